#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>

#include "tensor/half.h"

namespace aim {

// Every f16 value round-trips exactly; f32 -> f16 rounds to nearest even (checked against F16C on
// a sweep of bit patterns when the CPU has it).
TEST(Half, AllHalfValuesRoundTrip) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = half_bits_to_float(uint16_t(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half_bits(f), b) << b;
  }
}

__attribute__((target("f16c"))) uint16_t f16c(float f) {
  return uint16_t(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

TEST(Half, MatchesF16CRounding) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "CPU lacks F16C";
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 4099) {
    const float f = bits_float(uint32_t(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half_bits(f), f16c(f)) << std::hex << b;
  }
}

// The branching definitions the branch-free ones in half.h replaced, as the reference.
uint16_t float_to_half_bits_branching(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return uint16_t(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00u);
  if (ax < 0x38800000u) return uint16_t(sign | (float_bits(bits_float(ax) + 0.5f) - 0x3f000000u));
  return uint16_t(sign | ((ax + 0xc8000fffu + ((ax >> 13) & 1u)) >> 13));
}

float half_bits_to_float_branching(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    const float m = float(mant) * (1.0f / 16777216.0f);
    return sign ? -m : m;
  }
  return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}

// Every f16 value and every 7th f32 bit pattern (NaNs, infinities, subnormals, ties included),
// with denormals as the CPU runs them by default and flushed (as aim-train sets them).
TEST(Half, BranchFreeEqualsBranching) {
  for (bool flush : {false, true}) {
    const unsigned csr = _mm_getcsr();
    if (flush) _mm_setcsr(csr | 0x8040u);  // FTZ | DAZ
    for (uint32_t b = 0; b < 65536; ++b)
      ASSERT_EQ(float_bits(half_bits_to_float(uint16_t(b))),
                float_bits(half_bits_to_float_branching(uint16_t(b))))
          << std::hex << b;
    for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 7) {
      const float f = bits_float(uint32_t(b));
      ASSERT_EQ(float_to_half_bits(f), float_to_half_bits_branching(f)) << std::hex << b;
    }
    _mm_setcsr(csr);
  }
}

TEST(Half, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(bits_float(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(float_to_bf16_bits(bits_float(0x3f818000u)), 0x3f82);  // tie -> even (up)
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(NAN))));
}

}  // namespace aim
