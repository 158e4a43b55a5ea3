// What the CPU CTC files share (ctc_cpu.cpp: cpu.ref, cpu.omp, the checks and the registration;
// ctc_cases.cpp: the test cases). Internal to kernels/loss.
#pragma once
#include <string>
#include <vector>

#include "kernels/loss/ctc.h"
#include "kernels/registry.h"
#include "kernels/testing.h"

namespace aim::kernels::ctc_cpu {

// The CPU variants (ctc_cpu.cpp); the backward's test cases take their log_alpha from cpu.ref.
void ctc_fwd_cpu_ref(const CtcFwdArgs& a);
void ctc_bwd_cpu_ref(const CtcBwdArgs& a);
void ctc_fwd_cpu_omp(const CtcFwdArgs& a);
void ctc_bwd_cpu_omp(const CtcBwdArgs& a);
void ctc_greedy_cpu_ref(const CtcGreedyDecodeArgs& a);
void ctc_beam_cpu_ref(const CtcBeamDecodeArgs& a);

// Test cases (ctc_cases.cpp): shapes and their field names, case makers, tolerance.
std::vector<TestShape> loss_shapes();  // ctc_fwd and ctc_bwd
std::vector<std::string> loss_shape_fields();
TestCase make_fwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_bwd_case(const TestShape& s, DType t, uint64_t seed);
std::vector<TestShape> greedy_shapes();
std::vector<TestShape> beam_shapes();
std::vector<std::string> decode_shape_fields(bool beam);
TestCase make_greedy_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_beam_case(const TestShape& s, DType t, uint64_t seed);
Tolerance ctc_tolerance(DType t, const TestShape& s);
bool ctc_simt_small(const TestShape& s);

}  // namespace aim::kernels::ctc_cpu
