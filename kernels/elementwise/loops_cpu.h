// The CPU loop engine of the elementwise family (cpu.omp variants of unary, unary_bwd, binary,
// where). It splits the flat output range into one contiguous chunk per OpenMP thread (static
// schedule; serial below kEwParallelMin elements), walks each chunk row by row over the merged
// layout (layout.h) and hands every row segment to the op's inner-loop functor, which writes a
// contiguous destination and specialises its loops on the inputs' inner strides (1: plain
// vectorisable loop, 0: broadcast value, other: strided). Outputs with a non-unit inner stride go
// through a small buffer. Outputs much larger than the caches are written with non-temporal
// (streaming) stores: the functor writes an L1-resident buffer that is streamed out, which saves
// the read-for-ownership of every output line (STREAM triad: ~67 GB/s normal, ~83 GB/s streamed).
//
// Functor interface: `void operator()(Out* dst, const int64_t* in_offset, const int64_t*
// in_stride, int64_t m) const` computes dst[k] for k < m from input j at element
// in_offset[j] + k * in_stride[j].
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/elementwise/layout.h"

#if defined(__AVX__) || defined(__SSE2__)
#include <immintrin.h>
#define AIM_EW_CAN_STREAM 1
#else
#define AIM_EW_CAN_STREAM 0
#endif

namespace aim::kernels {

constexpr int64_t kEwParallelMin = 32768;             // elements; below: one thread
constexpr int64_t kEwStreamBytes = int64_t(8) << 20;  // output bytes from which stores stream
constexpr int kEwMaxInputs = 3;

// The shared L3 (32 MiB, MACHINE.md). An output larger than it, written once, has left the caches
// before the next op reads it: writing it with non-temporal stores costs that op nothing and saves
// the read for ownership of every line (batch norm's outputs, the convolutions' GEMMs).
constexpr int64_t kL3Bytes = int64_t(32) << 20;
inline bool beyond_l3(int64_t bytes) { return bytes >= kL3Bytes; }

namespace ew_detail {

constexpr size_t kBufBytes = 2048;  // L1-resident staging buffer

// dst (aligned) and bytes are multiples of the store width (32 bytes); src may be unaligned.
inline void stream_bytes(void* dst, const void* src, size_t bytes) {
#if defined(__AVX__)
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  for (size_t i = 0; i < bytes; i += 32)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
#elif AIM_EW_CAN_STREAM
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  for (size_t i = 0; i < bytes; i += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
#else
  std::memcpy(dst, src, bytes);
#endif
}

inline void stream_fence() {
#if AIM_EW_CAN_STREAM
  _mm_sfence();
#endif
}

inline void advance(int64_t* off, const int64_t* st, int nin, int64_t by) {
  for (int j = 0; j < nin; ++j) off[j] += by * st[j];
}

// Writes dst[0, m) through fill(out, i, c), called for consecutive pieces in order, each writing
// values i..i+c-1 to out[0, c): straight into dst, or (stream) into an L1-resident buffer streamed
// out in whole 32-byte units (the head up to 32-byte alignment and the tail stored normally).
// Short rows stream too (a broadcast [B, T, H] * [B, 1, H] has rows of H = 128 floats): the
// read-for-ownership saved is the same per byte; only rows under 256 bytes are not worth it.
template <class Out, class F>
void write_rows(Out* dst, int64_t m, bool stream, const F& fill) {
  if (!stream || m * int64_t(sizeof(Out)) < 256 ||
      reinterpret_cast<uintptr_t>(dst) % sizeof(Out) != 0) {
    fill(dst, 0, m);
    return;
  }
  constexpr int64_t kBuf = int64_t(kBufBytes / sizeof(Out));
  alignas(64) unsigned char raw[kBufBytes];  // raw: no per-call construction of 16-bit types
  Out* buf = reinterpret_cast<Out*>(raw);
  const int64_t mis = int64_t(reinterpret_cast<uintptr_t>(dst) % 32);
  const int64_t head = std::min(m, mis ? (32 - mis) / int64_t(sizeof(Out)) : 0);
  if (head) fill(dst, 0, head);
  int64_t i = head;
  for (; i + kBuf <= m; i += kBuf) {
    fill(buf, i, kBuf);
    stream_bytes(dst + i, buf, kBufBytes);
  }
  const int64_t c = (m - i) * int64_t(sizeof(Out)) / 32 * 32 / int64_t(sizeof(Out));
  if (c > 0) {
    fill(buf, i, c);
    stream_bytes(dst + i, buf, size_t(c) * sizeof(Out));
    i += c;
  }
  if (i < m) fill(dst + i, i, m - i);
}

// One row segment of m elements: dst (stride ys), inputs at off with strides st.
template <class Out, class K>
void segment(const K& k, int nin, Out* dst, int64_t ys, int64_t* off, const int64_t* st, int64_t m,
             bool stream) {
  if (ys != 1) {  // strided output: compute into the buffer, scatter
    constexpr int64_t kBuf = int64_t(kBufBytes / sizeof(Out));
    alignas(64) unsigned char raw[kBufBytes];
    Out* buf = reinterpret_cast<Out*>(raw);
    for (int64_t i = 0; i < m; i += kBuf) {
      const int64_t c = std::min(kBuf, m - i);
      k(buf, off, st, c);
      for (int64_t t = 0; t < c; ++t) dst[(i + t) * ys] = buf[t];
      advance(off, st, nin, c);
    }
    return;
  }
  write_rows(dst, m, stream, [&](Out* out, int64_t, int64_t c) {
    k(out, off, st, c);
    advance(off, st, nin, c);
  });
}

// Elements [lo, hi) of the flat output index.
template <class Out, class K>
void range(const EwLayout& l, Out* y, const K& k, int nin, int64_t lo, int64_t hi, bool stream) {
  const int r = l.ndim();
  const int64_t inner = l.inner();
  int64_t st[kEwMaxInputs];
  for (int j = 0; j < nin; ++j) st[j] = l.stride(j + 1, r - 1);
  for (int64_t i = lo; i < hi;) {
    const int64_t m = std::min(inner - i % inner, hi - i);
    int64_t off[kEwMaxInputs + 1] = {0, 0, 0, 0};
    int64_t rem = i;
    for (int d = r - 1; d >= 0; --d) {
      const int64_t idx = rem % l.sizes[size_t(d)];
      rem /= l.sizes[size_t(d)];
      for (int o = 0; o <= nin; ++o) off[o] += idx * l.stride(o, d);
    }
    segment(k, nin, y + off[0], l.stride(0, r - 1), off + 1, st, m, stream);
    i += m;
  }
  if (stream) stream_fence();
}

}  // namespace ew_detail

// Runs functor k over the whole layout (nin inputs) writing y (the output's first element).
template <class Out, class K>
void ew_cpu_run(const EwLayout& l, Out* y, int nin, const K& k) {
  const int64_t n = l.numel;
  if (n == 0) return;
  const bool stream = AIM_EW_CAN_STREAM && n * int64_t(sizeof(Out)) >= kEwStreamBytes;
  if (n < kEwParallelMin) {
    ew_detail::range(l, y, k, nin, 0, n, false);
    return;
  }
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t chunk = ((n + nt - 1) / nt + 63) & ~int64_t(63);  // whole cache lines per thread
    const int64_t lo = std::min(n, t * chunk), hi = std::min(n, lo + chunk);
    ew_detail::range(l, y, k, nin, lo, hi, stream);
  }
}

}  // namespace aim::kernels
