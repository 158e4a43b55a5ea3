// Host-side 16-bit float types. Storage-compatible with CUDA's __half / __nv_bfloat16 (same bits),
// so a tensor's bytes move between host and device unchanged. Arithmetic goes through float.
#pragma once
#include <cstdint>
#include <cstring>

namespace aim {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE binary16, round to nearest even (what F16C's vcvtps2ph with imm 0 and CUDA's __float2half
// do).
inline uint16_t float_to_half_bits(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return uint16_t(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520 -> inf
  if (ax < 0x38800000u) {                                  // subnormal or zero in half
    // Add 0.5 (as float) so the FPU's round-to-nearest-even does the rounding at 2^-24.
    const float r = bits_float(ax) + 0.5f;
    return uint16_t(sign | (float_bits(r) - 0x3f000000u));
  }
  const uint32_t mant_odd = (ax >> 13) & 1u;
  const uint32_t v = ax + 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round
  return uint16_t(sign | (v >> 13));
}

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    const float m = float(mant) * (1.0f / 16777216.0f);  // mant * 2^-24
    return sign ? -m : m;
  }
  return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}

// bfloat16: the top half of a float, rounded to nearest even; NaN stays NaN.
inline uint16_t float_to_bf16_bits(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
inline float bf16_bits_to_float(uint16_t b) { return bits_float(uint32_t(b) << 16); }

struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f) : bits(float_to_half_bits(f)) {}  // NOLINT: implicit like CUDA's __half
  Half(double d) : Half(float(d)) {}
  Half(int i) : Half(float(i)) {}
  operator float() const { return half_bits_to_float(bits); }
  static Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
};

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) : bits(float_to_bf16_bits(f)) {}  // NOLINT
  BFloat16(double d) : BFloat16(float(d)) {}
  BFloat16(int i) : BFloat16(float(i)) {}
  operator float() const { return bf16_bits_to_float(bits); }
  static BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
};

// Bulk conversions; use F16C / AVX-512 BF16 instructions when the CPU has them.
void convert_f32_to_f16(const float* src, Half* dst, int64_t n);
void convert_f16_to_f32(const Half* src, float* dst, int64_t n);
void convert_f32_to_bf16(const float* src, BFloat16* dst, int64_t n);
void convert_bf16_to_f32(const BFloat16* src, float* dst, int64_t n);

}  // namespace aim
