// bias_gelu_fwd, bias_gelu_bwd on the CPU.
// cpu.ref: the oracle. Plain loops; h = x + bias, gelu(h) and gelu'(h) in double through unary.h's
//   scalar math; dbias summed over rows in double; every output rounded once.
// cpu.omp: OpenMP over rows, h and gelu in f32 (f64 for f64) through the same scalar math, i.e.
//   libm's erf / tanh per element (not vectorised): where cpu.avx512 cannot run (f64, CPUs
//   without AVX-512).
// cpu.avx512 (f32, f16, bf16; the CPU default when the CPU has AVX-512): the same rows, 16 lanes
//   at a time with masked tails; f16/bf16 converted in registers; erf as a rational function and
//   exp as fast_expf's polynomial (kernels/fast_math_avx512.h); the tanh form as h·sigmoid(2u)
//   (= ½h(1 + tanh u), one exp and no cancellation in either tail).
// dbias (cpu.omp, cpu.avx512): per-chunk column sums of dx (before its rounding) over a fixed
//   number of row chunks, added in chunk order: deterministic, independent of the thread count.
// Test cases: bias_gelu_cases.cpp.
#include "kernels/elementwise/bias_gelu_cpu.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels/elementwise/bias_gelu.h"
#include "kernels/elementwise/loops_cpu.h"
#include "kernels/fast_math_avx512.h"
#include "kernels/matmul/gemm_avx512.h"
#include "kernels/registry.h"

namespace aim::kernels {

namespace {

void check_rows(const char* op, const char* name, const Tensor& t, const Tensor& x) {
  AIM_CHECK(t.defined() && t.sizes() == x.sizes() && t.dtype() == x.dtype() && t.is_contiguous(),
            "[", op, "] ", name, " must be contiguous ", to_string(x.sizes()), " ",
            dtype_name(x.dtype()), ", got ",
            t.defined() ? to_string(t.sizes()) + " " + dtype_name(t.dtype()) : "undefined");
}

void check_column(const char* op, const char* name, const Tensor& t, const Tensor& x) {
  const int64_t C = x.size(1);
  AIM_CHECK(t.sizes() == Shape{C} && t.dtype() == x.dtype() && t.is_contiguous(), "[", op, "] ",
            name, " must be contiguous [", C, "] ", dtype_name(x.dtype()), ", got ",
            to_string(t.sizes()), " ", dtype_name(t.dtype()));
}

}  // namespace

void check_bias_gelu_fwd_args(const BiasGeluFwdArgs& a) {
  AIM_CHECK(a.x.defined() && a.x.dim() == 2, "[bias_gelu_fwd] x must be [N, C], got ",
            a.x.defined() ? to_string(a.x.sizes()) : "undefined");
  AIM_CHECK(a.x.is_contiguous(), "[bias_gelu_fwd] x must be contiguous");
  AIM_CHECK(a.bias.defined(), "[bias_gelu_fwd] bias must be defined");
  check_column("bias_gelu_fwd", "bias", a.bias, a.x);
  check_rows("bias_gelu_fwd", "y", a.y, a.x);
}

void check_bias_gelu_bwd_args(const BiasGeluBwdArgs& a) {
  AIM_CHECK(a.x.defined() && a.x.dim() == 2, "[bias_gelu_bwd] x must be [N, C], got ",
            a.x.defined() ? to_string(a.x.sizes()) : "undefined");
  AIM_CHECK(a.x.is_contiguous(), "[bias_gelu_bwd] x must be contiguous");
  AIM_CHECK(a.bias.defined(), "[bias_gelu_bwd] bias must be defined");
  check_column("bias_gelu_bwd", "bias", a.bias, a.x);
  check_rows("bias_gelu_bwd", "dy", a.dy, a.x);
  check_rows("bias_gelu_bwd", "dx", a.dx, a.x);
  if (a.dbias.defined()) check_column("bias_gelu_bwd", "dbias", a.dbias, a.x);
}

namespace {

// ---- cpu.ref ---------------------------------------------------------------------------------

template <class T>
void fwd_ref(const BiasGeluFwdArgs& a) {
  const int64_t N = a.x.size(0), C = a.x.size(1);
  const UnaryKind k = bias_gelu_kind(a.tanh);
  const T* x = a.x.data<T>();
  const T* b = a.bias.data<T>();
  T* y = a.y.data<T>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      y[n * C + c] = T(unary_value<double>(k, double(x[n * C + c]) + double(b[c]), 0, 0));
}

template <class T>
void bwd_ref(const BiasGeluBwdArgs& a) {
  const int64_t N = a.x.size(0), C = a.x.size(1);
  const UnaryKind k = bias_gelu_kind(a.tanh);
  const T* x = a.x.data<T>();
  const T* b = a.bias.data<T>();
  const T* dy = a.dy.data<T>();
  T* dx = a.dx.data<T>();
  std::vector<double> db(size_t(C), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const double h = double(x[n * C + c]) + double(b[c]);
      const double d = unary_bwd_value<double>(k, double(dy[n * C + c]), h, 0, 0, 0);
      dx[n * C + c] = T(d);
      db[size_t(c)] += d;
    }
  if (a.dbias.defined())
    for (int64_t c = 0; c < C; ++c)
      a.dbias.data<T>()[c] = T(double(a.dbias.data<T>()[c]) + db[size_t(c)]);
}

void bias_gelu_fwd_cpu_ref(const BiasGeluFwdArgs& a) {
  check_bias_gelu_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { fwd_ref<T>(a); });
}

void bias_gelu_bwd_cpu_ref(const BiasGeluBwdArgs& a) {
  check_bias_gelu_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { bwd_ref<T>(a); });
}

// ---- the row drivers of cpu.omp and cpu.avx512 -------------------------------------------------

template <class T>
using AccOf = std::conditional_t<std::is_same_v<T, double>, double, float>;

// row(n) for every row, OpenMP over rows when the problem is large enough.
template <class Row>
void over_rows(int64_t N, int64_t C, const Row& row) {
#pragma omp parallel for schedule(static) if (N * C >= kEwParallelMin)
  for (int64_t n = 0; n < N; ++n) row(n);
}

// The backward's rows in a fixed number of chunks (independent of the thread count), OpenMP over
// chunks. rows(n0, n1, part) handles rows [n0, n1) and adds their dx column sums into part ([C],
// zeroed; null when dbias is not wanted); then dbias += the chunks' sums, added in chunk order.
template <class T, class Rows>
void over_row_chunks(const BiasGeluBwdArgs& a, const Rows& rows) {
  using A = AccOf<T>;
  const int64_t N = a.x.size(0), C = a.x.size(1);
  const bool sums = a.dbias.defined();
  const int64_t chunks = std::min<int64_t>(64, std::max<int64_t>(1, N / 16));
  const int64_t per_chunk = (N + chunks - 1) / chunks;
  const Tensor part = sums ? Tensor::empty({chunks, C}, dtype_of<A>()) : Tensor();
  A* p = sums ? part.data<A>() : nullptr;
#pragma omp parallel for schedule(static) if (N * C >= kEwParallelMin)
  for (int64_t k = 0; k < chunks; ++k) {
    A* pk = p ? p + k * C : nullptr;
    if (pk) std::fill(pk, pk + C, A(0));
    rows(k * per_chunk, std::min(N, (k + 1) * per_chunk), pk);
  }
  if (!sums) return;
  for (int64_t k = 1; k < chunks; ++k)
    for (int64_t c = 0; c < C; ++c) p[c] += p[k * C + c];
  T* db = a.dbias.data<T>();
  for (int64_t c = 0; c < C; ++c) db[c] = T(A(db[c]) + p[c]);
}

// ---- cpu.omp ---------------------------------------------------------------------------------

template <class T, UnaryKind K>
void fwd_omp(const BiasGeluFwdArgs& a) {
  using A = AccOf<T>;
  const int64_t N = a.x.size(0), C = a.x.size(1);
  const T* x = a.x.data<T>();
  const T* b = a.bias.data<T>();
  T* y = a.y.data<T>();
  over_rows(N, C, [&](int64_t n) {
    const T* xr = x + n * C;
    T* yr = y + n * C;
    for (int64_t c = 0; c < C; ++c) yr[c] = T(unary_value<A>(K, A(xr[c]) + A(b[c]), 0, 0));
  });
}

template <class T, UnaryKind K>
void bwd_omp(const BiasGeluBwdArgs& a) {
  using A = AccOf<T>;
  const int64_t C = a.x.size(1);
  const T* x = a.x.data<T>();
  const T* b = a.bias.data<T>();
  const T* dy = a.dy.data<T>();
  T* dx = a.dx.data<T>();
  over_row_chunks<T>(a, [&](int64_t n0, int64_t n1, A* part) {
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t c = 0; c < C; ++c) {
        const int64_t i = n * C + c;
        const A d = unary_bwd_value<A>(K, A(dy[i]), A(x[i]) + A(b[c]), 0, 0, 0);
        dx[i] = T(d);
        if (part) part[c] += d;
      }
  });
}

void bias_gelu_fwd_cpu_omp(const BiasGeluFwdArgs& a) {
  check_bias_gelu_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, {
    if (a.tanh)
      fwd_omp<T, UnaryKind::gelu_tanh>(a);
    else
      fwd_omp<T, UnaryKind::gelu_erf>(a);
  });
}

void bias_gelu_bwd_cpu_omp(const BiasGeluBwdArgs& a) {
  check_bias_gelu_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, {
    if (a.tanh)
      bwd_omp<T, UnaryKind::gelu_tanh>(a);
    else
      bwd_omp<T, UnaryKind::gelu_erf>(a);
  });
}

// ---- cpu.avx512 ------------------------------------------------------------------------------

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps() (`__m512 __Y = __Y;`), which
// -W(maybe-)uninitialized reports at every use (masked loads): a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma")

using avx512::lanes_below;
using avx512::load16;
using avx512::store16;

inline __m512 splat(float v) { return _mm512_set1_ps(v); }

// gelu(h), 16 lanes. Erf form: ½h(1 + erf(h/√2)); tanh form: h·sigmoid(2u), u = √(2/π)(h +
// 0.044715h³).
template <bool kTanh>
inline __m512 gelu16(__m512 h) {
  if constexpr (kTanh) {
    const __m512 u =
        _mm512_mul_ps(splat(0.79788456080286535588f),
                      _mm512_fmadd_ps(_mm512_mul_ps(splat(0.044715f), _mm512_mul_ps(h, h)), h, h));
    return _mm512_mul_ps(h, avx512::sigmoid16(_mm512_add_ps(u, u)));
  } else {
    const __m512 e = avx512::erf16(_mm512_mul_ps(h, splat(0.70710678118654752440f)));
    return _mm512_mul_ps(_mm512_mul_ps(h, splat(0.5f)), _mm512_add_ps(splat(1.0f), e));
  }
}

// gelu'(h), 16 lanes. Erf form: Φ(h) + h·φ(h). Tanh form, with e = exp(-2u) and s = 1/(1 + e) =
// ½(1 + tanh u): s + 2h·s(1 - s)·√(2/π)(1 + 3·0.044715h²), where s(1 - s) = e·s² (no cancellation).
template <bool kTanh>
inline __m512 gelu_grad16(__m512 h) {
  const __m512 h2 = _mm512_mul_ps(h, h);
  if constexpr (kTanh) {
    const __m512 kb = splat(0.79788456080286535588f);
    const __m512 u = _mm512_mul_ps(kb, _mm512_fmadd_ps(_mm512_mul_ps(splat(0.044715f), h2), h, h));
    const __m512 e = avx512::exp16(_mm512_mul_ps(splat(-2.0f), u));
    const __m512 s = _mm512_div_ps(splat(1.0f), _mm512_add_ps(splat(1.0f), e));
    const __m512 dinner = _mm512_mul_ps(kb, _mm512_fmadd_ps(splat(3 * 0.044715f), h2, splat(1.0f)));
    const __m512 ss = _mm512_mul_ps(_mm512_mul_ps(e, s), s);
    return _mm512_fmadd_ps(_mm512_mul_ps(_mm512_add_ps(h, h), ss), dinner, s);
  } else {
    const __m512 e = avx512::erf16(_mm512_mul_ps(h, splat(0.70710678118654752440f)));
    const __m512 cdf = _mm512_mul_ps(splat(0.5f), _mm512_add_ps(splat(1.0f), e));
    const __m512 pdf = _mm512_mul_ps(splat(0.39894228040143267794f),
                                     avx512::exp16(_mm512_mul_ps(splat(-0.5f), h2)));
    return _mm512_fmadd_ps(h, pdf, cdf);
  }
}

template <class T, bool kTanh>
void fwd_row_avx512(const T* x, const T* b, T* y, int64_t C) {
  for (int64_t c = 0; c < C; c += 16) {
    const __mmask16 k = lanes_below(c, C);
    const __m512 h = _mm512_add_ps(load16(x + c, k), load16(b + c, k));
    store16(y + c, k, gelu16<kTanh>(h));
  }
}

template <class T, bool kTanh>
void bwd_rows_avx512(const T* x, const T* b, const T* dy, T* dx, float* part, int64_t n0,
                     int64_t n1, int64_t C) {
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t c = 0; c < C; c += 16) {
      const __mmask16 k = lanes_below(c, C);
      const int64_t i = n * C + c;
      const __m512 h = _mm512_add_ps(load16(x + i, k), load16(b + c, k));
      const __m512 d = _mm512_mul_ps(load16(dy + i, k), gelu_grad16<kTanh>(h));
      store16(dx + i, k, d);
      if (part)
        _mm512_mask_storeu_ps(part + c, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, part + c), d));
    }
}

#pragma GCC pop_options
#pragma GCC diagnostic pop

std::string avx512_supports(const BiasGeluFwdArgs&) {
  return cpu_has_avx512() ? "" : "CPU lacks AVX-512";
}
std::string avx512_bwd_supports(const BiasGeluBwdArgs&) {
  return cpu_has_avx512() ? "" : "CPU lacks AVX-512";
}

template <class T, bool kTanh>
void fwd_avx512(const BiasGeluFwdArgs& a) {
  const int64_t N = a.x.size(0), C = a.x.size(1);
  const T* x = a.x.data<T>();
  const T* b = a.bias.data<T>();
  T* y = a.y.data<T>();
  over_rows(N, C, [&](int64_t n) { fwd_row_avx512<T, kTanh>(x + n * C, b, y + n * C, C); });
}

template <class T, bool kTanh>
void bwd_avx512(const BiasGeluBwdArgs& a) {
  const int64_t C = a.x.size(1);
  const T* x = a.x.data<T>();
  const T* b = a.bias.data<T>();
  const T* dy = a.dy.data<T>();
  T* dx = a.dx.data<T>();
  over_row_chunks<T>(a, [&](int64_t n0, int64_t n1, float* part) {
    bwd_rows_avx512<T, kTanh>(x, b, dy, dx, part, n0, n1, C);
  });
}

// f32, f16, bf16: the variant's dtypes (the registry refuses f64 before this runs).
template <class T>
void fwd_avx512_typed(const BiasGeluFwdArgs& a) {
  if constexpr (std::is_same_v<T, double>)
    AIM_FAIL("[bias_gelu_fwd] cpu.avx512 takes f32, f16, bf16, got f64");
  else if (a.tanh)
    fwd_avx512<T, true>(a);
  else
    fwd_avx512<T, false>(a);
}

template <class T>
void bwd_avx512_typed(const BiasGeluBwdArgs& a) {
  if constexpr (std::is_same_v<T, double>)
    AIM_FAIL("[bias_gelu_bwd] cpu.avx512 takes f32, f16, bf16, got f64");
  else if (a.tanh)
    bwd_avx512<T, true>(a);
  else
    bwd_avx512<T, false>(a);
}

void bias_gelu_fwd_cpu_avx512(const BiasGeluFwdArgs& a) {
  check_bias_gelu_fwd_args(a);
  AIM_CHECK(cpu_has_avx512(), "[bias_gelu_fwd] cpu.avx512: CPU lacks AVX-512");
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { fwd_avx512_typed<T>(a); });
}

void bias_gelu_bwd_cpu_avx512(const BiasGeluBwdArgs& a) {
  check_bias_gelu_bwd_args(a);
  AIM_CHECK(cpu_has_avx512(), "[bias_gelu_bwd] cpu.avx512: CPU lacks AVX-512");
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { bwd_avx512_typed<T>(a); });
}

std::vector<DType> float_dtypes() { return {DType::f32, DType::f64, DType::f16, DType::bf16}; }
std::vector<DType> avx512_dtypes() { return {DType::f32, DType::f16, DType::bf16}; }

}  // namespace

void bias_gelu_fwd(const BiasGeluFwdArgs& a) {
  AIM_DISPATCH_OP(BiasGeluFwdArgs, "bias_gelu_fwd", a);
}
void bias_gelu_bwd(const BiasGeluBwdArgs& a) {
  AIM_DISPATCH_OP(BiasGeluBwdArgs, "bias_gelu_bwd", a);
}

void register_bias_gelu_cpu(Registry& r) {
  const std::string fast = cpu_has_avx512() ? "cpu.avx512" : "cpu.omp";
  auto& f = r.op<BiasGeluFwdArgs>("bias_gelu_fwd");
  f.description = "y = gelu(x + bias), bias over rows (fused Linear bias + F.gelu, erf or tanh)";
  f.add({"cpu.ref", Backend::CPU, Provider::Own, bias_gelu_fwd_cpu_ref, float_dtypes()});
  f.add({"cpu.omp", Backend::CPU, Provider::Own, bias_gelu_fwd_cpu_omp, float_dtypes()});
  f.add({"cpu.avx512", Backend::CPU, Provider::Own, bias_gelu_fwd_cpu_avx512, avx512_dtypes(),
         avx512_supports});
  f.set_default(Backend::CPU, "cpu.omp");
  f.set_default(Backend::CPU, fast, {DType::f32, DType::f16, DType::bf16});
  f.set_cost(bias_gelu_fwd_cost);
  f.make_case = bias_gelu_cpu::make_bias_gelu_fwd_case;
  f.set_shape_fields(bias_gelu_cpu::bias_gelu_shape_fields());
  f.add_test_shapes(bias_gelu_cpu::bias_gelu_test_shapes());
  f.tolerance = bias_gelu_cpu::bias_gelu_tolerance;
  f.small_enough_for_simt = bias_gelu_cpu::bias_gelu_simt_small;

  auto& b = r.op<BiasGeluBwdArgs>("bias_gelu_bwd");
  b.description = "gradient of bias_gelu: dx = dy * gelu'(x + bias) (=), dbias (+=)";
  b.add({"cpu.ref", Backend::CPU, Provider::Own, bias_gelu_bwd_cpu_ref, float_dtypes()});
  b.add({"cpu.omp", Backend::CPU, Provider::Own, bias_gelu_bwd_cpu_omp, float_dtypes()});
  b.add({"cpu.avx512", Backend::CPU, Provider::Own, bias_gelu_bwd_cpu_avx512, avx512_dtypes(),
         avx512_bwd_supports});
  b.set_default(Backend::CPU, "cpu.omp");
  b.set_default(Backend::CPU, fast, {DType::f32, DType::f16, DType::bf16});
  b.set_cost(bias_gelu_bwd_cost);
  b.make_case = bias_gelu_cpu::make_bias_gelu_bwd_case;
  b.set_shape_fields(bias_gelu_cpu::bias_gelu_shape_fields());
  b.add_test_shapes(bias_gelu_cpu::bias_gelu_test_shapes());
  b.tolerance = bias_gelu_cpu::bias_gelu_tolerance;
  b.small_enough_for_simt = bias_gelu_cpu::bias_gelu_simt_small;
}

}  // namespace aim::kernels
