// What the CPU softmax files share (softmax_cpu.cpp: cpu.ref, cpu.omp and the registration;
// softmax_cases.cpp: the test cases). Internal to kernels/softmax.
#pragma once
#include <string>
#include <vector>

#include "kernels/registry.h"
#include "kernels/softmax/softmax.h"

namespace aim::kernels::softmax_cpu {

// Test cases (softmax_cases.cpp).
std::vector<std::string> softmax_shape_fields();
std::vector<TestShape> softmax_test_shapes();
TestCase make_softmax_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_softmax_bwd_case(const TestShape& s, DType t, uint64_t seed);

}  // namespace aim::kernels::softmax_cpu
