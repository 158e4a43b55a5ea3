// What the CPU attention files share (attention_cpu.cpp: checks, cpu.ref, registration;
// attention_flash_cpu.cpp: cpu.flash; attention_cases.cpp: the test cases). Internal to
// kernels/attention.
#pragma once
#include <string>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/registry.h"

namespace aim::kernels::attention_cpu {

// cpu.ref (attention_cpu.cpp): the oracle; every float dtype.
void fwd_ref(const AttentionFwdArgs& a);
void bwd_ref(const AttentionBwdArgs& a);

// cpu.flash (attention_flash_cpu.cpp): every float dtype (16-bit converted per block).
void fwd_flash(const AttentionFwdArgs& a);
void bwd_flash(const AttentionBwdArgs& a);

// Test cases (attention_cases.cpp).
std::vector<std::string> shape_fields();
std::vector<TestShape> test_shapes();
TestCase make_fwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_bwd_case(const TestShape& s, DType t, uint64_t seed);
Tolerance fwd_tolerance(DType t, const TestShape& s);
Tolerance bwd_tolerance(DType t, const TestShape& s);
bool small_enough_for_simt(const TestShape& s);

}  // namespace aim::kernels::attention_cpu
