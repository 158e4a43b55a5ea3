// The speech front end as ops (DeepSpeech's MFCC features, MODELS.md §3.3): framing with
// pre-emphasis and a window, the real FFT, the power spectrum, the mel filterbank (with the log),
// and the DCT-II that turns log-mel energies into MFCCs. Forward only: the front end sits before
// the first trained parameter, so no gradient is asked of it.
// Shapes (B batch, L samples, T frames, N frame length, R rows = any batch of frames,
// F = nfft / 2 + 1 frequency bins, M mel bands, K cepstral coefficients):
//   signal_frame   x [B, L] -> y [B, T, N], T = (L + 2 pad - N) / hop + 1 (floor; L + 2 pad >= N)
//   rfft           x [R, N] -> y [R, F, 2] (re, im), the frame zero-padded to nfft >= N
//   power_spectrum x [R, F, 2] -> y [R, F] = re^2 + im^2
//   mel_fbank      x [R, F], fb [F, M] -> y [R, M] = x fb, or log(max(x fb, log_floor))
//   dct            x [R, M] -> y [R, K], orthonormal DCT-II, optionally liftered
// f32 and f64; sums in double in cpu.ref. Math and the reference formulas: kernels/signal/README.md
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "kernels/op.h"

namespace aim::kernels {

enum class WindowKind : int64_t { rectangular = 0, hann = 1, hamming = 2 };

// ---- formulas written once for every variant (host and device) ------------------------------
#if defined(__CUDACC__)
#define AIM_SIGNAL_HD __host__ __device__ __forceinline__
#else
#define AIM_SIGNAL_HD inline
#endif

// Periodic windows of length N (torch.hann_window / hamming_window, periodic=True):
// hann 0.5 - 0.5 cos(2 pi n / N), hamming 0.54 - 0.46 cos(2 pi n / N).
AIM_SIGNAL_HD double window_value(WindowKind w, int64_t n, int64_t N) {
  if (w == WindowKind::rectangular) return 1.0;
  const double c = cos(6.283185307179586476925 * double(n) / double(N));
  return w == WindowKind::hann ? 0.5 - 0.5 * c : 0.54 - 0.46 * c;
}

// ---- args ------------------------------------------------------------------------------------
struct FrameParams {
  int64_t frame_length = 400;  // N (25 ms at 16 kHz)
  int64_t hop = 160;           // 10 ms
  int64_t pad = 0;             // zeros before and after the (pre-emphasised) signal
  double preemph = 0.97;       // p[i] = x[i] - a x[i - 1], p[0] = x[0]; 0: none
  WindowKind window = WindowKind::hamming;
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.param("frame_length", s.frame_length), f.param("hop", s.hop), f.param("pad", s.pad);
    f.param("preemph", s.preemph), f.param("window", s.window);
  }
};
struct SignalFrameArgs {
  Tensor x;  // [B, L]
  Tensor y;  // [B, T, N]: written
  FrameParams p;
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.out("y", s.y);
    f.group(s.p);
  }
};
// Frames of L samples (0 when the padded signal is shorter than one frame).
inline int64_t signal_frames(int64_t L, const FrameParams& p) {
  const int64_t n = L + 2 * p.pad;
  return n < p.frame_length ? 0 : (n - p.frame_length) / p.hop + 1;
}

struct RfftArgs {
  Tensor x;  // [R, N]
  Tensor y;  // [R, nfft / 2 + 1, 2]: written
  int64_t nfft = 512;
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.out("y", s.y), f.param("nfft", s.nfft);
  }
};

struct PowerSpectrumArgs {
  Tensor x;  // [R, F, 2]
  Tensor y;  // [R, F]: written
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.out("y", s.y);
  }
};

struct MelFbankArgs {
  Tensor x;              // [R, F] power
  Tensor fb;             // [F, M] filters (mel_filterbank())
  Tensor y;              // [R, M]: written
  double log_floor = 0;  // > 0: y = log(max(x fb, log_floor)); 0: y = x fb
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.in("fb", s.fb), f.out("y", s.y), f.param("log_floor", s.log_floor);
  }
};

struct DctArgs {
  Tensor x;            // [R, M]
  Tensor y;            // [R, K], K <= M: written
  int64_t lifter = 0;  // > 0: y_k *= 1 + lifter / 2 sin(pi k / lifter) (HTK's cepstral lifter)
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.out("y", s.y), f.param("lifter", s.lifter);
  }
};

// Orthonormal DCT-II weight of coefficient k and input m of M (scipy.fft.dct(norm='ortho'),
// torchaudio.functional.create_dct(norm='ortho')), times the lifter.
AIM_SIGNAL_HD double dct_weight(int64_t k, int64_t m, int64_t M, int64_t lifter) {
  const double pi = 3.141592653589793238463;
  const double s = k == 0 ? sqrt(1.0 / double(M)) : sqrt(2.0 / double(M));
  const double l =
      lifter > 0 ? 1.0 + 0.5 * double(lifter) * sin(pi * double(k) / double(lifter)) : 1.0;
  return l * s * cos(pi * double(k) * (2.0 * double(m) + 1.0) / (2.0 * double(M)));
}

// ---- costs -----------------------------------------------------------------------------------
inline double log2_ceil(int64_t n) {
  double l = 0;
  for (int64_t p = 1; p < n; p *= 2) l += 1;
  return l;
}
inline Cost signal_frame_cost(const SignalFrameArgs& a) {
  const double e = double(dtype_size(a.x.dtype())), out = double(a.y.numel());
  return Cost{3 * out, double(a.x.numel()) * e, out * e};  // pre-emphasis (2) and window (1)
}
// The usual FFT count for real input: 2.5 n log2 n per transform of n = nfft points.
inline Cost rfft_cost(const RfftArgs& a) {
  const double e = double(dtype_size(a.x.dtype())), R = double(a.x.size(0));
  return Cost{R * 2.5 * double(a.nfft) * log2_ceil(a.nfft), double(a.x.numel()) * e,
              double(a.y.numel()) * e};
}
inline Cost power_spectrum_cost(const PowerSpectrumArgs& a) {
  const double e = double(dtype_size(a.x.dtype())), out = double(a.y.numel());
  return Cost{3 * out, 2 * out * e, out * e};
}
inline Cost mel_fbank_cost(const MelFbankArgs& a) {
  const double e = double(dtype_size(a.x.dtype()));
  const double R = double(a.x.size(0)), F = double(a.x.size(1)), M = double(a.fb.size(1));
  return Cost{2 * R * F * M + (a.log_floor > 0 ? 2 * R * M : 0.0), (R * F + F * M) * e, R * M * e};
}
inline Cost dct_cost(const DctArgs& a) {
  const double e = double(dtype_size(a.x.dtype()));
  const double R = double(a.x.size(0)), M = double(a.x.size(1)), K = double(a.y.size(1));
  return Cost{2 * R * M * K, R * M * e, R * K * e};
}

// Host-side validation shared by every variant ("[rfft] ...").
void check_signal_frame_args(const SignalFrameArgs& a);
void check_rfft_args(const RfftArgs& a);
void check_power_spectrum_args(const PowerSpectrumArgs& a);
void check_mel_fbank_args(const MelFbankArgs& a);
void check_dct_args(const DctArgs& a);

void signal_frame(const SignalFrameArgs& a);  // run the selected variant
void rfft(const RfftArgs& a);
void power_spectrum(const PowerSpectrumArgs& a);
void mel_fbank(const MelFbankArgs& a);
void dct(const DctArgs& a);

// HTK mel scale 2595 log10(1 + f / 700) (torchaudio's default mel_scale="htk") and its inverse.
double hz_to_mel_htk(double hz);
double mel_to_hz_htk(double mel);
// torchaudio.functional.melscale_fbanks(n_freqs, f_min, f_max, n_mels, sample_rate, norm=None,
// mel_scale="htk"): triangular filters [n_freqs, n_mels] on the bins linspace(0, sr / 2, n_freqs),
// corners at n_mels + 2 points equally spaced in mel between f_min and f_max; f32 on the CPU.
Tensor mel_filterbank(int64_t n_freqs, double f_min, double f_max, int64_t n_mels,
                      double sample_rate, DType dtype = DType::f32);

// The CPU FFT that cpu.fft runs (exposed for tests): in-place complex DFT of n points (any n:
// radix-2 for powers of two, Bluestein's chirp-z through a power-of-two FFT otherwise), in double.
void fft_inplace(std::vector<double>& re, std::vector<double>& im);

}  // namespace aim::kernels
