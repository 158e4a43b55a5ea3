// The test cases of rnn_fwd / rnn_bwd (rnn_cpu.h): shapes and their field names, case makers,
// tolerances. Lengths are a host input (kernels/fields.h host_in_opt): it stays on the CPU.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/rnn/rnn_cpu.h"

namespace aim::kernels::rnn_cpu {

std::vector<TestShape> test_shapes() {
  // {cell, T, B, I, H, reverse, linear_before_reset, lengths, bias, h0, full}: the tiny ones
  // first (the emulator runs those), then odd sizes, a DIEN-like AUGRU and a wider LSTM.
  return {{0, 4, 3, 5, 8, 0, 1, 0, 1, 1, 1},     // LSTM
          {0, 4, 3, 5, 8, 1, 1, 1, 1, 1, 1},     // LSTM reverse, lengths
          {0, 3, 2, 4, 6, 0, 1, 1, 0, 0, 0},     // LSTM, no bias, no h0, inference / partial grads
          {0, 2, 5, 3, 4, 1, 1, 1, 1, 0, 1},     // LSTM reverse, a zero length (B > T)
          {1, 4, 3, 5, 8, 0, 1, 1, 1, 1, 1},     // GRU (PyTorch), lengths
          {1, 4, 3, 5, 8, 1, 1, 0, 1, 0, 1},     // GRU reverse
          {1, 4, 3, 5, 8, 0, 1, 1, 1, 1, 0},     // GRU inference / partial grads
          {1, 4, 3, 5, 8, 0, 0, 1, 1, 1, 1},     // GRU reset before the product (TF), lengths
          {1, 3, 3, 5, 7, 1, 0, 1, 0, 1, 0},     // ... reverse, no bias, partial
          {2, 4, 3, 5, 8, 0, 0, 1, 1, 1, 1},     // AUGRU (DIEN's cell), lengths
          {2, 4, 3, 5, 8, 1, 1, 1, 1, 1, 1},     // AUGRU reverse, linear_before_reset
          {2, 2, 5, 3, 4, 0, 0, 1, 1, 0, 0},     // AUGRU, a zero length, partial
          {0, 7, 9, 13, 17, 0, 1, 1, 1, 1, 1},   // odd sizes
          {1, 6, 10, 11, 19, 1, 1, 1, 1, 1, 1},  // odd sizes, reverse
          {1, 5, 7, 9, 12, 0, 0, 1, 1, 1, 1},    // TF GRU, odd sizes
          {2, 9, 17, 18, 18, 0, 0, 1, 1, 1, 1},  // DIEN-like AUGRU
          {0, 5, 6, 40, 33, 1, 1, 0, 1, 1, 1}};  // wider LSTM, reverse
}

// Codes as CaseSpec below: cell 0 LSTM, 1 GRU, 2 AUGRU; lengths 0 none, 1 varied; the others 0/1.
std::vector<std::string> shape_fields() {
  return {"cell",    "T",    "B",  "I",   "H", "reverse", "linear_before_reset",
          "lengths", "bias", "h0", "full"};
}

namespace {

// Test shape: {cell (0 LSTM, 1 GRU, 2 AUGRU), T, B, I, H, reverse, linear_before_reset,
// lengths (0: none, 1: varied, unsorted, a 0 where B > T), bias, h0/c0, full}.
// full: forward with workspace (training) / backward with dy, dhn and every gradient wanted;
// else an inference forward (no workspace) / a backward with dy undefined, dx and db_* not wanted.
struct CaseSpec {
  RnnCell cell;
  int64_t T, B, I, H;
  bool reverse, lbr, lengths, bias, h0, full;
};
CaseSpec spec_of(const TestShape& s) {
  AIM_CHECK(s.size() == 11,
            "[rnn] test shape needs 11 fields {cell, T, B, I, H, reverse, linear_before_reset, "
            "lengths, bias, h0, full}, got ",
            shape_str(s));
  AIM_CHECK(s[0] >= 0 && s[0] <= 2, "[rnn] test shape cell must be 0 (LSTM), 1 (GRU) or 2 (AUGRU)");
  return {RnnCell(s[0]), s[1],      s[2],      s[3],      s[4],      s[5] != 0,
          s[6] != 0,     s[7] != 0, s[8] != 0, s[9] != 0, s[10] != 0};
}

// Lengths T, T-1, ... wrapping to 0, T, ...: unsorted, the full length first.
std::vector<int32_t> case_lengths(int64_t T, int64_t B) {
  std::vector<int32_t> l(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) l[size_t(b)] = int32_t((T - b % (T + 1) + (T + 1)) % (T + 1));
  return l;
}

// The forward's inputs and parameters (dtype t; no outputs yet): shared by the forward and backward
// makers.
RnnFwdArgs fwd_inputs(const CaseSpec& p, DType t, uint64_t seed) {
  const int64_t GH = rnn_gates(p.cell) * p.H;
  const double k = 1.0 / std::sqrt(double(p.H));  // PyTorch's init range
  RnnFwdArgs a;
  a.x = random_tensor({p.T, p.B, p.I}, t, seed, -1.0, 1.0);
  if (p.lengths) a.lengths = Tensor::from_vector(case_lengths(p.T, p.B), {p.B});
  if (p.h0) a.h0 = random_tensor({p.B, p.H}, t, seed + 1, -1.0, 1.0);
  if (p.h0 && p.cell == RnnCell::LSTM) a.c0 = random_tensor({p.B, p.H}, t, seed + 2, -1, 1);
  a.w_ih = random_tensor({GH, p.I}, t, seed + 3, -k, k);
  a.w_hh = random_tensor({GH, p.H}, t, seed + 4, -k, k);
  if (p.bias) {
    a.b_ih = random_tensor({GH}, t, seed + 5, -k, k);
    a.b_hh = random_tensor({GH}, t, seed + 6, -k, k);
  }
  if (p.cell == RnnCell::AUGRU) a.att = random_tensor({p.T, p.B}, t, seed + 7, 0.0, 1.0);
  a.cell = p.cell;
  a.reverse = p.reverse;
  a.linear_before_reset = p.lbr;
  return a;
}

Tensor maybe(bool want, const Tensor& t) { return want ? t : Tensor(); }

}  // namespace

TestCase make_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  const CaseSpec p = spec_of(s);
  RnnFwdArgs a = fwd_inputs(p, t, seed);
  const bool lstm = p.cell == RnnCell::LSTM;
  a.y = poison_tensor({p.T, p.B, p.H}, t);
  a.hn = poison_tensor({p.B, p.H}, t);
  a.cn = maybe(lstm, poison_tensor({p.B, p.H}, t));
  a.workspace = maybe(p.full, poison_tensor({p.T, p.B, rnn_workspace_width(p.cell) * p.H}, t));
  return to_case(a);
}

// The backward's case: the forward's outputs come from cpu.ref in the case dtype.
TestCase make_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  const CaseSpec p = spec_of(s);
  const bool lstm = p.cell == RnnCell::LSTM;
  const int64_t GH = rnn_gates(p.cell) * p.H;
  RnnFwdArgs f = fwd_inputs(p, t, seed);
  f.y = Tensor::empty({p.T, p.B, p.H}, t);
  f.workspace = Tensor::empty({p.T, p.B, rnn_workspace_width(p.cell) * p.H}, t);
  rnn_fwd_cpu_ref(f);

  RnnBwdArgs a;
  a.cell = f.cell;
  a.reverse = f.reverse;
  a.linear_before_reset = f.linear_before_reset;
  a.x = f.x;
  a.lengths = f.lengths;
  a.h0 = f.h0;
  a.c0 = f.c0;
  a.w_ih = f.w_ih;
  a.w_hh = f.w_hh;
  a.b_ih = f.b_ih;
  a.b_hh = f.b_hh;
  a.att = f.att;
  a.y = f.y;
  a.workspace = f.workspace;
  a.dy = maybe(p.full, random_tensor({p.T, p.B, p.H}, t, seed + 10, -1.0, 1.0));
  // Partial cases without h0 leave dhn/dcn undefined too (zeros).
  const bool dstate = p.full || p.h0;
  a.dhn = maybe(dstate, random_tensor({p.B, p.H}, t, seed + 11, -1.0, 1.0));
  a.dcn = maybe(dstate && lstm, random_tensor({p.B, p.H}, t, seed + 12, -1.0, 1.0));
  a.dx = maybe(p.full, poison_tensor({p.T, p.B, p.I}, t));
  a.dh0 = poison_tensor({p.B, p.H}, t);
  a.dc0 = maybe(lstm, poison_tensor({p.B, p.H}, t));
  // Accumulated outputs start from random values: a variant that writes instead of adding fails.
  a.dw_ih = random_tensor({GH, p.I}, t, seed + 13, -1.0, 1.0);
  a.dw_hh = random_tensor({GH, p.H}, t, seed + 14, -1.0, 1.0);
  a.db_ih = maybe(p.full, random_tensor({GH}, t, seed + 15, -1.0, 1.0));
  a.db_hh = maybe(p.full, random_tensor({GH}, t, seed + 16, -1.0, 1.0));
  a.datt = maybe(p.cell == RnnCell::AUGRU, poison_tensor({p.T, p.B}, t));
  return to_case(a);
}

// Recurrences carry rounding through T steps and the weight gradients sum T*B products.
Tolerance rnn_tolerance(DType t, const TestShape&) {
  if (t == DType::f16) return {1e-2, 1e-2};
  if (t == DType::bf16) return {8e-2, 4e-2};
  if (t == DType::f32) return {1e-4, 1e-4};
  return default_tolerance(t);
}

// The emulator runs every thread of every step: keep its cases tiny.
bool rnn_simt_small(const TestShape& s) {
  const CaseSpec p = spec_of(s);
  return p.T <= 4 && p.B <= 5 && p.H <= 8 && p.I <= 8;
}

}  // namespace aim::kernels::rnn_cpu
