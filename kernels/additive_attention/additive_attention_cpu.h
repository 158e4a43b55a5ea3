// What additive_attention_cpu.cpp (the CPU variants and the registration) takes from
// additive_attention_cases.cpp (the test cases). Internal to kernels/additive_attention.
#pragma once
#include <string>
#include <vector>

#include "kernels/additive_attention/additive_attention.h"
#include "kernels/registry.h"

namespace aim::kernels::additive_attention_cpu {

std::vector<std::string> shape_fields();
std::vector<TestShape> test_shapes();
TestCase make_fwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_bwd_case(const TestShape& s, DType t, uint64_t seed);
Tolerance tolerance(DType t, const TestShape& s);
bool simt_small(const TestShape& s);
// The forward's cpu.ref (the backward's cases take align from it).
void fwd_cpu_ref(const AdditiveAttentionFwdArgs& a);

}  // namespace aim::kernels::additive_attention_cpu
