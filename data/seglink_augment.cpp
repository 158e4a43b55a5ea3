#include "data/seglink_augment.h"

#include <algorithm>
#include <cmath>

#include "data/philox_draw.h"
#include "tensor/check.h"

namespace aim::data {
namespace {

double uniform(PhiloxDraw& d, double lo, double hi) { return lo + (hi - lo) * d.unit(); }

double box_area(const CropBox& b) {
  return std::max(b[2] - b[0], 0.0) * std::max(b[3] - b[1], 0.0);
}

double inter_area(const CropBox& a, const CropBox& b) {
  return box_area(
      {std::max(a[0], b[0]), std::max(a[1], b[1]), std::min(a[2], b[2]), std::min(a[3], b[3])});
}

// Keys' cubic convolution weights (a = -0.75, as TF) of the 4 taps floor(x) - 1 .. + 2 at
// fraction t of the way from floor(x) to floor(x) + 1.
std::array<float, 4> cubic_weights(double t) {
  constexpr double A = -0.75;
  auto near = [](double x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };       // |x| <= 1
  auto far = [](double x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };  // 1 < |x| < 2
  return {float(far(t + 1)), float(near(t)), float(near(1 - t)), float(far(2 - t))};
}

}  // namespace

const char* seglink_resize_name(SeglinkResize m) {
  switch (m) {
    case SeglinkResize::area:
      return "area";
    case SeglinkResize::bicubic:
      return "bicubic";
    case SeglinkResize::bilinear:
      return "bilinear";
    default:
      return "nearest";
  }
}

FloatImage tf_resize(const FloatImage& img, int64_t out_h, int64_t out_w, SeglinkResize m) {
  const int64_t H = img.height, W = img.width;
  AIM_CHECK(out_h > 0 && out_w > 0 && H > 0 && W > 0 && img.chw.size() == size_t(3 * H * W),
            "tf_resize: a ", H, "x", W, " image (", img.chw.size(), " values) to ", out_h, "x",
            out_w);
  const double sy = double(H) / double(out_h), sx = double(W) / double(out_w);
  FloatImage out;
  out.height = out_h, out.width = out_w;
  out.chw.assign(size_t(3 * out_h * out_w), 0.0f);
  // Separable: per output row (and column), the source indices and weights.
  struct Taps {
    std::vector<int64_t> idx;
    std::vector<float> w;
  };
  auto taps = [&](int64_t n_out, int64_t n_in, double scale) {
    std::vector<Taps> t(static_cast<size_t>(n_out));
    for (int64_t i = 0; i < n_out; ++i) {
      Taps& k = t[size_t(i)];
      const double src = double(i) * scale;
      const int64_t lo = int64_t(std::floor(src));
      auto clamp = [&](int64_t v) { return std::clamp<int64_t>(v, 0, n_in - 1); };
      switch (m) {
        case SeglinkResize::nearest:
          k.idx = {std::min(lo, n_in - 1)}, k.w = {1.0f};
          break;
        case SeglinkResize::bilinear:
          k.idx = {lo, std::min(lo + 1, n_in - 1)};
          k.w = {float(1 - (src - double(lo))), float(src - double(lo))};
          break;
        case SeglinkResize::bicubic: {
          const std::array<float, 4> w = cubic_weights(src - double(lo));
          k.idx = {clamp(lo - 1), clamp(lo), clamp(lo + 1), clamp(lo + 2)};
          k.w.assign(w.begin(), w.end());
          break;
        }
        case SeglinkResize::area: {
          const double a = src, b = double(i + 1) * scale;
          for (int64_t j = int64_t(std::floor(a)); j < int64_t(std::ceil(b)); ++j) {
            const double cover = std::min(double(j + 1), b) - std::max(double(j), a);
            k.idx.push_back(clamp(j));
            k.w.push_back(float(cover / scale));
          }
          break;
        }
      }
    }
    return t;
  };
  const std::vector<Taps> ty = taps(out_h, H, sy), tx = taps(out_w, W, sx);
  std::vector<float> row(static_cast<size_t>(W));
  for (int c = 0; c < 3; ++c) {
    const float* src = img.chw.data() + c * H * W;
    float* dst = out.chw.data() + c * out_h * out_w;
    for (int64_t i = 0; i < out_h; ++i) {
      const Taps& ky = ty[size_t(i)];
      std::fill(row.begin(), row.end(), 0.0f);
      for (size_t a = 0; a < ky.idx.size(); ++a) {
        const float* r = src + ky.idx[a] * W;
        for (int64_t x = 0; x < W; ++x) row[size_t(x)] += ky.w[a] * r[x];
      }
      for (int64_t j = 0; j < out_w; ++j) {
        const Taps& kx = tx[size_t(j)];
        float v = 0;
        for (size_t a = 0; a < kx.idx.size(); ++a) v += kx.w[a] * row[size_t(kx.idx[a])];
        dst[i * out_w + j] = v;
      }
    }
  }
  return out;
}

bool sample_crop_bbox(int64_t H, int64_t W, const std::vector<CropBox>& envelopes,
                      double min_overlap, const SeglinkAugmentOptions& o, PhiloxDraw& d,
                      CropBox* crop) {
  const double h = double(H), w = double(W), shorter = std::min(h, w);
  for (int64_t trial = 0; trial < o.max_trials; ++trial) {
    const double size = uniform(d, shorter * o.min_scale, shorter * o.max_scale);
    const double r2 = (size / shorter) * (size / shorter);
    const double ar = uniform(d, std::max(o.min_aspect, r2), std::min(o.max_aspect, 1.0 / r2));
    const double bw = size * std::sqrt(ar), bh = size / std::sqrt(ar);
    const double x = uniform(d, 0.0, w - 1 - bw), y = uniform(d, 0.0, h - 1 - bh);
    auto cx = [&](double v) { return std::clamp(v, 0.0, w - 1); };
    auto cy = [&](double v) { return std::clamp(v, 0.0, h - 1); };
    const CropBox c = {cx(x), cy(y), cx(x + bw), cy(y + bh)};
    for (const CropBox& e : envelopes) {
      const double inter = inter_area(e, c);
      const double overlap = o.coverage
                                 ? inter / (box_area(e) + 1e-6)
                                 : inter / (box_area({std::min(e[0], c[0]), std::min(e[1], c[1]),
                                                      std::max(e[2], c[2]), std::max(e[3], c[3])}) +
                                            1e-6);
      if (overlap >= min_overlap) {
        *crop = c;
        return true;
      }
    }
  }
  return false;
}

bool project_quad(std::array<double, 8>& q, const CropBox& crop, int64_t out_h, int64_t out_w) {
  const double sx = double(out_w - 1) / (crop[2] - crop[0] + 1e-6);
  const double sy = double(out_h - 1) / (crop[3] - crop[1] + 1e-6);
  int inside = 0;
  for (int k = 0; k < 4; ++k) {
    double& x = q[size_t(2 * k)];
    double& y = q[size_t(2 * k + 1)];
    x = (x - crop[0]) * sx, y = (y - crop[1]) * sy;
    inside += x >= 0 && x <= double(out_w - 1) && y >= 0 && y <= double(out_h - 1);
  }
  return inside >= 1;
}

SeglinkAugmentInfo augment_seglink(FloatImage& img, std::vector<IcdarWord>& words, int64_t out_h,
                                   int64_t out_w, const SeglinkAugmentOptions& o, uint64_t key,
                                   uint64_t block) {
  const int64_t H = img.height, W = img.width;
  AIM_CHECK(H > 0 && W > 0 && img.chw.size() == size_t(3 * H * W), "seglink augment: the image ",
            "holds ", img.chw.size(), " values for 3x", H, "x", W);
  AIM_CHECK(out_h > 1 && out_w > 1, "seglink augment: output ", out_h, "x", out_w);
  AIM_CHECK(o.max_trials >= 0 && o.min_scale > 0 && o.min_scale <= o.max_scale &&
                o.max_scale <= 1 && o.min_aspect > 0 && o.min_aspect <= 1 && o.max_aspect >= 1,
            "seglink augment: bad sampler settings (trials ", o.max_trials, ", scale [",
            o.min_scale, ", ", o.max_scale, "], aspect [", o.min_aspect, ", ", o.max_aspect, "])");
  PhiloxDraw d(key, block);
  SeglinkAugmentInfo info;
  const CropBox whole = {0, 0, double(W - 1), double(H - 1)};
  std::vector<CropBox> candidates = {whole};
  if (o.crop) {
    std::vector<CropBox> env;
    for (const IcdarWord& wd : words) {
      CropBox e = {wd.quad[0], wd.quad[1], wd.quad[0], wd.quad[1]};
      for (int k = 1; k < 4; ++k) {
        e[0] = std::min(e[0], wd.quad[size_t(2 * k)]),
        e[2] = std::max(e[2], wd.quad[size_t(2 * k)]);
        e[1] = std::min(e[1], wd.quad[size_t(2 * k + 1)]);
        e[3] = std::max(e[3], wd.quad[size_t(2 * k + 1)]);
      }
      env.push_back(e);
    }
    for (double m : o.min_overlaps) {
      CropBox c{};
      if (sample_crop_bbox(H, W, env, m, o, d, &c)) candidates.push_back(c);
    }
  }
  info.candidates = int64_t(candidates.size());
  info.crop = candidates[size_t(d.below(info.candidates))];
  info.resize = o.random_interpolation ? SeglinkResize(d.below(4)) : SeglinkResize::bilinear;

  // The inclusive slice of the rounded corners (tf.round: half to even, the default mode of
  // nearbyint), then the resize.
  for (int k = 0; k < 4; ++k) info.slice[size_t(k)] = int64_t(std::nearbyint(info.crop[size_t(k)]));
  const int64_t x0 = info.slice[0], y0 = info.slice[1];
  const int64_t cw = info.slice[2] - x0 + 1, ch = info.slice[3] - y0 + 1;
  if (cw != W || ch != H) {
    FloatImage c;
    c.height = ch, c.width = cw;
    c.chw.resize(size_t(3 * ch * cw));
    for (int p = 0; p < 3; ++p)
      for (int64_t i = 0; i < ch; ++i)
        std::copy_n(img.chw.begin() + (p * H + y0 + i) * W + x0, cw,
                    c.chw.begin() + (p * ch + i) * cw);
    img = std::move(c);
  }
  img = tf_resize(img, out_h, out_w, info.resize);

  std::vector<IcdarWord> kept;
  for (IcdarWord& wd : words)
    if (project_quad(wd.quad, info.crop, out_h, out_w)) kept.push_back(std::move(wd));
  words = std::move(kept);
  return info;
}

}  // namespace aim::data
