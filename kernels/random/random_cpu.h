// What the CPU random files share (random_cpu.cpp: cpu.ref, cpu.omp, the checks and the
// registration; random_cases.cpp: the test cases). Internal to kernels/random.
#pragma once
#include <string>
#include <vector>

#include "kernels/random/random.h"
#include "kernels/registry.h"
#include "kernels/testing.h"

namespace aim::kernels::random_cpu {

// Test cases (random_cases.cpp). Fills (uniform, normal, bernoulli) share one shape list,
// dropout_fwd and dropout_bwd another.
std::vector<std::string> fill_shape_fields();
std::vector<TestShape> fill_shapes();
TestCase make_uniform_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_normal_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_bernoulli_case(const TestShape& s, DType t, uint64_t seed);
bool small_fill(const TestShape& s);

std::vector<std::string> dropout_shape_fields();
std::vector<TestShape> dropout_shapes();
TestCase make_dropout_fwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_dropout_bwd_case(const TestShape& s, DType t, uint64_t seed);

Tolerance exact(DType t, const TestShape& s);
Tolerance normal_tolerance(DType t, const TestShape& s);

}  // namespace aim::kernels::random_cpu
