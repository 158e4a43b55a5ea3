// Philox-4x32-10 counter-based RNG (Salmon et al., SC'11). Element i of a random fill with
// (seed, offset) uses counter block (offset + i / 4) and output word i % 4, so every element's
// number is a pure function of (seed, offset, i): CPU and CUDA give identical streams, and
// parallel kernels need no state. Compiles for host, CUDA and the SIMT emulator.
#pragma once
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define AIM_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define AIM_HOST_DEVICE inline
#endif

namespace aim::philox {

struct U4 {
  uint32_t x, y, z, w;
};

AIM_HOST_DEVICE uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
  const uint64_t p = uint64_t(a) * uint64_t(b);
  *hi = uint32_t(p >> 32);
  return uint32_t(p);
}

AIM_HOST_DEVICE U4 philox4x32(U4 c, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    const uint32_t lo0 = mulhilo(0xD2511F53u, c.x, &hi0);
    const uint32_t lo1 = mulhilo(0xCD9E8D57u, c.z, &hi1);
    c = U4{hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

// The 4 random words of counter block `block` for `seed`.
AIM_HOST_DEVICE U4 block_words(uint64_t seed, uint64_t block) {
  return philox4x32(U4{uint32_t(block), uint32_t(block >> 32), 0u, 0u}, uint32_t(seed),
                    uint32_t(seed >> 32));
}

AIM_HOST_DEVICE uint32_t word(const U4& w, int lane) {
  return lane == 0 ? w.x : lane == 1 ? w.y : lane == 2 ? w.z : w.w;
}

// Uniform in [0, 1) with 24 random bits (exactly representable in float).
AIM_HOST_DEVICE float to_unit(uint32_t u) { return float(u >> 8) * (1.0f / 16777216.0f); }

// Element i of a uniform [0,1) stream.
AIM_HOST_DEVICE float uniform(uint64_t seed, uint64_t offset, uint64_t i) {
  return to_unit(word(block_words(seed, offset + i / 4), int(i % 4)));
}

// Element i of a standard normal stream: Box-Muller on word pairs (0,1) and (2,3) of a block;
// even lanes take the cosine, odd lanes the sine. Computed in double so CPU and GPU agree to
// the last float bit after rounding (the GPU path also uses double).
AIM_HOST_DEVICE float normal(uint64_t seed, uint64_t offset, uint64_t i) {
  const U4 w = block_words(seed, offset + i / 4);
  const int lane = int(i % 4);
  const int pair = lane / 2;
  // u1 in (0, 1]: avoid log(0).
  const double u1 = (double((pair ? w.z : w.x) >> 8) + 1.0) * (1.0 / 16777216.0);
  const double u2 = double((pair ? w.w : w.y) >> 8) * (1.0 / 16777216.0);
  const double r = sqrt(-2.0 * log(u1));
  const double theta = 6.283185307179586 * u2;
  return float((lane % 2) ? r * sin(theta) : r * cos(theta));
}

// Number of counter blocks a fill of n elements consumes (advance the offset by this).
AIM_HOST_DEVICE uint64_t blocks_for(uint64_t n) { return (n + 3) / 4; }

}  // namespace aim::philox
