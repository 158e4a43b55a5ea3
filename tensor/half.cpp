// Bulk f16/bf16 conversions. F16C (and AVX-512 BF16 for f32 -> bf16) when the CPU has them,
// chosen at run time so the binary still runs elsewhere; portable loops otherwise.
#include "tensor/half.h"

#include <immintrin.h>

#include <algorithm>

namespace aim {
namespace {

bool has_f16c() {
#if defined(__F16C__) && defined(__AVX2__)
  return true;  // the build's -march has them (x86-64-v3; clang has no "f16c" for the builtin)
#else
  static const bool yes = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2");
  return yes;
#endif
}

__attribute__((target("f16c,avx2"))) void f32_to_f16_f16c(const float* s, Half* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), h);
  }
  for (; i < n; ++i) d[i] = Half(s[i]);
}

__attribute__((target("f16c,avx2"))) void f16_to_f32_f16c(const Half* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  for (; i < n; ++i) d[i] = float(s[i]);
}

}  // namespace

void convert_f32_to_f16(const float* src, Half* dst, int64_t n) {
  if (has_f16c()) {
#pragma omp parallel for schedule(static) if (n > (int64_t(1) << 18))
    for (int64_t b = 0; b < n; b += 65536)
      f32_to_f16_f16c(src + b, dst + b, std::min<int64_t>(65536, n - b));
    return;
  }
  for (int64_t i = 0; i < n; ++i) dst[i] = Half(src[i]);
}

void convert_f16_to_f32(const Half* src, float* dst, int64_t n) {
  if (has_f16c()) {
#pragma omp parallel for schedule(static) if (n > (int64_t(1) << 18))
    for (int64_t b = 0; b < n; b += 65536)
      f16_to_f32_f16c(src + b, dst + b, std::min<int64_t>(65536, n - b));
    return;
  }
  for (int64_t i = 0; i < n; ++i) dst[i] = float(src[i]);
}

void convert_f32_to_bf16(const float* src, BFloat16* dst, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (int64_t(1) << 18))
  for (int64_t i = 0; i < n; ++i) dst[i] = BFloat16(src[i]);
}

void convert_bf16_to_f32(const BFloat16* src, float* dst, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (int64_t(1) << 18))
  for (int64_t i = 0; i < n; ++i) dst[i] = float(src[i]);
}

}  // namespace aim
