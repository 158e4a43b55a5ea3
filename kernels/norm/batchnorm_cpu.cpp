// cpu.ref: the oracle. Plain loops per channel over (n, s), double accumulators, two passes for
// the statistics (mean, then squared deviations).
// cpu.omp: OpenMP over the N*C planes (one plane = the S values of one (n, c)). Statistics: each
// plane's mean and sum of squared deviations about its own mean (two passes while the plane is
// in cache), combined per channel in plane order (Chan et al.: M2 = sum M2_p + S * sum (mean_p -
// mean)^2) in double. Backward: per-plane sums of dy and dy*xhat, combined per channel in plane
// order. Every sum has a fixed order whatever the thread count: deterministic. Accumulation
// within a plane in float (double for f64); 16-bit outputs rounded once. Traffic: forward reads x
// twice (stats, y) and writes y; backward reads x and dy twice (sums, dx) and writes dx.
// Test cases: batchnorm_cases.cpp.
#include "kernels/norm/batchnorm_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/elementwise/loops_cpu.h"
#include "kernels/norm/batchnorm.h"
#include "kernels/registry.h"

namespace aim::kernels {

namespace {

std::string desc(const Tensor& t) {
  return t.defined() ? to_string(t.sizes()) + " " + dtype_name(t.dtype()) : "undefined";
}

// x [N, C, ...] folded to N, C, S.
struct Folded {
  int64_t N = 0, C = 0, S = 1;
};
Folded fold(const Tensor& x) {
  Folded f{x.size(0), x.size(1), 1};
  for (int64_t d = 2; d < x.dim(); ++d) f.S *= x.size(d);
  return f;
}

// x itself: defined, [N, C, ...], a float dtype, contiguous.
void check_x(const char* op, const Tensor& x) {
  AIM_CHECK(x.defined() && x.dim() >= 2, "[", op, "] x must be [N, C, ...], got ", desc(x));
  AIM_CHECK(is_floating(x.dtype()), "[", op, "] x must be f32, f64, f16 or bf16, got ",
            dtype_name(x.dtype()));
  AIM_CHECK(x.is_contiguous(), "[", op, "] x ", to_string(x.sizes()), " must be contiguous");
}

// A tensor like x (y, dy, dx): same sizes, dtype and device, contiguous.
void check_like_x(const char* op, const char* name, const Tensor& t, const Tensor& x) {
  AIM_CHECK(t.defined() && t.sizes() == x.sizes() && t.dtype() == x.dtype() && t.is_contiguous(),
            "[", op, "] ", name, " must be contiguous ", to_string(x.sizes()), " ",
            dtype_name(x.dtype()), " like x, got ", desc(t));
  AIM_CHECK(t.device() == x.device(), "[", op, "] ", name, " is on ", t.device().str(), ", x on ",
            x.device().str());
}

// A per-channel tensor: [C] in the statistics dtype, contiguous, on x's device.
void check_channel(const char* op, const char* name, const Tensor& t, const Tensor& x) {
  const int64_t C = x.size(1);
  const DType s = batchnorm_stat_dtype(x.dtype());
  AIM_CHECK(t.sizes() == Shape{C} && t.dtype() == s && t.is_contiguous(), "[", op, "] ", name,
            " must be contiguous [", C, "] ", dtype_name(s), " (x is ", to_string(x.sizes()), " ",
            dtype_name(x.dtype()), "), got ", desc(t));
  AIM_CHECK(t.device() == x.device(), "[", op, "] ", name, " is on ", t.device().str(), ", x on ",
            x.device().str());
}

}  // namespace

void check_batchnorm_fwd_args(const BatchNormFwdArgs& a) {
  constexpr const char* op = "batchnorm_fwd";
  check_x(op, a.x);
  check_like_x(op, "y", a.y, a.x);
  AIM_CHECK(a.gamma.defined() == a.beta.defined(),
            "[batchnorm_fwd] gamma and beta must both be given or both be undefined, got gamma ",
            desc(a.gamma), ", beta ", desc(a.beta));
  if (a.gamma.defined()) {
    check_channel(op, "gamma", a.gamma, a.x);
    check_channel(op, "beta", a.beta, a.x);
  }
  AIM_CHECK(a.running_mean.defined() == a.running_var.defined(),
            "[batchnorm_fwd] running_mean and running_var must both be given or both be "
            "undefined, got running_mean ",
            desc(a.running_mean), ", running_var ", desc(a.running_var));
  if (a.running_mean.defined()) {
    check_channel(op, "running_mean", a.running_mean, a.x);
    check_channel(op, "running_var", a.running_var, a.x);
  }
  if (a.save_mean.defined()) check_channel(op, "save_mean", a.save_mean, a.x);
  if (a.save_rstd.defined()) check_channel(op, "save_rstd", a.save_rstd, a.x);
  AIM_CHECK(std::isfinite(a.eps) && a.eps >= 0, "[batchnorm_fwd] eps must be finite and >= 0, got ",
            a.eps);
  if (a.training) {
    AIM_CHECK(a.save_mean.defined() && a.save_rstd.defined(),
              "[batchnorm_fwd] training needs save_mean and save_rstd (written for backward)");
    AIM_CHECK(std::isfinite(a.momentum), "[batchnorm_fwd] momentum must be finite, got ",
              a.momentum);
    const Folded f = fold(a.x);
    AIM_CHECK(f.N * f.S >= 1,
              "[batchnorm_fwd] training needs at least one value per channel, got x ",
              to_string(a.x.sizes()));
    AIM_CHECK(
        !a.running_var.defined() || f.N * f.S > 1,
        "[batchnorm_fwd] the running variance is unbiased (divides by N*S - 1): training with "
        "running statistics needs more than one value per channel, got x ",
        to_string(a.x.sizes()));
  } else {
    AIM_CHECK(a.running_mean.defined(),
              "[batchnorm_fwd] eval mode normalises with running_mean and running_var: both are "
              "required, got undefined");
  }
}

void check_batchnorm_bwd_args(const BatchNormBwdArgs& a) {
  constexpr const char* op = "batchnorm_bwd";
  check_x(op, a.x);
  check_like_x(op, "dy", a.dy, a.x);
  if (a.dx.defined()) check_like_x(op, "dx", a.dx, a.x);
  if (a.y_relu.defined()) check_like_x(op, "y_relu", a.y_relu, a.x);
  if (a.gamma.defined()) check_channel(op, "gamma", a.gamma, a.x);
  AIM_CHECK(a.save_mean.defined() && a.save_rstd.defined(),
            "[batchnorm_bwd] save_mean and save_rstd (from the forward) are required, got ",
            "save_mean ", desc(a.save_mean), ", save_rstd ", desc(a.save_rstd));
  check_channel(op, "save_mean", a.save_mean, a.x);
  check_channel(op, "save_rstd", a.save_rstd, a.x);
  if (a.dgamma.defined()) check_channel(op, "dgamma", a.dgamma, a.x);
  if (a.dbeta.defined()) check_channel(op, "dbeta", a.dbeta, a.x);
}

namespace {

// ---- cpu.ref --------------------------------------------------------------------------------

// T: x's element type; A: the statistics / parameter type (float, double for f64).
template <class T, class A>
void fwd_ref(const BatchNormFwdArgs& a) {
  const Folded f = fold(a.x);
  const int64_t N = f.N, C = f.C, S = f.S;
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  const A* g = a.gamma.defined() ? a.gamma.data<A>() : nullptr;
  const A* b = a.beta.defined() ? a.beta.data<A>() : nullptr;
  const double M = double(N * S);
  for (int64_t c = 0; c < C; ++c) {
    double m, r;
    if (a.training) {
      double sum = 0.0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) sum += double(x[(n * C + c) * S + s]);
      m = sum / M;
      double sq = 0.0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) {
          const double d = double(x[(n * C + c) * S + s]) - m;
          sq += d * d;
        }
      const double var = sq / M;  // biased: normalises
      r = 1.0 / std::sqrt(var + a.eps);
      if (a.running_mean.defined()) {
        A* rm = a.running_mean.data<A>();
        A* rv = a.running_var.data<A>();
        rm[c] = A((1.0 - a.momentum) * double(rm[c]) + a.momentum * m);
        rv[c] = A((1.0 - a.momentum) * double(rv[c]) + a.momentum * sq / (M - 1.0));  // unbiased
      }
    } else {
      m = double(a.running_mean.data<A>()[c]);
      r = 1.0 / std::sqrt(double(a.running_var.data<A>()[c]) + a.eps);
    }
    if (a.save_mean.defined()) a.save_mean.data<A>()[c] = A(m);
    if (a.save_rstd.defined()) a.save_rstd.data<A>()[c] = A(r);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t i = (n * C + c) * S + s;
        double v = (double(x[i]) - m) * r;
        if (g) v = v * double(g[c]) + double(b[c]);
        if (a.relu && v < 0.0) v = 0.0;  // NaN stays NaN
        y[i] = T(v);
      }
  }
}

template <class T, class A>
void bwd_ref(const BatchNormBwdArgs& a) {
  const Folded f = fold(a.x);
  const int64_t N = f.N, C = f.C, S = f.S;
  const T* x = a.x.data<T>();
  const T* dy = a.dy.data<T>();
  const A* g = a.gamma.defined() ? a.gamma.data<A>() : nullptr;
  const A* mean = a.save_mean.data<A>();
  const A* rstd = a.save_rstd.data<A>();
  const T* yr = a.y_relu.defined() ? a.y_relu.data<T>() : nullptr;
  // dy masked by the fused relu's output (relu's backward: dy where y > 0).
  auto dyv = [&](int64_t i) { return yr && !(double(yr[i]) > 0.0) ? 0.0 : double(dy[i]); };
  const double M = double(N * S);
  for (int64_t c = 0; c < C; ++c) {
    const double m = double(mean[c]), r = double(rstd[c]);
    double sdy = 0.0, sdyx = 0.0;  // sum of dy and of dy * xhat over the channel
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t i = (n * C + c) * S + s;
        sdy += dyv(i);
        sdyx += dyv(i) * (double(x[i]) - m) * r;
      }
    if (a.dx.defined()) {
      T* dx = a.dx.data<T>();
      const double gr = (g ? double(g[c]) : 1.0) * r;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) {
          const int64_t i = (n * C + c) * S + s;
          if (a.training) {
            const double xh = (double(x[i]) - m) * r;
            dx[i] = T(gr * (dyv(i) - sdy / M - xh * sdyx / M));
          } else {
            dx[i] = T(gr * dyv(i));  // frozen: mean and rstd are constants
          }
        }
    }
    if (a.dgamma.defined()) a.dgamma.data<A>()[c] = A(double(a.dgamma.data<A>()[c]) + sdyx);
    if (a.dbeta.defined()) a.dbeta.data<A>()[c] = A(double(a.dbeta.data<A>()[c]) + sdy);
  }
}

void batchnorm_fwd_cpu_ref(const BatchNormFwdArgs& a) {
  check_batchnorm_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, {
    if constexpr (std::is_same_v<T, double>)
      fwd_ref<T, double>(a);
    else
      fwd_ref<T, float>(a);
  });
}

void batchnorm_bwd_cpu_ref(const BatchNormBwdArgs& a) {
  check_batchnorm_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, {
    if constexpr (std::is_same_v<T, double>)
      bwd_ref<T, double>(a);
    else
      bwd_ref<T, float>(a);
  });
}

// ---- cpu.omp --------------------------------------------------------------------------------

template <class T>
using AccOf = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Outputs beyond the shared L3 (beyond_l3: ResNet's 256-channel 56x56 maps at batch 16) are
// written with non-temporal stores: no read-for-ownership of each line, a third of the forward's
// memory traffic (16x256x56x56 f32, two rounds: forward 5.5/6.0 -> 4.3/3.7 ms, backward 7.2/6.6 ->
// 5.9/5.9). Smaller outputs stay cached for the next layer (streaming a 12.8 MB one was slower).
bool streams(const Tensor& out) { return beyond_l3(out.nbytes()); }

// f(i) for i < n over the team (when par), each thread fencing its streamed stores before the
// region's barrier.
template <class F>
void for_each_streamed(int64_t n, bool par, bool stream, const F& f) {
#pragma omp parallel if (par)
  {
#pragma omp for schedule(static) nowait
    for (int64_t i = 0; i < n; ++i) f(i);
    if (stream) ew_detail::stream_fence();
  }
}

// Parallel loops only above this many elements (thread start-up costs more below).
constexpr int64_t kParallelMin = int64_t(1) << 15;

// Two sweeps over the whole tensor in memory order (statistics or sums, then y or dx), each thread
// over one contiguous half: on the AMD EPYC VM this beat reading one channel's N planes at a
// stride of C*S (planes of 49 to 3136 values) and running both passes on them while they sat in
// the L2, although that reads x once where the sweeps read it twice. BN+ReLU forward / backward,
// batch 16, ms (aim-bench op, channel by channel -> sweeps): 256x56x56 4.3 / 7.1 -> 3.8 / 6.8,
// 512x28x28 2.7 / 4.2 -> 2.0 / 5.0 (backward: noise of 4.2-5.9 on both), 1024x14x14 2.0 / 3.4
// -> 1.0 / 2.0, 992x7x7 0.56 / 0.94 -> 0.28 / 0.56; per training step, batch norm's ms (profile,
// two rounds each): ResNet-50 84+113 -> 60+86, DenseNet-121 118+192 -> 82+167. Long runs in
// memory order suit the prefetchers (they stop at page boundaries) and x's second read often
// comes from the 32 MiB L3. The per-plane partial sums and their combination in plane order do
// not depend on the schedule: the bits are those of the channel-by-channel version.

template <class T>
void fwd_omp(const BatchNormFwdArgs& a) {
  using A = AccOf<T>;
  const Folded f = fold(a.x);
  const int64_t N = f.N, C = f.C, S = f.S;
  const int64_t P = N * C;  // planes
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  const A* g = a.gamma.defined() ? a.gamma.data<A>() : nullptr;
  const A* b = a.beta.defined() ? a.beta.data<A>() : nullptr;
  const bool par = a.x.numel() > kParallelMin;
  std::vector<A> mean(static_cast<size_t>(C)), rstd(static_cast<size_t>(C));
  // Per plane (training): its mean and its sum of squared deviations about that mean.
  std::vector<double> pm(a.training ? size_t(P) : 0), pm2(a.training ? size_t(P) : 0);
  auto plane_stats = [&](int64_t p) {
    const T* xp = x + p * S;
    A sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t s = 0; s < S; ++s) sum += A(xp[s]);
    const A m = sum / A(S);
    A sq = 0;
#pragma omp simd reduction(+ : sq)
    for (int64_t s = 0; s < S; ++s) {
      const A d = A(xp[s]) - m;
      sq += d * d;
    }
    pm[size_t(p)] = double(m);
    pm2[size_t(p)] = double(sq);
  };
  // Per channel, planes in n order (Chan et al.'s pairwise combination, all counts S).
  const double M = double(N * S);
  A* rm = a.running_mean.defined() ? a.running_mean.data<A>() : nullptr;
  A* rv = a.running_var.defined() ? a.running_var.data<A>() : nullptr;
  auto channel_stats = [&](int64_t c) {
    double sm = 0.0;
    for (int64_t n = 0; n < N; ++n) sm += pm[size_t(n * C + c)];
    const double m = sm / double(N);
    double m2 = 0.0, dev = 0.0;
    for (int64_t n = 0; n < N; ++n) {
      const double d = pm[size_t(n * C + c)] - m;
      m2 += pm2[size_t(n * C + c)];
      dev += d * d;
    }
    m2 += double(S) * dev;
    const double r = 1.0 / std::sqrt(m2 / M + a.eps);
    mean[size_t(c)] = A(m);
    rstd[size_t(c)] = A(r);
    if (rm) {
      rm[c] = A((1.0 - a.momentum) * double(rm[c]) + a.momentum * m);
      rv[c] = A((1.0 - a.momentum) * double(rv[c]) + a.momentum * m2 / (M - 1.0));
    }
  };
  const bool stream = streams(a.y);
  auto apply = [&](int64_t p) {
    const int64_t c = p % C;
    const A m = mean[size_t(c)];
    const A k = g ? rstd[size_t(c)] * g[c] : rstd[size_t(c)];
    const A sh = b ? b[c] : A(0);
    ew_detail::write_rows(y + p * S, S, stream, [&](T* yp, int64_t i, int64_t n) {
      const T* xp = x + p * S + i;
      if (a.relu) {
        for (int64_t s = 0; s < n; ++s) {
          const A v = (A(xp[s]) - m) * k + sh;
          yp[s] = T(v < A(0) ? A(0) : v);  // NaN stays NaN
        }
      } else {
        for (int64_t s = 0; s < n; ++s) yp[s] = T((A(xp[s]) - m) * k + sh);
      }
    });
  };

  if (a.training) {
#pragma omp parallel for schedule(static) if (par)
    for (int64_t p = 0; p < P; ++p) plane_stats(p);
    for (int64_t c = 0; c < C; ++c) channel_stats(c);
  } else {
    const A* erm = a.running_mean.data<A>();
    const A* erv = a.running_var.data<A>();
    for (int64_t c = 0; c < C; ++c) {
      mean[size_t(c)] = erm[c];
      rstd[size_t(c)] = A(1.0 / std::sqrt(double(erv[c]) + a.eps));
    }
  }
  for_each_streamed(P, par, stream, apply);
  if (a.save_mean.defined()) std::copy(mean.begin(), mean.end(), a.save_mean.data<A>());
  if (a.save_rstd.defined()) std::copy(rstd.begin(), rstd.end(), a.save_rstd.data<A>());
}

// relu's backward, dy where y > 0 and +0 elsewhere (NaN dy included), as a bit mask: a
// branch-free select that vectorises for the widened 16-bit values too (the ternary left a branch
// per value in the f16/bf16 loops, mispredicted on every other one: 10x slower than f32).
inline float relu_grad(float y, float dy) {
  return bits_float(float_bits(dy) & (0u - uint32_t(y > 0.0f)));
}
inline double relu_grad(double y, double dy) {
  uint64_t u;
  std::memcpy(&u, &dy, 8);
  u &= 0ull - uint64_t(y > 0.0);
  std::memcpy(&dy, &u, 8);
  return dy;
}

template <class T>
void bwd_omp(const BatchNormBwdArgs& a) {
  using A = AccOf<T>;
  const Folded f = fold(a.x);
  const int64_t N = f.N, C = f.C, S = f.S;
  const int64_t P = N * C;
  if (P * S == 0) return;  // dx has no element; dgamma, dbeta += an empty sum
  const T* x = a.x.data<T>();
  const T* dy = a.dy.data<T>();
  const A* g = a.gamma.defined() ? a.gamma.data<A>() : nullptr;
  const A* mean = a.save_mean.data<A>();
  const A* rstd = a.save_rstd.data<A>();
  const bool par = a.x.numel() > kParallelMin;
  const bool need_sums = a.dgamma.defined() || a.dbeta.defined() || (a.training && a.dx.defined());
  const T* yr = a.y_relu.defined() ? a.y_relu.data<T>() : nullptr;
  std::vector<A> sdy(size_t(C), A(0)), sdyx(size_t(C), A(0));
  std::vector<A> ps(need_sums ? size_t(P) : 0), psx(need_sums ? size_t(P) : 0);
  auto plane_sums = [&](int64_t p) {
    const int64_t c = p % C;
    const A m = mean[c], r = rstd[c];
    const T* xp = x + p * S;
    const T* dyp = dy + p * S;
    // Σ dy and Σ dy·(x - mean) in 16 interleaved partial sums combined in lane order: the bits
    // do not depend on how the compiler vectorises each loop, so masking dy here by the fused
    // relu's output sums exactly what relu's own backward pass would have handed over (with
    // `omp simd reduction`, bf16's masked loop was vectorised differently: 1-ulp differences
    // that sent bf16 training on another trajectory).
    auto sums = [&](auto dval) {
      constexpr int L = 16;
      A l1[L] = {}, l2[L] = {};
      int64_t s = 0;
      auto add = [&](int64_t i, int j) {
        const A d = dval(i);
        l1[j] += d;
        l2[j] += d * (A(xp[i]) - m);
      };
      for (; s + L <= S; s += L)
#pragma omp simd
        for (int j = 0; j < L; ++j) add(s + j, j);
      for (int j = 0; s + j < S; ++j) add(s + j, j);
      A s1 = 0, s2 = 0;
      for (int j = 0; j < L; ++j) {
        s1 += l1[j];
        s2 += l2[j];
      }
      return std::pair<A, A>(s1, s2);
    };
    const T* yp = yr ? yr + p * S : nullptr;
    const auto [s1, s2] = yp ? sums([&](int64_t i) { return relu_grad(A(yp[i]), A(dyp[i])); })
                             : sums([&](int64_t i) { return A(dyp[i]); });
    ps[size_t(p)] = s1;
    psx[size_t(p)] = s2 * r;
  };
  auto channel_sums = [&](int64_t c) {
    double s1 = 0.0, s2 = 0.0;
    for (int64_t n = 0; n < N; ++n) {
      s1 += double(ps[size_t(n * C + c)]);
      s2 += double(psx[size_t(n * C + c)]);
    }
    sdy[size_t(c)] = A(s1);
    sdyx[size_t(c)] = A(s2);
    if (a.dgamma.defined()) a.dgamma.data<A>()[c] = A(double(a.dgamma.data<A>()[c]) + s2);
    if (a.dbeta.defined()) a.dbeta.data<A>()[c] = A(double(a.dbeta.data<A>()[c]) + s1);
  };
  T* dx = a.dx.defined() ? a.dx.data<T>() : nullptr;
  const A inv_m = A(1.0 / double(N * S));
  const bool stream = dx && streams(a.dx);
  auto apply = [&](int64_t p) {
    const int64_t c = p % C;
    const A r = rstd[c];
    const A k = g ? g[c] * r : r;  // dx = k * (dy - m1 - (x - mean) * q)
    ew_detail::write_rows(dx + p * S, S, stream, [&](T* dxp, int64_t i, int64_t n) {
      const T* dyp = dy + p * S + i;
      const T* yp = yr ? yr + p * S + i : nullptr;
      if (a.training) {
        const A m = mean[c], m1 = sdy[size_t(c)] * inv_m, q = r * sdyx[size_t(c)] * inv_m;
        const T* xp = x + p * S + i;
        if (yp)
          for (int64_t s = 0; s < n; ++s) {
            const A d = relu_grad(A(yp[s]), A(dyp[s]));
            dxp[s] = T(k * (d - m1 - (A(xp[s]) - m) * q));
          }
        else
          for (int64_t s = 0; s < n; ++s) dxp[s] = T(k * (A(dyp[s]) - m1 - (A(xp[s]) - m) * q));
      } else if (yp) {
        for (int64_t s = 0; s < n; ++s) dxp[s] = T(k * relu_grad(A(yp[s]), A(dyp[s])));
      } else {
        for (int64_t s = 0; s < n; ++s) dxp[s] = T(k * A(dyp[s]));
      }
    });
  };

  if (need_sums) {
#pragma omp parallel for schedule(static) if (par)
    for (int64_t p = 0; p < P; ++p) plane_sums(p);
    for (int64_t c = 0; c < C; ++c) channel_sums(c);
  }
  if (!dx) return;
  for_each_streamed(P, par, stream, apply);
}

void batchnorm_fwd_cpu_omp(const BatchNormFwdArgs& a) {
  check_batchnorm_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { fwd_omp<T>(a); });
}

void batchnorm_bwd_cpu_omp(const BatchNormBwdArgs& a) {
  check_batchnorm_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { bwd_omp<T>(a); });
}

std::vector<DType> float_dtypes() { return {DType::f32, DType::f64, DType::f16, DType::bf16}; }

}  // namespace

void batchnorm_fwd(const BatchNormFwdArgs& a) {
  AIM_DISPATCH_OP(BatchNormFwdArgs, "batchnorm_fwd", a);
}
void batchnorm_bwd(const BatchNormBwdArgs& a) {
  AIM_DISPATCH_OP(BatchNormBwdArgs, "batchnorm_bwd", a);
}

void register_batchnorm_cpu(Registry& r) {
  auto& f = r.op<BatchNormFwdArgs>("batchnorm_fwd");
  f.description = "batch normalisation over N and the trailing dims (F.batch_norm)";
  f.add({"cpu.ref", Backend::CPU, Provider::Own, batchnorm_fwd_cpu_ref, float_dtypes()});
  f.add({"cpu.omp", Backend::CPU, Provider::Own, batchnorm_fwd_cpu_omp, float_dtypes()});
  f.set_default(Backend::CPU, "cpu.omp");
  f.set_cost(batchnorm_fwd_cost);
  f.make_case = batchnorm_cpu::make_batchnorm_fwd_case;
  f.set_shape_fields(batchnorm_cpu::batchnorm_shape_fields());
  f.add_test_shapes(batchnorm_cpu::batchnorm_fwd_test_shapes());
  f.tolerance = batchnorm_cpu::batchnorm_tolerance;
  f.small_enough_for_simt = batchnorm_cpu::batchnorm_simt_small;

  auto& b = r.op<BatchNormBwdArgs>("batchnorm_bwd");
  b.description = "batch normalisation gradient: dx (=), dgamma and dbeta (+=); frozen BN too";
  b.add({"cpu.ref", Backend::CPU, Provider::Own, batchnorm_bwd_cpu_ref, float_dtypes()});
  b.add({"cpu.omp", Backend::CPU, Provider::Own, batchnorm_bwd_cpu_omp, float_dtypes()});
  b.set_default(Backend::CPU, "cpu.omp");
  b.set_cost(batchnorm_bwd_cost);
  b.make_case = batchnorm_cpu::make_batchnorm_bwd_case;
  b.set_shape_fields(batchnorm_cpu::batchnorm_shape_fields());
  b.add_test_shapes(batchnorm_cpu::batchnorm_bwd_test_shapes());
  b.tolerance = batchnorm_cpu::batchnorm_tolerance;
  b.small_enough_for_simt = batchnorm_cpu::batchnorm_simt_small;
}

}  // namespace aim::kernels
