// kernels/signal beyond the registry test: the CPU FFT (radix-2 and Bluestein) against the
// definition at every size 1..70 and a few large primes, the HTK mel filterbank's corners,
// the DCT's orthonormality, and the argument checks' messages.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/signal/signal.h"
#include "tests/support/common.h"

namespace aim::kernels {
namespace {

TEST(Signal, FftMatchesTheDefinitionAtEverySize) {
  std::vector<int> sizes;
  for (int n = 1; n <= 70; ++n) sizes.push_back(n);
  for (int n : {97, 127, 400, 509, 1000, 1024}) sizes.push_back(n);
  for (int n : sizes) {
    std::vector<double> re(static_cast<size_t>(n)), im(static_cast<size_t>(n));
    for (int j = 0; j < n; ++j)
      re[size_t(j)] = std::sin(0.7 * j + 0.1), im[size_t(j)] = std::cos(1.3 * j);
    std::vector<double> fr = re, fi = im;
    fft_inplace(fr, fi);
    double err = 0, mag = 0;
    for (int k = 0; k < n; ++k) {
      long double sr = 0, si = 0;
      for (int j = 0; j < n; ++j) {
        const long double a = -2.0L * 3.14159265358979323846264338L * ((int64_t(j) * k) % n) / n;
        sr += re[size_t(j)] * std::cos(a) - im[size_t(j)] * std::sin(a);
        si += re[size_t(j)] * std::sin(a) + im[size_t(j)] * std::cos(a);
      }
      err = std::max(err, double(std::fabs(sr - fr[size_t(k)]) + std::fabs(si - fi[size_t(k)])));
      mag = std::max(mag, double(std::fabs(sr) + std::fabs(si)));
    }
    EXPECT_LT(err, 1e-12 * std::max(1.0, mag)) << "n = " << n;
  }
  std::vector<double> a, b;
  AIM_EXPECT_ERROR(fft_inplace(a, b), "non-zero length");
}

TEST(Signal, MelFilterbankIsTorchaudiosHtk) {
  EXPECT_NEAR(hz_to_mel_htk(700.0), 2595.0 * std::log10(2.0), 1e-9);
  EXPECT_NEAR(mel_to_hz_htk(hz_to_mel_htk(1234.5)), 1234.5, 1e-9);
  const Tensor fb = mel_filterbank(257, 0.0, 8000.0, 26, 16000.0, DType::f64);
  ASSERT_EQ(fb.sizes(), (Shape{257, 26}));
  const std::vector<double> w = fb.to_vector<double>();
  // Every band is a triangle of peak <= 1 that starts and ends at zero; bin 0 (0 Hz, the first
  // corner) and bin 256 (8 kHz, the last corner) weigh 0 everywhere.
  for (int64_t m = 0; m < 26; ++m) {
    double peak = 0, sum = 0;
    for (int64_t f = 0; f < 257; ++f)
      peak = std::max(peak, w[size_t(f * 26 + m)]), sum += w[size_t(f * 26 + m)];
    EXPECT_GT(peak, 0.3) << m;
    EXPECT_LE(peak, 1.0) << m;
    EXPECT_EQ(w[size_t(m)], 0.0);
    EXPECT_NEAR(w[size_t(256 * 26 + m)], 0.0, 1e-12);  // rounding of the last corner
  }
  // Band 0 rises from 0 Hz to its centre, mel 2840.03 / 27 -> 67.8 Hz: bin 1 (31.25 Hz) weighs
  // 31.25 / 67.8.
  const double c0 = mel_to_hz_htk(hz_to_mel_htk(8000.0) / 27.0);
  EXPECT_NEAR(w[size_t(1 * 26 + 0)], 31.25 / c0, 1e-12);
  AIM_EXPECT_ERROR(mel_filterbank(257, 0.0, 9000.0, 26, 16000.0), "f_max <= sample_rate / 2");
}

TEST(Signal, DctIsOrthonormal) {
  const int64_t M = 26;
  for (int64_t k = 0; k < M; ++k)
    for (int64_t q = 0; q < M; ++q) {
      double s = 0;
      for (int64_t m = 0; m < M; ++m) s += dct_weight(k, m, M, 0) * dct_weight(q, m, M, 0);
      EXPECT_NEAR(s, k == q ? 1.0 : 0.0, 1e-12) << k << " " << q;
    }
  // HTK's lifter 22: coefficient k scaled by 1 + 11 sin(pi k / 22).
  EXPECT_NEAR(dct_weight(3, 5, M, 22) / dct_weight(3, 5, M, 0), 1 + 11 * std::sin(M_PI * 3 / 22),
              1e-12);
}

TEST(Signal, ArgumentErrorsNameTheOpAndShapes) {
  RfftArgs r;
  r.x = Tensor::zeros({2, 400});
  r.y = Tensor::zeros({2, 129, 2});
  r.nfft = 256;
  AIM_EXPECT_ERROR(rfft(r), "[rfft] nfft must be >= the frame length 400");
  r.nfft = 512;
  AIM_EXPECT_ERROR(rfft(r), "[rfft] y must be [2, 257, 2] for nfft 512");
  r.y = Tensor::zeros({2, 257, 2}, DType::f64);
  AIM_EXPECT_ERROR(rfft(r), "y must have x's dtype f32");
  SignalFrameArgs f;
  f.x = Tensor::zeros({1, 1000});
  f.y = Tensor::zeros({1, 5, 400});
  AIM_EXPECT_ERROR(signal_frame(f), "[signal_frame] y must be [1, 4, 400]");
  f.p.window = WindowKind(7);
  AIM_EXPECT_ERROR(signal_frame(f), "window must be 0 (rectangular), 1 (hann) or 2 (hamming)");
  MelFbankArgs m;
  m.x = Tensor::zeros({3, 257});
  m.fb = Tensor::zeros({256, 26});
  m.y = Tensor::zeros({3, 26});
  AIM_EXPECT_ERROR(mel_fbank(m), "[mel_fbank] x [3, 257] f32, fb [256, 26] f32");
  DctArgs d;
  d.x = Tensor::zeros({3, 26});
  d.y = Tensor::zeros({3, 27});
  AIM_EXPECT_ERROR(dct(d), "[dct] y must be [3, K] with K <= M = 26");
  PowerSpectrumArgs p;
  p.x = Tensor::zeros({3, 5, 3});
  p.y = Tensor::zeros({3, 5});
  AIM_EXPECT_ERROR(power_spectrum(p), "[power_spectrum] x [R, F, 2] and y [R, F] disagree");
}

}  // namespace
}  // namespace aim::kernels
