#include "data/text_detection_synthetic.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "data/philox_draw.h"
#include "data/polygon.h"
#include "tensor/check.h"

namespace aim::data {
namespace {

constexpr uint64_t kTagLayout = 60, kTagNoise = 61;
// Philox blocks per sample for its layout (4 words each): 16 words x 20 tries x ~17 draws plus
// the background's stay below these 16384 words, so samples never share draws.
constexpr uint64_t kLayoutBlocks = 4096;

// The rectangle (cx, cy, w, h, theta) as corners clockwise on the image from its top left.
std::array<double, 8> rect_quad(double cx, double cy, double w, double h, double theta) {
  const double c = std::cos(theta), s = std::sin(theta);
  const double ux = c * w / 2, uy = s * w / 2, vx = -s * h / 2, vy = c * h / 2;
  return {cx - ux - vx, cy - uy - vy, cx + ux - vx, cy + uy - vy,
          cx + ux + vx, cy + uy + vy, cx - ux + vx, cy - uy + vy};
}

// Whether (X, Y) in a glyph cell [0, gw] x [0, h] is ink of glyph `kind` (stroke width t).
bool glyph_ink(int kind, double X, double Y, double gw, double h, double t) {
  const bool left = X<t, right = X> gw - t, top = Y<t, bottom = Y> h - t;
  const bool middle = std::fabs(Y - h / 2) < t / 2;
  switch (kind) {
    case 0:  // rectangle ring
      return left || right || top || bottom;
    case 1:  // H
      return left || right || middle;
    case 2:  // E
      return left || top || bottom || middle;
    case 3:  // U
      return left || right || bottom;
    case 4:  // Z: bars and the diagonal from the top right to the bottom left
      return top || bottom || std::fabs(X * h + Y * gw - gw * h) / std::hypot(h, gw) < t / 2;
    default: {  // ellipse ring
      const double ax = gw / 2, ay = h / 2, x = X - ax, y = Y - ay;
      const double ix = std::max(ax - t, 1e-6), iy = std::max(ay - t, 1e-6);
      return (x * x) / (ax * ax) + (y * y) / (ay * ay) <= 1 &&
             (x * x) / (ix * ix) + (y * y) / (iy * iy) >= 1;
    }
  }
}

}  // namespace

TextDetectionSyntheticSource::TextDetectionSyntheticSource(const TextDetectionSyntheticConfig& cfg)
    : cfg_(cfg) {
  AIM_CHECK(cfg_.height >= 16 && cfg_.width >= 16, "text-detection-synthetic: the image must be ",
            "at least 16x16, got ", cfg_.height, "x", cfg_.width);
  AIM_CHECK(cfg_.max_words >= 1 && cfg_.max_words <= 16,
            "text-detection-synthetic: max_words must be in [1, 16], got ", cfg_.max_words);
  AIM_CHECK(cfg_.min_height > 0 && cfg_.min_height <= cfg_.max_height && cfg_.max_height <= 0.5,
            "text-detection-synthetic: need 0 < min_height <= max_height <= 0.5, got ",
            cfg_.min_height, ", ", cfg_.max_height);
  AIM_CHECK(cfg_.max_angle >= 0 && cfg_.max_angle <= 90,
            "text-detection-synthetic: max_angle must be in [0, 90] degrees, got ", cfg_.max_angle);
  AIM_CHECK(cfg_.vertical_fraction >= 0 && cfg_.vertical_fraction <= 1 &&
                cfg_.dont_care_fraction >= 0 && cfg_.dont_care_fraction <= 1,
            "text-detection-synthetic: vertical_fraction and dont_care_fraction must be in ",
            "[0, 1], got ", cfg_.vertical_fraction, ", ", cfg_.dont_care_fraction);
  AIM_CHECK(cfg_.noise >= 0 && cfg_.epoch_size >= 1 && cfg_.eval_size >= 1,
            "text-detection-synthetic: noise must be >= 0 and the set sizes >= 1");
  layout_key_ = philox_key(cfg_.seed, kTagLayout);
  noise_key_ = philox_key(cfg_.seed, kTagNoise);
}

std::string TextDetectionSyntheticSource::describe() const {
  std::ostringstream os;
  os << "text-detection-synthetic seed " << cfg_.seed << " (" << cfg_.height << "x" << cfg_.width
     << ", <= " << cfg_.max_words << " words)";
  return os.str();
}

std::string TextDetectionSyntheticSource::fingerprint() const {
  std::ostringstream os;
  os.precision(17);
  os << "text-detection-synthetic:seed=" << cfg_.seed << ",height=" << cfg_.height
     << ",width=" << cfg_.width << ",words=" << cfg_.max_words << ",size=" << cfg_.min_height << "-"
     << cfg_.max_height << ",angle=" << cfg_.max_angle << ",vertical=" << cfg_.vertical_fraction
     << ",dont_care=" << cfg_.dont_care_fraction << ",noise=" << cfg_.noise
     << ",epoch=" << cfg_.epoch_size << ",eval=" << cfg_.eval_size;
  return os.str();
}

std::vector<SyntheticWord> TextDetectionSyntheticSource::sample(int64_t index, float* img) const {
  AIM_CHECK(index >= 0, "text-detection-synthetic: negative sample index ", index);
  const int64_t H = cfg_.height, W = cfg_.width, HW = H * W;
  PhiloxDraw d(layout_key_, uint64_t(index) * kLayoutBlocks);
  // Background: gradient + two ripples per channel, within [0.25, 0.75].
  float base[3], gx[3], gy[3], amp[2][3];
  double fx[2], fy[2], phase[2];
  for (int c = 0; c < 3; ++c) {
    base[c] = float(0.35 + 0.3 * d.unit());
    gx[c] = float(-0.1 + 0.2 * d.unit());
    gy[c] = float(-0.1 + 0.2 * d.unit());
    for (int k = 0; k < 2; ++k) amp[k][c] = float(-0.05 + 0.1 * d.unit());
  }
  for (int k = 0; k < 2; ++k) {
    fx[k] = 2 * M_PI * (-4 + 8 * d.unit()) / double(W);
    fy[k] = 2 * M_PI * (-4 + 8 * d.unit()) / double(H);
    phase[k] = 2 * M_PI * d.unit();
  }
  if (img)
    for (int64_t i = 0; i < H; ++i)
      for (int64_t j = 0; j < W; ++j) {
        const float r0 = float(std::sin(fx[0] * double(j) + fy[0] * double(i) + phase[0]));
        const float r1 = float(std::sin(fx[1] * double(j) + fy[1] * double(i) + phase[1]));
        for (int c = 0; c < 3; ++c)
          img[c * HW + i * W + j] =
              std::clamp(base[c] + gx[c] * (float(j) / float(W) - 0.5f) +
                             gy[c] * (float(i) / float(H) - 0.5f) + amp[0][c] * r0 + amp[1][c] * r1,
                         0.25f, 0.75f);
      }
  const int64_t n = 1 + d.below(cfg_.max_words);
  const double side = double(std::min(H, W));
  std::vector<SyntheticWord> words;
  for (int64_t k = 0; k < n; ++k) {
    SyntheticWord w;
    const bool dark = d.unit() < 0.5;
    for (int c = 0; c < 3; ++c)
      w.rgb[size_t(c)] = float(dark ? 0.12 * d.unit() : 0.88 + 0.12 * d.unit());
    w.dont_care = d.unit() < cfg_.dont_care_fraction;
    if (w.dont_care)  // a quarter of the contrast against mid grey
      for (float& v : w.rgb) v = 0.375f + 0.25f * v;
    std::array<int, 8> kinds{};
    bool placed = false;
    for (int attempt = 0; attempt < 20 && !placed; ++attempt) {
      const double h =
          side * cfg_.min_height * std::exp(std::log(cfg_.max_height / cfg_.min_height) * d.unit());
      const double gw = h * (0.45 + 0.3 * d.unit()), gap = 0.2 * h;
      int64_t glyphs = 2 + d.below(7);
      for (int g = 0; g < 8; ++g) kinds[size_t(g)] = int(d.below(kGlyphKinds));
      double theta = (2 * d.unit() - 1) * cfg_.max_angle * M_PI / 180;
      if (d.unit() < cfg_.vertical_fraction) theta = d.unit() < 0.5 ? M_PI / 2 : -M_PI / 2;
      const double c = std::fabs(std::cos(theta)), s = std::fabs(std::sin(theta));
      double width = double(glyphs) * gw + double(glyphs - 1) * gap;
      // Fewer glyphs until the word fits (its half extents along x and y).
      while (glyphs > 2 && (c * width + s * h > double(W) || s * width + c * h > double(H)))
        --glyphs, width -= gw + gap;
      const double ex = 0.5 * (c * width + s * h), ey = 0.5 * (s * width + c * h);
      if (2 * ex > double(W) || 2 * ey > double(H)) continue;
      const double cx = ex + (double(W) - 2 * ex) * d.unit();
      const double cy = ey + (double(H) - 2 * ey) * d.unit();
      const std::array<double, 8> margin = rect_quad(cx, cy, width + 0.4 * h, 1.4 * h, theta);
      bool clear = true;
      for (const SyntheticWord& o : words)
        clear = clear &&
                intersection_area(quad_polygon(margin.data()), quad_polygon(o.quad.data())) == 0;
      if (!clear) continue;
      w.cx = cx, w.cy = cy, w.w = width, w.h = h, w.theta = theta, w.glyphs = glyphs;
      w.quad = rect_quad(cx, cy, width, h, theta);
      placed = true;
      if (!img) break;
      // Paint the pixels whose centres fall on a glyph's ink, in the word's frame (s along the
      // reading direction from the word's start, r across from its top).
      const double uc = std::cos(theta), us = std::sin(theta), t = std::max(1.0, 0.16 * h);
      const int64_t i0 = std::max<int64_t>(0, int64_t(cy - ey) - 1),
                    i1 = std::min<int64_t>(H, int64_t(cy + ey) + 2);
      const int64_t j0 = std::max<int64_t>(0, int64_t(cx - ex) - 1),
                    j1 = std::min<int64_t>(W, int64_t(cx + ex) + 2);
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) {
          const double px = double(j) + 0.5 - cx, py = double(i) + 0.5 - cy;
          const double sx = px * uc + py * us + width / 2, ry = -px * us + py * uc + h / 2;
          if (sx < 0 || sx >= width || ry < 0 || ry >= h) continue;
          const int64_t g = std::min<int64_t>(glyphs - 1, int64_t(sx / (gw + gap)));
          const double X = sx - double(g) * (gw + gap);
          if (X > gw || !glyph_ink(kinds[size_t(g)], X, ry, gw, h, t)) continue;
          for (int ch = 0; ch < 3; ++ch) img[ch * HW + i * W + j] = w.rgb[size_t(ch)];
        }
    }
    if (placed) words.push_back(w);
  }
  if (img) {
    const uint64_t blocks = philox::blocks_for(uint64_t(3 * HW));
    std::vector<float> z(size_t(3 * HW));
    philox_fill_normal(noise_key_, uint64_t(index) * blocks, 3 * HW, z.data());
    for (int64_t e = 0; e < 3 * HW; ++e)
      img[e] = std::clamp(img[e] + float(cfg_.noise) * z[size_t(e)], 0.0f, 1.0f);
  }
  return words;
}

TensorMap TextDetectionSyntheticSource::batch(int64_t first, int64_t count) const {
  const int64_t G = cfg_.max_words, HW = cfg_.height * cfg_.width;
  Tensor images = Tensor::empty({count, 3, cfg_.height, cfg_.width}, DType::f32);
  Tensor quads = Tensor::zeros({count, G, 8}, DType::f32);
  Tensor num = Tensor::empty({count}, DType::i64);
  Tensor dont_care = Tensor::zeros({count, G}, DType::u8);
  for (int64_t s = 0; s < count; ++s) {
    const std::vector<SyntheticWord> words = sample(first + s, images.data<float>() + s * 3 * HW);
    num.data<int64_t>()[s] = int64_t(words.size());
    for (size_t k = 0; k < words.size(); ++k) {
      float* q = quads.data<float>() + (s * G + int64_t(k)) * 8;
      for (int e = 0; e < 8; ++e) q[e] = float(words[k].quad[size_t(e)]);
      dont_care.data<uint8_t>()[s * G + int64_t(k)] = words[k].dont_care ? 1 : 0;
    }
  }
  return TensorMap{
      {"images", images}, {"quads", quads}, {"num_boxes", num}, {"dont_care", dont_care}};
}

TensorMap TextDetectionSyntheticSource::next(int64_t batch_size) {
  AIM_CHECK(batch_size > 0, "text-detection-synthetic: batch_size must be > 0, got ", batch_size);
  TensorMap b = batch(pos_, batch_size);
  pos_ += batch_size;
  return b;
}

void TextDetectionSyntheticSource::seek(int64_t position) {
  AIM_CHECK(position >= 0 && position < kEvalOffset, "text-detection-synthetic: position ",
            position, " outside [0, 2^40)");
  pos_ = position;
}

TensorMap TextDetectionSyntheticSource::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0 && start + count <= cfg_.eval_size,
            "text-detection-synthetic: eval samples [", start, ", ", start + count,
            ") outside the evaluation set of ", cfg_.eval_size);
  return batch(kEvalOffset + start, count);
}

}  // namespace aim::data
