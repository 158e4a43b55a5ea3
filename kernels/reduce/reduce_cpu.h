// What the CPU reduce files share (reduce_cpu.cpp: cpu.ref, cpu.omp, the checks and the
// registration; reduce_cases.cpp: the test cases). Internal to kernels/reduce.
#pragma once
#include <string>
#include <vector>

#include "kernels/reduce/reduce.h"
#include "kernels/registry.h"
#include "kernels/testing.h"

namespace aim::kernels::reduce_cpu {

// Test cases (reduce_cases.cpp).
std::vector<std::string> reduce_shape_fields();
std::vector<TestShape> reduce_test_shapes();
TestCase make_reduce_case(const TestShape& s, DType t, uint64_t seed);
Tolerance reduce_tolerance(DType t, const TestShape& s);
bool reduce_small_enough_for_simt(const TestShape& s);

}  // namespace aim::kernels::reduce_cpu
