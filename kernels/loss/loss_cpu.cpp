// cpu.ref: the oracle. Each formula written out in double, plain loops, sums in index order.
// cpu.omp: OpenMP over rows (cross entropy) or fixed chunks of elements (pointwise losses);
// per-row / per-chunk partial losses are summed in order afterwards: deterministic, independent
// of the thread count. Accumulation in float (double for f64).
// Test cases: loss_cases.cpp.
#include "kernels/loss/loss_cpu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/loss/loss.h"
#include "kernels/registry.h"

namespace aim::kernels {

const char* reduction_name(Reduction r) {
  return r == Reduction::none ? "none" : r == Reduction::mean ? "mean" : "sum";
}

void cross_entropy_target_error(const char* op, int64_t position, int64_t target, int64_t V,
                                int64_t ignore_index) {
  AIM_FAIL("[", op, "] target ", target, " at position ", position, " is out of range for V = ", V,
           " (expected 0 <= target < ", V, " or ignore_index = ", ignore_index, ")");
}

namespace {

void check_loss_tensor(const char* op, const Tensor& t, const char* name, const Shape& want,
                       DType dt) {
  AIM_CHECK(t.defined() && t.sizes() == want && t.dtype() == dt && t.is_contiguous(), "[", op, "] ",
            name, " must be a contiguous ", to_string(want), " ", dtype_name(dt), ", got ",
            t.defined() ? to_string(t.sizes()) : std::string("undefined"), " ",
            t.defined() ? dtype_name(t.dtype()) : "");
}

}  // namespace

void check_cross_entropy_fwd_args(const CrossEntropyFwdArgs& a) {
  const char* op = "cross_entropy_fwd";
  AIM_CHECK(a.logits.dim() == 2 && a.logits.is_contiguous(), "[", op,
            "] logits must be a contiguous [N, V], got ", to_string(a.logits.sizes()));
  const int64_t N = a.logits.size(0);
  AIM_CHECK(a.target.dim() == 1 && a.target.size(0) == N && a.target.is_contiguous() &&
                (a.target.dtype() == DType::i32 || a.target.dtype() == DType::i64),
            "[", op, "] target must be a contiguous [", N, "] i32/i64, got ",
            to_string(a.target.sizes()), " ", dtype_name(a.target.dtype()));
  const DType s = loss_dtype(a.logits.dtype());
  check_loss_tensor(op, a.loss, "loss", a.reduction == Reduction::none ? Shape{N} : Shape{}, s);
  check_loss_tensor(op, a.lse, "lse", {N}, s);
  AIM_CHECK(a.label_smoothing >= 0 && a.label_smoothing <= 1, "[", op,
            "] label_smoothing must be in [0, 1], got ", a.label_smoothing);
}

void check_cross_entropy_bwd_args(const CrossEntropyBwdArgs& a) {
  const char* op = "cross_entropy_bwd";
  AIM_CHECK(a.logits.dim() == 2 && a.logits.is_contiguous(), "[", op,
            "] logits must be a contiguous [N, V], got ", to_string(a.logits.sizes()));
  const int64_t N = a.logits.size(0);
  AIM_CHECK(a.target.dim() == 1 && a.target.size(0) == N && a.target.is_contiguous() &&
                (a.target.dtype() == DType::i32 || a.target.dtype() == DType::i64),
            "[", op, "] target must be a contiguous [", N, "] i32/i64, got ",
            to_string(a.target.sizes()), " ", dtype_name(a.target.dtype()));
  const DType s = loss_dtype(a.logits.dtype());
  check_loss_tensor(op, a.dloss, "dloss", a.reduction == Reduction::none ? Shape{N} : Shape{}, s);
  check_loss_tensor(op, a.lse, "lse", {N}, s);
  check_loss_tensor(op, a.dlogits, "dlogits", a.logits.sizes(), a.logits.dtype());
  AIM_CHECK(a.label_smoothing >= 0 && a.label_smoothing <= 1, "[", op,
            "] label_smoothing must be in [0, 1], got ", a.label_smoothing);
}

void check_pointwise_args(const PointwiseLoss& p, bool backward) {
  const char* op = p.op;
  AIM_CHECK(p.x.dim() >= 1 && p.x.is_contiguous(), "[", op,
            "] input must be contiguous with at least one dim, got ", to_string(p.x.sizes()));
  const DType t = p.x.dtype(), s = loss_dtype(t);
  check_loss_tensor(op, p.target, "target", p.x.sizes(), t);
  if (p.pos_weight.defined()) check_loss_tensor(op, p.pos_weight, "pos_weight", {p.x.size(-1)}, t);
  const Shape red = p.reduction == Reduction::none ? p.x.sizes() : Shape{};
  if (backward) {
    check_loss_tensor(op, p.dloss, "dloss", red, s);
    check_loss_tensor(op, p.out, "dinput", p.x.sizes(), t);
  } else {
    check_loss_tensor(op, p.out, "loss", red, s);
  }
  AIM_CHECK(p.beta >= 0, "[", op, "] beta must be >= 0, got ", p.beta);
}

PointwiseLoss to_pointwise(const BceWithLogitsFwdArgs& a) {
  return {PointwiseKind::bce_with_logits,
          "bce_with_logits_fwd",
          a.logits,
          a.target,
          a.pos_weight,
          Tensor(),
          a.loss,
          a.reduction,
          0.0};
}
PointwiseLoss to_pointwise(const BceWithLogitsBwdArgs& a) {
  return {PointwiseKind::bce_with_logits,
          "bce_with_logits_bwd",
          a.logits,
          a.target,
          a.pos_weight,
          a.dloss,
          a.dlogits,
          a.reduction,
          0.0};
}
PointwiseLoss to_pointwise(const MseFwdArgs& a) {
  return {PointwiseKind::mse, "mse_fwd", a.input,     a.target, Tensor(),
          Tensor(),           a.loss,    a.reduction, 0.0};
}
PointwiseLoss to_pointwise(const MseBwdArgs& a) {
  return {PointwiseKind::mse, "mse_bwd",   a.input, a.target, Tensor(), a.dloss,
          a.dinput,           a.reduction, 0.0};
}
PointwiseLoss to_pointwise(const SmoothL1FwdArgs& a) {
  return {PointwiseKind::smooth_l1,
          "smooth_l1_fwd",
          a.input,
          a.target,
          Tensor(),
          Tensor(),
          a.loss,
          a.reduction,
          double(a.beta)};
}
PointwiseLoss to_pointwise(const SmoothL1BwdArgs& a) {
  return {PointwiseKind::smooth_l1,
          "smooth_l1_bwd",
          a.input,
          a.target,
          Tensor(),
          a.dloss,
          a.dinput,
          a.reduction,
          double(a.beta)};
}

namespace {

template <class T>
using AccOf = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Mean over non-ignored samples: 0/0 gives NaN, as PyTorch.
double reduce_value(Reduction r, double sum, double count) {
  return r == Reduction::mean ? (count > 0 ? sum / count : std::numeric_limits<double>::quiet_NaN())
                              : sum;
}

template <class I>
void check_targets(const char* op, const I* t, int64_t N, int64_t V, int64_t ignore) {
  for (int64_t n = 0; n < N; ++n) {
    const int64_t v = int64_t(t[n]);
    if (v != ignore && (v < 0 || v >= V)) cross_entropy_target_error(op, n, v, V, ignore);
  }
}

// ---- cross entropy: cpu.ref -----------------------------------------------------------------

template <class T, class S, class I>
void ce_fwd_ref(const CrossEntropyFwdArgs& a) {
  const int64_t N = a.logits.size(0), V = a.logits.size(1);
  const T* x = a.logits.data<T>();
  const I* t = a.target.data<I>();
  check_targets("cross_entropy_fwd", t, N, V, a.ignore_index);
  const double eps = a.label_smoothing;
  double total = 0, count = 0;
  for (int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * V;
    double mx = -std::numeric_limits<double>::infinity(), sx = 0;
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, double(xr[v]));
    double se = 0;
    for (int64_t v = 0; v < V; ++v) {
      se += std::exp(double(xr[v]) - mx);
      sx += double(xr[v]);
    }
    const double lse = mx + std::log(se);
    a.lse.data<S>()[n] = S(lse);
    double l = 0;
    if (int64_t(t[n]) != a.ignore_index) {
      l = (1 - eps) * (lse - double(xr[t[n]])) + eps * (lse - sx / double(V));
      count += 1;
    }
    if (a.reduction == Reduction::none) a.loss.data<S>()[n] = S(l);
    total += l;
  }
  if (a.reduction != Reduction::none)
    a.loss.data<S>()[0] = S(reduce_value(a.reduction, total, count));
}

template <class T, class S, class I>
void ce_bwd_ref(const CrossEntropyBwdArgs& a) {
  const int64_t N = a.logits.size(0), V = a.logits.size(1);
  const T* x = a.logits.data<T>();
  const I* t = a.target.data<I>();
  check_targets("cross_entropy_bwd", t, N, V, a.ignore_index);
  const S* lse = a.lse.data<S>();
  const S* dl = a.dloss.data<S>();
  T* dx = a.dlogits.data<T>();
  const double eps = a.label_smoothing;
  double count = 0;
  for (int64_t n = 0; n < N; ++n) count += int64_t(t[n]) != a.ignore_index;
  for (int64_t n = 0; n < N; ++n) {
    const bool ignored = int64_t(t[n]) == a.ignore_index;
    const double g = a.reduction == Reduction::none   ? double(dl[n])
                     : a.reduction == Reduction::mean ? double(dl[0]) / count
                                                      : double(dl[0]);
    for (int64_t v = 0; v < V; ++v) {
      const double p = std::exp(double(x[n * V + v]) - double(lse[n]));
      const double target = (v == int64_t(t[n]) ? 1 - eps : 0) + eps / double(V);
      dx[n * V + v] = T(ignored ? 0.0 : g * (p - target));
    }
  }
}

// ---- cross entropy: cpu.omp -----------------------------------------------------------------

template <class T, class I>
void ce_fwd_omp(const CrossEntropyFwdArgs& a) {
  using A = AccOf<T>;
  const int64_t N = a.logits.size(0), V = a.logits.size(1);
  const T* x = a.logits.data<T>();
  const I* t = a.target.data<I>();
  check_targets("cross_entropy_fwd", t, N, V, a.ignore_index);
  const A eps = A(a.label_smoothing);
  A* lse = a.lse.data<A>();
  std::vector<A> rows(static_cast<size_t>(N));
#pragma omp parallel for schedule(static) if (N * V > (int64_t(1) << 15))
  for (int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * V;
    A mx = -std::numeric_limits<A>::infinity(), se = 0, sx = 0;
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, A(xr[v]));
    for (int64_t v = 0; v < V; ++v) {
      se += std::exp(A(xr[v]) - mx);
      sx += A(xr[v]);
    }
    const A l = mx + std::log(se);
    lse[n] = l;
    const bool ignored = int64_t(t[n]) == a.ignore_index;
    rows[size_t(n)] = ignored ? A(0) : (A(1) - eps) * (l - A(xr[t[n]])) + eps * (l - sx / A(V));
  }
  if (a.reduction == Reduction::none) {
    std::copy(rows.begin(), rows.end(), a.loss.data<A>());
    return;
  }
  A total = 0, count = 0;
  for (int64_t n = 0; n < N; ++n) {
    total += rows[size_t(n)];
    count += int64_t(t[n]) != a.ignore_index;
  }
  a.loss.data<A>()[0] = a.reduction == Reduction::sum ? total : total / count;  // 0/0: NaN
}

template <class T, class I>
void ce_bwd_omp(const CrossEntropyBwdArgs& a) {
  using A = AccOf<T>;
  const int64_t N = a.logits.size(0), V = a.logits.size(1);
  const T* x = a.logits.data<T>();
  const I* t = a.target.data<I>();
  check_targets("cross_entropy_bwd", t, N, V, a.ignore_index);
  const A* lse = a.lse.data<A>();
  const A* dl = a.dloss.data<A>();
  T* dx = a.dlogits.data<T>();
  const A eps = A(a.label_smoothing), off = eps / A(V);
  A count = 0;
  for (int64_t n = 0; n < N; ++n) count += int64_t(t[n]) != a.ignore_index;
#pragma omp parallel for schedule(static) if (N * V > (int64_t(1) << 15))
  for (int64_t n = 0; n < N; ++n) {
    T* dr = dx + n * V;
    const int64_t tn = int64_t(t[n]);
    if (tn == a.ignore_index) {
      std::fill(dr, dr + V, T(0.0f));
      continue;
    }
    const A g = a.reduction == Reduction::none   ? dl[n]
                : a.reduction == Reduction::mean ? dl[0] / count
                                                 : dl[0];
    const T* xr = x + n * V;
    for (int64_t v = 0; v < V; ++v)
      dr[v] = T(g * (std::exp(A(xr[v]) - lse[n]) - (v == tn ? A(1) - eps + off : off)));
  }
}

template <class F>
void ce_dispatch(DType x, DType t, F&& f) {
  AIM_DISPATCH_FLOAT_TYPES(x, T, { AIM_DISPATCH_INDEX_TYPES(t, I, { f(T{}, I{}); }); });
}

void cross_entropy_fwd_cpu_ref(const CrossEntropyFwdArgs& a) {
  check_cross_entropy_fwd_args(a);
  ce_dispatch(a.logits.dtype(), a.target.dtype(), [&](auto tv, auto iv) {
    using T = decltype(tv);
    using I = decltype(iv);
    ce_fwd_ref<T, AccOf<T>, I>(a);
  });
}
void cross_entropy_bwd_cpu_ref(const CrossEntropyBwdArgs& a) {
  check_cross_entropy_bwd_args(a);
  ce_dispatch(a.logits.dtype(), a.target.dtype(), [&](auto tv, auto iv) {
    using T = decltype(tv);
    using I = decltype(iv);
    ce_bwd_ref<T, AccOf<T>, I>(a);
  });
}
void cross_entropy_fwd_cpu_omp(const CrossEntropyFwdArgs& a) {
  check_cross_entropy_fwd_args(a);
  ce_dispatch(a.logits.dtype(), a.target.dtype(),
              [&](auto tv, auto iv) { ce_fwd_omp<decltype(tv), decltype(iv)>(a); });
}
void cross_entropy_bwd_cpu_omp(const CrossEntropyBwdArgs& a) {
  check_cross_entropy_bwd_args(a);
  ce_dispatch(a.logits.dtype(), a.target.dtype(),
              [&](auto tv, auto iv) { ce_bwd_omp<decltype(tv), decltype(iv)>(a); });
}

// ---- pointwise losses: cpu.ref (each formula on its own, in double) --------------------------

double softplus(double z) { return std::max(z, 0.0) + std::log1p(std::exp(-std::fabs(z))); }

double ref_value(const PointwiseLoss& p, double x, double y, double pw) {
  switch (p.kind) {
    case PointwiseKind::bce_with_logits:
      // -[pw y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))], with -log sigmoid(x) = softplus(-x)
      return pw * y * softplus(-x) + (1 - y) * softplus(x);
    case PointwiseKind::mse:
      return (x - y) * (x - y);
    case PointwiseKind::smooth_l1: {
      const double d = std::fabs(x - y);
      return d < p.beta ? 0.5 * d * d / p.beta : d - 0.5 * p.beta;
    }
  }
  return 0;
}

double ref_grad(const PointwiseLoss& p, double x, double y, double pw) {
  switch (p.kind) {
    case PointwiseKind::bce_with_logits: {
      const double s = 1 / (1 + std::exp(-x));  // d/dx: -pw y (1 - s) + (1 - y) s
      return -pw * y * (1 - s) + (1 - y) * s;
    }
    case PointwiseKind::mse:
      return 2 * (x - y);
    case PointwiseKind::smooth_l1: {
      const double d = x - y;
      if (std::fabs(d) < p.beta) return d / p.beta;
      return d > 0 ? 1.0 : d < 0 ? -1.0 : 0.0;  // beta = 0: the L1 gradient sign(d)
    }
  }
  return 0;
}

template <class T, class S>
void pointwise_fwd_ref(const PointwiseLoss& p) {
  const int64_t n = p.x.numel(), C = p.x.size(-1);
  const T* x = p.x.data<T>();
  const T* y = p.target.data<T>();
  const T* pw = p.pos_weight.defined() ? p.pos_weight.data<T>() : nullptr;
  S* out = p.out.data<S>();
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double l = ref_value(p, double(x[i]), double(y[i]), pw ? double(pw[i % C]) : 1.0);
    if (p.reduction == Reduction::none) out[i] = S(l);
    total += l;
  }
  if (p.reduction != Reduction::none) out[0] = S(reduce_value(p.reduction, total, double(n)));
}

template <class T, class S>
void pointwise_bwd_ref(const PointwiseLoss& p) {
  const int64_t n = p.x.numel(), C = p.x.size(-1);
  const T* x = p.x.data<T>();
  const T* y = p.target.data<T>();
  const T* pw = p.pos_weight.defined() ? p.pos_weight.data<T>() : nullptr;
  const S* dl = p.dloss.data<S>();
  T* dx = p.out.data<T>();
  for (int64_t i = 0; i < n; ++i) {
    const double g = p.reduction == Reduction::none   ? double(dl[i])
                     : p.reduction == Reduction::mean ? double(dl[0]) / double(n)
                                                      : double(dl[0]);
    dx[i] = T(g * ref_grad(p, double(x[i]), double(y[i]), pw ? double(pw[i % C]) : 1.0));
  }
}

void pointwise_cpu_ref(const PointwiseLoss& p, bool backward) {
  check_pointwise_args(p, backward);
  AIM_DISPATCH_FLOAT_TYPES(p.x.dtype(), T, {
    if (backward)
      pointwise_bwd_ref<T, AccOf<T>>(p);
    else
      pointwise_fwd_ref<T, AccOf<T>>(p);
  });
}

// ---- pointwise losses: cpu.omp --------------------------------------------------------------

constexpr int64_t kChunk = 4096;  // fixed chunking: the sum's order does not depend on threads

template <class T>
void pointwise_fwd_omp(const PointwiseLoss& p) {
  using A = AccOf<T>;
  const int64_t n = p.x.numel(), C = p.x.size(-1);
  const T* x = p.x.data<T>();
  const T* y = p.target.data<T>();
  const T* pw = p.pos_weight.defined() ? p.pos_weight.data<T>() : nullptr;
  A* out = p.out.data<A>();
  const bool none = p.reduction == Reduction::none;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<A> part(static_cast<size_t>(chunks), A(0));
#pragma omp parallel for schedule(static) if (n > (int64_t(1) << 15))
  for (int64_t k = 0; k < chunks; ++k) {
    A s = 0;
    const int64_t e = std::min(n, (k + 1) * kChunk);
    for (int64_t i = k * kChunk; i < e; ++i) {
      const A l = pointwise_value<A>(p.kind, A(x[i]), A(y[i]), pw ? A(pw[i % C]) : A(1), A(p.beta));
      if (none) out[i] = l;
      s += l;
    }
    part[size_t(k)] = s;
  }
  if (none) return;
  A total = 0;
  for (A s : part) total += s;
  out[0] = p.reduction == Reduction::sum ? total : total / A(n);
}

template <class T>
void pointwise_bwd_omp(const PointwiseLoss& p) {
  using A = AccOf<T>;
  const int64_t n = p.x.numel(), C = p.x.size(-1);
  const T* x = p.x.data<T>();
  const T* y = p.target.data<T>();
  const T* pw = p.pos_weight.defined() ? p.pos_weight.data<T>() : nullptr;
  const A* dl = p.dloss.data<A>();
  T* dx = p.out.data<T>();
  const bool none = p.reduction == Reduction::none;
  const A g0 = none ? A(0) : p.reduction == Reduction::mean ? dl[0] / A(n) : dl[0];
#pragma omp parallel for schedule(static) if (n > (int64_t(1) << 15))
  for (int64_t i = 0; i < n; ++i) {
    const A g = none ? dl[i] : g0;
    dx[i] = T(g * pointwise_grad<A>(p.kind, A(x[i]), A(y[i]), pw ? A(pw[i % C]) : A(1), A(p.beta)));
  }
}

void pointwise_cpu_omp(const PointwiseLoss& p, bool backward) {
  check_pointwise_args(p, backward);
  AIM_DISPATCH_FLOAT_TYPES(p.x.dtype(), T, {
    if (backward)
      pointwise_bwd_omp<T>(p);
    else
      pointwise_fwd_omp<T>(p);
  });
}

std::vector<DType> float_dtypes() { return {DType::f32, DType::f64, DType::f16, DType::bf16}; }

// Variants, cost and test description of one loss op (test cases: loss_cases.cpp).
template <class Args>
void describe(Op<Args>& op, const char* what, void (*ref)(const Args&), void (*omp)(const Args&),
              Cost (*cost)(const Args&), TestCase (*make_case)(const TestShape&, DType, uint64_t),
              std::vector<std::string> shape_fields, std::vector<TestShape> shapes) {
  op.description = what;
  op.add({"cpu.ref", Backend::CPU, Provider::Own, ref, float_dtypes()});
  op.add({"cpu.omp", Backend::CPU, Provider::Own, omp, float_dtypes()});
  op.set_default(Backend::CPU, "cpu.omp");
  op.set_cost(cost);
  op.make_case = make_case;
  op.set_shape_fields(std::move(shape_fields));
  op.add_test_shapes(std::move(shapes));
  op.tolerance = loss_cpu::loss_tolerance;
  op.small_enough_for_simt = loss_cpu::loss_simt_small;
}

template <class Args>
void pointwise_ref_fwd(const Args& a) {
  pointwise_cpu_ref(to_pointwise(a), false);
}
template <class Args>
void pointwise_ref_bwd(const Args& a) {
  pointwise_cpu_ref(to_pointwise(a), true);
}
template <class Args>
void pointwise_omp_fwd(const Args& a) {
  pointwise_cpu_omp(to_pointwise(a), false);
}
template <class Args>
void pointwise_omp_bwd(const Args& a) {
  pointwise_cpu_omp(to_pointwise(a), true);
}

}  // namespace

void cross_entropy_fwd(const CrossEntropyFwdArgs& a) {
  AIM_DISPATCH_OP(CrossEntropyFwdArgs, "cross_entropy_fwd", a);
}
void cross_entropy_bwd(const CrossEntropyBwdArgs& a) {
  AIM_DISPATCH_OP(CrossEntropyBwdArgs, "cross_entropy_bwd", a);
}
void bce_with_logits_fwd(const BceWithLogitsFwdArgs& a) {
  AIM_DISPATCH_OP(BceWithLogitsFwdArgs, "bce_with_logits_fwd", a);
}
void bce_with_logits_bwd(const BceWithLogitsBwdArgs& a) {
  AIM_DISPATCH_OP(BceWithLogitsBwdArgs, "bce_with_logits_bwd", a);
}
void mse_fwd(const MseFwdArgs& a) { AIM_DISPATCH_OP(MseFwdArgs, "mse_fwd", a); }
void mse_bwd(const MseBwdArgs& a) { AIM_DISPATCH_OP(MseBwdArgs, "mse_bwd", a); }
void smooth_l1_fwd(const SmoothL1FwdArgs& a) {
  AIM_DISPATCH_OP(SmoothL1FwdArgs, "smooth_l1_fwd", a);
}
void smooth_l1_bwd(const SmoothL1BwdArgs& a) {
  AIM_DISPATCH_OP(SmoothL1BwdArgs, "smooth_l1_bwd", a);
}

void register_loss_cpu(Registry& r) {
  using namespace loss_cpu;
  // ---- cross entropy ----
  auto& cf = r.op<CrossEntropyFwdArgs>("cross_entropy_fwd");
  describe(cf, "cross entropy of logits and class targets (F.cross_entropy)",
           cross_entropy_fwd_cpu_ref, cross_entropy_fwd_cpu_omp, cross_entropy_fwd_cost,
           make_cross_entropy_fwd_case, cross_entropy_shape_fields(), cross_entropy_shapes());
  auto& cb = r.op<CrossEntropyBwdArgs>("cross_entropy_bwd");
  describe(cb, "cross entropy gradient: softmax minus smoothed one-hot, scaled",
           cross_entropy_bwd_cpu_ref, cross_entropy_bwd_cpu_omp, cross_entropy_bwd_cost,
           make_cross_entropy_bwd_case, cross_entropy_shape_fields(), cross_entropy_shapes());

  // ---- binary cross entropy with logits ----
  const auto bce = PointwiseKind::bce_with_logits;
  auto& bf = r.op<BceWithLogitsFwdArgs>("bce_with_logits_fwd");
  describe(bf, "binary cross entropy on logits (F.binary_cross_entropy_with_logits)",
           pointwise_ref_fwd<BceWithLogitsFwdArgs>, pointwise_omp_fwd<BceWithLogitsFwdArgs>,
           bce_with_logits_fwd_cost, make_bce_with_logits_fwd_case, pointwise_shape_fields(bce),
           pointwise_shapes(2));
  auto& bb = r.op<BceWithLogitsBwdArgs>("bce_with_logits_bwd");
  describe(bb, "gradient of bce_with_logits w.r.t. the logits",
           pointwise_ref_bwd<BceWithLogitsBwdArgs>, pointwise_omp_bwd<BceWithLogitsBwdArgs>,
           bce_with_logits_bwd_cost, make_bce_with_logits_bwd_case, pointwise_shape_fields(bce),
           pointwise_shapes(2));

  // ---- mean squared error ----
  const auto mse = PointwiseKind::mse;
  auto& mf = r.op<MseFwdArgs>("mse_fwd");
  describe(mf, "squared error (F.mse_loss)", pointwise_ref_fwd<MseFwdArgs>,
           pointwise_omp_fwd<MseFwdArgs>, mse_fwd_cost, make_mse_fwd_case,
           pointwise_shape_fields(mse), pointwise_shapes(1));
  auto& mb = r.op<MseBwdArgs>("mse_bwd");
  describe(mb, "gradient of mse w.r.t. the input", pointwise_ref_bwd<MseBwdArgs>,
           pointwise_omp_bwd<MseBwdArgs>, mse_bwd_cost, make_mse_bwd_case,
           pointwise_shape_fields(mse), pointwise_shapes(1));

  // ---- smooth L1 ----
  const auto sl1 = PointwiseKind::smooth_l1;
  auto& sf = r.op<SmoothL1FwdArgs>("smooth_l1_fwd");
  describe(sf, "smooth L1 / Huber-like loss with beta (F.smooth_l1_loss)",
           pointwise_ref_fwd<SmoothL1FwdArgs>, pointwise_omp_fwd<SmoothL1FwdArgs>,
           smooth_l1_fwd_cost, make_smooth_l1_fwd_case, pointwise_shape_fields(sl1),
           pointwise_shapes(3));
  auto& sb = r.op<SmoothL1BwdArgs>("smooth_l1_bwd");
  describe(sb, "gradient of smooth_l1 w.r.t. the input", pointwise_ref_bwd<SmoothL1BwdArgs>,
           pointwise_omp_bwd<SmoothL1BwdArgs>, smooth_l1_bwd_cost, make_smooth_l1_bwd_case,
           pointwise_shape_fields(sl1), pointwise_shapes(3));
}

}  // namespace aim::kernels
