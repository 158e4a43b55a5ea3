// What the CPU unary files share (unary_cpu.cpp: cpu.ref, cpu.omp, the checks and the
// registration; unary_cases.cpp: the test cases). Internal to kernels/elementwise.
#pragma once
#include <string>
#include <vector>

#include "kernels/elementwise/unary.h"
#include "kernels/registry.h"
#include "kernels/testing.h"

namespace aim::kernels::unary_cpu {

// cpu.ref's forward (unary_cpu.cpp): unary_bwd's test cases take y from it.
void unary_ref(const UnaryArgs& a);

// Test cases (unary_cases.cpp) of unary and unary_bwd: one shape list for both.
std::vector<std::string> unary_shape_fields();
std::vector<TestShape> unary_test_shapes();
TestCase make_unary_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_unary_bwd_case(const TestShape& s, DType t, uint64_t seed);
bool unary_small_enough_for_simt(const TestShape& s);
Tolerance unary_tolerance(DType t, const TestShape& s);

}  // namespace aim::kernels::unary_cpu
