// cpu.ref: the oracle. Plain loops over every (n, s) column and channel, the window sum of
// squares recomputed for each output, double accumulation, std::pow.
// cpu.omp: OpenMP over (n, block of kColumns columns of s). For each channel the window sum runs
// over the block's columns in the innermost loop (contiguous in s: vectorised), so x is read
// `size` times from L1/L2 and once from DRAM. beta = 0.75 (AlexNet, GoogLeNet) takes
// scale^-0.75 = r * sqrt(r) with r = 1/sqrt(scale) (vectorises); other betas call pow. Backward
// keeps scale^-beta and dy*x*scale^(-beta-1) of every channel of the block in a per-task buffer
// and sums the second over the transposed window. Float accumulation (double for f64), 16-bit
// outputs rounded once; no reduction crosses threads: deterministic.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/norm/lrn.h"
#include "kernels/registry.h"
#include "kernels/testing.h"

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

// ---- test cases -----------------------------------------------------------------------------
// Shapes {N, C, H, W, size, params}: x is [N, C] when H = 0, [N, C, H] when W = 0, else
// [N, C, H, W]. params 0: AlexNet's (alpha 1e-4, beta 0.75, k 2); 1: alpha 0.3, beta 0.6, k 1.5
// (large alpha: the window sum matters; general pow); 2: GoogLeNet's (alpha 1e-4, beta 0.75, k 1)
// with alpha large enough to matter (0.5).

Shape case_x_shape(const TestShape& s) {
  if (s[2] == 0) return {s[0], s[1]};
  if (s[3] == 0) return {s[0], s[1], s[2]};
  return {s[0], s[1], s[2], s[3]};
}

void set_params(TestCase& c, const TestShape& s) {
  static const double kParams[3][3] = {{1e-4, 0.75, 2.0}, {0.3, 0.6, 1.5}, {0.5, 0.75, 1.0}};
  const double* p = kParams[s[5]];
  c.params["size"] = double(s[4]);
  c.params["alpha"] = p[0];
  c.params["beta"] = p[1];
  c.params["k"] = p[2];
}

LrnParams params_of(const TestCase& c) {
  LrnParams p;
  p.size = int64_t(c.param("size"));
  p.alpha = c.param("alpha");
  p.beta = c.param("beta");
  p.k = c.param("k");
  return p;
}

TestCase make_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  const Shape xs = case_x_shape(s);
  TestCase c;
  c.add_in("x", random_tensor(xs, t, seed, -2.0, 2.0));
  c.add_out("y", poison_tensor(xs, t));
  set_params(c, s);
  return c;
}

TestCase make_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  const Shape xs = case_x_shape(s);
  TestCase c;
  c.add_in("dy", random_tensor(xs, t, seed + 1, -1.0, 1.0));
  c.add_in("x", random_tensor(xs, t, seed, -2.0, 2.0));
  c.add_out("dx", poison_tensor(xs, t));
  set_params(c, s);
  return c;
}

std::vector<DType> float_dtypes() { return {DType::f32, DType::f64, DType::f16, DType::bf16}; }

Tolerance lrn_tolerance(DType t, const TestShape&) {
  if (t == DType::f16) return {4e-3, 4e-3};
  if (t == DType::bf16) return {3e-2, 2e-2};
  if (t == DType::f32) return {2e-5, 2e-5};
  return default_tolerance(t);
}

bool simt_small(const TestShape& s) { return shape_numel(case_x_shape(s)) <= 8192; }

const std::vector<TestShape>& test_shapes() {
  static const std::vector<TestShape> shapes = {
      // {N, C, H, W, size, params}: window larger than C, even and odd sizes, size 1, [N, C],
      // a column count that is not a multiple of the omp block, AlexNet's first LRN (reduced N).
      {2, 3, 0, 0, 5, 1},   {3, 7, 4, 0, 1, 1},   {2, 6, 3, 5, 2, 1},    {2, 9, 5, 5, 3, 1},
      {1, 5, 2, 3, 4, 1},   {2, 11, 7, 3, 5, 2},  {1, 16, 17, 19, 5, 0}, {2, 8, 300, 0, 6, 1},
      {4, 13, 0, 0, 13, 2}, {2, 96, 55, 55, 5, 0}};
  return shapes;
}

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
  f.set_bind([](const TestCase& c) {
    LrnFwdArgs a;
    a.x = c.in("x");
    a.y = c.out("y");
    a.p = params_of(c);
    return a;
  });
  f.make_case = make_fwd_case;
  f.add_test_shapes(test_shapes());
  f.tolerance = lrn_tolerance;
  f.small_enough_for_simt = simt_small;

  auto& b = r.op<LrnBwdArgs>("lrn_bwd");
  b.description = "local response normalisation gradient: dx (=), scale recomputed from x";
  b.add({"cpu.ref", Backend::CPU, Provider::Own, lrn_bwd_cpu_ref, float_dtypes()});
  b.add({"cpu.omp", Backend::CPU, Provider::Own, lrn_bwd_cpu_omp, float_dtypes()});
  b.set_default(Backend::CPU, "cpu.omp");
  b.set_cost(lrn_bwd_cost);
  b.set_bind([](const TestCase& c) {
    LrnBwdArgs a;
    a.dy = c.in("dy");
    a.x = c.in("x");
    a.dx = c.out("dx");
    a.p = params_of(c);
    return a;
  });
  b.make_case = make_bwd_case;
  b.add_test_shapes(test_shapes());
  b.tolerance = lrn_tolerance;
  b.small_enough_for_simt = simt_small;
}

}  // namespace aim::kernels
