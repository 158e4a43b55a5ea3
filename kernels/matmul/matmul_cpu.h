// What the CPU matmul files share (matmul_cpu.cpp: cpu.ref, cpu.blas, cpu.avx512, cpu.widen, the
// checks and the registration; matmul_cases.cpp: the test cases). Internal to kernels/matmul.
#pragma once
#include <string>
#include <vector>

#include "kernels/matmul/matmul.h"
#include "kernels/registry.h"
#include "kernels/testing.h"

namespace aim::kernels::matmul_cpu {

// Test cases (matmul_cases.cpp).
std::vector<std::string> matmul_shape_fields();
std::vector<TestShape> matmul_test_shapes();
TestCase make_matmul_case(const TestShape& s, DType t, uint64_t seed);
Tolerance matmul_tolerance(DType t, const TestShape& s);
bool matmul_small_enough_for_simt(const TestShape& s);

}  // namespace aim::kernels::matmul_cpu
