// exp and log in float for the CPU's vectorised loops: branch- and call-free, so GCC vectorises
// the loop around them (a libm call per element made sigmoid the second most expensive op of DIN
// and the transcendentals most of a DIEN-sized rnn step). Used by unary (sigmoid, exp), rnn
// (gates) and ctc (log-sum-exp).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "tensor/half.h"  // AIM_HALF_INLINE: the project's forced-inline macro

namespace aim::kernels {

// x = n ln2 + r with |r| <= ln2/2 (Cody-Waite, two-part ln2), a degree-6 polynomial for e^r
// (Cephes expf coefficients), 2^n from the exponent bits. Max relative error ~2 ulp on
// [-87, 88]; inputs are clamped there (e^-87 ~ 1.6e-38, the float normal range: exp(-inf) gives
// 1.6e-38, not 0, which only matters beside a term >= 1).
// Forced inline (AIM_HALF_INLINE, as the f16 conversions): GCC had left it an out-of-line call
// inside the elementwise functors' loops, which kept them scalar: DIN's sigmoids ran at 1.5 ns per
// value.
AIM_HALF_INLINE float fast_expf(float x) {
  x = x < -87.0f ? -87.0f : x;  // selects, not std::min/max: they vectorise (-fno-trapping-math)
  x = x > 88.0f ? 88.0f : x;
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // NaN x gives NaN n, whose int conversion is undefined, and a negative shifted left is too
  // (UBSan, Trainer.NanLossStopsNamingTheStep): n is 0 for NaN (p is NaN, so is the result) and
  // the exponent is shifted unsigned.
  const float nn = n == n ? n : 0.0f;
  const uint32_t bits = uint32_t(int32_t(nn) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// Cephes logf: x = m 2^e with m in [sqrt(1/2), sqrt(2)), a degree-9 polynomial in m - 1; ~2 ulp
// for positive normal x (all a log-sum-exp needs).
AIM_HALF_INLINE float fast_logf(float x) {
  int32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  float e = float(((bits >> 23) & 0xff) - 126);  // x = m 2^e, m in [0.5, 1)
  bits = (bits & 0x007fffff) | 0x3f000000;
  float m;
  std::memcpy(&m, &bits, sizeof m);
  const bool low = m < 0.707106781186547524f;
  e = low ? e - 1.0f : e;
  m = low ? m + m - 1.0f : m - 1.0f;
  const float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  y += -2.12194440e-4f * e;
  y += -0.5f * z;
  return m + y + 0.693359375f * e;
}

}  // namespace aim::kernels
