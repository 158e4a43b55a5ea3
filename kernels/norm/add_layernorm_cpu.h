// What add_layernorm_cpu.cpp (the CPU variants and the registration) takes from
// add_layernorm_cases.cpp (the test cases of add_layernorm_fwd and add_layernorm_bwd). Internal to
// kernels/norm.
#pragma once
#include <string>
#include <vector>

#include "kernels/norm/add_layernorm.h"
#include "kernels/registry.h"

namespace aim::kernels::add_layernorm_cpu {

// Both directions share the shapes and their fields.
std::vector<std::string> add_layernorm_shape_fields();
std::vector<TestShape> add_layernorm_test_shapes();
TestCase make_add_layernorm_fwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_add_layernorm_bwd_case(const TestShape& s, DType t, uint64_t seed);
Tolerance add_layernorm_tolerance(DType t, const TestShape& s);
bool add_layernorm_simt_small(const TestShape& s);

}  // namespace aim::kernels::add_layernorm_cpu
