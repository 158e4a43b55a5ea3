// The Philox draws the data sources share (tensor/philox.h: one counter-based stream per key):
// a 64-bit key derived from (seed, tag), sequential 32-bit words of one stream, and a fill of
// standard normals. The synthetic sources and samplers derive their keys and draw here, so equal
// (seed, tag, block) give equal numbers in every source.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tensor/philox.h"

namespace aim::data {

// The key of the independent stream `tag` under `seed`: words x (high) and y (low) of Philox
// block `tag`.
inline uint64_t philox_key(uint64_t seed, uint64_t tag) {
  const philox::U4 w = philox::block_words(seed, tag);
  return (uint64_t(w.x) << 32) | w.y;
}

// Sequential 32-bit words of one Philox stream (key, first block): the four words of a block in
// order, then the next block.
class PhiloxDraw {
 public:
  PhiloxDraw(uint64_t key, uint64_t block) : key_(key), block_(block) {}
  uint32_t word() {
    if (lane_ == 4) {
      w_ = philox::block_words(key_, block_++);
      lane_ = 0;
    }
    return philox::word(w_, lane_++);
  }
  int64_t below(int64_t n) { return int64_t((uint64_t(word()) * uint64_t(n)) >> 32); }  // [0, n)
  double unit() { return double(word()) * (1.0 / 4294967296.0); }                       // [0, 1)

 private:
  uint64_t key_, block_;
  philox::U4 w_{0, 0, 0, 0};
  int lane_ = 4;
};

// Standard normals of Philox counter blocks [block, block + ceil(n / 4)) into out[0, n): element
// e equals philox::normal(key, block, e) up to float rounding of the transform (computed in float
// here for speed: Box-Muller on the word pairs (0, 1) and (2, 3), cosine to even lanes).
inline void philox_fill_normal(uint64_t key, uint64_t block, int64_t n, float* out) {
  constexpr float kTwoPi = 6.283185307179586f, kUnit = 1.0f / 16777216.0f;
  for (int64_t e = 0; e < n; e += 4, ++block) {
    const philox::U4 w = philox::block_words(key, block);
    const float r0 = std::sqrt(-2.0f * std::log((float(w.x >> 8) + 1.0f) * kUnit));
    const float r1 = std::sqrt(-2.0f * std::log((float(w.z >> 8) + 1.0f) * kUnit));
    const float t0 = kTwoPi * (float(w.y >> 8) * kUnit), t1 = kTwoPi * (float(w.w >> 8) * kUnit);
    const float v[4] = {r0 * std::cos(t0), r0 * std::sin(t0), r1 * std::cos(t1), r1 * std::sin(t1)};
    const int64_t m = std::min<int64_t>(4, n - e);
    for (int64_t k = 0; k < m; ++k) out[e + k] = v[k];
  }
}

}  // namespace aim::data
