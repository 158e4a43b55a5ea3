// What conv2d_cpu.cpp (the CPU variants and the registration) takes from conv2d_cases.cpp (the
// test cases of conv2d_fwd, conv2d_bwd_data and conv2d_bwd_filter). Internal to kernels/conv.
#pragma once
#include <string>
#include <vector>

#include "kernels/conv/conv2d.h"
#include "kernels/registry.h"

namespace aim::kernels::conv_cpu {

// Test cases (conv2d_cases.cpp): the three directions share the shapes, their fields, the
// tolerance and the emulator's budget.
std::vector<std::string> conv2d_shape_fields();
std::vector<TestShape> conv2d_test_shapes();
TestCase make_conv2d_fwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_conv2d_bwd_data_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_conv2d_bwd_filter_case(const TestShape& s, DType t, uint64_t seed);
Tolerance conv2d_tolerance(DType t, const TestShape& s);
Tolerance conv2d_winograd4_tolerance(DType t, const TestShape& s);
Tolerance conv2d_winograd_filter_tolerance(DType t, const TestShape& s);
bool conv2d_simt_small(const TestShape& s);

}  // namespace aim::kernels::conv_cpu
