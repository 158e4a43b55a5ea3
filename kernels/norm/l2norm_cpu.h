// What l2norm_cpu.cpp (the CPU variants and the registration) takes from l2norm_cases.cpp (the
// test cases of l2norm_fwd and l2norm_bwd). Internal to kernels/norm.
#pragma once
#include <string>
#include <vector>

#include "kernels/norm/l2norm.h"
#include "kernels/registry.h"

namespace aim::kernels::l2norm_cpu {

std::vector<std::string> l2norm_shape_fields();
std::vector<TestShape> l2norm_test_shapes();
TestCase make_l2norm_fwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_l2norm_bwd_case(const TestShape& s, DType t, uint64_t seed);
Tolerance l2norm_tolerance(DType t, const TestShape& s);
bool l2norm_simt_small(const TestShape& s);

}  // namespace aim::kernels::l2norm_cpu
