// How the CPU convolution variants (cpu.im2col, cpu.winograd) spread blocks of images over the
// OpenMP team, and their per-thread scratch buffers. Internal to kernels/conv.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace aim::kernels::conv_cpu {

// Whether the blocks run over the team (each GEMM inside then single-threaded) rather than one
// after another with the GEMMs (and transforms) using the team. `ordered` (the *_ordered filter
// gradient variants, --deterministic): always one after another.
inline bool blocks_parallel(int64_t blocks, bool ordered = false) {
  const int nt = omp_get_max_threads();
  return !ordered && nt > 1 && blocks >= nt && !omp_in_parallel();
}

// Runs body(b, tid) for every block b: over the team when blocks_parallel, else in order (tid 0).
template <class F>
void for_blocks(int64_t blocks, bool ordered, F&& body) {
  if (blocks_parallel(blocks, ordered)) {
#pragma omp parallel
    {
      const int tid = omp_get_thread_num();
#pragma omp for schedule(static)
      for (int64_t b = 0; b < blocks; ++b) body(b, tid);
    }
  } else {
    for (int64_t b = 0; b < blocks; ++b) body(b, 0);
  }
}
template <class F>
void for_blocks(int64_t blocks, F&& body) {
  for_blocks(blocks, false, std::forward<F>(body));
}

// Images per block for blocks of at most `most` images: the fewest blocks that are a multiple of
// the team size nt, with the images spread evenly over them (64 images, at most 20 per block, 2
// threads: 4 blocks of 16, not 20 + 20 + 20 + 4, which left one thread 40 images and the other 24).
inline int64_t balanced_images(int64_t N, int64_t most, int nt) {
  int64_t blocks = (N + most - 1) / std::max<int64_t>(1, most);
  blocks = (blocks + nt - 1) / nt * nt;
  return std::max<int64_t>(1, (N + blocks - 1) / blocks);
}

// Per-thread buffers (slots 0..3) that only grow: first touch paid once per thread (MACHINE.md
// lesson 1), no allocation in steady state.
inline float* thread_buffer(int slot, size_t n) {
  thread_local std::vector<float> buf[4];
  if (buf[slot].size() < n) buf[slot].resize(n);
  return buf[slot].data();
}

}  // namespace aim::kernels::conv_cpu
