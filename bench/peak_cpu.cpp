// Compiled with AVX-512 flags (CMake); the AVX-512 loop runs only when the CPU has AVX-512.
#include "bench/peak_cpu.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "tensor/tensor.h"

namespace aim::bench {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// 12 independent accumulators hide the FMA latency (4 cycles x 2-3 pipes).
__attribute__((target("avx512f"))) float fma_loop_avx512(int64_t iters) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(float(i) * 1e-3f);
  const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, a);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  alignas(64) float out[16];  // (_mm512_reduce_add_ps warns inside GCC 12's own header)
  _mm512_store_ps(out, s);
  return out[0] + out[15];
}

__attribute__((target("avx2,fma"))) float fma_loop_avx2(int64_t iters) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(float(i) * 1e-3f);
  const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, a);
  }
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[7];
}

__attribute__((target("avx512f"))) double fma_loop_avx512_f64(int64_t iters) {
  __m512d acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_pd(double(i) * 1e-3);
  const __m512d m = _mm512_set1_pd(0.999999), a = _mm512_set1_pd(1e-7);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_pd(acc[i], m, a);
  }
  __m512d s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_pd(s, acc[i]);
  alignas(64) double out[8];
  _mm512_store_pd(out, s);
  return out[0] + out[7];
}

__attribute__((target("avx2,fma"))) double fma_loop_avx2_f64(int64_t iters) {
  __m256d acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_pd(double(i) * 1e-3);
  const __m256d m = _mm256_set1_pd(0.999999), a = _mm256_set1_pd(1e-7);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_pd(acc[i], m, a);
  }
  __m256d s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_pd(s, acc[i]);
  double out[4];
  _mm256_storeu_pd(out, s);
  return out[0] + out[3];
}

}  // namespace

namespace {

// Best of 3: `loop(iters)` on every OpenMP thread at once, 12 FMAs of `lanes` lanes per
// iteration, 2 FLOP each.
template <class Loop>
double fma_rate(int lanes, Loop loop) {
  const int64_t iters = 20'000'000;
  double best = 0;
  volatile double sink = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = now_s();
    int threads = 1;
#pragma omp parallel
    {
#pragma omp single
      threads = omp_get_num_threads();
      const double r = double(loop(iters));
#pragma omp atomic
      sink = sink + r;
    }
    const double dt = now_s() - t0;
    best = std::max(best, double(threads) * double(iters) * 12 * lanes * 2 / dt / 1e9);
  }
  (void)sink;
  return best;
}

}  // namespace

double peak_fma_gflops_f64() {
  const bool avx512 = __builtin_cpu_supports("avx512f");
  return fma_rate(avx512 ? 8 : 4, [avx512](int64_t it) {
    return avx512 ? fma_loop_avx512_f64(it) : fma_loop_avx2_f64(it);
  });
}

double peak_fma_gflops(const char** isa) {
  const bool avx512 = __builtin_cpu_supports("avx512f");
  *isa = avx512 ? "avx512" : "avx2";
  return fma_rate(avx512 ? 16 : 8, [avx512](int64_t it) {
    return avx512 ? fma_loop_avx512(it) : fma_loop_avx2(it);
  });
}

namespace {

// a[i] = b[i] + 3 c[i] over [lo, hi) with non-temporal stores (no read-for-ownership of a).
__attribute__((target("avx2"))) void triad_stream(float* a, const float* b, const float* c,
                                                  int64_t lo, int64_t hi) {
  const __m256 k = _mm256_set1_ps(3.0f);
  int64_t i = lo;
  for (; i < hi && (reinterpret_cast<uintptr_t>(a + i) & 31); ++i) a[i] = b[i] + 3.0f * c[i];
  for (; i + 8 <= hi; i += 8)
    _mm256_stream_ps(
        a + i, _mm256_add_ps(_mm256_loadu_ps(b + i), _mm256_mul_ps(k, _mm256_loadu_ps(c + i))));
  for (; i < hi; ++i) a[i] = b[i] + 3.0f * c[i];
}

}  // namespace

double triad_gbps(int64_t n, int reps, bool streaming) {
  // Cached allocator blocks, first-touched in parallel (the same threads then stream them).
  Tensor ta = Tensor::empty({n}), tb = Tensor::empty({n}), tc = Tensor::empty({n});
  float *a = ta.data<float>(), *b = tb.data<float>(), *c = tc.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    a[i] = 0;
    b[i] = 1;
    c[i] = 2;
  }
  double best = 0;
  for (int rep = 0; rep < reps; ++rep) {
    const double t0 = now_s();
    if (streaming) {
#pragma omp parallel
      {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        triad_stream(a, b, c, n * t / nt, n * (t + 1) / nt);
        _mm_sfence();
      }
    } else {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) a[i] = b[i] + 3.0f * c[i];
    }
    const double dt = now_s() - t0;
    best = std::max(best, 12.0 * double(n) / dt / 1e9);
  }
  return best;
}

}  // namespace aim::bench
