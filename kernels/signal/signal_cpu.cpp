// signal: argument checks, CPU variants, the mel filterbank and registration.
// cpu.ref: the oracle of every op. Plain loops in double; the DFT straight from its definition
// with the angle reduced exactly (k n mod nfft) before the cosine, so it stays accurate at any
// size. cpu.fft (rfft): the frame zero-padded to nfft and transformed by fft_inplace: iterative
// radix-2 for powers of two; for any other n, Bluestein's chirp-z (x_n w_n convolved with conj(w)
// by a power-of-two FFT of size >= 2n - 1, w_n = exp(-i pi n^2 / n)), so every n costs O(n log n).
// Twiddles and the chirp's transform are built once per call; OpenMP over rows; double inside.
// Test cases: signal_cases.cpp.
#include "kernels/signal/signal_cpu.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <vector>

#include "kernels/registry.h"
#include "kernels/signal/signal.h"

namespace aim::kernels {
namespace {

constexpr double kPi = 3.141592653589793238463;

std::string desc(const Tensor& t) {
  return t.defined() ? to_string(t.sizes()) + " " + dtype_name(t.dtype()) : "undefined";
}

void check_pair(const char* op, const Tensor& x, const char* xs, const Tensor& y, const char* ys,
                int64_t xdim, int64_t ydim) {
  AIM_CHECK(x.defined() && x.dim() == xdim, "[", op, "] x must be ", xs, ", got ", desc(x));
  AIM_CHECK(y.defined() && y.dim() == ydim, "[", op, "] y must be ", ys, ", got ", desc(y));
  AIM_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, "[", op,
            "] x must be f32 or f64, got ", dtype_name(x.dtype()));
  AIM_CHECK(y.dtype() == x.dtype(), "[", op, "] y must have x's dtype ", dtype_name(x.dtype()),
            ", got ", dtype_name(y.dtype()));
  AIM_CHECK(x.is_contiguous() && y.is_contiguous(), "[", op, "] x and y must be contiguous");
  AIM_CHECK(x.device() == y.device(), "[", op, "] x is on ", x.device().str(), ", y on ",
            y.device().str());
}

template <class F>
void dispatch_signal(DType t, F f) {
  if (t == DType::f32)
    f(float{});
  else
    f(double{});  // the checks admit f32 and f64 only
}

}  // namespace

void check_signal_frame_args(const SignalFrameArgs& a) {
  check_pair("signal_frame", a.x, "[B, L]", a.y, "[B, T, N]", 2, 3);
  const FrameParams& p = a.p;
  AIM_CHECK(p.frame_length >= 1 && p.hop >= 1 && p.pad >= 0, "[signal_frame] frame_length and ",
            "hop must be >= 1 and pad >= 0, got ", p.frame_length, ", ", p.hop, ", ", p.pad);
  AIM_CHECK(p.window == WindowKind::rectangular || p.window == WindowKind::hann ||
                p.window == WindowKind::hamming,
            "[signal_frame] window must be 0 (rectangular), 1 (hann) or 2 (hamming), got ",
            int64_t(p.window));
  AIM_CHECK(std::isfinite(p.preemph), "[signal_frame] preemph must be finite");
  const int64_t T = signal_frames(a.x.size(1), p);
  AIM_CHECK(a.y.size(0) == a.x.size(0) && a.y.size(1) == T && a.y.size(2) == p.frame_length,
            "[signal_frame] y must be [", a.x.size(0), ", ", T, ", ", p.frame_length, "] for x ",
            desc(a.x), " (frame_length ", p.frame_length, ", hop ", p.hop, ", pad ", p.pad,
            "), got ", desc(a.y));
}
void check_rfft_args(const RfftArgs& a) {
  check_pair("rfft", a.x, "[R, N]", a.y, "[R, nfft / 2 + 1, 2]", 2, 3);
  AIM_CHECK(a.nfft >= 1 && a.nfft >= a.x.size(1), "[rfft] nfft must be >= the frame length ",
            a.x.size(1), " and >= 1, got ", a.nfft);
  AIM_CHECK(a.y.size(0) == a.x.size(0) && a.y.size(1) == a.nfft / 2 + 1 && a.y.size(2) == 2,
            "[rfft] y must be [", a.x.size(0), ", ", a.nfft / 2 + 1, ", 2] for nfft ", a.nfft,
            ", got ", desc(a.y));
}
void check_power_spectrum_args(const PowerSpectrumArgs& a) {
  check_pair("power_spectrum", a.x, "[R, F, 2]", a.y, "[R, F]", 3, 2);
  AIM_CHECK(a.x.size(2) == 2 && a.y.size(0) == a.x.size(0) && a.y.size(1) == a.x.size(1),
            "[power_spectrum] x [R, F, 2] and y [R, F] disagree: ", desc(a.x), " and ", desc(a.y));
}
void check_mel_fbank_args(const MelFbankArgs& a) {
  check_pair("mel_fbank", a.x, "[R, F]", a.y, "[R, M]", 2, 2);
  AIM_CHECK(a.fb.defined() && a.fb.dim() == 2 && a.fb.dtype() == a.x.dtype() &&
                a.fb.device() == a.x.device() && a.fb.is_contiguous(),
            "[mel_fbank] fb must be a contiguous [F, M] tensor of x's dtype and device, got ",
            desc(a.fb));
  AIM_CHECK(
      a.fb.size(0) == a.x.size(1) && a.y.size(0) == a.x.size(0) && a.y.size(1) == a.fb.size(1),
      "[mel_fbank] x ", desc(a.x), ", fb ", desc(a.fb), " and y ", desc(a.y),
      " must be [R, F], [F, M] and [R, M]");
  AIM_CHECK(std::isfinite(a.log_floor) && a.log_floor >= 0,
            "[mel_fbank] log_floor must be >= 0 (0: no log), got ", a.log_floor);
}
void check_dct_args(const DctArgs& a) {
  check_pair("dct", a.x, "[R, M]", a.y, "[R, K]", 2, 2);
  AIM_CHECK(a.y.size(0) == a.x.size(0) && a.y.size(1) <= a.x.size(1) && a.x.size(1) >= 1,
            "[dct] y must be [", a.x.size(0), ", K] with K <= M = ", a.x.size(1), ", got ",
            desc(a.y));
  AIM_CHECK(a.lifter >= 0, "[dct] lifter must be >= 0, got ", a.lifter);
}

// ---- the FFT ---------------------------------------------------------------------------------
namespace {

bool is_pow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

// A power-of-two complex FFT plan: bit reversal and twiddles exp(-2 pi i k / n), k < n / 2.
struct Pow2Plan {
  int64_t n = 1;
  std::vector<int64_t> rev;
  std::vector<std::complex<double>> tw;
  explicit Pow2Plan(int64_t size) : n(size), rev(size_t(size)), tw(size_t(size / 2)) {
    int64_t bits = 0;
    while ((int64_t(1) << bits) < n) ++bits;
    for (int64_t i = 0; i < n; ++i) {
      int64_t r = 0;
      for (int64_t b = 0; b < bits; ++b) r |= ((i >> b) & 1) << (bits - 1 - b);
      rev[size_t(i)] = r;
    }
    for (int64_t k = 0; k < n / 2; ++k)
      tw[size_t(k)] = std::polar(1.0, -2.0 * kPi * double(k) / double(n));
  }
  // In place; sign -1 forward, +1 inverse (unscaled).
  void run(std::complex<double>* a, bool inverse) const {
    for (int64_t i = 0; i < n; ++i)
      if (i < rev[size_t(i)]) std::swap(a[i], a[rev[size_t(i)]]);
    for (int64_t len = 2; len <= n; len *= 2) {
      const int64_t half = len / 2, step = n / len;
      for (int64_t s = 0; s < n; s += len)
        for (int64_t j = 0; j < half; ++j) {
          std::complex<double> w = tw[size_t(j * step)];
          if (inverse) w = std::conj(w);
          const std::complex<double> u = a[s + j], v = a[s + j + half] * w;
          a[s + j] = u + v;
          a[s + j + half] = u - v;
        }
    }
  }
};

// Any n: radix-2 directly, else Bluestein through a power-of-two plan of m >= 2n - 1.
struct FftPlan {
  int64_t n;
  bool pow2;
  Pow2Plan p2;
  std::vector<std::complex<double>> chirp;   // w_k = exp(-i pi k^2 / n), k < n
  std::vector<std::complex<double>> kernel;  // FFT_m of conj(w) placed circularly
  static int64_t conv_size(int64_t n) {
    int64_t m = 1;
    while (m < 2 * n - 1) m *= 2;
    return m;
  }
  explicit FftPlan(int64_t size)
      : n(size), pow2(is_pow2(size)), p2(is_pow2(size) ? size : conv_size(size)) {
    if (pow2) return;
    const int64_t m = p2.n;
    chirp.resize(size_t(n));
    for (int64_t k = 0; k < n; ++k) {
      const int64_t k2 = (k * k) % (2 * n);  // exact reduction keeps the angle accurate
      chirp[size_t(k)] = std::polar(1.0, -kPi * double(k2) / double(n));
    }
    kernel.assign(size_t(m), {0.0, 0.0});
    kernel[0] = std::conj(chirp[0]);
    for (int64_t k = 1; k < n; ++k)
      kernel[size_t(k)] = kernel[size_t(m - k)] = std::conj(chirp[size_t(k)]);
    p2.run(kernel.data(), false);
  }
  // a: n values in, n values out; work: m scratch values (Bluestein only).
  void run(std::complex<double>* a, std::vector<std::complex<double>>& work) const {
    if (pow2) return p2.run(a, false);
    const int64_t m = p2.n;
    work.assign(size_t(m), {0.0, 0.0});
    for (int64_t k = 0; k < n; ++k) work[size_t(k)] = a[k] * chirp[size_t(k)];
    p2.run(work.data(), false);
    for (int64_t k = 0; k < m; ++k) work[size_t(k)] *= kernel[size_t(k)];
    p2.run(work.data(), true);
    const double inv = 1.0 / double(m);
    for (int64_t k = 0; k < n; ++k) a[k] = work[size_t(k)] * inv * chirp[size_t(k)];
  }
};

}  // namespace

void fft_inplace(std::vector<double>& re, std::vector<double>& im) {
  AIM_CHECK(re.size() == im.size() && !re.empty(), "fft_inplace: re and im must have the same ",
            "non-zero length, got ", re.size(), " and ", im.size());
  const int64_t n = int64_t(re.size());
  FftPlan plan(n);
  std::vector<std::complex<double>> a(static_cast<size_t>(n)), work;
  for (int64_t i = 0; i < n; ++i) a[size_t(i)] = {re[size_t(i)], im[size_t(i)]};
  plan.run(a.data(), work);
  for (int64_t i = 0; i < n; ++i)
    re[size_t(i)] = a[size_t(i)].real(), im[size_t(i)] = a[size_t(i)].imag();
}

// ---- mel filterbank --------------------------------------------------------------------------
double hz_to_mel_htk(double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); }
double mel_to_hz_htk(double mel) { return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0); }

Tensor mel_filterbank(int64_t n_freqs, double f_min, double f_max, int64_t n_mels,
                      double sample_rate, DType dtype) {
  AIM_CHECK(
      n_freqs >= 2 && n_mels >= 1 && f_min >= 0 && f_max > f_min && f_max <= sample_rate / 2 + 1e-9,
      "mel_filterbank: need n_freqs >= 2, n_mels >= 1, 0 <= f_min < f_max <= sample_rate / 2",
      "; got n_freqs ", n_freqs, ", n_mels ", n_mels, ", f_min ", f_min, ", f_max ", f_max,
      ", sample_rate ", sample_rate);
  const double m_min = hz_to_mel_htk(f_min), m_max = hz_to_mel_htk(f_max);
  std::vector<double> f_pts(size_t(n_mels + 2));
  for (int64_t i = 0; i < n_mels + 2; ++i)
    f_pts[size_t(i)] = mel_to_hz_htk(m_min + (m_max - m_min) * double(i) / double(n_mels + 1));
  std::vector<double> fb(size_t(n_freqs * n_mels));
  for (int64_t f = 0; f < n_freqs; ++f) {
    const double hz = (sample_rate / 2) * double(f) / double(n_freqs - 1);
    for (int64_t m = 0; m < n_mels; ++m) {
      const double lo = f_pts[size_t(m)], mid = f_pts[size_t(m + 1)], hi = f_pts[size_t(m + 2)];
      const double down = (hz - lo) / (mid - lo), up = (hi - hz) / (hi - mid);
      fb[size_t(f * n_mels + m)] = std::max(0.0, std::min(down, up));
    }
  }
  Tensor t = Tensor::from_vector(fb, {n_freqs, n_mels});
  return t.to(dtype);
}

// ---- variants --------------------------------------------------------------------------------
namespace {

template <class T>
void frame_ref(const SignalFrameArgs& a) {
  const int64_t B = a.x.size(0), L = a.x.size(1), T_ = a.y.size(1), N = a.p.frame_length;
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T_; ++t)
      for (int64_t n = 0; n < N; ++n) {
        const int64_t i = t * a.p.hop + n - a.p.pad;  // index into the unpadded signal
        double v = 0;
        if (i >= 0 && i < L) {
          v = double(x[b * L + i]);
          if (i > 0) v -= a.p.preemph * double(x[b * L + i - 1]);
        }
        y[(b * T_ + t) * N + n] = T(v * window_value(a.p.window, n, N));
      }
}

template <class T>
void rfft_ref(const RfftArgs& a) {
  const int64_t R = a.x.size(0), N = a.x.size(1), F = a.y.size(1), n = a.nfft;
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  for (int64_t r = 0; r < R; ++r)
    for (int64_t k = 0; k < F; ++k) {
      double re = 0, im = 0;
      for (int64_t j = 0; j < N; ++j) {
        const double ang = -2.0 * kPi * double((k * j) % n) / double(n);
        re += double(x[r * N + j]) * std::cos(ang);
        im += double(x[r * N + j]) * std::sin(ang);
      }
      y[(r * F + k) * 2] = T(re);
      y[(r * F + k) * 2 + 1] = T(im);
    }
}

template <class T>
void rfft_fast(const RfftArgs& a) {
  const int64_t R = a.x.size(0), N = a.x.size(1), F = a.y.size(1), n = a.nfft;
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  const FftPlan plan(n);
#pragma omp parallel
  {
    std::vector<std::complex<double>> buf(static_cast<size_t>(n)), work;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t j = 0; j < n; ++j) buf[size_t(j)] = {j < N ? double(x[r * N + j]) : 0.0, 0.0};
      plan.run(buf.data(), work);
      for (int64_t k = 0; k < F; ++k) {
        y[(r * F + k) * 2] = T(buf[size_t(k)].real());
        y[(r * F + k) * 2 + 1] = T(buf[size_t(k)].imag());
      }
    }
  }
}

template <class T>
void power_ref(const PowerSpectrumArgs& a) {
  const int64_t n = a.y.numel();
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  for (int64_t i = 0; i < n; ++i) {
    const double re = double(x[2 * i]), im = double(x[2 * i + 1]);
    y[i] = T(re * re + im * im);
  }
}

template <class T>
void mel_ref(const MelFbankArgs& a) {
  const int64_t R = a.x.size(0), F = a.x.size(1), M = a.fb.size(1);
  const T *x = a.x.data<T>(), *fb = a.fb.data<T>();
  T* y = a.y.data<T>();
  for (int64_t r = 0; r < R; ++r)
    for (int64_t m = 0; m < M; ++m) {
      double s = 0;
      for (int64_t f = 0; f < F; ++f) s += double(x[r * F + f]) * double(fb[f * M + m]);
      y[r * M + m] = T(a.log_floor > 0 ? std::log(std::max(s, a.log_floor)) : s);
    }
}

template <class T>
void dct_ref(const DctArgs& a) {
  const int64_t R = a.x.size(0), M = a.x.size(1), K = a.y.size(1);
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  for (int64_t r = 0; r < R; ++r)
    for (int64_t k = 0; k < K; ++k) {
      double s = 0;
      for (int64_t m = 0; m < M; ++m) s += double(x[r * M + m]) * dct_weight(k, m, M, a.lifter);
      y[r * K + k] = T(s);
    }
}

void signal_frame_cpu_ref(const SignalFrameArgs& a) {
  check_signal_frame_args(a);
  dispatch_signal(a.x.dtype(), [&](auto t) { frame_ref<decltype(t)>(a); });
}
void rfft_cpu_ref(const RfftArgs& a) {
  check_rfft_args(a);
  dispatch_signal(a.x.dtype(), [&](auto t) { rfft_ref<decltype(t)>(a); });
}
void rfft_cpu_fft(const RfftArgs& a) {
  check_rfft_args(a);
  dispatch_signal(a.x.dtype(), [&](auto t) { rfft_fast<decltype(t)>(a); });
}
void power_spectrum_cpu_ref(const PowerSpectrumArgs& a) {
  check_power_spectrum_args(a);
  dispatch_signal(a.x.dtype(), [&](auto t) { power_ref<decltype(t)>(a); });
}
void mel_fbank_cpu_ref(const MelFbankArgs& a) {
  check_mel_fbank_args(a);
  dispatch_signal(a.x.dtype(), [&](auto t) { mel_ref<decltype(t)>(a); });
}
void dct_cpu_ref(const DctArgs& a) {
  check_dct_args(a);
  dispatch_signal(a.x.dtype(), [&](auto t) { dct_ref<decltype(t)>(a); });
}

}  // namespace

void signal_frame(const SignalFrameArgs& a) { AIM_DISPATCH_OP(SignalFrameArgs, "signal_frame", a); }
void rfft(const RfftArgs& a) { AIM_DISPATCH_OP(RfftArgs, "rfft", a); }
void power_spectrum(const PowerSpectrumArgs& a) {
  AIM_DISPATCH_OP(PowerSpectrumArgs, "power_spectrum", a);
}
void mel_fbank(const MelFbankArgs& a) { AIM_DISPATCH_OP(MelFbankArgs, "mel_fbank", a); }
void dct(const DctArgs& a) { AIM_DISPATCH_OP(DctArgs, "dct", a); }

void register_signal_cpu(Registry& r) {
  namespace sc = signal_cpu;
  const std::vector<DType> dt = {DType::f32, DType::f64};
  {
    auto& op = r.op<SignalFrameArgs>("signal_frame");
    op.description = "overlapping frames of a signal with pre-emphasis, zero padding and a window";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, signal_frame_cpu_ref, dt});
    op.set_cost(signal_frame_cost);
    op.make_case = sc::make_frame_case;
    op.set_shape_fields(sc::frame_shape_fields());
    op.add_test_shapes(sc::frame_shapes());
    op.small_enough_for_simt = sc::frame_simt_small;
  }
  {
    auto& op = r.op<RfftArgs>("rfft");
    op.description = "DFT of real frames zero-padded to nfft: bins 0..nfft/2 (torch.fft.rfft)";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, rfft_cpu_ref, dt});
    op.add({"cpu.fft", Backend::CPU, Provider::Own, rfft_cpu_fft, dt});
    op.set_default(Backend::CPU, "cpu.fft");
    op.set_cost(rfft_cost);
    op.make_case = sc::make_rfft_case;
    op.tolerance = sc::rfft_tolerance;
    op.set_shape_fields(sc::rfft_shape_fields());
    op.add_test_shapes(sc::rfft_shapes());
    op.small_enough_for_simt = sc::rfft_simt_small;
  }
  {
    auto& op = r.op<PowerSpectrumArgs>("power_spectrum");
    op.description = "|X|^2 of complex bins [R, F, 2]";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, power_spectrum_cpu_ref, dt});
    op.set_cost(power_spectrum_cost);
    op.make_case = sc::make_power_case;
    op.set_shape_fields(sc::power_shape_fields());
    op.add_test_shapes(sc::power_shapes());
    op.small_enough_for_simt = sc::power_simt_small;
  }
  {
    auto& op = r.op<MelFbankArgs>("mel_fbank");
    op.description = "mel filterbank energies x fb, optionally log(max(., floor))";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, mel_fbank_cpu_ref, dt});
    op.set_cost(mel_fbank_cost);
    op.make_case = sc::make_mel_case;
    op.set_shape_fields(sc::mel_shape_fields());
    op.add_test_shapes(sc::mel_shapes());
    op.small_enough_for_simt = sc::mel_simt_small;
  }
  {
    auto& op = r.op<DctArgs>("dct");
    op.description = "orthonormal DCT-II (MFCC from log-mel energies), optional cepstral lifter";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, dct_cpu_ref, dt});
    op.set_cost(dct_cost);
    op.make_case = sc::make_dct_case;
    op.set_shape_fields(sc::dct_shape_fields());
    op.add_test_shapes(sc::dct_shapes());
    op.small_enough_for_simt = sc::dct_simt_small;
  }
}

}  // namespace aim::kernels
