// What the CPU embedding files share (embedding_cpu.cpp: cpu.ref, cpu.omp, the checks and the
// registration; embedding_cases.cpp: the test cases). Internal to kernels/embedding.
#pragma once
#include <string>
#include <vector>

#include "kernels/embedding/embedding.h"
#include "kernels/registry.h"
#include "kernels/testing.h"

namespace aim::kernels::embedding_cpu {

// Test cases (embedding_cases.cpp) of embedding_fwd and embedding_bwd: one shape list for both.
std::vector<std::string> shape_fields();
std::vector<TestShape> test_shapes();
TestCase make_fwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_bwd_case(const TestShape& s, DType t, uint64_t seed);
Tolerance bwd_tolerance(DType t, const TestShape& s);
bool simt_small(const TestShape& s);

}  // namespace aim::kernels::embedding_cpu
