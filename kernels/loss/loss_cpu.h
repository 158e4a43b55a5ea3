// What the CPU loss files share (loss_cpu.cpp: cpu.ref, cpu.omp, the checks and the registration;
// loss_cases.cpp: the test cases). Internal to kernels/loss.
#pragma once
#include <string>
#include <vector>

#include "kernels/loss/loss.h"
#include "kernels/registry.h"
#include "kernels/testing.h"

namespace aim::kernels::loss_cpu {

// Test cases (loss_cases.cpp): shapes and their field names, case makers, tolerance.
std::vector<TestShape> cross_entropy_shapes();
std::vector<std::string> cross_entropy_shape_fields();
TestCase make_cross_entropy_fwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_cross_entropy_bwd_case(const TestShape& s, DType t, uint64_t seed);

// The pointwise losses' shapes: {rows, C, reduction, extra}, extra_values codes of the last.
std::vector<TestShape> pointwise_shapes(int64_t extra_values);
std::vector<std::string> pointwise_shape_fields(PointwiseKind k);
TestCase make_bce_with_logits_fwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_bce_with_logits_bwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_mse_fwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_mse_bwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_smooth_l1_fwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_smooth_l1_bwd_case(const TestShape& s, DType t, uint64_t seed);

Tolerance loss_tolerance(DType t, const TestShape& s);
bool loss_simt_small(const TestShape& s);

}  // namespace aim::kernels::loss_cpu
