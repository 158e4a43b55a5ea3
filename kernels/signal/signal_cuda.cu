// signal: own CUDA variants.
// cuda.direct (signal_frame, power_spectrum, mel_fbank, dct): one thread per output element,
// grid-stride. signal_frame reads two neighbouring samples per output (pre-emphasis) and the
// window from its formula; power_spectrum one complex value; mel_fbank walks one row of x and one
// column of fb (the 26-band front end: F = 257 products per output, fb stays in L1/L2);
// dct evaluates each weight from dct_weight (signal.h, the CPU's formula, in double). All are
// bandwidth bound at the front end's sizes. Accumulation in double for mel_fbank and dct (the
// sums are short; the reference is double).
// cuda.smem (rfft): one block per row, nfft a power of two whose complex values fit in 48 KiB of
// shared memory (f32: nfft <= 4096, f64: <= 2048). The row is loaded zero-padded in bit-reversed
// order, then log2(nfft) radix-2 stages, each thread doing nfft / 2 / blockDim butterflies per
// stage between __syncthreads; twiddles from cos/sin of the exactly reduced angle in the
// accumulation type. Bins 0..nfft/2 written. Compute bound on log2 n stages of shared-memory
// traffic; other sizes are cuda.cufft's (or cpu.fft's Bluestein). Not yet timed on a GPU.
#include "kernels/cuda_common.h"
// (cuda_common.h first, as every *_cuda.cu)
#include "kernels/signal/signal.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kSmemBytes = 48 * 1024;

__device__ __forceinline__ int64_t grid_start() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_step() { return int64_t(blockDim.x) * gridDim.x; }

template <class T>
__global__ void frame_kernel(const T* x, T* y, int64_t B, int64_t L, int64_t TT, FrameParams p) {
  const int64_t N = p.frame_length, total = B * TT * N;
  for (int64_t o = grid_start(); o < total; o += grid_step()) {
    const int64_t n = o % N, t = (o / N) % TT, b = o / (N * TT);
    const int64_t i = t * p.hop + n - p.pad;
    double v = 0;
    if (i >= 0 && i < L) {
      v = double(x[b * L + i]);
      if (i > 0) v -= p.preemph * double(x[b * L + i - 1]);
    }
    y[o] = T(v * window_value(p.window, n, N));
  }
}

template <class T>
__global__ void power_kernel(const T* x, T* y, int64_t n) {
  for (int64_t i = grid_start(); i < n; i += grid_step()) {
    const T re = x[2 * i], im = x[2 * i + 1];
    y[i] = re * re + im * im;
  }
}

template <class T>
__global__ void mel_kernel(const T* x, const T* fb, T* y, int64_t R, int64_t F, int64_t M,
                           double log_floor) {
  for (int64_t o = grid_start(); o < R * M; o += grid_step()) {
    const int64_t m = o % M, r = o / M;
    double s = 0;
    for (int64_t f = 0; f < F; ++f) s += double(x[r * F + f]) * double(fb[f * M + m]);
    y[o] = T(log_floor > 0 ? log(s > log_floor ? s : log_floor) : s);
  }
}

template <class T>
__global__ void dct_kernel(const T* x, T* y, int64_t R, int64_t M, int64_t K, int64_t lifter) {
  for (int64_t o = grid_start(); o < R * K; o += grid_step()) {
    const int64_t k = o % K, r = o / K;
    double s = 0;
    for (int64_t m = 0; m < M; ++m) s += double(x[r * M + m]) * dct_weight(k, m, M, lifter);
    y[o] = T(s);
  }
}

// One block per row; a holds nfft complex values (re, im interleaved).
template <class T>
__global__ void rfft_smem_kernel(const T* x, T* y, int64_t N, int64_t n, int bits) {
  using A = typename Acc<T>::type;
  AIM_DYNAMIC_SHARED(A, a);
  const int64_t r = blockIdx.x, F = n / 2 + 1;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    int64_t rev = 0;
    for (int b = 0; b < bits; ++b) rev |= ((j >> b) & 1) << (bits - 1 - b);
    a[2 * rev] = j < N ? A(x[r * N + j]) : A(0);
    a[2 * rev + 1] = A(0);
  }
  __syncthreads();
  const A two_pi = A(6.283185307179586476925);
  for (int64_t len = 2; len <= n; len *= 2) {
    const int64_t half = len / 2;
    for (int64_t q = threadIdx.x; q < n / 2; q += blockDim.x) {
      const int64_t j = q % half, s = (q / half) * len;
      const A ang = -two_pi * A(j * (n / len)) / A(n);
      const A wr = cos(ang), wi = sin(ang);
      const int64_t u = s + j, v = u + half;
      const A vr = a[2 * v] * wr - a[2 * v + 1] * wi, vi = a[2 * v] * wi + a[2 * v + 1] * wr;
      const A ur = a[2 * u], ui = a[2 * u + 1];
      a[2 * u] = ur + vr, a[2 * u + 1] = ui + vi;
      a[2 * v] = ur - vr, a[2 * v + 1] = ui - vi;
    }
    __syncthreads();
  }
  for (int64_t k = threadIdx.x; k < F; k += blockDim.x) {
    y[(r * F + k) * 2] = T(a[2 * k]);
    y[(r * F + k) * 2 + 1] = T(a[2 * k + 1]);
  }
}

template <class F>
void dispatch_signal(DType t, F f) {
  if (t == DType::f32)
    f(float{});
  else
    f(double{});  // the checks admit f32 and f64 only
}

void signal_frame_cuda_direct(const SignalFrameArgs& a) {
  check_signal_frame_args(a);
  const int64_t total = a.y.numel();
  if (total == 0) return;
  dispatch_signal(a.x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    AIM_LAUNCH(grid_for(total, kThreads), kThreads, 0, stream_for(a.x.device()), frame_kernel<T>)
    (a.x.data<T>(), a.y.data<T>(), a.x.size(0), a.x.size(1), a.y.size(1), a.p);
    AIM_CHECK_LAUNCH();
  });
}

void power_spectrum_cuda_direct(const PowerSpectrumArgs& a) {
  check_power_spectrum_args(a);
  const int64_t total = a.y.numel();
  if (total == 0) return;
  dispatch_signal(a.x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    AIM_LAUNCH(grid_for(total, kThreads), kThreads, 0, stream_for(a.x.device()), power_kernel<T>)
    (a.x.data<T>(), a.y.data<T>(), total);
    AIM_CHECK_LAUNCH();
  });
}

void mel_fbank_cuda_direct(const MelFbankArgs& a) {
  check_mel_fbank_args(a);
  const int64_t total = a.y.numel();
  if (total == 0) return;
  dispatch_signal(a.x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    AIM_LAUNCH(grid_for(total, kThreads), kThreads, 0, stream_for(a.x.device()), mel_kernel<T>)
    (a.x.data<T>(), a.fb.data<T>(), a.y.data<T>(), a.x.size(0), a.x.size(1), a.fb.size(1),
     a.log_floor);
    AIM_CHECK_LAUNCH();
  });
}

void dct_cuda_direct(const DctArgs& a) {
  check_dct_args(a);
  const int64_t total = a.y.numel();
  if (total == 0) return;
  dispatch_signal(a.x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    AIM_LAUNCH(grid_for(total, kThreads), kThreads, 0, stream_for(a.x.device()), dct_kernel<T>)
    (a.x.data<T>(), a.y.data<T>(), a.x.size(0), a.x.size(1), a.y.size(1), a.lifter);
    AIM_CHECK_LAUNCH();
  });
}

std::string rfft_smem_supports(const RfftArgs& a) {
  const int64_t n = a.nfft;
  if (n < 1 || (n & (n - 1)) != 0)
    return "cuda.smem needs nfft a power of two, got " + std::to_string(n);
  const int64_t acc = a.x.dtype() == DType::f64 ? 8 : 4;
  if (2 * n * acc > kSmemBytes)
    return "cuda.smem needs nfft * 2 * " + std::to_string(acc) + " bytes <= 48 KiB, got nfft " +
           std::to_string(n);
  return "";
}

void rfft_cuda_smem(const RfftArgs& a) {
  check_rfft_args(a);
  const std::string why = rfft_smem_supports(a);
  AIM_CHECK(why.empty(), "[rfft] ", why);
  const int64_t R = a.x.size(0), n = a.nfft;
  if (R == 0) return;
  int bits = 0;
  while ((int64_t(1) << bits) < n) ++bits;
  dispatch_signal(a.x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using A = typename Acc<T>::type;
    const int threads = int(n / 2 < kThreads ? (n / 2 > 32 ? n / 2 : 32) : kThreads);
    AIM_LAUNCH(unsigned(R), threads, size_t(2 * n) * sizeof(A), stream_for(a.x.device()),
               rfft_smem_kernel<T>)
    (a.x.data<T>(), a.y.data<T>(), a.x.size(1), n, bits);
    AIM_CHECK_LAUNCH();
  });
}

}  // namespace

void register_signal_cuda(Registry& r) {
  const std::vector<DType> dt = {DType::f32, DType::f64};
  r.op<SignalFrameArgs>("signal_frame")
      .add({"cuda.direct", AIM_CUDA_BACKEND, Provider::Own, signal_frame_cuda_direct, dt});
  r.op<SignalFrameArgs>("signal_frame").set_default(AIM_CUDA_BACKEND, "cuda.direct");
  r.op<RfftArgs>("rfft").add(
      {"cuda.smem", AIM_CUDA_BACKEND, Provider::Own, rfft_cuda_smem, dt, rfft_smem_supports});
  r.op<RfftArgs>("rfft").set_default(AIM_CUDA_BACKEND, "cuda.smem");
  r.op<PowerSpectrumArgs>("power_spectrum")
      .add({"cuda.direct", AIM_CUDA_BACKEND, Provider::Own, power_spectrum_cuda_direct, dt});
  r.op<PowerSpectrumArgs>("power_spectrum").set_default(AIM_CUDA_BACKEND, "cuda.direct");
  r.op<MelFbankArgs>("mel_fbank")
      .add({"cuda.direct", AIM_CUDA_BACKEND, Provider::Own, mel_fbank_cuda_direct, dt});
  r.op<MelFbankArgs>("mel_fbank").set_default(AIM_CUDA_BACKEND, "cuda.direct");
  r.op<DctArgs>("dct").add({"cuda.direct", AIM_CUDA_BACKEND, Provider::Own, dct_cuda_direct, dt});
  r.op<DctArgs>("dct").set_default(AIM_CUDA_BACKEND, "cuda.direct");
}

}  // namespace aim::kernels::AIM_CUDA_NS
