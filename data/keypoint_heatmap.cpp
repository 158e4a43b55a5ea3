#include "data/keypoint_heatmap.h"

#include <algorithm>
#include <cmath>

#include "tensor/check.h"

namespace aim::data {
namespace {

int64_t reflect101(int64_t i, int64_t n) {
  if (n == 1) return 0;
  while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
  return i;
}

}  // namespace

void cv_gaussian_blur(const float* src, float* dst, int64_t h, int64_t w, int64_t k) {
  AIM_CHECK(k % 2 == 1 && k > 7, "gaussian blur: kernel ", k, " must be odd and > 7");
  const double sigma = 0.3 * ((double(k) - 1) * 0.5 - 1) + 0.8;
  std::vector<double> g(size_t(k), 0.0);
  double s = 0;
  for (int64_t i = 0; i < k; ++i) {
    const double d = double(i) - double(k - 1) / 2;
    g[size_t(i)] = std::exp(-d * d / (2 * sigma * sigma));
    s += g[size_t(i)];
  }
  for (double& v : g) v /= s;
  const int64_t r = k / 2;
  std::vector<double> rows(size_t(h * w));  // the row filter (along x) first, as OpenCV
  for (int64_t i = 0; i < h; ++i)
    for (int64_t j = 0; j < w; ++j) {
      double a = 0;
      for (int64_t t = -r; t <= r; ++t) a += g[size_t(t + r)] * src[i * w + reflect101(j + t, w)];
      rows[size_t(i * w + j)] = a;
    }
  for (int64_t i = 0; i < h; ++i)
    for (int64_t j = 0; j < w; ++j) {
      double a = 0;
      for (int64_t t = -r; t <= r; ++t)
        a += g[size_t(t + r)] * rows[size_t(reflect101(i + t, h) * w + j)];
      dst[i * w + j] = float(a);
    }
}

void cpn_keypoint_heatmap(double x, double y, double v, int64_t in_h, int64_t in_w, int64_t out_h,
                          int64_t out_w, int64_t k, float* out) {
  std::fill(out, out + out_h * out_w, 0.0f);
  if (!(v > 0) || x < 0 || y < 0) return;
  y = std::min(y, double(in_h - 1));
  x = std::min(x, double(in_w - 1));
  std::vector<float> one(size_t(out_h * out_w), 0.0f);
  one[size_t(int64_t(y * double(out_h) / double(in_h)) * out_w +
             int64_t(x * double(out_w) / double(in_w)))] = 1.0f;
  cv_gaussian_blur(one.data(), out, out_h, out_w, k);
  const float am = *std::max_element(out, out + out_h * out_w);
  if (am <= 1e-8f) return;
  for (int64_t i = 0; i < out_h * out_w; ++i) out[i] /= am / 255.0f;
}

std::vector<float> cpn_decode_keypoints(const float* heat, int64_t K, int64_t h, int64_t w,
                                        int64_t in_h, int64_t in_w) {
  constexpr int64_t border = 10;
  const int64_t H = h + 2 * border, W = w + 2 * border;
  const double sx = double(in_w) / double(w), sy = double(in_h) / double(h);
  std::vector<float> out(size_t(3 * K)), pad(size_t(H * W)), dr(size_t(H * W));
  for (int64_t k = 0; k < K; ++k) {
    const float* m = heat + k * h * w;
    // res /= np.amax(res) (a map without a positive maximum is kept as it is: the reference
    // would divide by zero or flip it).
    const float am = *std::max_element(m, m + h * w);
    std::fill(pad.begin(), pad.end(), 0.0f);
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < w; ++j)
        pad[size_t((i + border) * W + j + border)] = am > 0 ? m[i * w + j] / am : m[i * w + j];
    cv_gaussian_blur(pad.data(), dr.data(), H, W, 21);
    const int64_t a = int64_t(std::max_element(dr.begin(), dr.end()) - dr.begin());
    int64_t y = a / W, x = a % W;
    dr[size_t(a)] = 0;
    const int64_t b = int64_t(std::max_element(dr.begin(), dr.end()) - dr.begin());
    const int64_t py = b / W - y, px = b % W - x;
    y -= border, x -= border;
    double fx = double(x), fy = double(y);
    const double ln = std::sqrt(double(px * px + py * py));
    if (ln > 1e-3) fx += 0.25 * double(px) / ln, fy += 0.25 * double(py) / ln;
    fx = std::max(0.0, std::min(fx, double(w - 1)));
    fy = std::max(0.0, std::min(fy, double(h - 1)));
    out[size_t(3 * k)] = float(fx * sx + sx / 2);
    out[size_t(3 * k + 1)] = float(fy * sy + sy / 2);
    const int64_t ry = int64_t(std::round(fy) + 1e-10), rx = int64_t(std::round(fx) + 1e-10);
    out[size_t(3 * k + 2)] = m[ry * w + rx] / 255.0f + 0.5f;
  }
  return out;
}

}  // namespace aim::data
