// The test cases of additive_attention_fwd and _bwd (additive_attention_cpu.h): shapes and their
// fields, case makers, tolerance, the emulator's budget.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/additive_attention/additive_attention_cpu.h"
#include "kernels/testing.h"

namespace aim::kernels::additive_attention_cpu {

// Shapes {B, T, C, D, lengths (0: none; 1: varied, one row of length 0 when B > 2; 2: varied,
// none 0), dalign (backward: 1 = given), params (backward: 1 = dbias, dv, dg wanted)}. Odd sizes,
// a single step, C and D past a warp, GNMT's tiny and reduced widths.
std::vector<std::string> shape_fields() {
  return {"B", "T", "C", "D", "lengths", "dalign", "params"};
}

std::vector<TestShape> test_shapes() {
  return {{1, 1, 1, 1, 0, 0, 1},     {2, 3, 5, 7, 0, 1, 1},     {3, 7, 33, 17, 1, 0, 1},
          {5, 9, 31, 65, 2, 1, 0},   {4, 13, 64, 64, 1, 1, 1},  {2, 50, 40, 80, 2, 0, 1},
          {3, 33, 129, 37, 1, 1, 1}, {8, 21, 256, 512, 2, 0, 1}};
}

namespace {

Tensor case_lengths(const TestShape& s) {
  if (s[4] == 0) return Tensor();
  Tensor L = Tensor::empty({s[0]}, DType::i32, kCPU);
  int32_t* p = L.data<int32_t>();
  for (int64_t b = 0; b < s[0]; ++b) {
    int64_t len = s[1] - (b * 5) % s[1];  // T, T-5, ... (mod T): varied, b = 0 full
    if (s[4] == 2) len = std::max<int64_t>(len, 1);
    p[b] = int32_t(len);
  }
  if (s[4] == 1 && s[0] > 2) p[s[0] - 1] = 0;
  return L;
}

template <class Args>
void fill_inputs(Args& a, const TestShape& s, DType t, uint64_t seed) {
  const int64_t B = s[0], T = s[1], C = s[2], D = s[3];
  a.keys = random_tensor({B, T, C}, t, seed, -1.5, 1.5);
  a.query = random_tensor({B, C}, t, seed + 1, -1, 1);
  a.bias = random_tensor({C}, t, seed + 2, -0.5, 0.5);
  a.v = random_tensor({C}, t, seed + 3, -1, 1);
  a.g = random_tensor({1}, t, seed + 4, 1, 3);
  a.values = random_tensor({B, T, D}, t, seed + 5, -1, 1);
  a.lengths = case_lengths(s);
}

}  // namespace

TestCase make_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  AdditiveAttentionFwdArgs a;
  fill_inputs(a, s, t, seed);
  a.align = poison_tensor({s[0], s[1]}, t);
  a.context = poison_tensor({s[0], s[3]}, t);
  return to_case(a);
}

TestCase make_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  AdditiveAttentionBwdArgs a;
  fill_inputs(a, s, t, seed);
  const int64_t B = s[0], T = s[1], C = s[2], D = s[3];
  // align: a valid distribution over each row's kept positions (the reference forward's).
  AdditiveAttentionFwdArgs f;
  fill_inputs(f, s, DType::f64, seed);
  f.align = Tensor::empty({B, T}, DType::f64, kCPU);
  f.context = Tensor::empty({B, D}, DType::f64, kCPU);
  fwd_cpu_ref(f);
  a.align = f.align.to(t);
  a.dcontext = random_tensor({B, D}, t, seed + 6, -1, 1);
  if (s[5]) a.dalign = random_tensor({B, T}, t, seed + 7, -1, 1);
  a.dkeys = poison_tensor({B, T, C}, t);
  a.dquery = poison_tensor({B, C}, t);
  a.dvalues = poison_tensor({B, T, D}, t);
  if (s[6]) {
    a.dbias = random_tensor({C}, t, seed + 8, -1, 1);  // accumulated into
    a.dv = random_tensor({C}, t, seed + 9, -1, 1);
    a.dg = random_tensor({1}, t, seed + 10, -1, 1);
  }
  return to_case(a);
}

// Sums over C (scores), T (context, softmax) and B*T (dbias, dv, dg); 16-bit: the inputs'
// rounding moves the scores by ~C * 2^-8.
Tolerance tolerance(DType t, const TestShape& s) {
  const double n = std::sqrt(std::max(1.0, double(s[0] * s[1] * std::max(s[2], s[3])) / 256.0));
  if (t == DType::f16) return {2e-2 * n, 2e-2};
  if (t == DType::bf16) return {1e-1 * n, 5e-2};
  if (t == DType::f32) return {2e-5 * n, 2e-5 * n};
  return default_tolerance(t);
}

bool simt_small(const TestShape& s) { return s[0] * s[1] * std::max(s[2], s[3]) <= 40000; }

}  // namespace aim::kernels::additive_attention_cpu
