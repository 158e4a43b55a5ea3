// What lrn_cpu.cpp (the CPU variants and the registration) takes from lrn_cases.cpp (the test
// cases of lrn_fwd and lrn_bwd). Internal to kernels/norm.
#pragma once
#include <string>
#include <vector>

#include "kernels/norm/lrn.h"
#include "kernels/registry.h"

namespace aim::kernels::lrn_cpu {

// Test cases (lrn_cases.cpp): both directions share the shapes and their fields.
std::vector<std::string> lrn_shape_fields();
std::vector<TestShape> lrn_test_shapes();
TestCase make_lrn_fwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_lrn_bwd_case(const TestShape& s, DType t, uint64_t seed);
Tolerance lrn_tolerance(DType t, const TestShape& s);
bool lrn_simt_small(const TestShape& s);

}  // namespace aim::kernels::lrn_cpu
