// What bias_gelu_cpu.cpp (the CPU variants and the registration) takes from bias_gelu_cases.cpp
// (the test cases of bias_gelu_fwd and bias_gelu_bwd). Internal to kernels/elementwise.
#pragma once
#include <string>
#include <vector>

#include "kernels/elementwise/bias_gelu.h"
#include "kernels/registry.h"

namespace aim::kernels::bias_gelu_cpu {

// Both directions share the shapes and their fields.
std::vector<std::string> bias_gelu_shape_fields();
std::vector<TestShape> bias_gelu_test_shapes();
TestCase make_bias_gelu_fwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_bias_gelu_bwd_case(const TestShape& s, DType t, uint64_t seed);
Tolerance bias_gelu_tolerance(DType t, const TestShape& s);
bool bias_gelu_simt_small(const TestShape& s);

}  // namespace aim::kernels::bias_gelu_cpu
