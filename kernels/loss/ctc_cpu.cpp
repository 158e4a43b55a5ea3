// CTC loss and decoding on the CPU (math, gradient, layout: kernels/loss/CTC.md).
// cpu.ref (ctc_fwd, ctc_bwd, ctc_greedy_decode, ctc_beam_decode): the oracle. One sample at a
//   time, every log-sum-exp and every sum in double, in index order; values are rounded once,
//   where they are stored (log_alpha, loss, dlog_probs). The backward reads log_alpha (as every
//   variant does) and computes beta in double. f32 f64 f16 bf16.
// cpu.omp (ctc_fwd, ctc_bwd; default): OpenMP over the batch (one sample per task, dynamic
//   schedule: lengths vary), float accumulators (double for f64). Per time step the alpha (beta)
//   row is one `omp simd` loop over the extended-label positions s: the three-term log-sum-exp
//   with a branch-free exp/log polynomial for float (libm calls do not vectorise), the s-2 term
//   masked by an additive 0/-inf row computed once per sample. The gradient row is exp(log_probs)
//   (one simd loop over C) minus the occupancies scattered by label, in s order. Per-sample
//   losses are reduced in b order afterwards: deterministic, independent of the thread count.
//   Threads only from B*T*L >= 8192 lattice nodes (CRNN: 33600); smaller calls run serially.
//   Work: ~T*L log-sum-exps per sample forward, twice that plus T*C exps backward; at CRNN's
//   shape (T 25, B 64, C 37, S 10) the whole call is a few hundred microseconds on 2 cores.
// Test cases: ctc_cases.cpp.
#include "kernels/loss/ctc_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/fast_math.h"
#include "kernels/loss/ctc.h"
#include "kernels/registry.h"

namespace aim::kernels {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

std::string desc(const Tensor& t) {
  return t.defined()
             ? to_string(t.sizes()) + " " + dtype_name(t.dtype()) + " on " + t.device().str()
             : "undefined";
}

bool is_index(DType t) { return t == DType::i32 || t == DType::i64; }

// A [B] i32/i64 lengths tensor on the CPU, every value in [0, hi].
std::vector<int64_t> read_lengths(const char* op, const char* name, const Tensor& t, int64_t B,
                                  int64_t hi, const char* hi_name) {
  AIM_CHECK(t.defined() && t.sizes() == Shape{B} && is_index(t.dtype()) && t.device() == kCPU &&
                t.is_contiguous(),
            "[", op, "] ", name, " must be a contiguous [", B,
            "] i32/i64 tensor on the CPU (the kernels plan from it), got ", desc(t));
  std::vector<int64_t> v(static_cast<size_t>(B));
  AIM_DISPATCH_INDEX_TYPES(t.dtype(), I, {
    const I* p = t.data<I>();
    for (int64_t b = 0; b < B; ++b) v[size_t(b)] = int64_t(p[b]);
  });
  for (int64_t b = 0; b < B; ++b)
    AIM_CHECK(v[size_t(b)] >= 0 && v[size_t(b)] <= hi, "[", op, "] ", name, "[", b,
              "] = ", v[size_t(b)], " is outside [0, ", hi_name, " = ", hi, "]");
  return v;
}

void check_tensor(const char* op, const char* name, const Tensor& t, const Shape& want, DType dt,
                  Device dev) {
  AIM_CHECK(t.defined() && t.sizes() == want && t.dtype() == dt && t.is_contiguous(), "[", op, "] ",
            name, " must be a contiguous ", to_string(want), " ", dtype_name(dt), ", got ",
            desc(t));
  AIM_CHECK(t.device() == dev, "[", op, "] ", name, " is on ", t.device().str(), ", log_probs on ",
            dev.str());
}

// log_probs, blank, input_lengths (optional for the decoders).
CtcPlan plan_common(const char* op, const Tensor& lp, const Tensor& input_lengths, int64_t blank,
                    bool lengths_required) {
  AIM_CHECK(lp.defined() && lp.dim() == 3, "[", op, "] log_probs must be [T, B, C], got ",
            desc(lp));
  AIM_CHECK(is_floating(lp.dtype()), "[", op, "] log_probs must be f32, f64, f16 or bf16, got ",
            dtype_name(lp.dtype()));
  AIM_CHECK(lp.is_contiguous(), "[", op, "] log_probs ", to_string(lp.sizes()),
            " must be contiguous");
  CtcPlan p;
  p.T = lp.size(0);
  p.B = lp.size(1);
  p.C = lp.size(2);
  AIM_CHECK(p.T >= 1 && p.B >= 1 && p.C >= 1, "[", op, "] log_probs must have T, B, C >= 1, got ",
            to_string(lp.sizes()));
  AIM_CHECK(blank >= 0 && blank < p.C, "[", op, "] blank = ", blank, " is outside [0, C = ", p.C,
            ")");
  if (input_lengths.defined() || lengths_required)
    p.input_len = read_lengths(op, "input_lengths", input_lengths, p.B, p.T, "T");
  else
    p.input_len.assign(size_t(p.B), p.T);
  return p;
}

// Targets and target_lengths: fills S, L, target_len, target_off; checks the labels on the CPU.
void plan_targets(const char* op, CtcPlan& p, const Tensor& targets, const Tensor& target_lengths,
                  int64_t blank, Device dev, bool check_labels) {
  AIM_CHECK(targets.defined() && (targets.dim() == 1 || targets.dim() == 2) &&
                is_index(targets.dtype()) && targets.is_contiguous(),
            "[", op, "] targets must be a contiguous [B, S] (padded) or [sum(target_lengths)] ",
            "i32/i64 tensor, got ", desc(targets));
  AIM_CHECK(targets.device() == dev, "[", op, "] targets are on ", targets.device().str(),
            ", log_probs on ", dev.str());
  const bool padded = targets.dim() == 2;
  if (padded)
    AIM_CHECK(targets.size(0) == p.B, "[", op, "] targets [B, S] must have B = ", p.B,
              " rows (log_probs' batch), got ", desc(targets));
  const int64_t cap = padded ? targets.size(1) : targets.size(0);
  p.target_len = read_lengths(op, "target_lengths", target_lengths, p.B, cap,
                              padded ? "S = targets.size(1)" : "targets.size(0)");
  p.target_off.resize(size_t(p.B));
  int64_t off = 0, mx = 0;
  for (int64_t b = 0; b < p.B; ++b) {
    p.target_off[size_t(b)] = padded ? b * targets.size(1) : off;
    off += p.target_len[size_t(b)];
    mx = std::max(mx, p.target_len[size_t(b)]);
  }
  if (!padded)
    AIM_CHECK(off == targets.size(0), "[", op, "] 1-D targets hold ", targets.size(0),
              " labels but target_lengths sum to ", off);
  p.S = padded ? targets.size(1) : mx;
  p.L = 2 * p.S + 1;
  // CUDA variants check the labels on the device (also when the emulator runs them on the CPU).
  if (targets.device() != kCPU || !check_labels) return;
  AIM_DISPATCH_INDEX_TYPES(targets.dtype(), I, {
    const I* tg = targets.data<I>();
    for (int64_t b = 0; b < p.B; ++b)
      for (int64_t i = 0; i < p.target_len[size_t(b)]; ++i) {
        const int64_t v = int64_t(tg[p.target_off[size_t(b)] + i]);
        if (v < 0 || v >= p.C || v == blank) ctc_target_error(op, b, i, v, p.C, blank);
      }
  });
}

}  // namespace

void ctc_target_error(const char* op, int64_t b, int64_t i, int64_t value, int64_t C,
                      int64_t blank) {
  AIM_FAIL("[", op, "] target ", value, " of sample ", b, " at position ", i,
           " is not a label: expected 0 <= target < C = ", C, " and target != blank = ", blank);
}

Shape ctc_log_alpha_shape(const Tensor& log_probs, const Tensor& targets,
                          const Tensor& target_lengths) {
  AIM_CHECK(log_probs.defined() && log_probs.dim() == 3, "[ctc] log_probs must be [T, B, C], got ",
            desc(log_probs));
  AIM_CHECK(targets.defined() && (targets.dim() == 1 || targets.dim() == 2),
            "[ctc] targets must be [B, S] or 1-D, got ", desc(targets));
  const int64_t B = log_probs.size(1), T = log_probs.size(0);
  int64_t S = 0;
  if (targets.dim() == 2) {
    S = targets.size(1);
  } else {
    const std::vector<int64_t> tl = read_lengths("ctc", "target_lengths", target_lengths, B,
                                                 targets.size(0), "targets.size(0)");
    for (int64_t v : tl) S = std::max(S, v);
  }
  return {B, T, 2 * S + 1};
}

CtcPlan check_ctc_fwd_args(const CtcFwdArgs& a, bool check_labels) {
  const char* op = "ctc_fwd";
  CtcPlan p = plan_common(op, a.log_probs, a.input_lengths, a.blank, true);
  plan_targets(op, p, a.targets, a.target_lengths, a.blank, a.device(), check_labels);
  const DType s = loss_dtype(a.log_probs.dtype());
  check_tensor(op, "loss", a.loss, a.reduction == Reduction::none ? Shape{p.B} : Shape{}, s,
               a.device());
  check_tensor(op, "log_alpha", a.log_alpha, {p.B, p.T, p.L}, s, a.device());
  return p;
}

CtcPlan check_ctc_bwd_args(const CtcBwdArgs& a, bool check_labels) {
  const char* op = "ctc_bwd";
  CtcPlan p = plan_common(op, a.log_probs, a.input_lengths, a.blank, true);
  plan_targets(op, p, a.targets, a.target_lengths, a.blank, a.device(), check_labels);
  const DType s = loss_dtype(a.log_probs.dtype());
  check_tensor(op, "dloss", a.dloss, a.reduction == Reduction::none ? Shape{p.B} : Shape{}, s,
               a.device());
  check_tensor(op, "log_alpha (the forward's)", a.log_alpha, {p.B, p.T, p.L}, s, a.device());
  check_tensor(op, "dlog_probs", a.dlog_probs, a.log_probs.sizes(), a.log_probs.dtype(),
               a.device());
  return p;
}

namespace {
void check_decode_outputs(const char* op, const CtcPlan& p, const Tensor& labels,
                          const Tensor& lengths, const Tensor& log_prob, bool log_prob_required,
                          const Tensor& lp) {
  check_tensor(op, "labels", labels, {p.B, p.T}, DType::i64, lp.device());
  check_tensor(op, "lengths", lengths, {p.B}, DType::i64, lp.device());
  if (log_prob.defined() || log_prob_required)
    check_tensor(op, "log_prob", log_prob, {p.B}, loss_dtype(lp.dtype()), lp.device());
}
}  // namespace

CtcPlan check_ctc_greedy_args(const CtcGreedyDecodeArgs& a) {
  const char* op = "ctc_greedy_decode";
  CtcPlan p = plan_common(op, a.log_probs, a.input_lengths, a.blank, false);
  check_decode_outputs(op, p, a.labels, a.lengths, a.log_prob, false, a.log_probs);
  return p;
}

CtcPlan check_ctc_beam_args(const CtcBeamDecodeArgs& a) {
  const char* op = "ctc_beam_decode";
  CtcPlan p = plan_common(op, a.log_probs, a.input_lengths, a.blank, false);
  AIM_CHECK(a.beam_width >= 1, "[", op, "] beam_width must be >= 1, got ", a.beam_width);
  check_decode_outputs(op, p, a.labels, a.lengths, a.log_prob, true, a.log_probs);
  return p;
}

namespace {

// ---- cpu.ref ----------------------------------------------------------------------------------

double lse2(double a, double b) {
  const double m = std::max(a, b);
  if (m == kNegInf) return kNegInf;
  return m + std::log(std::exp(a - m) + std::exp(b - m));
}
double lse3(double a, double b, double c) {
  const double m = std::max(a, std::max(b, c));
  if (m == kNegInf) return kNegInf;
  return m + std::log(std::exp(a - m) + std::exp(b - m) + std::exp(c - m));
}

// Sample b's extended labels l' (blank, l1, blank, l2, ..., blank): 2*tl+1 entries.
template <class I>
std::vector<int64_t> extended_labels(const CtcPlan& p, const I* tg, int64_t b, int64_t blank) {
  const int64_t tl = p.target_len[size_t(b)];
  std::vector<int64_t> lab(size_t(2 * tl + 1), blank);
  for (int64_t i = 0; i < tl; ++i)
    lab[size_t(2 * i + 1)] = int64_t(tg[p.target_off[size_t(b)] + i]);
  return lab;
}
// The s-2 transition is allowed into a label that differs from the label two positions back.
bool skip_allowed(const std::vector<int64_t>& lab, int64_t s, int64_t blank) {
  return s >= 2 && lab[size_t(s)] != blank && lab[size_t(s)] != lab[size_t(s - 2)];
}

// -log p(target | input) from a sample's stored alpha (the backward's and the tests' view).
template <class S>
double nll_from_alpha(const S* la, const CtcPlan& p, int64_t b) {
  const int64_t il = p.input_len[size_t(b)], Lb = 2 * p.target_len[size_t(b)] + 1;
  if (il == 0) return Lb == 1 ? 0.0 : INFINITY;
  const S* row = la + (b * p.T + il - 1) * p.L;
  return -lse2(double(row[Lb - 1]), Lb > 1 ? double(row[Lb - 2]) : kNegInf);
}

// Per-sample losses -> the loss tensor (reduction applied in b order).
template <class S, class A>
void write_loss(S* out, const std::vector<A>& nll, const CtcPlan& p, Reduction r, bool zi) {
  A sum = 0;
  for (int64_t b = 0; b < p.B; ++b) {
    A l = nll[size_t(b)];
    if (zi && std::isinf(l)) l = 0;
    if (r == Reduction::none) out[b] = S(l);
    if (r == Reduction::mean) l /= A(std::max<int64_t>(p.target_len[size_t(b)], 1));
    sum += l;
  }
  if (r == Reduction::sum) out[0] = S(sum);
  if (r == Reduction::mean) out[0] = S(sum / A(p.B));
}

// The factor dloss contributes to sample b's gradient.
template <class S>
double grad_scale(const S* dloss, const CtcPlan& p, Reduction r, int64_t b) {
  if (r == Reduction::none) return double(dloss[b]);
  if (r == Reduction::sum) return double(dloss[0]);
  return double(dloss[0]) / double(p.B) / double(std::max<int64_t>(p.target_len[size_t(b)], 1));
}

template <class T, class S, class I>
void fwd_ref(const CtcFwdArgs& a, const CtcPlan& p) {
  const T* lp = a.log_probs.data<T>();
  const I* tg = a.targets.data<I>();
  S* la = a.log_alpha.data<S>();
  const int64_t B = p.B, C = p.C, L = p.L;
  std::fill(la, la + B * p.T * L, S(kNegInf));
  std::vector<double> nll(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<int64_t> lab = extended_labels(p, tg, b, a.blank);
    const int64_t Lb = int64_t(lab.size()), il = p.input_len[size_t(b)];
    auto emit = [&](int64_t t, int64_t s) { return double(lp[(t * B + b) * C + lab[size_t(s)]]); };
    std::vector<double> prev(size_t(Lb), kNegInf), cur(static_cast<size_t>(Lb));
    for (int64_t t = 0; t < il; ++t) {
      for (int64_t s = 0; s < Lb; ++s) {
        double v;
        if (t == 0) {
          v = s < 2 ? emit(0, s) : kNegInf;
        } else {
          const double stay = prev[size_t(s)];
          const double step = s >= 1 ? prev[size_t(s - 1)] : kNegInf;
          const double skip = skip_allowed(lab, s, a.blank) ? prev[size_t(s - 2)] : kNegInf;
          const double in = lse3(stay, step, skip);
          v = in == kNegInf ? kNegInf : in + emit(t, s);
        }
        cur[size_t(s)] = v;
        la[(b * p.T + t) * L + s] = S(v);
      }
      std::swap(prev, cur);
    }
    if (il == 0)
      nll[size_t(b)] = Lb == 1 ? 0.0 : INFINITY;
    else
      nll[size_t(b)] = -lse2(prev[size_t(Lb - 1)], Lb > 1 ? prev[size_t(Lb - 2)] : kNegInf);
  }
  write_loss(a.loss.data<S>(), nll, p, a.reduction, a.zero_infinity);
}

template <class T, class S, class I>
void bwd_ref(const CtcBwdArgs& a, const CtcPlan& p) {
  const T* lp = a.log_probs.data<T>();
  const I* tg = a.targets.data<I>();
  const S* la = a.log_alpha.data<S>();
  const S* dloss = a.dloss.data<S>();
  T* g = a.dlog_probs.data<T>();
  const int64_t B = p.B, C = p.C, L = p.L;
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<int64_t> lab = extended_labels(p, tg, b, a.blank);
    const int64_t Lb = int64_t(lab.size()), il = p.input_len[size_t(b)];
    const double nll = nll_from_alpha(la, p, b);
    const double scale = grad_scale(dloss, p, a.reduction, b);
    // Infeasible (nll = inf): gradient 0 with or without zero_infinity (CTC.md).
    const bool feasible = std::isfinite(nll);
    for (int64_t t = 0; t < p.T; ++t)
      for (int64_t c = 0; c < C; ++c) g[(t * B + b) * C + c] = T(0.0);
    if (!feasible) continue;
    auto emit = [&](int64_t t, int64_t s) { return double(lp[(t * B + b) * C + lab[size_t(s)]]); };
    std::vector<double> next(size_t(Lb), kNegInf), cur(static_cast<size_t>(Lb)),
        occ(static_cast<size_t>(C));
    for (int64_t t = il - 1; t >= 0; --t) {
      for (int64_t s = 0; s < Lb; ++s) {
        double v;
        if (t == il - 1) {
          v = s >= Lb - 2 ? emit(t, s) : kNegInf;
        } else {
          const double stay = next[size_t(s)];
          const double step = s + 1 < Lb ? next[size_t(s + 1)] : kNegInf;
          const double skip =
              s + 2 < Lb && skip_allowed(lab, s + 2, a.blank) ? next[size_t(s + 2)] : kNegInf;
          const double in = lse3(stay, step, skip);
          v = in == kNegInf ? kNegInf : in + emit(t, s);
        }
        cur[size_t(s)] = v;
      }
      // occupancy of position s at t: exp(alpha + beta - log_probs + nll) (both include the
      // emission at t); summed per class in s order.
      std::fill(occ.begin(), occ.end(), 0.0);
      const S* arow = la + (b * p.T + t) * L;
      for (int64_t s = 0; s < Lb; ++s) {
        const double ab = double(arow[s]) + cur[size_t(s)];
        if (ab != kNegInf) occ[size_t(lab[size_t(s)])] += std::exp(ab - emit(t, s) + nll);
      }
      for (int64_t c = 0; c < C; ++c) {
        const double x = double(lp[(t * B + b) * C + c]);
        g[(t * B + b) * C + c] = T((std::exp(x) - occ[size_t(c)]) * scale);
      }
      std::swap(next, cur);
    }
  }
}

// ---- cpu.omp ----------------------------------------------------------------------------------

template <class A>
inline A fexp(A v) {
  if constexpr (std::is_same_v<A, float>)
    return fast_expf(v);
  else
    return std::exp(v);
}
template <class A>
inline A flog(A v) {
  if constexpr (std::is_same_v<A, float>)
    return fast_logf(v);
  else
    return std::log(v);
}
// log(e^x0 + e^x1 + e^x2), -inf when all three are -inf; selects only (vectorises).
template <class A>
inline A lse3_simd(A x0, A x1, A x2) {
  constexpr A ninf = -std::numeric_limits<A>::infinity();
  A m = x0 > x1 ? x0 : x1;
  m = m > x2 ? m : x2;
  const A base = m == ninf ? A(0) : m;
  const A r = base + flog(fexp(x0 - base) + fexp(x1 - base) + fexp(x2 - base));
  return m == ninf ? ninf : r;
}

// Threads only above this many lattice nodes (B*T*L): below it, waking the pool costs more than
// the work (and far more on a loaded machine).
constexpr int64_t kParallelMin = 8192;

// Per-thread scratch of one sample: extended labels, the s-2 mask, emissions, two rows.
template <class A>
struct Scratch {
  std::vector<int64_t> lab;
  std::vector<A> mask, e, rows, occ, grow;
};

template <class I>
void extended_into(std::vector<int64_t>& lab, const CtcPlan& p, const I* tg, int64_t b,
                   int64_t blank) {
  const int64_t tl = p.target_len[size_t(b)];
  lab.assign(size_t(2 * tl + 1), blank);
  for (int64_t i = 0; i < tl; ++i)
    lab[size_t(2 * i + 1)] = int64_t(tg[p.target_off[size_t(b)] + i]);
}

template <class T, class A, class I>
void fwd_omp(const CtcFwdArgs& a, const CtcPlan& p) {
  constexpr A ninf = -std::numeric_limits<A>::infinity();
  const T* lp = a.log_probs.data<T>();
  const I* tg = a.targets.data<I>();
  A* la = a.log_alpha.data<A>();
  const int64_t B = p.B, C = p.C, L = p.L, Tn = p.T;
  std::vector<A> nll(static_cast<size_t>(B));
#pragma omp parallel if (B > 1 && B * Tn * L >= kParallelMin)
  {
    Scratch<A> w;
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < B; ++b) {
      extended_into(w.lab, p, tg, b, a.blank);
      const int64_t Lb = int64_t(w.lab.size()), il = p.input_len[size_t(b)];
      const int64_t* lab = w.lab.data();
      w.mask.assign(size_t(Lb), ninf);
      for (int64_t s = 2; s < Lb; ++s)
        if (lab[s] != a.blank && lab[s] != lab[s - 2]) w.mask[size_t(s)] = 0;
      w.e.resize(size_t(Lb));
      w.rows.assign(size_t(2 * (Lb + 2)), ninf);  // two rows, each after two -inf pads
      A* prev = w.rows.data() + 2;
      A* cur = prev + Lb + 2;
      const A* mask = w.mask.data();
      A* e = w.e.data();
      for (int64_t t = 0; t < il; ++t) {
        const T* x = lp + (t * B + b) * C;
        for (int64_t s = 0; s < Lb; ++s) e[s] = A(x[lab[s]]);
        if (t == 0) {
          for (int64_t s = 0; s < Lb; ++s) cur[s] = s < 2 ? e[s] : ninf;
        } else {
#pragma omp simd
          for (int64_t s = 0; s < Lb; ++s)
            cur[s] = lse3_simd(prev[s], prev[s - 1], prev[s - 2] + mask[s]) + e[s];
        }
        A* row = la + (b * Tn + t) * L;
        std::memcpy(row, cur, size_t(Lb) * sizeof(A));
        std::fill(row + Lb, row + L, ninf);
        std::swap(prev, cur);
      }
      std::fill(la + (b * Tn + il) * L, la + (b * Tn + Tn) * L, ninf);
      if (il == 0)
        nll[size_t(b)] = Lb == 1 ? A(0) : std::numeric_limits<A>::infinity();
      else
        nll[size_t(b)] = A(-lse2(double(prev[Lb - 1]), Lb > 1 ? double(prev[Lb - 2]) : kNegInf));
    }
  }
  write_loss(a.loss.data<A>(), nll, p, a.reduction, a.zero_infinity);
}

template <class T, class A, class I>
void bwd_omp(const CtcBwdArgs& a, const CtcPlan& p) {
  constexpr A ninf = -std::numeric_limits<A>::infinity();
  const T* lp = a.log_probs.data<T>();
  const I* tg = a.targets.data<I>();
  const A* la = a.log_alpha.data<A>();
  const A* dloss = a.dloss.data<A>();
  T* g = a.dlog_probs.data<T>();
  const int64_t B = p.B, C = p.C, L = p.L, Tn = p.T;
#pragma omp parallel if (B > 1 && B * Tn * L >= kParallelMin)
  {
    Scratch<A> w;
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < B; ++b) {
      const int64_t il = p.input_len[size_t(b)];
      const A nll = A(nll_from_alpha(la, p, b));
      const A scale = A(grad_scale(dloss, p, a.reduction, b));
      auto zero_rows = [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
          std::fill(g + (t * B + b) * C, g + (t * B + b + 1) * C, T(0.0));
      };
      if (!std::isfinite(nll)) {  // infeasible: gradient 0 (CTC.md)
        zero_rows(0, Tn);
        continue;
      }
      zero_rows(il, Tn);
      extended_into(w.lab, p, tg, b, a.blank);
      const int64_t Lb = int64_t(w.lab.size());
      const int64_t* lab = w.lab.data();
      // mask[s]: the s+2 -> s transition of beta (the s+2 label differs from blank and from s's).
      w.mask.assign(size_t(Lb), ninf);
      for (int64_t s = 0; s + 2 < Lb; ++s)
        if (lab[s + 2] != a.blank && lab[s + 2] != lab[s]) w.mask[size_t(s)] = 0;
      w.e.resize(size_t(Lb));
      w.occ.resize(size_t(Lb));
      w.grow.resize(size_t(C));
      w.rows.assign(size_t(2 * (Lb + 2)), ninf);  // two rows, each followed by two -inf pads
      A* next = w.rows.data();
      A* cur = next + Lb + 2;
      const A* mask = w.mask.data();
      A* e = w.e.data();
      A* occ = w.occ.data();
      A* grow = w.grow.data();
      for (int64_t t = il - 1; t >= 0; --t) {
        const T* x = lp + (t * B + b) * C;
        for (int64_t s = 0; s < Lb; ++s) e[s] = A(x[lab[s]]);
        if (t == il - 1) {
          for (int64_t s = 0; s < Lb; ++s) cur[s] = s >= Lb - 2 ? e[s] : ninf;
        } else {
#pragma omp simd
          for (int64_t s = 0; s < Lb; ++s)
            cur[s] = lse3_simd(next[s], next[s + 1], next[s + 2] + mask[s]) + e[s];
        }
        const A* arow = la + (b * Tn + t) * L;
#pragma omp simd
        for (int64_t s = 0; s < Lb; ++s) {
          const A ab = arow[s] + cur[s];
          occ[s] = ab == ninf ? A(0) : fexp(ab - e[s] + nll) * scale;
        }
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) grow[c] = fexp(A(x[c])) * scale;
        for (int64_t s = 0; s < Lb; ++s) grow[lab[s]] -= occ[s];
        T* gr = g + (t * B + b) * C;
        for (int64_t c = 0; c < C; ++c) gr[c] = T(grow[c]);
        std::swap(next, cur);
      }
    }
  }
}

// ---- decoding (cpu.ref) -----------------------------------------------------------------------

// The decoded labels of sample b into row b of labels ([B, T], -1 past the length).
void write_labels(const CtcPlan& p, int64_t b, const std::vector<int64_t>& seq, int64_t* labels,
                  int64_t* lengths) {
  int64_t* row = labels + b * p.T;
  for (int64_t i = 0; i < p.T; ++i) row[i] = i < int64_t(seq.size()) ? seq[size_t(i)] : -1;
  lengths[b] = int64_t(seq.size());
}

template <class T, class S>
void greedy_ref(const CtcGreedyDecodeArgs& a, const CtcPlan& p) {
  const T* lp = a.log_probs.data<T>();
  for (int64_t b = 0; b < p.B; ++b) {
    std::vector<int64_t> seq;
    int64_t prev = -1;
    double sum = 0;
    for (int64_t t = 0; t < p.input_len[size_t(b)]; ++t) {
      const T* x = lp + (t * p.B + b) * p.C;
      int64_t best = 0;
      double bv = double(x[0]);
      for (int64_t c = 1; c < p.C; ++c)
        if (double(x[c]) > bv) best = c, bv = double(x[c]);  // first maximum wins ties
      sum += bv;
      if (best != a.blank && !(a.merge_repeated && best == prev)) seq.push_back(best);
      prev = best;
    }
    write_labels(p, b, seq, a.labels.data<int64_t>(), a.lengths.data<int64_t>());
    if (a.log_prob.defined()) a.log_prob.data<S>()[b] = S(sum);
  }
}

// Prefix beam search (CTC.md). Candidates are enumerated in a fixed order — first the beams
// themselves (index i), then every extension of beam j by a non-blank class c (j, then c) — and
// the new beam is the first beam_width of them by total probability, ties to the earlier
// candidate. cuda.batch enumerates and ranks the same way.
template <class T, class S>
void beam_ref(const CtcBeamDecodeArgs& a, const CtcPlan& p) {
  struct Beam {
    std::vector<int64_t> prefix;
    double pb, pnb;  // log-probability of the prefix ending in blank / in its last label
  };
  struct Cand {
    int64_t from, c;  // c < 0: beam `from` itself; else beam `from` extended by c
    double pb, pnb, tot;
  };
  const T* lp = a.log_probs.data<T>();
  const int64_t C = p.C, blank = a.blank, W = a.beam_width;
  for (int64_t b = 0; b < p.B; ++b) {
    std::vector<Beam> beams{{{}, 0.0, kNegInf}};
    for (int64_t t = 0; t < p.input_len[size_t(b)]; ++t) {
      const T* x = lp + (t * p.B + b) * C;
      auto y = [&](int64_t c) { return double(x[c]); };
      const int64_t nb = int64_t(beams.size());
      // The beam whose prefix is beam i's without its last label (-1: none in the beam), and
      // which extensions are already beams.
      std::vector<int64_t> parent(size_t(nb), -1);
      std::vector<char> is_beam(size_t(nb * C), 0);
      for (int64_t i = 0; i < nb; ++i) {
        const auto& q = beams[size_t(i)].prefix;
        if (q.empty()) continue;
        for (int64_t j = 0; j < nb && parent[size_t(i)] < 0; ++j) {
          const auto& r = beams[size_t(j)].prefix;
          if (r.size() + 1 == q.size() && std::equal(r.begin(), r.end(), q.begin()))
            parent[size_t(i)] = j;
        }
        if (parent[size_t(i)] >= 0) is_beam[size_t(parent[size_t(i)] * C + q.back())] = 1;
      }
      std::vector<Cand> cand;
      for (int64_t i = 0; i < nb; ++i) {
        const Beam& q = beams[size_t(i)];
        const double npb = lse2(q.pb, q.pnb) + y(blank);
        double npnb = kNegInf;
        if (!q.prefix.empty()) {
          const int64_t last = q.prefix.back();
          npnb = q.pnb + y(last);        // the last label repeated
          if (parent[size_t(i)] >= 0) {  // the last label entered from the parent prefix
            const Beam& r = beams[size_t(parent[size_t(i)])];
            const double from =
                !r.prefix.empty() && r.prefix.back() == last ? r.pb : lse2(r.pb, r.pnb);
            npnb = lse2(npnb, from + y(last));
          }
        }
        cand.push_back({i, -1, npb, npnb, lse2(npb, npnb)});
      }
      for (int64_t j = 0; j < nb; ++j) {
        const Beam& r = beams[size_t(j)];
        for (int64_t c = 0; c < C; ++c) {
          if (c == blank || is_beam[size_t(j * C + c)]) continue;
          const double from = !r.prefix.empty() && r.prefix.back() == c ? r.pb : lse2(r.pb, r.pnb);
          const double pnb = from + y(c);
          cand.push_back({j, c, kNegInf, pnb, lse2(kNegInf, pnb)});
        }
      }
      std::stable_sort(cand.begin(), cand.end(),
                       [](const Cand& u, const Cand& v) { return u.tot > v.tot; });
      std::vector<Beam> next;
      for (size_t k = 0; k < cand.size() && int64_t(next.size()) < W; ++k) {
        Beam nbm{beams[size_t(cand[k].from)].prefix, cand[k].pb, cand[k].pnb};
        if (cand[k].c >= 0) nbm.prefix.push_back(cand[k].c);
        next.push_back(std::move(nbm));
      }
      beams = std::move(next);
    }
    const Beam& best = beams[0];
    std::vector<int64_t> seq;
    for (int64_t v : best.prefix)
      if (!a.merge_repeated || seq.empty() || seq.back() != v) seq.push_back(v);
    write_labels(p, b, seq, a.labels.data<int64_t>(), a.lengths.data<int64_t>());
    a.log_prob.data<S>()[b] = S(lse2(best.pb, best.pnb));
  }
}

template <class T>
using LossT = std::conditional_t<std::is_same_v<T, double>, double, float>;

}  // namespace

namespace ctc_cpu {

// ---- entry points ------------------------------------------------------------------------------

void ctc_fwd_cpu_ref(const CtcFwdArgs& a) {
  const CtcPlan p = check_ctc_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.log_probs.dtype(), T, {
    AIM_DISPATCH_INDEX_TYPES(a.targets.dtype(), I, { fwd_ref<T, LossT<T>, I>(a, p); });
  });
}
void ctc_bwd_cpu_ref(const CtcBwdArgs& a) {
  const CtcPlan p = check_ctc_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.log_probs.dtype(), T, {
    AIM_DISPATCH_INDEX_TYPES(a.targets.dtype(), I, { bwd_ref<T, LossT<T>, I>(a, p); });
  });
}
void ctc_fwd_cpu_omp(const CtcFwdArgs& a) {
  const CtcPlan p = check_ctc_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.log_probs.dtype(), T, {
    AIM_DISPATCH_INDEX_TYPES(a.targets.dtype(), I, { fwd_omp<T, LossT<T>, I>(a, p); });
  });
}
void ctc_bwd_cpu_omp(const CtcBwdArgs& a) {
  const CtcPlan p = check_ctc_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.log_probs.dtype(), T, {
    AIM_DISPATCH_INDEX_TYPES(a.targets.dtype(), I, { bwd_omp<T, LossT<T>, I>(a, p); });
  });
}
void ctc_greedy_cpu_ref(const CtcGreedyDecodeArgs& a) {
  const CtcPlan p = check_ctc_greedy_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.log_probs.dtype(), T, { greedy_ref<T, LossT<T>>(a, p); });
}
void ctc_beam_cpu_ref(const CtcBeamDecodeArgs& a) {
  const CtcPlan p = check_ctc_beam_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.log_probs.dtype(), T, { beam_ref<T, LossT<T>>(a, p); });
}

}  // namespace ctc_cpu

namespace {

std::vector<DType> float_dtypes() { return {DType::f32, DType::f64, DType::f16, DType::bf16}; }

}  // namespace

void ctc_fwd(const CtcFwdArgs& a) { AIM_DISPATCH_OP(CtcFwdArgs, "ctc_fwd", a); }
void ctc_bwd(const CtcBwdArgs& a) { AIM_DISPATCH_OP(CtcBwdArgs, "ctc_bwd", a); }
void ctc_greedy_decode(const CtcGreedyDecodeArgs& a) {
  AIM_DISPATCH_OP(CtcGreedyDecodeArgs, "ctc_greedy_decode", a);
}
void ctc_beam_decode(const CtcBeamDecodeArgs& a) {
  AIM_DISPATCH_OP(CtcBeamDecodeArgs, "ctc_beam_decode", a);
}

void register_ctc_cpu(Registry& r) {
  using namespace ctc_cpu;
  // Test cases: ctc_cases.cpp. The binders are the ones derived from the Args' fields plus a move
  // of the lengths back to the CPU (ctc_cpu.h).
  auto& f = r.op<CtcFwdArgs>("ctc_fwd");
  f.description = "CTC loss forward (F.ctc_loss): log-space alpha, saved for the backward";
  f.add({"cpu.ref", Backend::CPU, Provider::Own, ctc_fwd_cpu_ref, float_dtypes()});
  f.add({"cpu.omp", Backend::CPU, Provider::Own, ctc_fwd_cpu_omp, float_dtypes()});
  f.set_default(Backend::CPU, "cpu.omp");
  f.set_cost(ctc_fwd_cost);
  f.make_case = make_fwd_case;
  f.set_shape_fields(loss_shape_fields());
  f.add_test_shapes(loss_shapes());
  f.tolerance = ctc_tolerance;
  f.small_enough_for_simt = ctc_simt_small;

  auto& b = r.op<CtcBwdArgs>("ctc_bwd");
  b.description = "CTC loss gradient w.r.t. log_probs (PyTorch's): written (=)";
  b.add({"cpu.ref", Backend::CPU, Provider::Own, ctc_bwd_cpu_ref, float_dtypes()});
  b.add({"cpu.omp", Backend::CPU, Provider::Own, ctc_bwd_cpu_omp, float_dtypes()});
  b.set_default(Backend::CPU, "cpu.omp");
  b.set_cost(ctc_bwd_cost);
  b.make_case = make_bwd_case;
  b.set_shape_fields(loss_shape_fields());
  b.add_test_shapes(loss_shapes());
  b.tolerance = ctc_tolerance;
  b.small_enough_for_simt = ctc_simt_small;

  auto& g = r.op<CtcGreedyDecodeArgs>("ctc_greedy_decode");
  g.description = "CTC best-path decoding: argmax per step, repeats merged, blanks dropped";
  g.add({"cpu.ref", Backend::CPU, Provider::Own, ctc_greedy_cpu_ref, float_dtypes()});
  g.set_default(Backend::CPU, "cpu.ref");
  g.set_cost(ctc_greedy_decode_cost);
  g.make_case = make_greedy_case;
  g.set_shape_fields(decode_shape_fields(false));
  g.add_test_shapes(greedy_shapes());
  g.tolerance = ctc_tolerance;
  g.small_enough_for_simt = ctc_simt_small;

  auto& m = r.op<CtcBeamDecodeArgs>("ctc_beam_decode");
  m.description = "CTC prefix beam search (TF's ctc_beam_search_decoder), best path";
  m.add({"cpu.ref", Backend::CPU, Provider::Own, ctc_beam_cpu_ref, float_dtypes()});
  m.set_default(Backend::CPU, "cpu.ref");
  m.set_cost(ctc_beam_decode_cost);
  m.make_case = make_beam_case;
  m.set_shape_fields(decode_shape_fields(true));
  m.add_test_shapes(beam_shapes());
  m.tolerance = ctc_tolerance;
  m.small_enough_for_simt = ctc_simt_small;
}

}  // namespace aim::kernels
