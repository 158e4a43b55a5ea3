// cpu.ref: the oracle. Plain loops over rows, double accumulators, two passes per row.
// cpu.omp: OpenMP over rows (forward, dx); dgamma/dbeta from per-chunk partial sums over a fixed
// number of row chunks, reduced in chunk order: the result does not depend on the thread count.
// The row math is layernorm_rows.h's (shared with add_layernorm).
// Accumulation in float (double for f64), 16-bit types rounded once at the output.
// Test cases: layernorm_cases.cpp.
#include "kernels/norm/layernorm_cpu.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/norm/layernorm.h"
#include "kernels/norm/layernorm_rows.h"
#include "kernels/registry.h"

namespace aim::kernels {

void check_layernorm_fwd_args(const LayerNormFwdArgs& a) {
  AIM_CHECK(a.x.dim() == 2, "[layernorm_fwd] x must be [N, C], got ", to_string(a.x.sizes()));
  const int64_t N = a.x.size(0), C = a.x.size(1);
  const DType s = layernorm_stat_dtype(a.x.dtype());
  AIM_CHECK(a.gamma.defined() == a.beta.defined(),
            "[layernorm_fwd] gamma and beta must both be given or both be undefined");
  for (const Tensor* p : {&a.gamma, &a.beta})
    if (p->defined())
      AIM_CHECK(p->sizes() == Shape{C} && p->dtype() == a.x.dtype() && p->is_contiguous(),
                "[layernorm_fwd] gamma/beta must be contiguous [", C, "] ", dtype_name(a.x.dtype()),
                ", got ", to_string(p->sizes()), " ", dtype_name(p->dtype()));
  AIM_CHECK(a.y.sizes() == a.x.sizes() && a.y.dtype() == a.x.dtype(), "[layernorm_fwd] y must be ",
            to_string(a.x.sizes()), " ", dtype_name(a.x.dtype()), ", got ", to_string(a.y.sizes()),
            " ", dtype_name(a.y.dtype()));
  for (const Tensor* p : {&a.mean, &a.rstd})
    AIM_CHECK(p->sizes() == Shape{N} && p->dtype() == s, "[layernorm_fwd] mean/rstd must be [", N,
              "] ", dtype_name(s), ", got ", to_string(p->sizes()), " ", dtype_name(p->dtype()));
  AIM_CHECK(a.x.is_contiguous() && a.y.is_contiguous() && a.mean.is_contiguous() &&
                a.rstd.is_contiguous(),
            "[layernorm_fwd] tensors must be contiguous");
  AIM_CHECK(a.eps >= 0, "[layernorm_fwd] eps must be >= 0, got ", a.eps);
}

void check_layernorm_bwd_args(const LayerNormBwdArgs& a) {
  AIM_CHECK(a.x.dim() == 2, "[layernorm_bwd] x must be [N, C], got ", to_string(a.x.sizes()));
  const int64_t N = a.x.size(0), C = a.x.size(1);
  const DType t = a.x.dtype(), s = layernorm_stat_dtype(t);
  for (const Tensor* p : {&a.dy, &a.dx})
    AIM_CHECK(p->sizes() == a.x.sizes() && p->dtype() == t && p->is_contiguous(),
              "[layernorm_bwd] dy/dx must be contiguous ", to_string(a.x.sizes()), " ",
              dtype_name(t), ", got ", to_string(p->sizes()), " ", dtype_name(p->dtype()));
  for (const Tensor* p : {&a.gamma, &a.dgamma, &a.dbeta})
    if (p->defined())
      AIM_CHECK(p->sizes() == Shape{C} && p->dtype() == t && p->is_contiguous(),
                "[layernorm_bwd] gamma/dgamma/dbeta must be contiguous [", C, "] ", dtype_name(t),
                ", got ", to_string(p->sizes()), " ", dtype_name(p->dtype()));
  for (const Tensor* p : {&a.mean, &a.rstd})
    AIM_CHECK(p->sizes() == Shape{N} && p->dtype() == s && p->is_contiguous(),
              "[layernorm_bwd] mean/rstd must be [", N, "] ", dtype_name(s), ", got ",
              to_string(p->sizes()), " ", dtype_name(p->dtype()));
  AIM_CHECK(a.x.is_contiguous(), "[layernorm_bwd] x must be contiguous");
}

namespace {

// ---- cpu.ref --------------------------------------------------------------------------------

template <class T, class S>
void fwd_ref(const LayerNormFwdArgs& a) {
  const int64_t N = a.x.size(0), C = a.x.size(1);
  const T* x = a.x.data<T>();
  const T* g = a.gamma.defined() ? a.gamma.data<T>() : nullptr;
  const T* b = a.beta.defined() ? a.beta.data<T>() : nullptr;
  T* y = a.y.data<T>();
  for (int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * C;
    double sum = 0.0;
    for (int64_t c = 0; c < C; ++c) sum += double(xr[c]);
    const double m = sum / double(C);
    double sq = 0.0;
    for (int64_t c = 0; c < C; ++c) sq += (double(xr[c]) - m) * (double(xr[c]) - m);
    const double r = 1.0 / std::sqrt(sq / double(C) + double(a.eps));  // biased variance
    for (int64_t c = 0; c < C; ++c) {
      double v = (double(xr[c]) - m) * r;
      if (g) v = v * double(g[c]) + double(b[c]);
      y[n * C + c] = T(v);
    }
    a.mean.data<S>()[n] = S(m);
    a.rstd.data<S>()[n] = S(r);
  }
}

template <class T, class S>
void bwd_ref(const LayerNormBwdArgs& a) {
  const int64_t N = a.x.size(0), C = a.x.size(1);
  const T* x = a.x.data<T>();
  const T* dy = a.dy.data<T>();
  const T* g = a.gamma.defined() ? a.gamma.data<T>() : nullptr;
  const S* mean = a.mean.data<S>();
  const S* rstd = a.rstd.data<S>();
  T* dx = a.dx.data<T>();
  std::vector<double> dg(size_t(C), 0.0), db(size_t(C), 0.0);
  for (int64_t n = 0; n < N; ++n) {
    const double m = double(mean[n]), r = double(rstd[n]);
    double s1 = 0.0, s2 = 0.0;  // mean over c of dy*g, and of dy*g*xhat
    for (int64_t c = 0; c < C; ++c) {
      const double xh = (double(x[n * C + c]) - m) * r;
      const double d = double(dy[n * C + c]) * (g ? double(g[c]) : 1.0);
      s1 += d;
      s2 += d * xh;
      dg[size_t(c)] += double(dy[n * C + c]) * xh;
      db[size_t(c)] += double(dy[n * C + c]);
    }
    s1 /= double(C);
    s2 /= double(C);
    for (int64_t c = 0; c < C; ++c) {
      const double xh = (double(x[n * C + c]) - m) * r;
      const double d = double(dy[n * C + c]) * (g ? double(g[c]) : 1.0);
      dx[n * C + c] = T(r * (d - s1 - xh * s2));
    }
  }
  if (a.dgamma.defined())
    for (int64_t c = 0; c < C; ++c)
      a.dgamma.data<T>()[c] = T(double(a.dgamma.data<T>()[c]) + dg[size_t(c)]);
  if (a.dbeta.defined())
    for (int64_t c = 0; c < C; ++c)
      a.dbeta.data<T>()[c] = T(double(a.dbeta.data<T>()[c]) + db[size_t(c)]);
}

void layernorm_fwd_cpu_ref(const LayerNormFwdArgs& a) {
  check_layernorm_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, {
    if constexpr (std::is_same_v<T, double>)
      fwd_ref<T, double>(a);
    else
      fwd_ref<T, float>(a);
  });
}

void layernorm_bwd_cpu_ref(const LayerNormBwdArgs& a) {
  check_layernorm_bwd_args(a);
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

template <class T>
void fwd_omp(const LayerNormFwdArgs& a) {
  using A = AccOf<T>;
  const int64_t N = a.x.size(0), C = a.x.size(1);
  const T* x = a.x.data<T>();
  const T* g = a.gamma.defined() ? a.gamma.data<T>() : nullptr;
  const T* b = a.beta.defined() ? a.beta.data<T>() : nullptr;
  T* y = a.y.data<T>();
  A* mean = a.mean.data<A>();
  A* rstd = a.rstd.data<A>();
#pragma omp parallel for schedule(static) if (N * C > (int64_t(1) << 15))
  for (int64_t n = 0; n < N; ++n)
    layernorm_row_fwd<false>(x + n * C, g, b, y + n * C, C, a.eps, mean + n, rstd + n);
}

template <class T>
void bwd_omp(const LayerNormBwdArgs& a) {
  using A = AccOf<T>;
  const int64_t N = a.x.size(0), C = a.x.size(1);
  const T* x = a.x.data<T>();
  const T* dy = a.dy.data<T>();
  const T* g = a.gamma.defined() ? a.gamma.data<T>() : nullptr;
  const A* mean = a.mean.data<A>();
  const A* rstd = a.rstd.data<A>();
  T* dx = a.dx.data<T>();
  const bool params = a.dgamma.defined() || a.dbeta.defined();
  // Fixed chunking of rows (independent of the thread count) for deterministic dgamma/dbeta.
  const int64_t chunks = params ? std::min<int64_t>(64, std::max<int64_t>(1, N / 16)) : 1;
  const int64_t rows_per_chunk = (N + chunks - 1) / chunks;
  std::vector<A> part(params ? size_t(2 * chunks * C) : 0, A(0));
#pragma omp parallel for schedule(static) if (N * C > (int64_t(1) << 15))
  for (int64_t k = 0; k < chunks; ++k) {
    A* pg = params ? part.data() + 2 * k * C : nullptr;
    A* pb = params ? pg + C : nullptr;
    const int64_t n1 = std::min(N, (k + 1) * rows_per_chunk);
    for (int64_t n = k * rows_per_chunk; n < n1; ++n)
      layernorm_row_bwd<false>(x + n * C, dy + n * C, g, mean[n], rstd[n], dx + n * C, C, pg, pb,
                               static_cast<A*>(nullptr));
  }
  if (!params) return;
  T* dg = a.dgamma.defined() ? a.dgamma.data<T>() : nullptr;
  T* db = a.dbeta.defined() ? a.dbeta.data<T>() : nullptr;
  for (int64_t c = 0; c < C; ++c) {
    A sg = 0, sb = 0;
    for (int64_t k = 0; k < chunks; ++k) {
      sg += part[size_t(2 * k * C + c)];
      sb += part[size_t(2 * k * C + C + c)];
    }
    if (dg) dg[c] = T(A(dg[c]) + sg);
    if (db) db[c] = T(A(db[c]) + sb);
  }
}

void layernorm_fwd_cpu_omp(const LayerNormFwdArgs& a) {
  check_layernorm_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { fwd_omp<T>(a); });
}

void layernorm_bwd_cpu_omp(const LayerNormBwdArgs& a) {
  check_layernorm_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { bwd_omp<T>(a); });
}

std::vector<DType> float_dtypes() { return {DType::f32, DType::f64, DType::f16, DType::bf16}; }

}  // namespace

void layernorm_cpu::layernorm_fwd_ref(const LayerNormFwdArgs& a) { layernorm_fwd_cpu_ref(a); }
void layernorm_cpu::layernorm_bwd_ref(const LayerNormBwdArgs& a) { layernorm_bwd_cpu_ref(a); }

void layernorm_fwd(const LayerNormFwdArgs& a) {
  AIM_DISPATCH_OP(LayerNormFwdArgs, "layernorm_fwd", a);
}
void layernorm_bwd(const LayerNormBwdArgs& a) {
  AIM_DISPATCH_OP(LayerNormBwdArgs, "layernorm_bwd", a);
}

void register_layernorm_cpu(Registry& r) {
  auto& f = r.op<LayerNormFwdArgs>("layernorm_fwd");
  f.description = "layer normalisation over the last axis (F.layer_norm)";
  f.add({"cpu.ref", Backend::CPU, Provider::Own, layernorm_fwd_cpu_ref, float_dtypes()});
  f.add({"cpu.omp", Backend::CPU, Provider::Own, layernorm_fwd_cpu_omp, float_dtypes()});
  f.set_default(Backend::CPU, "cpu.omp");
  f.set_cost(layernorm_fwd_cost);
  f.make_case = layernorm_cpu::make_layernorm_fwd_case;
  f.set_shape_fields(layernorm_cpu::layernorm_shape_fields());
  f.add_test_shapes(layernorm_cpu::layernorm_test_shapes());
  f.tolerance = layernorm_cpu::layernorm_tolerance;
  f.small_enough_for_simt = layernorm_cpu::layernorm_simt_small;

  auto& b = r.op<LayerNormBwdArgs>("layernorm_bwd");
  b.description = "layer normalisation gradient: dx (=), dgamma and dbeta (+=)";
  b.add({"cpu.ref", Backend::CPU, Provider::Own, layernorm_bwd_cpu_ref, float_dtypes()});
  b.add({"cpu.omp", Backend::CPU, Provider::Own, layernorm_bwd_cpu_omp, float_dtypes()});
  b.set_default(Backend::CPU, "cpu.omp");
  b.set_cost(layernorm_bwd_cost);
  b.make_case = layernorm_cpu::make_layernorm_bwd_case;
  b.set_shape_fields(layernorm_cpu::layernorm_shape_fields());
  b.add_test_shapes(layernorm_cpu::layernorm_test_shapes());
  b.tolerance = layernorm_cpu::layernorm_tolerance;
  b.small_enough_for_simt = layernorm_cpu::layernorm_simt_small;
}

}  // namespace aim::kernels
