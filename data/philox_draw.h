// The Philox draws the data sources share (tensor/philox.h: one counter-based stream per key):
// a 64-bit key derived from (seed, tag), and sequential 32-bit words of one stream. Every
// synthetic source and sampler derives its keys and draws its words here, so equal (seed, tag,
// block) give equal numbers in every source.
#pragma once
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

}  // namespace aim::data
