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

TEST(Half, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(bits_float(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(float_to_bf16_bits(bits_float(0x3f818000u)), 0x3f82);  // tie -> even (up)
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(NAN))));
}

}  // namespace aim
