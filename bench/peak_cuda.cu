// GPU ceilings with own kernels: FMA throughput per dtype and copy / triad bandwidth
// (bench/peak_cuda.h). Compiled with nvcc into aim-bench (CMakeLists.txt: AIM_BENCH_PEAK_CUDA).
//
// fma_kernel<T>: one thread runs kChains independent recurrences x = fma(x, m, a) for `iters`
//   steps (T = float: FFMA, double: DFMA, __half2: HFMA2, __nv_bfloat162: HFMA2.BF16; the 16-bit
//   kinds do two FMAs per instruction). Thread mapping: blocks of 256 threads, 8 blocks per SM
//   (2048 threads, a full SM on sm_80/sm_90), every thread independent. Memory traffic: none in
//   the loop; each thread stores its kChains results once at the end. Expected bound: the FMA
//   pipes (8 chains per thread x 64 warps per SM hide the 4-8 cycle FMA latency many times over).
//   The stored results are compared with an exact host emulation of the recurrence (fmaf / fma;
//   16-bit: the exact product-sum in double rounded to 11 / 8 significant bits), so a shortened
//   kernel cannot report a rate. Limits: one device (the current one).
// copy_kernel / triad_kernel: grid-stride loops over float4 (16-byte loads and stores), 4 blocks of
//   256 threads per SM x enough iterations; b[i] = a[i] and a[i] = b[i] + s * c[i]. Memory traffic:
//   8 or 12 bytes per element, counted as STREAM counts them (no write-allocate traffic on GPUs).
//   Expected bound: HBM bandwidth. Limits: n a multiple of 4.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "bench/peak_cuda.h"
#include "tensor/allocator.h"
#include "tensor/check.h"
#include "tensor/cuda_check.h"

namespace aim::bench {
namespace {

constexpr int kChains = 8;
constexpr int kThreads = 256;
// Exactly representable in fp16, bf16, fp32 and fp64: the emulation needs no conversions.
constexpr float kM = 0.99609375f;    // 1 - 2^-8
constexpr float kA = 0.0009765625f;  // 2^-10
__host__ __device__ inline float start_value(int chain, int lane) {
  return float(2 * chain + lane + 1) * 0.03125f;
}

template <class T>
struct Fma;
template <>
struct Fma<float> {
  static constexpr int kLanes = 1;
  __device__ static float make(float lo, float) { return lo; }
  __device__ static float step(float x, float m, float a) { return __fmaf_rn(x, m, a); }
  __device__ static void store(double* o, float x) { o[0] = double(x); }
};
template <>
struct Fma<double> {
  static constexpr int kLanes = 1;
  __device__ static double make(float lo, float) { return double(lo); }
  __device__ static double step(double x, double m, double a) { return __fma_rn(x, m, a); }
  __device__ static void store(double* o, double x) { o[0] = x; }
};
template <>
struct Fma<__half2> {
  static constexpr int kLanes = 2;
  __device__ static __half2 make(float lo, float hi) { return __floats2half2_rn(lo, hi); }
  __device__ static __half2 step(__half2 x, __half2 m, __half2 a) { return __hfma2(x, m, a); }
  __device__ static void store(double* o, __half2 x) {
    o[0] = double(__low2float(x));
    o[1] = double(__high2float(x));
  }
};
template <>
struct Fma<__nv_bfloat162> {
  static constexpr int kLanes = 2;
  __device__ static __nv_bfloat162 make(float lo, float hi) {
    return __floats2bfloat162_rn(lo, hi);
  }
  __device__ static __nv_bfloat162 step(__nv_bfloat162 x, __nv_bfloat162 m, __nv_bfloat162 a) {
    return __hfma2(x, m, a);
  }
  __device__ static void store(double* o, __nv_bfloat162 x) {
    o[0] = double(__low2float(x));
    o[1] = double(__high2float(x));
  }
};

template <class T>
__global__ void fma_kernel(double* out, int iters) {
  using F = Fma<T>;
  const T m = F::make(kM, kM), a = F::make(kA, kA);
  T x[kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c) x[c] = F::make(start_value(c, 0), start_value(c, 1));
#pragma unroll 4
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) x[c] = F::step(x[c], m, a);
  }
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
#pragma unroll
  for (int c = 0; c < kChains; ++c) F::store(out + (t * kChains + c) * F::kLanes, x[c]);
}

// Round to `bits` significant bits, nearest even (normal numbers; the recurrence stays in
// [2^-6, 1], normal in fp16 and bf16).
double round_to_bits(double v, int bits) {
  int e = 0;
  const double f = std::frexp(v, &e);
  return std::ldexp(std::nearbyint(std::ldexp(f, bits)), e - bits);
}

// The exact value of chain (c, lane) after `iters` steps in the arithmetic of `kind`.
double emulate(const std::string& kind, int c, int lane, int iters) {
  if (kind == "fp32") {
    float x = start_value(c, lane);
    for (int i = 0; i < iters; ++i) x = std::fmaf(x, kM, kA);
    return double(x);
  }
  if (kind == "fp64") {
    double x = start_value(c, lane);
    for (int i = 0; i < iters; ++i) x = std::fma(x, double(kM), double(kA));
    return x;
  }
  // x * m + a is exact in double for 11- and 8-bit significands of this range.
  const int bits = kind == "fp16" ? 11 : 8;
  double x = start_value(c, lane);
  for (int i = 0; i < iters; ++i) x = round_to_bits(x * double(kM) + double(kA), bits);
  return x;
}

cudaStream_t stream() { return static_cast<cudaStream_t>(current_stream(0)); }

// Milliseconds of one call of fn on the current stream.
template <class Fn>
float time_ms(Fn fn) {
  cudaEvent_t a, b;
  AIM_CUDA_CHECK(cudaEventCreate(&a));
  AIM_CUDA_CHECK(cudaEventCreate(&b));
  AIM_CUDA_CHECK(cudaEventRecord(a, stream()));
  fn();
  AIM_CUDA_CHECK(cudaGetLastError());
  AIM_CUDA_CHECK(cudaEventRecord(b, stream()));
  AIM_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  AIM_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  AIM_CUDA_CHECK(cudaEventDestroy(a));
  AIM_CUDA_CHECK(cudaEventDestroy(b));
  return ms;
}

int sm_count() {
  int device = 0, sms = 0;
  AIM_CUDA_CHECK(cudaGetDevice(&device));
  AIM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

template <class T>
double fma_rate(const std::string& kind) {
  constexpr int lanes = Fma<T>::kLanes;
  const int blocks = sm_count() * 8;
  const int64_t threads = int64_t(blocks) * kThreads;
  double* out = nullptr;
  AIM_CUDA_CHECK(cudaMalloc(&out, size_t(threads) * kChains * lanes * sizeof(double)));
  auto run = [&](int iters) {
    return time_ms([&] { fma_kernel<T><<<blocks, kThreads, 0, stream()>>>(out, iters); });
  };
  // Calibrate to ~50 ms per run.
  const int probe = 4096;
  run(probe);
  const float probe_ms = std::max(run(probe), 1e-3f);
  const int iters =
      int(std::clamp(double(probe) * 50.0 / double(probe_ms), double(probe), double(1 << 24)));
  float best = 1e30f;
  for (int r = 0; r < 3; ++r) best = std::min(best, run(iters));
  // Check a sample of threads (every chain and lane) against the emulation.
  std::vector<double> host(size_t(threads) * kChains * lanes);
  AIM_CUDA_CHECK(
      cudaMemcpy(host.data(), out, host.size() * sizeof(double), cudaMemcpyDeviceToHost));
  AIM_CUDA_CHECK(cudaFree(out));
  for (int c = 0; c < kChains; ++c)
    for (int l = 0; l < lanes; ++l) {
      const double want = emulate(kind, c, l, iters);
      for (int64_t t = 0; t < threads; t += 997) {
        const double got = host[size_t((t * kChains + c) * lanes + l)];
        AIM_CHECK(got == want, "[peak cuda] ", kind, " FMA chain ", c, " lane ", l, " of thread ",
                  t, " after ", iters, " steps: got ", got, ", expected ", want,
                  " (no rate is reported for a kernel that did not run as written)");
      }
    }
  const double flops = double(threads) * kChains * lanes * 2.0 * double(iters);
  return flops / (double(best) * 1e-3) / 1e9;
}

__global__ void fill_kernel(float4* p, int64_t n4, float v) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n4;
       i += int64_t(gridDim.x) * blockDim.x)
    p[i] = make_float4(v, v, v, v);
}

__global__ void copy_kernel(float4* __restrict__ b, const float4* __restrict__ a, int64_t n4) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n4;
       i += int64_t(gridDim.x) * blockDim.x)
    b[i] = a[i];
}

__global__ void triad_kernel(float4* __restrict__ a, const float4* __restrict__ b,
                             const float4* __restrict__ c, float s, int64_t n4) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n4;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float4 x = b[i], y = c[i];
    a[i] = make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w);
  }
}

}  // namespace

double cuda_fma_gflops(const std::string& kind) {
  if (kind == "fp32") return fma_rate<float>(kind);
  if (kind == "fp64") return fma_rate<double>(kind);
  if (kind == "fp16") return fma_rate<__half2>(kind);
  if (kind == "bf16") return fma_rate<__nv_bfloat162>(kind);
  AIM_FAIL("[peak cuda] FMA kind: expected fp32, fp64, fp16 or bf16, got '", kind, "'");
}

double cuda_stream_gbps(const std::string& kind, int64_t n) {
  AIM_CHECK(kind == "copy" || kind == "triad", "[peak cuda] expected copy or triad, got '", kind,
            "'");
  AIM_CHECK(n > 0 && n % 4 == 0, "[peak cuda] ", kind, ": n must be a positive multiple of 4, got ",
            n);
  const int64_t n4 = n / 4;
  float4 *a = nullptr, *b = nullptr, *c = nullptr;
  AIM_CUDA_CHECK(cudaMalloc(&a, size_t(n) * sizeof(float)));
  AIM_CUDA_CHECK(cudaMalloc(&b, size_t(n) * sizeof(float)));
  AIM_CUDA_CHECK(cudaMalloc(&c, size_t(n) * sizeof(float)));
  const int blocks = sm_count() * 4;
  fill_kernel<<<blocks, kThreads, 0, stream()>>>(a, n4, 0.0f);
  fill_kernel<<<blocks, kThreads, 0, stream()>>>(b, n4, 1.0f);
  fill_kernel<<<blocks, kThreads, 0, stream()>>>(c, n4, 2.0f);
  AIM_CUDA_CHECK(cudaGetLastError());
  const bool triad = kind == "triad";
  auto run = [&] {
    return time_ms([&] {
      if (triad)
        triad_kernel<<<blocks, kThreads, 0, stream()>>>(a, b, c, 3.0f, n4);
      else
        copy_kernel<<<blocks, kThreads, 0, stream()>>>(b, a, n4);
    });
  };
  run();  // warm-up
  float best = 1e30f;
  for (int r = 0; r < 5; ++r) best = std::min(best, run());
  // After the triad a = 1 + 3 * 2 = 7 everywhere; after the copy b = a = 0.
  const float want = triad ? 7.0f : 0.0f;
  const float* checked = reinterpret_cast<const float*>(triad ? a : b);
  for (int64_t i : {int64_t(0), n / 3, n - 1}) {
    float got = -1;
    AIM_CUDA_CHECK(cudaMemcpy(&got, checked + i, sizeof(float), cudaMemcpyDeviceToHost));
    AIM_CHECK(got == want, "[peak cuda] ", kind, ": element ", i, " is ", got, ", expected ", want);
  }
  AIM_CUDA_CHECK(cudaFree(a));
  AIM_CUDA_CHECK(cudaFree(b));
  AIM_CUDA_CHECK(cudaFree(c));
  const double bytes = (triad ? 12.0 : 8.0) * double(n);
  return bytes / (double(best) * 1e-3) / 1e9;
}

}  // namespace aim::bench
