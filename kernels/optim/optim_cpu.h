// What the CPU optim files share (optim_cpu.cpp: cpu.ref, cpu.omp, the checks and the
// registration; optim_cases.cpp: the test cases). Internal to kernels/optim.
#pragma once
#include <string>
#include <vector>

#include "kernels/optim/optim.h"
#include "kernels/registry.h"
#include "kernels/testing.h"

namespace aim::kernels::optim_cpu {

// Test cases (optim_cases.cpp). Every op's shapes are {n, mode}: the modes of each op are listed
// beside its case maker.
std::vector<TestShape> test_shapes(int modes);
std::vector<std::string> shape_fields();
TestCase make_sgd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_adam_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_adagrad_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_unscale_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_ftrl_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_sq_sum_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_clip_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_lamb_stage1_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_lamb_stage2_case(const TestShape& s, DType t, uint64_t seed);
Tolerance lamb_tolerance(DType t, const TestShape& s);
bool simt_size(const TestShape& s);

}  // namespace aim::kernels::optim_cpu
