// What the CPU rnn files share (rnn_cpu.cpp: cpu.ref and the checks; rnn_cpu_fast.cpp:
// cpu.fast; rnn_cases.cpp: the test cases). Internal to kernels/rnn.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/registry.h"
#include "kernels/rnn/rnn.h"
#include "kernels/testing.h"

namespace aim::kernels::rnn_cpu {

// Sizes of one call: T steps, B sequences, I inputs, H hidden, G gates, W workspace width / H.
struct Dims {
  int64_t T = 0, B = 0, I = 0, H = 0, G = 0, W = 0;
};

// The argument checks of rnn_fwd / rnn_bwd (every variant runs them): the call's sizes.
Dims check_fwd(const RnnFwdArgs& a);
Dims check_bwd(const RnnBwdArgs& a);

// Sequence b's length: lengths[b] (i32 on the CPU), or T when lengths is undefined.
inline int64_t len_of(const Tensor& lengths, int64_t b, int64_t T) {
  return lengths.defined() ? int64_t(lengths.data<int32_t>()[b]) : T;
}

// cpu.ref's forward (rnn_cpu.cpp): the backward's test cases take their forward from it.
void rnn_fwd_cpu_ref(const RnnFwdArgs& a);

// cpu.fast (rnn_cpu_fast.cpp): f32 and f64.
void rnn_fwd_cpu_fast(const RnnFwdArgs& a);
void rnn_bwd_cpu_fast(const RnnBwdArgs& a);

// Test cases (rnn_cases.cpp): the shapes and their field names, case makers and tolerances of
// rnn_fwd / rnn_bwd (their binders are derived from the Args' fields, kernels/fields.h).
std::vector<TestShape> test_shapes();
std::vector<std::string> shape_fields();
TestCase make_fwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_bwd_case(const TestShape& s, DType t, uint64_t seed);
Tolerance rnn_tolerance(DType t, const TestShape& s);
bool rnn_simt_small(const TestShape& s);

}  // namespace aim::kernels::rnn_cpu
