// add_layernorm_fwd, add_layernorm_bwd on the CPU.
// cpu.ref: the oracle. h = x + bias + residual in double, rounded once to h's dtype; then
//   layernorm's cpu.ref on h (forward), or on dy and h (backward) followed by dbias += Σ_n dh in
//   double.
// cpu.omp: OpenMP over rows; per row h in float (double for f64), stored, then layernorm cpu.omp's
//   row math (layernorm_rows.h) on the stored h. Backward: layernorm's row math over a fixed number
//   of row chunks with per-chunk partial sums for dgamma, dbeta and dbias (dh before its rounding),
//   reduced in chunk order: deterministic, independent of the thread count.
// Test cases: add_layernorm_cases.cpp.
#include "kernels/norm/add_layernorm_cpu.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels/norm/add_layernorm.h"
#include "kernels/norm/layernorm_cpu.h"
#include "kernels/norm/layernorm_rows.h"
#include "kernels/registry.h"

namespace aim::kernels {

namespace {

void check_matrix(const char* op, const char* name, const Tensor& t, const Tensor& like) {
  AIM_CHECK(
      t.defined() && t.sizes() == like.sizes() && t.dtype() == like.dtype() && t.is_contiguous(),
      "[", op, "] ", name, " must be contiguous ", to_string(like.sizes()), " ",
      dtype_name(like.dtype()), ", got ",
      t.defined() ? to_string(t.sizes()) + " " + dtype_name(t.dtype()) : "undefined");
}

void check_vector(const char* op, const char* name, const Tensor& t, int64_t n, DType d) {
  if (!t.defined()) return;
  AIM_CHECK(t.sizes() == Shape{n} && t.dtype() == d && t.is_contiguous(), "[", op, "] ", name,
            " must be contiguous [", n, "] ", dtype_name(d), ", got ", to_string(t.sizes()), " ",
            dtype_name(t.dtype()));
}

}  // namespace

void check_add_layernorm_fwd_args(const AddLayerNormFwdArgs& a) {
  const char* op = "add_layernorm_fwd";
  AIM_CHECK(a.x.defined() && a.x.dim() == 2, "[", op, "] x must be [N, C], got ",
            a.x.defined() ? to_string(a.x.sizes()) : "undefined");
  AIM_CHECK(a.x.is_contiguous(), "[", op, "] x must be contiguous");
  const int64_t N = a.x.size(0), C = a.x.size(1);
  const DType t = a.x.dtype(), s = layernorm_stat_dtype(t);
  check_matrix(op, "residual", a.residual, a.x);
  check_vector(op, "bias", a.bias, C, t);
  AIM_CHECK(a.gamma.defined() == a.beta.defined(), "[", op,
            "] gamma and beta must both be given or both be undefined");
  check_vector(op, "gamma", a.gamma, C, t);
  check_vector(op, "beta", a.beta, C, t);
  check_matrix(op, "h", a.h, a.x);
  check_matrix(op, "y", a.y, a.x);
  AIM_CHECK(a.mean.defined() && a.rstd.defined(), "[", op, "] mean and rstd must be defined");
  check_vector(op, "mean", a.mean, N, s);
  check_vector(op, "rstd", a.rstd, N, s);
  AIM_CHECK(a.eps >= 0, "[", op, "] eps must be >= 0, got ", a.eps);
}

void check_add_layernorm_bwd_args(const AddLayerNormBwdArgs& a) {
  const char* op = "add_layernorm_bwd";
  AIM_CHECK(a.h.defined() && a.h.dim() == 2, "[", op, "] h must be [N, C], got ",
            a.h.defined() ? to_string(a.h.sizes()) : "undefined");
  AIM_CHECK(a.h.is_contiguous(), "[", op, "] h must be contiguous");
  const int64_t N = a.h.size(0), C = a.h.size(1);
  const DType t = a.h.dtype(), s = layernorm_stat_dtype(t);
  check_matrix(op, "dy", a.dy, a.h);
  check_matrix(op, "dh", a.dh, a.h);
  for (const auto& [name, p] : {std::pair<const char*, const Tensor*>{"gamma", &a.gamma},
                                {"dgamma", &a.dgamma},
                                {"dbeta", &a.dbeta},
                                {"dbias", &a.dbias}})
    check_vector(op, name, *p, C, t);
  AIM_CHECK(a.mean.defined() && a.rstd.defined(), "[", op, "] mean and rstd must be defined");
  check_vector(op, "mean", a.mean, N, s);
  check_vector(op, "rstd", a.rstd, N, s);
}

namespace {

template <class T>
using AccOf = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class T>
const T* opt(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// ---- cpu.ref ---------------------------------------------------------------------------------

template <class T>
void residual_ref(const AddLayerNormFwdArgs& a) {
  const int64_t N = a.x.size(0), C = a.x.size(1);
  const T* x = a.x.data<T>();
  const T* b = opt<T>(a.bias);
  const T* r = a.residual.data<T>();
  T* h = a.h.data<T>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      h[n * C + c] = T(double(x[n * C + c]) + (b ? double(b[c]) : 0.0) + double(r[n * C + c]));
}

void add_layernorm_fwd_cpu_ref(const AddLayerNormFwdArgs& a) {
  check_add_layernorm_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { residual_ref<T>(a); });
  LayerNormFwdArgs l;
  l.x = a.h, l.gamma = a.gamma, l.beta = a.beta;
  l.y = a.y, l.mean = a.mean, l.rstd = a.rstd, l.eps = a.eps;
  layernorm_cpu::layernorm_fwd_ref(l);
}

template <class T>
void dbias_ref(const AddLayerNormBwdArgs& a) {
  const int64_t N = a.h.size(0), C = a.h.size(1);
  const T* dh = a.dh.data<T>();
  T* db = a.dbias.data<T>();
  for (int64_t c = 0; c < C; ++c) {
    double s = 0;
    for (int64_t n = 0; n < N; ++n) s += double(dh[n * C + c]);
    db[c] = T(double(db[c]) + s);
  }
}

void add_layernorm_bwd_cpu_ref(const AddLayerNormBwdArgs& a) {
  check_add_layernorm_bwd_args(a);
  LayerNormBwdArgs l;
  l.dy = a.dy, l.x = a.h, l.gamma = a.gamma, l.mean = a.mean, l.rstd = a.rstd;
  l.dx = a.dh, l.dgamma = a.dgamma, l.dbeta = a.dbeta;
  layernorm_cpu::layernorm_bwd_ref(l);
  if (a.dbias.defined()) AIM_DISPATCH_FLOAT_TYPES(a.h.dtype(), T, { dbias_ref<T>(a); });
}

// ---- cpu.omp ---------------------------------------------------------------------------------

template <class T>
void fwd_omp(const AddLayerNormFwdArgs& a) {
  using A = AccOf<T>;
  const int64_t N = a.x.size(0), C = a.x.size(1);
  const T* x = a.x.data<T>();
  const T* bias = opt<T>(a.bias);
  const T* res = a.residual.data<T>();
  const T* g = opt<T>(a.gamma);
  const T* b = opt<T>(a.beta);
  T* h = a.h.data<T>();
  T* y = a.y.data<T>();
  A* mean = a.mean.data<A>();
  A* rstd = a.rstd.data<A>();
#pragma omp parallel for schedule(static) if (N * C > (int64_t(1) << 15))
  for (int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * C;
    const T* rr = res + n * C;
    T* hr = h + n * C;
    if (bias) {
      for (int64_t c = 0; c < C; ++c) hr[c] = T(A(xr[c]) + A(bias[c]) + A(rr[c]));
    } else {
      for (int64_t c = 0; c < C; ++c) hr[c] = T(A(xr[c]) + A(rr[c]));
    }
    layernorm_row_fwd<true>(hr, g, b, y + n * C, C, a.eps, mean + n, rstd + n);
  }
}

template <class T>
void bwd_omp(const AddLayerNormBwdArgs& a) {
  using A = AccOf<T>;
  const int64_t N = a.h.size(0), C = a.h.size(1);
  const T* h = a.h.data<T>();
  const T* dy = a.dy.data<T>();
  const T* g = opt<T>(a.gamma);
  const A* mean = a.mean.data<A>();
  const A* rstd = a.rstd.data<A>();
  T* dh = a.dh.data<T>();
  const bool params = a.dgamma.defined() || a.dbeta.defined();
  const bool sums = a.dbias.defined();
  // Fixed chunking of rows (independent of the thread count): deterministic column sums. Per
  // chunk: [dgamma, dbeta, dbias] partials of C each.
  const int64_t chunks =
      params || sums ? std::min<int64_t>(64, std::max<int64_t>(1, N / 16)) : int64_t(1);
  const int64_t rows_per_chunk = (N + chunks - 1) / chunks;
  const Tensor part = params || sums ? Tensor::zeros({chunks, 3, C}, dtype_of<A>()) : Tensor();
  A* p = params || sums ? part.data<A>() : nullptr;
#pragma omp parallel for schedule(static) if (N * C > (int64_t(1) << 15))
  for (int64_t k = 0; k < chunks; ++k) {
    A* pg = params ? p + 3 * k * C : nullptr;
    A* pb = params ? pg + C : nullptr;
    A* pd = sums ? p + 3 * k * C + 2 * C : nullptr;
    const int64_t n1 = std::min(N, (k + 1) * rows_per_chunk);
    for (int64_t n = k * rows_per_chunk; n < n1; ++n)
      layernorm_row_bwd<true>(h + n * C, dy + n * C, g, mean[n], rstd[n], dh + n * C, C, pg, pb,
                              pd);
  }
  if (!params && !sums) return;
  for (int64_t k = 1; k < chunks; ++k)  // chunk order: deterministic
    for (int64_t c = 0; c < 3 * C; ++c) p[c] += p[3 * k * C + c];
  T* dg = a.dgamma.defined() ? a.dgamma.data<T>() : nullptr;
  T* db = a.dbeta.defined() ? a.dbeta.data<T>() : nullptr;
  T* dbias = a.dbias.defined() ? a.dbias.data<T>() : nullptr;
  for (int64_t c = 0; c < C; ++c) {
    if (dg) dg[c] = T(A(dg[c]) + p[c]);
    if (db) db[c] = T(A(db[c]) + p[C + c]);
    if (dbias) dbias[c] = T(A(dbias[c]) + p[2 * C + c]);
  }
}

void add_layernorm_fwd_cpu_omp(const AddLayerNormFwdArgs& a) {
  check_add_layernorm_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { fwd_omp<T>(a); });
}

void add_layernorm_bwd_cpu_omp(const AddLayerNormBwdArgs& a) {
  check_add_layernorm_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.h.dtype(), T, { bwd_omp<T>(a); });
}

std::vector<DType> float_dtypes() { return {DType::f32, DType::f64, DType::f16, DType::bf16}; }

}  // namespace

void add_layernorm_fwd(const AddLayerNormFwdArgs& a) {
  AIM_DISPATCH_OP(AddLayerNormFwdArgs, "add_layernorm_fwd", a);
}
void add_layernorm_bwd(const AddLayerNormBwdArgs& a) {
  AIM_DISPATCH_OP(AddLayerNormBwdArgs, "add_layernorm_bwd", a);
}

void register_add_layernorm_cpu(Registry& r) {
  auto& f = r.op<AddLayerNormFwdArgs>("add_layernorm_fwd");
  f.description = "h = x + bias + residual; y = layer_norm(h) (fused residual add + LayerNorm)";
  f.add({"cpu.ref", Backend::CPU, Provider::Own, add_layernorm_fwd_cpu_ref, float_dtypes()});
  f.add({"cpu.omp", Backend::CPU, Provider::Own, add_layernorm_fwd_cpu_omp, float_dtypes()});
  f.set_default(Backend::CPU, "cpu.omp");
  f.set_cost(add_layernorm_fwd_cost);
  f.make_case = add_layernorm_cpu::make_add_layernorm_fwd_case;
  f.set_shape_fields(add_layernorm_cpu::add_layernorm_shape_fields());
  f.add_test_shapes(add_layernorm_cpu::add_layernorm_test_shapes());
  f.tolerance = add_layernorm_cpu::add_layernorm_tolerance;
  f.small_enough_for_simt = add_layernorm_cpu::add_layernorm_simt_small;
  // h's dtype is part of the result: a 16-bit h is rounded before it is normalised, so the
  // reference runs in the case's dtype too (an f32 reference would normalise the unrounded sum).
  f.ref_uses_case_dtype = true;

  auto& b = r.op<AddLayerNormBwdArgs>("add_layernorm_bwd");
  b.description = "add_layernorm gradient: dh (=, for x and residual), dgamma, dbeta, dbias (+=)";
  b.add({"cpu.ref", Backend::CPU, Provider::Own, add_layernorm_bwd_cpu_ref, float_dtypes()});
  b.add({"cpu.omp", Backend::CPU, Provider::Own, add_layernorm_bwd_cpu_omp, float_dtypes()});
  b.set_default(Backend::CPU, "cpu.omp");
  b.set_cost(add_layernorm_bwd_cost);
  b.make_case = add_layernorm_cpu::make_add_layernorm_bwd_case;
  b.set_shape_fields(add_layernorm_cpu::add_layernorm_shape_fields());
  b.add_test_shapes(add_layernorm_cpu::add_layernorm_test_shapes());
  b.tolerance = add_layernorm_cpu::add_layernorm_tolerance;
  b.small_enough_for_simt = add_layernorm_cpu::add_layernorm_simt_small;
}

}  // namespace aim::kernels
