// data/text_detection_synthetic.h: determinism and resumption, the batch layout (names, shapes,
// padding, don't-care flags), word rectangles inside the image, clockwise, clear of each other,
// inked by their own colour and tight around that ink, no ink outside the words, the angle /
// height / don't-care distributions, and the configuration errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "data/polygon.h"
#include "data/text_detection_synthetic.h"
#include "tests/support/common.h"

namespace aim::data {
namespace {

TextDetectionSyntheticConfig small() {
  TextDetectionSyntheticConfig c;
  c.height = 160, c.width = 192, c.max_words = 5, c.noise = 0.0;
  c.min_height = 0.05, c.max_height = 0.2;
  c.dont_care_fraction = 0.3, c.vertical_fraction = 0.2;
  c.epoch_size = 100, c.eval_size = 10;
  return c;
}

TEST(TextDetectionSynthetic, BatchLayoutAndDeterminism) {
  TextDetectionSyntheticSource a(small()), b(small());
  const TensorMap x = a.next(6);
  EXPECT_EQ(x.at("images").sizes(), (Shape{6, 3, 160, 192}));
  EXPECT_EQ(x.at("quads").sizes(), (Shape{6, 5, 8}));
  EXPECT_EQ(x.at("num_boxes").sizes(), (Shape{6}));
  EXPECT_EQ(x.at("dont_care").sizes(), (Shape{6, 5}));
  EXPECT_EQ(x.at("dont_care").dtype(), DType::u8);
  b.seek(2);
  const TensorMap y = b.next(4);
  for (const char* k : {"images", "quads"})
    EXPECT_EQ(y.at(k).to_vector<float>(), x.at(k).narrow(0, 2, 4).contiguous().to_vector<float>())
        << k;
  EXPECT_EQ(y.at("dont_care").to_vector<uint8_t>(),
            x.at("dont_care").narrow(0, 2, 4).contiguous().to_vector<uint8_t>());
  EXPECT_EQ(a.position(), 6);
  // Rows past num_boxes are zero padding; the flags agree with sample().
  const std::vector<float> q = x.at("quads").to_vector<float>();
  const std::vector<int64_t> n = x.at("num_boxes").to_vector<int64_t>();
  const std::vector<uint8_t> dc = x.at("dont_care").to_vector<uint8_t>();
  for (int64_t s = 0; s < 6; ++s) {
    const std::vector<SyntheticWord> words = a.sample(s, nullptr);
    ASSERT_EQ(n[size_t(s)], int64_t(words.size()));
    for (int64_t g = 0; g < 5; ++g)
      for (int e = 0; e < 8; ++e) {
        const float v = q[size_t((s * 5 + g) * 8 + e)];
        if (g >= n[size_t(s)])
          EXPECT_EQ(v, 0.0f);
        else
          EXPECT_EQ(v, float(words[size_t(g)].quad[size_t(e)]));
      }
    for (int64_t g = 0; g < n[size_t(s)]; ++g)
      EXPECT_EQ(dc[size_t(s * 5 + g)], words[size_t(g)].dont_care ? 1 : 0);
  }
  // Another seed, other images; the evaluation set is not the training stream.
  TextDetectionSyntheticConfig c = small();
  c.seed = 2;
  EXPECT_NE(TextDetectionSyntheticSource(c).next(1).at("images").to_vector<float>(),
            TextDetectionSyntheticSource(small()).next(1).at("images").to_vector<float>());
  EXPECT_NE(a.eval_batch(0, 1).at("images").to_vector<float>(),
            x.at("images").narrow(0, 0, 1).contiguous().to_vector<float>());
  const std::vector<float> img = x.at("images").to_vector<float>();
  for (float v : img) ASSERT_TRUE(v >= 0.0f && v <= 1.0f);
}

TEST(TextDetectionSynthetic, WordsAreInsideClearInkedAndTight) {
  const TextDetectionSyntheticConfig cfg = small();
  TextDetectionSyntheticSource src(cfg);
  const int64_t H = cfg.height, W = cfg.width, HW = H * W;
  std::vector<float> img(size_t(3 * HW));
  int64_t words_seen = 0;
  double min_ink = 1, max_ink = 0;
  for (int64_t i = 0; i < 60; ++i) {
    const std::vector<SyntheticWord> words = src.sample(i, img.data());
    ASSERT_GE(words.size(), 1u);
    std::vector<Polygon> polys;
    for (const SyntheticWord& w : words) {
      const Polygon p = quad_polygon(w.quad.data());
      for (const Point2& v : p) {
        EXPECT_GE(v.x, -1e-9);
        EXPECT_LE(v.x, double(W) + 1e-9);
        EXPECT_GE(v.y, -1e-9);
        EXPECT_LE(v.y, double(H) + 1e-9);
      }
      // Clockwise on the image, a w x h rectangle.
      EXPECT_NEAR(signed_area(p), w.w * w.h, 1e-6 * w.w * w.h);
      EXPECT_NEAR(std::hypot(p[1].x - p[0].x, p[1].y - p[0].y), w.w, 1e-9);
      EXPECT_NEAR(std::hypot(p[3].x - p[0].x, p[3].y - p[0].y), w.h, 1e-9);
      for (const Polygon& o : polys) EXPECT_EQ(intersection_area(p, o), 0.0) << "sample " << i;
      polys.push_back(p);
    }
    // Ink: the pixels of a word's exact colour (no noise here), in the word's frame.
    for (size_t k = 0; k < words.size(); ++k) {
      const SyntheticWord& w = words[k];
      const double c = std::cos(w.theta), s = std::sin(w.theta);
      int64_t ink = 0, pixels = 0;
      double lo_u = 1e9, hi_u = -1e9, lo_v = 1e9, hi_v = -1e9;
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x) {
          const double px = double(x) + 0.5 - w.cx, py = double(y) + 0.5 - w.cy;
          const double u = px * c + py * s, v = -px * s + py * c;
          const bool in_word = std::fabs(u) < w.w / 2 && std::fabs(v) < w.h / 2;
          bool coloured = true;
          for (int ch = 0; ch < 3; ++ch)
            coloured = coloured && img[size_t(ch * HW + y * W + x)] == w.rgb[size_t(ch)];
          pixels += in_word;
          if (!coloured) continue;
          // Ink of this colour lies inside the word (its pixel centre within 1e-9 of it).
          EXPECT_LT(std::fabs(u), w.w / 2 + 1e-9) << "sample " << i << " word " << k;
          EXPECT_LT(std::fabs(v), w.h / 2 + 1e-9) << "sample " << i << " word " << k;
          ++ink;
          lo_u = std::min(lo_u, u), hi_u = std::max(hi_u, u);
          lo_v = std::min(lo_v, v), hi_v = std::max(hi_v, v);
        }
      ASSERT_GT(pixels, 0);
      const double frac = double(ink) / double(pixels);
      min_ink = std::min(min_ink, frac), max_ink = std::max(max_ink, frac);
      EXPECT_GT(frac, 0.2) << "sample " << i << " word " << k;
      EXPECT_LT(frac, 0.9) << "sample " << i << " word " << k;
      // Tight: the ink reaches within a pixel and a half of the rectangle's four sides.
      EXPECT_LT(w.w / 2 + lo_u, 1.5) << "sample " << i << " word " << k;
      EXPECT_LT(w.w / 2 - hi_u, 1.5) << "sample " << i << " word " << k;
      EXPECT_LT(w.h / 2 + lo_v, 1.5) << "sample " << i << " word " << k;
      EXPECT_LT(w.h / 2 - hi_v, 1.5) << "sample " << i << " word " << k;
      ++words_seen;
    }
  }
  EXPECT_GT(words_seen, 100);
  std::printf("[text synthetic] %lld words; ink covers %.2f .. %.2f of a word's rectangle\n",
              (long long)words_seen, min_ink, max_ink);
}

TEST(TextDetectionSynthetic, AnglesHeightsAndDontCare) {
  TextDetectionSyntheticConfig cfg = small();
  TextDetectionSyntheticSource src(cfg);
  const double side = double(std::min(cfg.height, cfg.width));
  int64_t total = 0, vertical = 0, dont_care = 0, steep = 0;
  for (int64_t i = 0; i < 400; ++i)
    for (const SyntheticWord& w : src.sample(i, nullptr)) {
      ++total;
      const double deg = w.theta * 180 / M_PI;
      if (std::fabs(std::fabs(deg) - 90) < 1e-9)
        ++vertical;
      else
        EXPECT_LE(std::fabs(deg), cfg.max_angle + 1e-9);
      steep += std::fabs(deg) > 30 && std::fabs(deg) < 46;
      EXPECT_GE(w.h, cfg.min_height * side - 1e-9);
      EXPECT_LE(w.h, cfg.max_height * side + 1e-9);
      EXPECT_GE(w.glyphs, 2);
      EXPECT_LE(w.glyphs, 8);
      if (w.dont_care) {
        ++dont_care;
        // A quarter of the contrast: every channel within 0.125 of mid grey.
        for (float v : w.rgb) EXPECT_NEAR(v, 0.5, 0.1251);
      }
    }
  const double fv = double(vertical) / double(total), fd = double(dont_care) / double(total);
  std::printf("[text synthetic] %lld words: %.3f vertical, %.3f don't-care, %lld at 30-45 deg\n",
              (long long)total, fv, fd, (long long)steep);
  EXPECT_GT(total, 600);
  EXPECT_NEAR(fv, cfg.vertical_fraction, 0.05);
  EXPECT_NEAR(fd, cfg.dont_care_fraction, 0.05);
  EXPECT_GT(steep, 50);
}

TEST(TextDetectionSynthetic, ConfigurationErrors) {
  TextDetectionSyntheticConfig c = small();
  c.max_words = 0;
  AIM_EXPECT_ERROR(TextDetectionSyntheticSource{c}, "max_words must be in [1, 16], got 0");
  c = small();
  c.min_height = 0.3, c.max_height = 0.2;
  AIM_EXPECT_ERROR(TextDetectionSyntheticSource{c}, "need 0 < min_height <= max_height <= 0.5");
  c = small();
  c.max_angle = 120;
  AIM_EXPECT_ERROR(TextDetectionSyntheticSource{c}, "max_angle must be in [0, 90] degrees");
  TextDetectionSyntheticSource s(small());
  AIM_EXPECT_ERROR(s.eval_batch(8, 3), "eval samples [8, 11) outside the evaluation set of 10");
  AIM_EXPECT_ERROR(s.seek(-1), "position -1 outside");
}

}  // namespace
}  // namespace aim::data
