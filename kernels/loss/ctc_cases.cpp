// The test cases of the CTC ops (ctc_cpu.h): shapes and their field names, case makers,
// tolerance. Lengths are host inputs (kernels/fields.h host_in): they stay on the CPU.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/loss/ctc_cpu.h"

namespace aim::kernels::ctc_cpu {

std::vector<TestShape> loss_shapes() {
  // {T, B, C, S, blank, reduction, zero_infinity, targets i64, 1-D targets, lengths i64}: the
  // emulator-sized ones first (repeated labels come from the small C; S close to T makes some
  // samples infeasible), then odd sizes and CRNN's shape.
  return {{6, 3, 5, 3, 0, 1, 0, 1, 0, 1},       // mean, padded i64
          {6, 3, 5, 3, 2, 0, 0, 0, 0, 0},       // none, blank in the middle, i32
          {5, 3, 4, 4, 3, 2, 1, 1, 1, 0},       // sum, zero_infinity, 1-D targets, blank = C - 1
          {4, 3, 3, 4, 0, 0, 0, 0, 0, 1},       // none, infeasible samples (+inf, zero gradient)
          {4, 3, 3, 4, 1, 1, 1, 1, 0, 0},       // mean, infeasible with zero_infinity
          {12, 3, 6, 5, 1, 1, 0, 0, 1, 1},      // mean, 1-D targets
          {1, 2, 2, 1, 0, 2, 0, 1, 0, 0},       // T = 1
          {7, 2, 6, 0, 0, 0, 0, 1, 0, 1},       // empty targets (S = 0)
          {30, 7, 11, 9, 4, 0, 1, 0, 1, 0},     // odd sizes
          {25, 64, 37, 10, 0, 1, 0, 1, 0, 1}};  // CRNN (T 25, B 64, 37 classes, <= 10 labels)
}

// Loss cases: reduction 0 none, 1 mean, 2 sum; zero_infinity, targets_i64, targets_1d (the
// concatenated form instead of padded [B, S]) and lengths_i64 (else i32) are 0/1.
std::vector<std::string> loss_shape_fields() {
  return {"T",           "B",          "C",          "S", "blank", "reduction", "zero_infinity",
          "targets_i64", "targets_1d", "lengths_i64"};
}

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

struct LossSpec {
  int64_t T, B, C, S, blank;
  Reduction r;
  bool zi, t64, concat, l64;
};
LossSpec loss_spec(const TestShape& s) {
  return {s[0],      s[1],      s[2],      s[3],     s[4], Reduction(int(s[5])),
          s[6] != 0, s[7] != 0, s[8] != 0, s[9] != 0};
}

// Random logits in [-3, 3), log-softmaxed over C in double, then rounded to t.
Tensor random_log_probs(int64_t T, int64_t B, int64_t C, DType t, uint64_t seed) {
  Tensor x = random_tensor({T, B, C}, DType::f64, seed, -3.0, 3.0);
  double* v = x.data<double>();
  for (int64_t r = 0; r < T * B; ++r) {
    double m = kNegInf;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, v[r * C + c]);
    double s = 0;
    for (int64_t c = 0; c < C; ++c) s += std::exp(v[r * C + c] - m);
    const double lse = m + std::log(s);
    for (int64_t c = 0; c < C; ++c) v[r * C + c] -= lse;
  }
  return x.to(t);
}

// Lengths in [lo, hi] (the first sample gets hi), as i32 or i64.
Tensor random_lengths(int64_t B, int64_t lo, int64_t hi, bool i64, uint64_t seed) {
  std::vector<int64_t> v = random_indices({B}, hi - lo + 1, DType::i64, seed).to_vector<int64_t>();
  for (auto& x : v) x += lo;
  v[0] = hi;
  return Tensor::from_vector(v, {B}).to(i64 ? DType::i64 : DType::i32);
}

// The forward's inputs and parameters (no outputs yet): shared by the forward and backward makers.
CtcFwdArgs loss_inputs(const LossSpec& p, DType t, uint64_t seed) {
  CtcFwdArgs a;
  a.log_probs = random_log_probs(p.T, p.B, p.C, t, seed);
  a.input_lengths = random_lengths(p.B, 1, p.T, p.l64, seed + 1);
  a.target_lengths = random_lengths(p.B, 0, p.S, p.l64, seed + 2);
  // Labels in [0, C) without the blank; padding past the length is an invalid value on purpose
  // (it must never be read).
  std::vector<int64_t> lab = random_indices({p.B, std::max<int64_t>(p.S, 1)},
                                            std::max<int64_t>(p.C - 1, 1), DType::i64, seed + 3)
                                 .to_vector<int64_t>();
  const std::vector<int64_t> tlv = a.target_lengths.to_vector<int64_t>();
  std::vector<int64_t> padded(size_t(p.B * p.S)), flat;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t i = 0; i < p.S; ++i) {
      int64_t v = lab[size_t(b * std::max<int64_t>(p.S, 1) + i)];
      v = v >= p.blank ? v + 1 : v;
      if (i < tlv[size_t(b)]) {
        flat.push_back(v);
      } else {
        v = p.C + 5;
      }
      padded[size_t(b * p.S + i)] = v;
    }
  Tensor tg = p.concat ? Tensor::from_vector(flat, {int64_t(flat.size())})
                       : Tensor::from_vector(padded, {p.B, p.S});
  a.targets = tg.to(p.t64 ? DType::i64 : DType::i32);
  a.blank = p.blank;
  a.reduction = p.r;
  a.zero_infinity = p.zi;
  return a;
}

Shape loss_shape(const LossSpec& p) { return p.r == Reduction::none ? Shape{p.B} : Shape{}; }

}  // namespace

TestCase make_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  const LossSpec p = loss_spec(s);
  CtcFwdArgs a = loss_inputs(p, t, seed);
  const DType ld = loss_dtype(t);
  a.loss = poison_tensor(loss_shape(p), ld);
  a.log_alpha = poison_tensor(ctc_log_alpha_shape(a.log_probs, a.targets, a.target_lengths), ld);
  return to_case(a);
}

// The backward's case: log_alpha from cpu.ref in the case dtype, a random dloss.
TestCase make_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  const LossSpec p = loss_spec(s);
  CtcFwdArgs f = loss_inputs(p, t, seed);
  const DType ld = loss_dtype(t);
  f.loss = Tensor::empty(loss_shape(p), ld);
  f.log_alpha = Tensor::empty(ctc_log_alpha_shape(f.log_probs, f.targets, f.target_lengths), ld);
  ctc_fwd_cpu_ref(f);
  CtcBwdArgs a;
  a.log_probs = f.log_probs;
  a.targets = f.targets;
  a.input_lengths = f.input_lengths;
  a.target_lengths = f.target_lengths;
  a.log_alpha = f.log_alpha;
  a.dloss = random_tensor(loss_shape(p), ld, seed + 7, -1.0, 1.0);
  a.dlog_probs = poison_tensor({p.T, p.B, p.C}, t);
  a.blank = f.blank;
  a.reduction = f.reduction;
  a.zero_infinity = f.zero_infinity;
  return to_case(a);
}

std::vector<TestShape> greedy_shapes() {
  // {T, B, C, blank, merge_repeated, input_lengths (0 none, 1 i32, 2 i64)}
  return {{12, 3, 6, 0, 1, 1}, {12, 3, 6, 5, 0, 2},   {7, 2, 4, 2, 1, 0},
          {1, 3, 2, 1, 1, 2},  {25, 64, 37, 0, 1, 2}, {40, 9, 100, 3, 0, 1}};
}

std::vector<TestShape> beam_shapes() {
  // {T, B, C, blank, merge_repeated, input_lengths, beam_width}
  return {{12, 3, 6, 0, 1, 1, 4}, {10, 3, 5, 2, 0, 2, 3},   {8, 2, 4, 3, 1, 0, 1},
          {12, 2, 3, 0, 0, 1, 8}, {25, 8, 37, 0, 1, 2, 10}, {20, 5, 12, 11, 0, 1, 30}};
}

// Decoder cases: input_lengths 0: none (every length T), 1: i32, 2: i64; lengths in [0, T] (a
// zero length decodes to nothing).
std::vector<std::string> decode_shape_fields(bool beam) {
  std::vector<std::string> f = {"T", "B", "C", "blank", "merge_repeated", "input_lengths"};
  if (beam) f.push_back("beam_width");
  return f;
}

namespace {

template <class Args>
TestCase make_decode_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t T = s[0], B = s[1], C = s[2];
  Args a;
  a.log_probs = random_log_probs(T, B, C, t, seed);
  if (s[5]) a.input_lengths = random_lengths(B, 0, T, s[5] == 2, seed + 1);
  a.blank = s[3];
  a.merge_repeated = s[4] != 0;
  if constexpr (std::is_same_v<Args, CtcBeamDecodeArgs>) a.beam_width = s[6];
  a.labels = poison_tensor({B, T}, DType::i64);
  a.lengths = poison_tensor({B}, DType::i64);
  a.log_prob = poison_tensor({B}, loss_dtype(t));
  return to_case(a);
}

}  // namespace

TestCase make_greedy_case(const TestShape& s, DType t, uint64_t seed) {
  return make_decode_case<CtcGreedyDecodeArgs>(s, t, seed);
}
TestCase make_beam_case(const TestShape& s, DType t, uint64_t seed) {
  return make_decode_case<CtcBeamDecodeArgs>(s, t, seed);
}

// Alpha and beta chain T log-sum-exps; float variants use polynomial exp/log (cpu.omp).
Tolerance ctc_tolerance(DType t, const TestShape&) {
  if (t == DType::f16) return {3e-3, 3e-3};
  if (t == DType::bf16) return {2e-2, 2e-2};
  if (t == DType::f32) return {1e-4, 1e-4};
  return {1e-9, 1e-9};
}

// The emulator runs every thread of every block: T <= 12, B <= 3, C <= 6.
bool ctc_simt_small(const TestShape& s) { return s[0] <= 12 && s[1] <= 3 && s[2] <= 6; }

}  // namespace aim::kernels::ctc_cpu
