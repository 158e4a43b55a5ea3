// What batchnorm_cpu.cpp (the CPU variants and the registration) takes from batchnorm_cases.cpp
// (the test cases of batchnorm_fwd and batchnorm_bwd). Internal to kernels/norm.
#pragma once
#include <string>
#include <vector>

#include "kernels/norm/batchnorm.h"
#include "kernels/registry.h"

namespace aim::kernels::batchnorm_cpu {

// Test cases (batchnorm_cases.cpp).
std::vector<std::string> batchnorm_shape_fields();
std::vector<TestShape> batchnorm_fwd_test_shapes();
std::vector<TestShape> batchnorm_bwd_test_shapes();
TestCase make_batchnorm_fwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_batchnorm_bwd_case(const TestShape& s, DType t, uint64_t seed);
Tolerance batchnorm_tolerance(DType t, const TestShape& s);
bool batchnorm_simt_small(const TestShape& s);

}  // namespace aim::kernels::batchnorm_cpu
