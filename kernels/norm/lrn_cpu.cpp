// cpu.ref: the oracle. Plain loops over every (n, s) column and channel, the window sum of
// squares recomputed for each output, double accumulation, std::pow.
// cpu.omp: OpenMP over (n, block of kColumns columns of s). For each channel the window sum runs
// over the block's columns in the innermost loop (contiguous in s: vectorised), so x is read
// `size` times from L1/L2 and once from DRAM. beta = 0.75 (AlexNet, GoogLeNet) takes
// scale^-0.75 = r * sqrt(r) with r = 1/sqrt(scale) (vectorises); other betas call pow. Backward
// keeps scale^-beta and dy*x*scale^(-beta-1) of every channel of the block in a per-task buffer
// and sums the second over the transposed window. Float accumulation (double for f64), 16-bit
// outputs rounded once; no reduction crosses threads: deterministic.
// Test cases: lrn_cases.cpp.
#include "kernels/norm/lrn_cpu.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/norm/lrn.h"
#include "kernels/registry.h"

namespace aim::kernels {

namespace {

std::string desc(const Tensor& t) {
  return t.defined() ? to_string(t.sizes()) + " " + dtype_name(t.dtype()) : "undefined";
}

struct Folded {
  int64_t N = 0, C = 0, S = 1;
};
Folded fold(const Tensor& x) {
  Folded f{x.size(0), x.size(1), 1};
  for (int64_t d = 2; d < x.dim(); ++d) f.S *= x.size(d);
  return f;
}

void check_common(const char* op, const Tensor& x, const LrnParams& p) {
  AIM_CHECK(x.defined() && x.dim() >= 2, "[", op, "] x must be [N, C, ...], got ", desc(x));
  AIM_CHECK(is_floating(x.dtype()), "[", op, "] x must be f32, f64, f16 or bf16, got ",
            dtype_name(x.dtype()));
  AIM_CHECK(x.is_contiguous(), "[", op, "] x ", to_string(x.sizes()), " must be contiguous");
  AIM_CHECK(p.size >= 1, "[", op, "] size must be >= 1, got ", p.size);
  AIM_CHECK(std::isfinite(p.alpha) && std::isfinite(p.beta) && std::isfinite(p.k), "[", op,
            "] alpha, beta and k must be finite, got alpha ", p.alpha, ", beta ", p.beta, ", k ",
            p.k);
}

void check_like_x(const char* op, const char* name, const Tensor& t, const Tensor& x) {
  AIM_CHECK(t.defined() && t.sizes() == x.sizes() && t.dtype() == x.dtype() && t.is_contiguous(),
            "[", op, "] ", name, " must be contiguous ", to_string(x.sizes()), " ",
            dtype_name(x.dtype()), " like x, got ", desc(t));
  AIM_CHECK(t.device() == x.device(), "[", op, "] ", name, " is on ", t.device().str(), ", x on ",
            x.device().str());
}

}  // namespace

void check_lrn_fwd_args(const LrnFwdArgs& a) {
  check_common("lrn_fwd", a.x, a.p);
  check_like_x("lrn_fwd", "y", a.y, a.x);
}

void check_lrn_bwd_args(const LrnBwdArgs& a) {
  check_common("lrn_bwd", a.x, a.p);
  check_like_x("lrn_bwd", "dy", a.dy, a.x);
  check_like_x("lrn_bwd", "dx", a.dx, a.x);
}

namespace {

// Channel window of output c: [c - size/2, c + (size-1)/2] within [0, C). The channels whose
// window contains c (backward): [c - (size-1)/2, c + size/2].
struct Window {
  int64_t lo, hi;  // inclusive
};
Window fwd_window(int64_t c, int64_t size, int64_t C) {
  return {std::max<int64_t>(0, c - size / 2), std::min<int64_t>(C - 1, c + (size - 1) / 2)};
}
Window bwd_window(int64_t c, int64_t size, int64_t C) {
  return {std::max<int64_t>(0, c - (size - 1) / 2), std::min<int64_t>(C - 1, c + size / 2)};
}

// ---- cpu.ref --------------------------------------------------------------------------------

template <class T>
void fwd_ref(const LrnFwdArgs& a) {
  const Folded f = fold(a.x);
  const int64_t N = f.N, C = f.C, S = f.S;
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  const double as = a.p.alpha / double(a.p.size);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const Window w = fwd_window(c, a.p.size, C);
      for (int64_t s = 0; s < S; ++s) {
        double sum = 0.0;
        for (int64_t j = w.lo; j <= w.hi; ++j) {
          const double v = double(x[(n * C + j) * S + s]);
          sum += v * v;
        }
        const int64_t i = (n * C + c) * S + s;
        y[i] = T(double(x[i]) * std::pow(a.p.k + as * sum, -a.p.beta));
      }
    }
}

template <class T>
void bwd_ref(const LrnBwdArgs& a) {
  const Folded f = fold(a.x);
  const int64_t N = f.N, C = f.C, S = f.S;
  const T* x = a.x.data<T>();
  const T* dy = a.dy.data<T>();
  T* dx = a.dx.data<T>();
  const double as = a.p.alpha / double(a.p.size), beta = a.p.beta;
  std::vector<double> scale(static_cast<size_t>(C));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t s = 0; s < S; ++s) {
      auto at = [&](int64_t c) { return (n * C + c) * S + s; };
      for (int64_t c = 0; c < C; ++c) {
        const Window w = fwd_window(c, a.p.size, C);
        double sum = 0.0;
        for (int64_t j = w.lo; j <= w.hi; ++j) sum += double(x[at(j)]) * double(x[at(j)]);
        scale[size_t(c)] = a.p.k + as * sum;
      }
      for (int64_t c = 0; c < C; ++c) {
        const Window w = bwd_window(c, a.p.size, C);
        double sum = 0.0;  // sum over the outputs j whose window holds c
        for (int64_t j = w.lo; j <= w.hi; ++j)
          sum += double(dy[at(j)]) * double(x[at(j)]) * std::pow(scale[size_t(j)], -beta - 1.0);
        dx[at(c)] = T(double(dy[at(c)]) * std::pow(scale[size_t(c)], -beta) -
                      2.0 * as * beta * double(x[at(c)]) * sum);
      }
    }
}

void lrn_fwd_cpu_ref(const LrnFwdArgs& a) {
  check_lrn_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { fwd_ref<T>(a); });
}

void lrn_bwd_cpu_ref(const LrnBwdArgs& a) {
  check_lrn_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { bwd_ref<T>(a); });
}

// ---- cpu.omp --------------------------------------------------------------------------------

template <class T>
using AccOf = std::conditional_t<std::is_same_v<T, double>, double, float>;

constexpr int64_t kColumns = 256;  // columns of s per task
constexpr int64_t kParallelMin = int64_t(1) << 14;

// p[i] = scale[i]^-beta for i < len.
template <class A>
void pow_neg_beta(const A* scale, A* p, int64_t len, double beta) {
  if (beta == 0.75) {
    for (int64_t i = 0; i < len; ++i) {
      const A r = A(1) / std::sqrt(scale[i]);
      p[i] = r * std::sqrt(r);
    }
  } else if (beta == 0.5) {
    for (int64_t i = 0; i < len; ++i) p[i] = A(1) / std::sqrt(scale[i]);
  } else {
    const A e = A(-beta);
    for (int64_t i = 0; i < len; ++i) p[i] = std::pow(scale[i], e);
  }
}

// scale[s] = k + alpha/size * sum over c's window of x^2, for columns [s0, s0 + len) of plane n.
template <class T, class A>
void window_scale(const T* x, int64_t n, int64_t c, int64_t C, int64_t S, int64_t s0, int64_t len,
                  const LrnParams& p, A* scale) {
  for (int64_t s = 0; s < len; ++s) scale[s] = A(0);
  const Window w = fwd_window(c, p.size, C);
  for (int64_t j = w.lo; j <= w.hi; ++j) {
    const T* xj = x + (n * C + j) * S + s0;
    for (int64_t s = 0; s < len; ++s) {
      const A v = A(xj[s]);
      scale[s] += v * v;
    }
  }
  const A as = A(p.alpha / double(p.size)), k = A(p.k);
  for (int64_t s = 0; s < len; ++s) scale[s] = k + as * scale[s];
}

template <class T>
void fwd_omp(const LrnFwdArgs& a) {
  using A = AccOf<T>;
  const Folded f = fold(a.x);
  const int64_t N = f.N, C = f.C, S = f.S;
  const int64_t blocks = (S + kColumns - 1) / kColumns;
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
#pragma omp parallel for schedule(static) if (a.x.numel() > kParallelMin)
  for (int64_t task = 0; task < N * blocks; ++task) {
    const int64_t n = task / blocks, s0 = (task % blocks) * kColumns;
    const int64_t len = std::min(kColumns, S - s0);
    A scale[kColumns], p[kColumns];
    for (int64_t c = 0; c < C; ++c) {
      window_scale(x, n, c, C, S, s0, len, a.p, scale);
      pow_neg_beta(scale, p, len, a.p.beta);
      const T* xc = x + (n * C + c) * S + s0;
      T* yc = y + (n * C + c) * S + s0;
      for (int64_t s = 0; s < len; ++s) yc[s] = T(A(xc[s]) * p[s]);
    }
  }
}

template <class T>
void bwd_omp(const LrnBwdArgs& a) {
  using A = AccOf<T>;
  const Folded f = fold(a.x);
  const int64_t N = f.N, C = f.C, S = f.S;
  const int64_t blocks = (S + kColumns - 1) / kColumns;
  const T* x = a.x.data<T>();
  const T* dy = a.dy.data<T>();
  T* dx = a.dx.data<T>();
  const A coef = A(2.0 * a.p.alpha * a.p.beta / double(a.p.size));
#pragma omp parallel if (a.x.numel() > kParallelMin)
  {
    // Per channel of the block: p = scale^-beta and t = dy * x * scale^(-beta-1).
    std::vector<A> pbuf(size_t(C * kColumns)), tbuf(size_t(C * kColumns));
    A scale[kColumns], acc[kColumns];
#pragma omp for schedule(static)
    for (int64_t task = 0; task < N * blocks; ++task) {
      const int64_t n = task / blocks, s0 = (task % blocks) * kColumns;
      const int64_t len = std::min(kColumns, S - s0);
      for (int64_t c = 0; c < C; ++c) {
        A* p = pbuf.data() + c * kColumns;
        A* t = tbuf.data() + c * kColumns;
        window_scale(x, n, c, C, S, s0, len, a.p, scale);
        pow_neg_beta(scale, p, len, a.p.beta);
        const T* xc = x + (n * C + c) * S + s0;
        const T* dyc = dy + (n * C + c) * S + s0;
        for (int64_t s = 0; s < len; ++s) t[s] = A(dyc[s]) * A(xc[s]) * p[s] / scale[s];
      }
      for (int64_t c = 0; c < C; ++c) {
        for (int64_t s = 0; s < len; ++s) acc[s] = A(0);
        const Window w = bwd_window(c, a.p.size, C);
        for (int64_t j = w.lo; j <= w.hi; ++j) {
          const A* t = tbuf.data() + j * kColumns;
          for (int64_t s = 0; s < len; ++s) acc[s] += t[s];
        }
        const A* p = pbuf.data() + c * kColumns;
        const T* xc = x + (n * C + c) * S + s0;
        const T* dyc = dy + (n * C + c) * S + s0;
        T* dxc = dx + (n * C + c) * S + s0;
        for (int64_t s = 0; s < len; ++s) dxc[s] = T(A(dyc[s]) * p[s] - coef * A(xc[s]) * acc[s]);
      }
    }
  }
}

void lrn_fwd_cpu_omp(const LrnFwdArgs& a) {
  check_lrn_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { fwd_omp<T>(a); });
}

void lrn_bwd_cpu_omp(const LrnBwdArgs& a) {
  check_lrn_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { bwd_omp<T>(a); });
}

std::vector<DType> float_dtypes() { return {DType::f32, DType::f64, DType::f16, DType::bf16}; }

}  // namespace

void lrn_fwd(const LrnFwdArgs& a) { AIM_DISPATCH_OP(LrnFwdArgs, "lrn_fwd", a); }
void lrn_bwd(const LrnBwdArgs& a) { AIM_DISPATCH_OP(LrnBwdArgs, "lrn_bwd", a); }

void register_lrn_cpu(Registry& r) {
  auto& f = r.op<LrnFwdArgs>("lrn_fwd");
  f.description = "local response normalisation across channels (nn.LocalResponseNorm)";
  f.add({"cpu.ref", Backend::CPU, Provider::Own, lrn_fwd_cpu_ref, float_dtypes()});
  f.add({"cpu.omp", Backend::CPU, Provider::Own, lrn_fwd_cpu_omp, float_dtypes()});
  f.set_default(Backend::CPU, "cpu.omp");
  f.set_cost(lrn_fwd_cost);
  f.make_case = lrn_cpu::make_lrn_fwd_case;
  f.set_shape_fields(lrn_cpu::lrn_shape_fields());
  f.add_test_shapes(lrn_cpu::lrn_test_shapes());
  f.tolerance = lrn_cpu::lrn_tolerance;
  f.small_enough_for_simt = lrn_cpu::lrn_simt_small;

  auto& b = r.op<LrnBwdArgs>("lrn_bwd");
  b.description = "local response normalisation gradient: dx (=), scale recomputed from x";
  b.add({"cpu.ref", Backend::CPU, Provider::Own, lrn_bwd_cpu_ref, float_dtypes()});
  b.add({"cpu.omp", Backend::CPU, Provider::Own, lrn_bwd_cpu_omp, float_dtypes()});
  b.set_default(Backend::CPU, "cpu.omp");
  b.set_cost(lrn_bwd_cost);
  b.make_case = lrn_cpu::make_lrn_bwd_case;
  b.set_shape_fields(lrn_cpu::lrn_shape_fields());
  b.add_test_shapes(lrn_cpu::lrn_test_shapes());
  b.tolerance = lrn_cpu::lrn_tolerance;
  b.small_enough_for_simt = lrn_cpu::lrn_simt_small;
}

}  // namespace aim::kernels
