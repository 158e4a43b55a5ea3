// What layernorm_cpu.cpp (the CPU variants and the registration) takes from layernorm_cases.cpp
// (the test cases of layernorm_fwd and layernorm_bwd). Internal to kernels/norm.
#pragma once
#include <string>
#include <vector>

#include "kernels/norm/layernorm.h"
#include "kernels/registry.h"

namespace aim::kernels::layernorm_cpu {

// Test cases (layernorm_cases.cpp): both directions share the shapes and their fields.
std::vector<std::string> layernorm_shape_fields();
std::vector<TestShape> layernorm_test_shapes();
TestCase make_layernorm_fwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_layernorm_bwd_case(const TestShape& s, DType t, uint64_t seed);
Tolerance layernorm_tolerance(DType t, const TestShape& s);
bool layernorm_simt_small(const TestShape& s);
// The mean (want_rstd false) or rstd of each row of x [N, C], computed in f64, as dtype s: what
// a backward case takes as saved statistics (also add_layernorm_cases.cpp).
Tensor layernorm_stat_from(const Tensor& x, bool want_rstd, DType s, float eps);

// cpu.ref (layernorm_cpu.cpp): add_layernorm's cpu.ref is this after h = x + bias + residual.
void layernorm_fwd_ref(const LayerNormFwdArgs& a);
void layernorm_bwd_ref(const LayerNormBwdArgs& a);

}  // namespace aim::kernels::layernorm_cpu
