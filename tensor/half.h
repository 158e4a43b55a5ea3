// Host-side 16-bit float types. Storage-compatible with CUDA's __half / __nv_bfloat16 (same bits),
// so a tensor's bytes move between host and device unchanged. Arithmetic goes through float.
#pragma once
#include <cstdint>
#include <cstring>

namespace aim {

// Forced inline: g++ -O2 otherwise calls the conversions out of line inside the kernels' loops,
// which then cannot vectorise.
#if defined(__GNUC__)
#define AIM_HALF_ALWAYS __attribute__((always_inline))
#else
#define AIM_HALF_ALWAYS
#endif
#define AIM_HALF_INLINE inline AIM_HALF_ALWAYS

AIM_HALF_INLINE uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
AIM_HALF_INLINE float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE binary16, round to nearest even (what F16C's vcvtps2ph with imm 0 and CUDA's __float2half
// do); NaN -> 0x7e00 with the sign. Every case is computed and one selected, no branch: g++
// vectorises loops over Half values (a branch per value made f16 batch norm and relu passes 5-13x
// slower than f32's). Exhaustively equal to the branching form (tests/tensor/test_half.cpp).
AIM_HALF_INLINE uint16_t float_to_half_bits(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  // Normal in half: rebias the exponent (-112 << 23) and round at bit 13, ties to even.
  const uint32_t normal = (ax + 0xc8000fffu + ((ax >> 13) & 1u)) >> 13;
  // Subnormal or zero in half (ax < 2^-14): adding 0.5 (as float) lets the FPU's
  // round-to-nearest-even round at 2^-24 (float subnormals, flushed or not, give 0).
  const uint32_t sub = float_bits(bits_float(ax) + 0.5f) - 0x3f000000u;
  uint32_t r = ax < 0x38800000u ? sub : normal;
  r = ax >= 0x477ff000u ? 0x7c00u : r;  // rounds to >= 65520: inf (and inf itself)
  r = ax > 0x7f800000u ? 0x7e00u : r;   // NaN
  return uint16_t(sign | r);
}

// Exact; NaN keeps its payload. Branch-free as float_to_half_bits.
AIM_HALF_INLINE float half_bits_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;  // exponent and mantissa
  // Subnormal or zero: mant * 2^-24, a normal float (so flushing denormals does not touch it).
  const uint32_t sub = float_bits(float(int32_t(em)) * (1.0f / 16777216.0f));
  uint32_t r = (em << 13) + 0x38000000u;    // normal: rebias the exponent (+112 << 23)
  r = em >= 0x7c00u ? r + 0x38000000u : r;  // inf / NaN: exponent all ones
  r = em < 0x400u ? sub : r;
  return bits_float(sign | r);
}

// bfloat16: the top half of a float, rounded to nearest even; NaN stays NaN.
AIM_HALF_INLINE uint16_t float_to_bf16_bits(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
AIM_HALF_INLINE float bf16_bits_to_float(uint16_t b) { return bits_float(uint32_t(b) << 16); }

struct Half {
  uint16_t bits = 0;
  Half() = default;
  AIM_HALF_ALWAYS Half(float f)
      : bits(float_to_half_bits(f)) {}  // NOLINT: implicit like CUDA's __half
  Half(double d) : Half(float(d)) {}
  Half(int i) : Half(float(i)) {}
  AIM_HALF_ALWAYS operator float() const { return half_bits_to_float(bits); }
  static Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
};

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  AIM_HALF_ALWAYS BFloat16(float f) : bits(float_to_bf16_bits(f)) {}  // NOLINT
  BFloat16(double d) : BFloat16(float(d)) {}
  BFloat16(int i) : BFloat16(float(i)) {}
  AIM_HALF_ALWAYS operator float() const { return bf16_bits_to_float(bits); }
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
