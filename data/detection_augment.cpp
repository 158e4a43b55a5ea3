#include "data/detection_augment.h"

#include <algorithm>
#include <cmath>

#include "data/philox_draw.h"
#include "tensor/check.h"

namespace aim::data {
namespace {

double uniform(PhiloxDraw& d, double lo, double hi) { return lo + (hi - lo) * d.unit(); }
bool coin(PhiloxDraw& d) { return d.below(2) == 1; }

// RGB <-> HSV (h in degrees [0, 360), s and v in [0, 1]), per pixel.
void rgb_to_hsv(float r, float g, float b, float& h, float& s, float& v) {
  const float mx = std::max({r, g, b}), mn = std::min({r, g, b}), c = mx - mn;
  v = mx;
  s = mx > 0 ? c / mx : 0;
  if (c <= 0) {
    h = 0;
  } else if (mx == r) {
    h = 60.0f * std::fmod((g - b) / c + 6.0f, 6.0f);
  } else if (mx == g) {
    h = 60.0f * ((b - r) / c + 2.0f);
  } else {
    h = 60.0f * ((r - g) / c + 4.0f);
  }
}

void hsv_to_rgb(float h, float s, float v, float& r, float& g, float& b) {
  const float c = v * s, hp = h / 60.0f, x = c * (1 - std::fabs(std::fmod(hp, 2.0f) - 1));
  float r1 = 0, g1 = 0, b1 = 0;
  switch (int(hp) % 6) {
    case 0:
      r1 = c, g1 = x;
      break;
    case 1:
      r1 = x, g1 = c;
      break;
    case 2:
      g1 = c, b1 = x;
      break;
    case 3:
      g1 = x, b1 = c;
      break;
    case 4:
      r1 = x, b1 = c;
      break;
    default:
      r1 = c, b1 = x;
      break;
  }
  const float m = v - c;
  r = r1 + m, g = g1 + m, b = b1 + m;
}

void photometric(FloatImage& img, PhiloxDraw& d) {
  const int64_t HW = img.height * img.width;
  float* p = img.chw.data();
  auto clamp_all = [&] {
    for (float& v : img.chw) v = std::clamp(v, 0.0f, 1.0f);
  };
  if (coin(d)) {
    const float delta = float(uniform(d, -32.0, 32.0) / 255.0);
    for (float& v : img.chw) v += delta;
    clamp_all();
  }
  const bool contrast_first = coin(d);
  auto contrast = [&] {
    if (!coin(d)) return;
    const float k = float(uniform(d, 0.5, 1.5));
    for (float& v : img.chw) v *= k;
    clamp_all();
  };
  if (contrast_first) contrast();
  const bool sat = coin(d), hue = coin(d);
  const float ks = sat ? float(uniform(d, 0.5, 1.5)) : 1.0f;
  const float dh = hue ? float(uniform(d, -18.0, 18.0)) : 0.0f;
  if (sat || hue)
    for (int64_t i = 0; i < HW; ++i) {
      float h, s, v;
      rgb_to_hsv(p[i], p[HW + i], p[2 * HW + i], h, s, v);
      s = std::clamp(s * ks, 0.0f, 1.0f);
      h = std::fmod(h + dh + 360.0f, 360.0f);
      hsv_to_rgb(h, s, v, p[i], p[HW + i], p[2 * HW + i]);
    }
  if (!contrast_first) contrast();
  if (coin(d)) {  // a random permutation of the channels
    static const int kPerms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                     {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    const int* q = kPerms[d.below(6)];
    std::vector<float> out(img.chw.size());
    for (int c = 0; c < 3; ++c) std::copy(p + q[c] * HW, p + (q[c] + 1) * HW, out.begin() + c * HW);
    img.chw.swap(out);
  }
}

void expand(FloatImage& img, std::vector<AugmentBox>& boxes, const DetectionAugmentOptions& o,
            PhiloxDraw& d) {
  if (!coin(d)) return;
  const double ratio = uniform(d, 1.0, o.max_expand);
  const int64_t H = img.height, W = img.width;
  const int64_t nh = int64_t(double(H) * ratio), nw = int64_t(double(W) * ratio);
  const int64_t top = int64_t(uniform(d, 0, double(nh - H))),
                left = int64_t(uniform(d, 0, double(nw - W)));
  FloatImage out;
  out.height = nh, out.width = nw;
  out.chw.resize(size_t(3 * nh * nw));
  for (int c = 0; c < 3; ++c) {
    std::fill(out.chw.begin() + c * nh * nw, out.chw.begin() + (c + 1) * nh * nw,
              o.mean[size_t(c)]);
    for (int64_t i = 0; i < H; ++i)
      std::copy(img.chw.begin() + (c * H + i) * W, img.chw.begin() + (c * H + i + 1) * W,
                out.chw.begin() + (c * nh + top + i) * nw + left);
  }
  img = std::move(out);
  for (AugmentBox& b : boxes)
    b.x1 += float(left), b.x2 += float(left), b.y1 += float(top), b.y2 += float(top);
}

double iou_with(const AugmentBox& b, double x1, double y1, double x2, double y2) {
  const double w = std::max(0.0, std::min(double(b.x2), x2) - std::max(double(b.x1), x1));
  const double h = std::max(0.0, std::min(double(b.y2), y2) - std::max(double(b.y1), y1));
  const double inter = w * h;
  return inter / ((double(b.x2) - b.x1) * (double(b.y2) - b.y1) + (x2 - x1) * (y2 - y1) - inter);
}

void crop(FloatImage& img, std::vector<AugmentBox>& boxes, PhiloxDraw& d) {
  static const double kMinIou[6] = {-1, 0.1, 0.3, 0.7, 0.9, -INFINITY};  // -1: no crop
  const double min_iou = kMinIou[d.below(6)];
  if (min_iou == -1 || boxes.empty()) return;
  const double H = double(img.height), W = double(img.width);
  for (int trial = 0; trial < 50; ++trial) {
    const double w = uniform(d, 0.3 * W, W), h = uniform(d, 0.3 * H, H);
    const double left = uniform(d, 0, W - w), top = uniform(d, 0, H - h);
    if (h / w < 0.5 || h / w > 2) continue;
    const int64_t x1 = int64_t(left), y1 = int64_t(top), x2 = int64_t(left + w),
                  y2 = int64_t(top + h);
    if (x2 <= x1 || y2 <= y1) continue;
    bool ok = true;
    for (const AugmentBox& b : boxes)
      ok = ok && iou_with(b, double(x1), double(y1), double(x2), double(y2)) >= min_iou;
    if (!ok) continue;
    std::vector<AugmentBox> kept;
    for (const AugmentBox& b : boxes) {
      const double cx = 0.5 * (double(b.x1) + b.x2), cy = 0.5 * (double(b.y1) + b.y2);
      if (!(cx > double(x1) && cy > double(y1) && cx < double(x2) && cy < double(y2))) continue;
      AugmentBox c = b;
      c.x1 = std::max(c.x1, float(x1)) - float(x1), c.y1 = std::max(c.y1, float(y1)) - float(y1);
      c.x2 = std::min(c.x2, float(x2)) - float(x1), c.y2 = std::min(c.y2, float(y2)) - float(y1);
      kept.push_back(c);
    }
    if (kept.empty()) continue;
    FloatImage out;
    out.height = y2 - y1, out.width = x2 - x1;
    out.chw.resize(size_t(3 * out.height * out.width));
    for (int c = 0; c < 3; ++c)
      for (int64_t i = 0; i < out.height; ++i)
        std::copy(img.chw.begin() + (c * img.height + y1 + i) * img.width + x1,
                  img.chw.begin() + (c * img.height + y1 + i) * img.width + x2,
                  out.chw.begin() + (c * out.height + i) * out.width);
    img = std::move(out);
    boxes = std::move(kept);
    return;
  }
}

void flip(FloatImage& img, std::vector<AugmentBox>& boxes, PhiloxDraw& d) {
  if (!coin(d)) return;
  const int64_t W = img.width;
  for (int64_t r = 0; r < 3 * img.height; ++r)
    std::reverse(img.chw.begin() + r * W, img.chw.begin() + (r + 1) * W);
  for (AugmentBox& b : boxes) {
    const float x1 = float(W) - b.x2, x2 = float(W) - b.x1;
    b.x1 = x1, b.x2 = x2;
  }
}

}  // namespace

FloatImage resize_bilinear(const FloatImage& img, int64_t out_h, int64_t out_w) {
  AIM_CHECK(out_h > 0 && out_w > 0 && img.height > 0 && img.width > 0, "resize: ", img.height, "x",
            img.width, " to ", out_h, "x", out_w);
  FloatImage out;
  out.height = out_h, out.width = out_w;
  out.chw.resize(size_t(3 * out_h * out_w));
  const double sy = double(img.height) / double(out_h), sx = double(img.width) / double(out_w);
  for (int64_t i = 0; i < out_h; ++i) {
    const double fy = std::max(0.0, (double(i) + 0.5) * sy - 0.5);
    const int64_t y0 = std::min<int64_t>(int64_t(fy), img.height - 1),
                  y1 = std::min<int64_t>(y0 + 1, img.height - 1);
    const float wy = float(fy - double(y0));
    for (int64_t j = 0; j < out_w; ++j) {
      const double fx = std::max(0.0, (double(j) + 0.5) * sx - 0.5);
      const int64_t x0 = std::min<int64_t>(int64_t(fx), img.width - 1),
                    x1 = std::min<int64_t>(x0 + 1, img.width - 1);
      const float wx = float(fx - double(x0));
      for (int c = 0; c < 3; ++c) {
        const float* p = img.chw.data() + c * img.height * img.width;
        const float top = p[y0 * img.width + x0] * (1 - wx) + p[y0 * img.width + x1] * wx;
        const float bot = p[y1 * img.width + x0] * (1 - wx) + p[y1 * img.width + x1] * wx;
        out.chw[size_t((c * out_h + i) * out_w + j)] = top * (1 - wy) + bot * wy;
      }
    }
  }
  return out;
}

void augment_detection(FloatImage& img, std::vector<AugmentBox>& boxes, int64_t out_h,
                       int64_t out_w, const DetectionAugmentOptions& o, uint64_t key,
                       uint64_t block) {
  AIM_CHECK(img.chw.size() == size_t(3 * img.height * img.width) && img.height > 0 && img.width > 0,
            "augment: the image holds ", img.chw.size(), " values for 3x", img.height, "x",
            img.width);
  AIM_CHECK(o.max_expand >= 1, "augment: max_expand must be >= 1, got ", o.max_expand);
  PhiloxDraw d(key, block);
  if (o.photometric) photometric(img, d);
  if (o.expand) expand(img, boxes, o, d);
  if (o.crop) crop(img, boxes, d);
  if (o.flip) flip(img, boxes, d);
  const float sy = float(out_h) / float(img.height), sx = float(out_w) / float(img.width);
  img = resize_bilinear(img, out_h, out_w);
  for (AugmentBox& b : boxes) b.x1 *= sx, b.x2 *= sx, b.y1 *= sy, b.y2 *= sy;
}

}  // namespace aim::data
