// l2norm_fwd, l2norm_bwd: CPU variants, argument checks and registration.
// cpu.ref: the oracle. Per (n, s) column the sums over channels in double, then each element.
// cpu.omp: OpenMP over (n, block of kColumns columns of s); the channel sums run with the
// block's columns innermost (contiguous in s: vectorised), then each channel's row of the block is
// written; accumulation in float (double for f64). dscale: the columns' 1/d kept in a buffer, then
// OpenMP over channels, each summing its n and s in order: no reduction crosses threads
// (deterministic).
// Test cases: l2norm_cases.cpp.
#include "kernels/norm/l2norm_cpu.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/norm/l2norm.h"
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

void check_x(const char* op, const Tensor& x, double eps) {
  AIM_CHECK(x.defined() && x.dim() >= 2, "[", op, "] x must be [N, C, ...], got ", desc(x));
  AIM_CHECK(is_floating(x.dtype()), "[", op, "] x must be f32, f64, f16 or bf16, got ",
            dtype_name(x.dtype()));
  AIM_CHECK(x.is_contiguous(), "[", op, "] x ", to_string(x.sizes()), " must be contiguous");
  AIM_CHECK(eps >= 0 && std::isfinite(eps), "[", op, "] eps must be finite and >= 0, got ", eps);
}

void check_like(const char* op, const char* name, const Tensor& t, const Tensor& x) {
  AIM_CHECK(t.defined() && t.sizes() == x.sizes() && t.dtype() == x.dtype() && t.is_contiguous(),
            "[", op, "] ", name, " must be contiguous ", to_string(x.sizes()), " ",
            dtype_name(x.dtype()), " like x, got ", desc(t));
  AIM_CHECK(t.device() == x.device(), "[", op, "] ", name, " is on ", t.device().str(), ", x on ",
            x.device().str());
}

void check_channels(const char* op, const char* name, const Tensor& t, const Tensor& x) {
  if (!t.defined()) return;
  AIM_CHECK(t.sizes() == std::vector<int64_t>{x.size(1)} && t.dtype() == x.dtype() &&
                t.is_contiguous() && t.device() == x.device(),
            "[", op, "] ", name, " must be [", x.size(1), "] ", dtype_name(x.dtype()), " on ",
            x.device().str(), " (x's channels), got ", desc(t));
}

}  // namespace

void check_l2norm_fwd_args(const L2NormFwdArgs& a) {
  check_x("l2norm_fwd", a.x, a.eps);
  check_channels("l2norm_fwd", "scale", a.scale, a.x);
  check_like("l2norm_fwd", "y", a.y, a.x);
}

void check_l2norm_bwd_args(const L2NormBwdArgs& a) {
  check_x("l2norm_bwd", a.x, a.eps);
  check_channels("l2norm_bwd", "scale", a.scale, a.x);
  check_channels("l2norm_bwd", "dscale", a.dscale, a.x);
  check_like("l2norm_bwd", "dy", a.dy, a.x);
  check_like("l2norm_bwd", "dx", a.dx, a.x);
}

namespace {

template <class T>
using AccT = std::conditional_t<std::is_same_v<T, double>, double, float>;

// ---- cpu.ref --------------------------------------------------------------------------------

template <class T>
void fwd_ref(const L2NormFwdArgs& a) {
  const Folded f = fold(a.x);
  const T* x = a.x.data<T>();
  const T* sc = a.scale.defined() ? a.scale.data<T>() : nullptr;
  T* y = a.y.data<T>();
  for (int64_t n = 0; n < f.N; ++n)
    for (int64_t s = 0; s < f.S; ++s) {
      auto at = [&](int64_t c) { return (n * f.C + c) * f.S + s; };
      double ss = 0;
      for (int64_t c = 0; c < f.C; ++c) ss += double(x[at(c)]) * double(x[at(c)]);
      const double d = std::max(std::sqrt(ss), a.eps);
      for (int64_t c = 0; c < f.C; ++c)
        y[at(c)] = T((sc ? double(sc[c]) : 1.0) * double(x[at(c)]) / d);
    }
}

template <class T>
void bwd_ref(const L2NormBwdArgs& a) {
  const Folded f = fold(a.x);
  const T* x = a.x.data<T>();
  const T* dy = a.dy.data<T>();
  const T* sc = a.scale.defined() ? a.scale.data<T>() : nullptr;
  T* dx = a.dx.data<T>();
  std::vector<double> ds(static_cast<size_t>(f.C), 0.0);
  for (int64_t n = 0; n < f.N; ++n)
    for (int64_t s = 0; s < f.S; ++s) {
      auto at = [&](int64_t c) { return (n * f.C + c) * f.S + s; };
      double ss = 0, g = 0;
      for (int64_t c = 0; c < f.C; ++c) {
        const double xv = double(x[at(c)]);
        ss += xv * xv;
        g += (sc ? double(sc[c]) : 1.0) * double(dy[at(c)]) * xv;
      }
      const double r = std::sqrt(ss), d = std::max(r, a.eps);
      const double coef = r >= a.eps ? g / (d * d * r) : 0.0;
      for (int64_t c = 0; c < f.C; ++c) {
        const double xv = double(x[at(c)]), dyv = double(dy[at(c)]);
        dx[at(c)] = T((sc ? double(sc[c]) : 1.0) * dyv / d - xv * coef);
        ds[size_t(c)] += dyv * xv / d;
      }
    }
  if (a.dscale.defined()) {
    T* out = a.dscale.data<T>();
    for (int64_t c = 0; c < f.C; ++c) out[c] = T(double(out[c]) + ds[size_t(c)]);
  }
}

// ---- cpu.omp --------------------------------------------------------------------------------

constexpr int64_t kColumns = 64;

// Calls f(n, s0, w) for every (n, block of columns [s0, s0 + w)), in parallel when large.
template <class F>
void over_blocks(const Folded& f, F fn) {
  const int64_t blocks = (f.S + kColumns - 1) / kColumns, total = f.N * blocks;
#pragma omp parallel for schedule(static) if (total > 1 && f.N * f.C * f.S > (int64_t(1) << 14))
  for (int64_t i = 0; i < total; ++i) {
    const int64_t n = i / blocks, s0 = (i % blocks) * kColumns;
    fn(n, s0, std::min(kColumns, f.S - s0));
  }
}

template <class T>
void fwd_omp(const L2NormFwdArgs& a) {
  using A = AccT<T>;
  const Folded f = fold(a.x);
  const T* x = a.x.data<T>();
  const T* sc = a.scale.defined() ? a.scale.data<T>() : nullptr;
  T* y = a.y.data<T>();
  const A eps = A(a.eps);
  over_blocks(f, [&](int64_t n, int64_t s0, int64_t w) {
    A ss[kColumns] = {}, inv[kColumns];
    const T* xb = x + n * f.C * f.S + s0;
    for (int64_t c = 0; c < f.C; ++c)
      for (int64_t j = 0; j < w; ++j) {
        const A v = A(xb[c * f.S + j]);
        ss[j] += v * v;
      }
    for (int64_t j = 0; j < w; ++j) inv[j] = A(1) / std::max(std::sqrt(ss[j]), eps);
    T* yb = y + n * f.C * f.S + s0;
    for (int64_t c = 0; c < f.C; ++c) {
      const A k = sc ? A(sc[c]) : A(1);
      for (int64_t j = 0; j < w; ++j) yb[c * f.S + j] = T(k * A(xb[c * f.S + j]) * inv[j]);
    }
  });
}

template <class T>
void bwd_omp(const L2NormBwdArgs& a) {
  using A = AccT<T>;
  const Folded f = fold(a.x);
  const T* x = a.x.data<T>();
  const T* dy = a.dy.data<T>();
  const T* sc = a.scale.defined() ? a.scale.data<T>() : nullptr;
  T* dx = a.dx.data<T>();
  const bool want_ds = a.dscale.defined();
  std::vector<A> invd(want_ds ? size_t(f.N * f.S) : 0);
  over_blocks(f, [&](int64_t n, int64_t s0, int64_t w) {
    A ss[kColumns] = {}, g[kColumns] = {}, inv[kColumns], coef[kColumns];
    const int64_t base = n * f.C * f.S + s0;
    for (int64_t c = 0; c < f.C; ++c) {
      const A k = sc ? A(sc[c]) : A(1);
      for (int64_t j = 0; j < w; ++j) {
        const A v = A(x[base + c * f.S + j]);
        ss[j] += v * v;
        g[j] += k * A(dy[base + c * f.S + j]) * v;
      }
    }
    for (int64_t j = 0; j < w; ++j) {
      const A r = std::sqrt(ss[j]), d = std::max(r, A(a.eps));
      inv[j] = A(1) / d;
      coef[j] = double(r) >= a.eps ? g[j] / (d * d * r) : A(0);
      if (want_ds) invd[size_t(n * f.S + s0 + j)] = inv[j];
    }
    for (int64_t c = 0; c < f.C; ++c) {
      const A k = sc ? A(sc[c]) : A(1);
      for (int64_t j = 0; j < w; ++j) {
        const int64_t i = base + c * f.S + j;
        dx[i] = T(k * A(dy[i]) * inv[j] - A(x[i]) * coef[j]);
      }
    }
  });
  if (!want_ds) return;
  T* out = a.dscale.data<T>();
#pragma omp parallel for schedule(static) if (f.N * f.C * f.S > (int64_t(1) << 14))
  for (int64_t c = 0; c < f.C; ++c) {
    A sum = 0;
    for (int64_t n = 0; n < f.N; ++n) {
      const int64_t base = (n * f.C + c) * f.S;
      const A* iv = invd.data() + n * f.S;
      for (int64_t s = 0; s < f.S; ++s) sum += A(dy[base + s]) * A(x[base + s]) * iv[s];
    }
    out[c] = T(A(out[c]) + sum);
  }
}

void l2norm_fwd_cpu_ref(const L2NormFwdArgs& a) {
  check_l2norm_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { fwd_ref<T>(a); });
}
void l2norm_bwd_cpu_ref(const L2NormBwdArgs& a) {
  check_l2norm_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { bwd_ref<T>(a); });
}
void l2norm_fwd_cpu_omp(const L2NormFwdArgs& a) {
  check_l2norm_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { fwd_omp<T>(a); });
}
void l2norm_bwd_cpu_omp(const L2NormBwdArgs& a) {
  check_l2norm_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { bwd_omp<T>(a); });
}

std::vector<DType> float_dtypes() { return {DType::f32, DType::f64, DType::f16, DType::bf16}; }

}  // namespace

void l2norm_fwd(const L2NormFwdArgs& a) { AIM_DISPATCH_OP(L2NormFwdArgs, "l2norm_fwd", a); }
void l2norm_bwd(const L2NormBwdArgs& a) { AIM_DISPATCH_OP(L2NormBwdArgs, "l2norm_bwd", a); }

void register_l2norm_cpu(Registry& r) {
  auto& f = r.op<L2NormFwdArgs>("l2norm_fwd");
  f.description =
      "channel L2 normalisation times a learned scale (SSD's L2Norm: scale * F.normalize)";
  f.add({"cpu.ref", Backend::CPU, Provider::Own, l2norm_fwd_cpu_ref, float_dtypes()});
  f.add({"cpu.omp", Backend::CPU, Provider::Own, l2norm_fwd_cpu_omp, float_dtypes()});
  f.set_default(Backend::CPU, "cpu.omp");
  f.set_cost(l2norm_fwd_cost);
  f.make_case = l2norm_cpu::make_l2norm_fwd_case;
  f.set_shape_fields(l2norm_cpu::l2norm_shape_fields());
  f.add_test_shapes(l2norm_cpu::l2norm_test_shapes());
  f.tolerance = l2norm_cpu::l2norm_tolerance;
  f.small_enough_for_simt = l2norm_cpu::l2norm_simt_small;

  auto& b = r.op<L2NormBwdArgs>("l2norm_bwd");
  b.description = "gradient of l2norm: dx (=), dscale (+=), the norms recomputed from x";
  b.add({"cpu.ref", Backend::CPU, Provider::Own, l2norm_bwd_cpu_ref, float_dtypes()});
  b.add({"cpu.omp", Backend::CPU, Provider::Own, l2norm_bwd_cpu_omp, float_dtypes()});
  b.set_default(Backend::CPU, "cpu.omp");
  b.set_cost(l2norm_bwd_cost);
  b.make_case = l2norm_cpu::make_l2norm_bwd_case;
  b.set_shape_fields(l2norm_cpu::l2norm_shape_fields());
  b.add_test_shapes(l2norm_cpu::l2norm_test_shapes());
  b.tolerance = l2norm_cpu::l2norm_tolerance;
  b.small_enough_for_simt = l2norm_cpu::l2norm_simt_small;
}

}  // namespace aim::kernels
