// The test cases of attention_fwd / attention_bwd (attention_cpu.h): shapes and their field
// names, case makers, tolerances.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/attention/attention_cpu.h"
#include "kernels/testing.h"

namespace aim::kernels::attention_cpu {
namespace {

// Test shape: {B, NH, Tq, Tk, HS, mask, causal, dropout}.
// mask: 0 none; 1 key padding [B, 1, 1, Tk] in q's dtype: batch element b keeps its first
//   Tk - (1 + 7 b) % Tk keys, the others get -10000 (b % 3 == 0) or -inf (b % 3 == 1); b % 3 == 2
//   masks every key with -inf (fully masked rows); 2 full [B, NH, Tq, Tk] f32, random in [-2, 2],
//   about one element in ten -inf and every row r with r % 7 == 3 fully -inf; 3 [1, NH, Tq, Tk] in
//   q's dtype, random in [-1, 1] (broadcast over the batch).
// dropout: 0 none; 1 p = 0.1 (offset 3). HS = 32 takes an explicit scale (0.3), others 1/sqrt(HS).
enum Field { kB, kNH, kTq, kTk, kHS, kMask, kCausal, kDropout };

Tensor make_mask(const TestShape& s, DType t, uint64_t seed) {
  const int64_t B = s[kB], NH = s[kNH], Tq = s[kTq], Tk = s[kTk];
  const double inf = std::numeric_limits<double>::infinity();
  switch (s[kMask]) {
    case 1: {
      Tensor m = Tensor::zeros({B, 1, 1, Tk}, DType::f64);
      double* p = m.data<double>();
      for (int64_t b = 0; b < B; ++b) {
        const int64_t keep = b % 3 == 2 ? 0 : Tk - (1 + 7 * b) % Tk;
        for (int64_t j = keep; j < Tk; ++j) p[b * Tk + j] = b % 3 == 0 ? -10000.0 : -inf;
      }
      return m.to(t);
    }
    case 2: {
      Tensor m = random_tensor({B, NH, Tq, Tk}, DType::f64, seed ^ 0x9e3779b9u, -2, 2);
      const Tensor u = random_tensor({B, NH, Tq, Tk}, DType::f64, seed ^ 0x7f4a7c15u, 0, 1);
      double* p = m.data<double>();
      const double* up = u.data<double>();
      for (int64_t e = 0; e < m.numel(); ++e)
        if (up[e] < 0.1 || (e / Tk) % 7 == 3) p[e] = -inf;
      return m.to(DType::f32);
    }
    case 3:
      return random_tensor({1, NH, Tq, Tk}, t, seed ^ 0x5bd1e995u, -1, 1);
    default:
      return Tensor();
  }
}

template <class Args>
void set_params(Args& a, const TestShape& s, uint64_t seed) {
  a.scale = s[kHS] == 32 ? 0.3f : 0.0f;
  a.causal = s[kCausal] != 0;
  a.dropout_p = s[kDropout] ? 0.1f : 0.0f;
  a.seed = seed;
  a.offset = 3;
}

AttentionFwdArgs fwd_args(const TestShape& s, DType t, uint64_t seed) {
  const int64_t B = s[kB], NH = s[kNH], Tq = s[kTq], Tk = s[kTk], HS = s[kHS];
  AttentionFwdArgs a;
  a.q = random_tensor({B, NH, Tq, HS}, t, seed, -2, 2);
  a.k = random_tensor({B, NH, Tk, HS}, t, seed + 1, -2, 2);
  a.v = random_tensor({B, NH, Tk, HS}, t, seed + 2, -1, 1);
  a.mask = make_mask(s, t, seed);
  a.o = poison_tensor({B, NH, Tq, HS}, t);
  a.lse = poison_tensor({B, NH, Tq}, DType::f32);
  set_params(a, s, seed);
  return a;
}

// Rounding grows with the length of the sums: sqrt(keys / 32) for the softmax's sums and the
// weighted sum of v, sqrt(max(Tq, Tk) / 32) for the gradients' sums over queries or keys.
Tolerance grown(DType t, double n) {
  const double g = std::sqrt(std::max(1.0, n / 32.0));
  const Tolerance d = default_tolerance(t);
  return Tolerance{d.atol * g, d.rtol * g};
}

}  // namespace

std::vector<std::string> shape_fields() {
  return {"B", "NH", "Tq", "Tk", "HS", "mask", "causal", "dropout"};
}

std::vector<TestShape> test_shapes() {
  return {
      {1, 1, 1, 1, 32, 0, 0, 0},       // one query, one key
      {1, 1, 1, 17, 64, 0, 1, 0},      // one query (a decoding step), causal sees every key
      {2, 1, 5, 1, 64, 0, 0, 1},       // one key
      {2, 3, 7, 7, 32, 1, 0, 0},       // padding: -10000 and -inf keys
      {3, 2, 7, 7, 64, 1, 1, 1},       // causal + padding + dropout; b = 2 fully masked
      {2, 2, 33, 33, 64, 0, 1, 0},     // causal
      {2, 2, 33, 33, 64, 2, 0, 1},     // full random mask with -inf rows, dropout
      {1, 2, 33, 129, 64, 1, 0, 0},    // Tq < Tk, padding
      {1, 2, 129, 33, 32, 0, 1, 0},    // Tq > Tk causal: the first 96 rows fully masked
      {2, 2, 31, 45, 40, 2, 1, 0},     // HS not a multiple of 16/32, causal + full mask
      {2, 2, 129, 129, 128, 1, 1, 0},  // HS 128, causal + padding
      {1, 2, 129, 129, 64, 3, 0, 1},   // mask broadcast over the batch, dropout
      {1, 1, 65, 97, 128, 2, 0, 0},    // HS 128, Tq != Tk, full mask
      {1, 2, 384, 384, 64, 1, 0, 1},   // BERT's sequence length (skipped under the emulator)
  };
}

bool small_enough_for_simt(const TestShape& s) {
  return s[kB] * s[kNH] * s[kTq] * s[kTk] * s[kHS] <= 10000000;
}

TestCase make_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  return to_case(fwd_args(s, t, seed));
}

// o and lse from the forward's cpu.ref on the same inputs (o rounded to q's dtype, as a forward
// in that dtype would give it).
TestCase make_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  const AttentionFwdArgs f = fwd_args(s, t, seed);
  fwd_ref(f);
  AttentionBwdArgs a;
  a.dout = random_tensor(f.o.sizes(), t, seed + 3, -1, 1);
  a.q = f.q;
  a.k = f.k;
  a.v = f.v;
  a.o = f.o;
  a.lse = f.lse;
  a.mask = f.mask;
  a.dq = poison_tensor(f.q.sizes(), t);
  a.dk = poison_tensor(f.k.sizes(), t);
  a.dv = poison_tensor(f.v.sizes(), t);
  set_params(a, s, seed);
  return to_case(a);
}

Tolerance fwd_tolerance(DType t, const TestShape& s) { return grown(t, double(s[kTk])); }

Tolerance bwd_tolerance(DType t, const TestShape& s) {
  return grown(t, double(std::max(s[kTq], s[kTk])));
}

}  // namespace aim::kernels::attention_cpu
