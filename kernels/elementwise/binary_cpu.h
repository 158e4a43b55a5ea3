// What the CPU binary files share (binary_cpu.cpp: cpu.ref, cpu.omp, the checks and the
// registration of binary and where; binary_cases.cpp: the test cases). Internal to
// kernels/elementwise.
#pragma once
#include <string>
#include <vector>

#include "kernels/elementwise/binary.h"
#include "kernels/registry.h"
#include "kernels/testing.h"

namespace aim::kernels::binary_cpu {

// Test cases (binary_cases.cpp).
std::vector<std::string> binary_shape_fields();
std::vector<TestShape> binary_test_shapes();
TestCase make_binary_case(const TestShape& s, DType t, uint64_t seed);
bool binary_small_enough_for_simt(const TestShape& s);
Tolerance binary_tolerance(DType t, const TestShape& s);

std::vector<std::string> where_shape_fields();
std::vector<TestShape> where_test_shapes();
TestCase make_where_case(const TestShape& s, DType t, uint64_t seed);
bool where_small_enough_for_simt(const TestShape& s);

}  // namespace aim::kernels::binary_cpu
