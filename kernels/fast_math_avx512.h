// 16-lane AVX-512 forms of the float math the CPU's fused elementwise kernels need: exp
// (fast_expf's range reduction and polynomial, kernels/fast_math.h), erf (a rational function),
// sigmoid, masked loads and stores that convert f16/bf16 <-> f32 in registers, and the tail mask.
//
// The functions are compiled for AVX-512 whatever the including file's flags (the target pragma
// below); they inline into callers compiled the same way (a `#pragma GCC target("avx512f,
// avx512bw,avx512dq,avx512vl,fma")` region) and may run only when cpu_has_avx512()
// (kernels/matmul/gemm_avx512.h) is true. The attention kernels (attention_flash_cpu.cpp) use
// exp16 and lanes_below from here too.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "tensor/half.h"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps() (`__m512 __Y = __Y;`), which
// -W(maybe-)uninitialized reports at every use: a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma")

namespace aim::kernels::avx512 {

// Lanes c0 + [0, 16) below n.
inline __mmask16 lanes_below(int64_t c0, int64_t n) {
  const int64_t k = n - c0;
  return k >= 16 ? __mmask16(0xffff) : k <= 0 ? __mmask16(0) : __mmask16((1u << k) - 1u);
}

// e^x: fast_expf's Cody-Waite reduction and degree-6 polynomial, 2^n by scalef; ~2 ulp. Inputs are
// clamped to [-87, 88] as there (a NaN input gives a finite value: callers that must propagate NaN
// multiply by their input).
inline __m512 exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
  const __m512 n = _mm512_roundscale_ps(
      _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f)),
      _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

// 1 / (1 + e^-x).
inline __m512 sigmoid16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(one, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

// erf(x) = x P(x²) / Q(x²) on [-4, 4], ±1 beyond (erf(4) = 1 - 1.5e-8 is 1 in f32). P (degree 6)
// and Q (degree 5) were fitted for aim by iteratively reweighted least squares against mpmath's
// erf (a near-minimax fit: 1.5e-9 in exact arithmetic); evaluated in f32 the absolute error is
// below 3.3e-7 everywhere (kernels/elementwise/README.md, "bias_gelu"). NaN gives -1.
inline __m512 erf16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-4.0f)), _mm512_set1_ps(4.0f));
  const __m512 s = _mm512_mul_ps(x, x);
  __m512 p = _mm512_set1_ps(-1.3667215803536692e-08f);
  p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(4.780607014254201e-06f));
  p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(3.8269837386906147e-04f));
  p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(3.839657874777913e-03f));
  p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(5.433304235339165e-02f));
  p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(1.8471309542655945e-01f));
  p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(1.128379225730896f));
  __m512 q = _mm512_set1_ps(6.401005521183833e-05f);
  q = _mm512_fmadd_ps(q, s, _mm512_set1_ps(1.3096146285533905e-03f));
  q = _mm512_fmadd_ps(q, s, _mm512_set1_ps(1.5453786589205265e-02f));
  q = _mm512_fmadd_ps(q, s, _mm512_set1_ps(1.1382751911878586e-01f));
  q = _mm512_fmadd_ps(q, s, _mm512_set1_ps(4.970312714576721e-01f));
  q = _mm512_fmadd_ps(q, s, _mm512_set1_ps(1.0f));
  return _mm512_div_ps(_mm512_mul_ps(x, p), q);
}

// Masked loads of 16 elements as f32 (lanes outside the mask read nothing and are 0), and masked
// stores from f32 rounded to the element type exactly as tensor/half.h rounds (nearest even).
inline __m512 load16(const float* p, __mmask16 k) { return _mm512_maskz_loadu_ps(k, p); }
inline __m512 load16(const Half* p, __mmask16 k) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, p));
}
inline __m512 load16(const BFloat16* p, __mmask16 k) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
inline void store16(float* p, __mmask16 k, __m512 v) { _mm512_mask_storeu_ps(p, k, v); }
inline void store16(Half* p, __mmask16 k, __m512 v) {
  _mm256_mask_storeu_epi16(p, k, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
// float_to_bf16_bits: add 0x7fff plus the lowest kept bit (nearest even), NaN made quiet.
inline void store16(BFloat16* p, __mmask16 k, __m512 v) {
  const __m512i x = _mm512_castps_si512(v);
  const __m512i hi = _mm512_srli_epi32(x, 16);
  const __m512i odd = _mm512_and_si512(hi, _mm512_set1_epi32(1));
  __m512i r =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), odd), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
  _mm256_mask_storeu_epi16(p, k, _mm512_cvtepi32_epi16(r));
}

}  // namespace aim::kernels::avx512

#pragma GCC pop_options
#pragma GCC diagnostic pop
