// ICDAR 2015 folders for SegLink (data/icdar_source.h) and SegLink's training augmentation
// (data/seglink_augment.h). The augmentation: TF1's four resizes on hand cases, the crop sampler's
// constraints, determinism per stream, and quadrilaterals that stay on their words (filled
// coloured quadrilaterals on black: points inside each kept quadrilateral have its colour). The
// source: on a small Challenge 4 layout written by the test (PNG content in .jpg files, which the
// decoder sniffs), file order, batch layout, scaling, don't-care flags, degenerate words,
// determinism and resumption, the errors for a missing folder, ground truth, image and a malformed
// line; and aim-train seglink --data icdar:DIR through the registry (train_model, 2 steps).
#include <gtest/gtest.h>
#include <png.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "data/icdar_source.h"
#include "data/philox_draw.h"
#include "data/seglink_augment.h"
#include "models/registry.h"
#include "tests/support/common.h"
#include "train/trainer.h"

namespace aim::data {
namespace {

namespace fs = std::filesystem;
using Quad = std::array<double, 8>;

// ---- the augmentation ---------------------------------------------------------------------------

FloatImage ramp(int64_t h, int64_t w) {
  FloatImage f;
  f.height = h, f.width = w;
  f.chw.resize(size_t(3 * h * w));
  for (int c = 0; c < 3; ++c)
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < w; ++j) f.chw[size_t((c * h + i) * w + j)] = float(c + 10 * i + j);
  return f;
}

float at(const FloatImage& f, int c, int64_t i, int64_t j) {
  return f.chw[size_t((c * f.height + i) * f.width + j)];
}

TEST(SeglinkAugment, Tf1Resizes) {
  const FloatImage src = ramp(4, 6);  // value c + 10 i + j
  for (SeglinkResize m : {SeglinkResize::area, SeglinkResize::bicubic, SeglinkResize::bilinear,
                          SeglinkResize::nearest}) {
    const FloatImage same = tf_resize(src, 4, 6, m);  // the identity size is the identity
    for (size_t k = 0; k < src.chw.size(); ++k)
      ASSERT_NEAR(same.chw[k], src.chw[k], 1e-4) << seglink_resize_name(m);
    FloatImage flat = ramp(5, 7);
    std::fill(flat.chw.begin(), flat.chw.end(), 0.25f);
    for (float v : tf_resize(flat, 3, 11, m).chw)  // weights sum to 1
      ASSERT_NEAR(v, 0.25f, 1e-6) << seglink_resize_name(m);
  }
  // Halving: nearest takes source 2i, area averages the 2 x 2 block, bilinear reads 2i exactly.
  const FloatImage n = tf_resize(src, 2, 3, SeglinkResize::nearest);
  const FloatImage a = tf_resize(src, 2, 3, SeglinkResize::area);
  const FloatImage b = tf_resize(src, 2, 3, SeglinkResize::bilinear);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      EXPECT_EQ(at(n, 1, i, j), at(src, 1, 2 * i, 2 * j));
      EXPECT_NEAR(at(a, 1, i, j), 1 + 10 * (2 * i + 0.5) + (2 * j + 0.5), 1e-4);
      EXPECT_NEAR(at(b, 1, i, j), at(src, 1, 2 * i, 2 * j), 1e-4);
    }
  // Doubling (TF1's legacy grid: source i / 2, the last row repeated): bilinear 0, 0.5, ... 3, 3;
  // bicubic interpolates a linear ramp exactly away from the clamped border.
  const FloatImage up = tf_resize(src, 8, 12, SeglinkResize::bilinear);
  const FloatImage cu = tf_resize(src, 8, 12, SeglinkResize::bicubic);
  for (int64_t i = 0; i < 8; ++i) {
    const double y = std::min(i / 2.0, 3.0);
    EXPECT_NEAR(at(up, 0, i, 4), 10 * y + 2, 1e-4) << i;
    if (i >= 2 && i <= 4) {
      EXPECT_NEAR(at(cu, 0, i, 4), 10 * (i / 2.0) + 2, 1e-4) << i;
    }
  }
  // Area over a non-integer ratio: output 0 of 3 -> 2 covers source 0 and half of 1.
  FloatImage row = ramp(1, 3);
  EXPECT_NEAR(at(tf_resize(row, 1, 2, SeglinkResize::area), 0, 0, 0), (0 + 0.5 * 1) / 1.5, 1e-5);
  EXPECT_NEAR(at(tf_resize(row, 1, 2, SeglinkResize::area), 0, 0, 1), (0.5 * 1 + 2) / 1.5, 1e-5);
}

double coverage(const CropBox& e, const CropBox& c) {
  const double w = std::max(0.0, std::min(e[2], c[2]) - std::max(e[0], c[0]));
  const double h = std::max(0.0, std::min(e[3], c[3]) - std::max(e[1], c[1]));
  return w * h / ((e[2] - e[0]) * (e[3] - e[1]) + 1e-6);
}

TEST(SeglinkAugment, CropSamplerConstraints) {
  const SeglinkAugmentOptions o;
  const std::vector<CropBox> env = {{20, 30, 60, 45}, {150, 100, 190, 118}};
  int64_t found = 0;
  for (double m : {0.1, 0.5, 0.9}) {
    for (uint64_t s = 0; s < 200; ++s) {
      PhiloxDraw d(99, s * 1024);
      CropBox c{};
      if (!sample_crop_bbox(120, 200, env, m, o, d, &c)) continue;
      ++found;
      ASSERT_GE(c[0], 0);
      ASSERT_GE(c[1], 0);
      ASSERT_LE(c[2], 199);
      ASSERT_LE(c[3], 119);
      ASSERT_GE(std::max(coverage(env[0], c), coverage(env[1], c)), m);
      // Sides: 0.3 - 1 of the shorter side (120) times sqrt of an aspect in [0.5, 2], unless the
      // image's edge clamped them.
      const double w = c[2] - c[0], h = c[3] - c[1];
      EXPECT_LE(w * h, 120.0 * 120 + 1e-6);
      if (c[0] > 0 && c[1] > 0 && c[2] < 199 && c[3] < 119) {
        EXPECT_GE(w * h, 36.0 * 36 - 1e-6);
        EXPECT_GE(w / h, 0.5 - 1e-9);
        EXPECT_LE(w / h, 2 + 1e-9);
      }
    }
  }
  EXPECT_GT(found, 300);
  // Without words nothing succeeds; min_overlap 0 with a word succeeds at the first trial.
  PhiloxDraw d(5, 0);
  CropBox c{};
  EXPECT_FALSE(sample_crop_bbox(120, 200, {}, 0.0, o, d, &c));
  EXPECT_TRUE(sample_crop_bbox(120, 200, {env[0]}, 0.0, o, d, &c));
  // A word no crop can cover to 0.9 (the whole image) fails.
  SeglinkAugmentOptions one = o;
  one.max_trials = 1;
  int64_t ok = 0;
  for (uint64_t s = 0; s < 50; ++s) {
    PhiloxDraw e(5, s);
    ok += sample_crop_bbox(120, 200, {{0, 0, 199, 119}}, 0.9, one, e, &c);
  }
  EXPECT_EQ(ok, 0);  // a crop of at most 120 x 120 covers < 0.61 of the whole image
}

TEST(SeglinkAugment, ProjectPolygons) {
  Quad q = {10, 20, 30, 20, 30, 40, 10, 40};
  EXPECT_TRUE(project_quad(q, {10, 20, 110, 70}, 51, 101));  // 1 px per px, from (10, 20)
  EXPECT_NEAR(q[0], 0, 1e-4);
  EXPECT_NEAR(q[4], 20, 1e-4);
  EXPECT_NEAR(q[5], 20, 1e-4);
  Quad far = {200, 5, 220, 5, 220, 15, 200, 15};
  EXPECT_FALSE(project_quad(far, {10, 20, 110, 70}, 51, 101));  // no corner inside
  Quad part = {100, 60, 140, 60, 140, 90, 100, 90};             // one corner inside
  EXPECT_TRUE(project_quad(part, {10, 20, 110, 70}, 51, 101));
}

// Three filled quadrilaterals (a rotated word, an axis-aligned one, a thin slanted one), each in a
// pure colour on black.
struct Scene {
  FloatImage img;
  std::vector<IcdarWord> words;
};

bool inside_convex(const Quad& q, double x, double y) {
  int sign = 0;
  for (int k = 0; k < 4; ++k) {
    const double ax = q[size_t(2 * k)], ay = q[size_t(2 * k + 1)];
    const double bx = q[size_t((2 * k + 2) % 8)], by = q[size_t((2 * k + 3) % 8)];
    const double cr = (bx - ax) * (y - ay) - (by - ay) * (x - ax);
    const int s = cr > 0 ? 1 : (cr < 0 ? -1 : 0);
    if (s != 0 && sign != 0 && s != sign) return false;
    if (s != 0) sign = s;
  }
  return true;
}

Scene scene() {
  Scene s;
  s.img.height = 150, s.img.width = 240;
  s.img.chw.assign(size_t(3 * 150 * 240), 0.0f);
  const std::vector<Quad> quads = {{30, 40, 110, 20, 118, 52, 38, 72},
                                   {140, 90, 220, 90, 220, 130, 140, 130},
                                   {20, 100, 100, 110, 98, 126, 18, 116}};
  for (size_t k = 0; k < quads.size(); ++k) {
    IcdarWord w;
    w.quad = quads[k];
    w.text = k == 2 ? "###" : "w" + std::to_string(k);
    w.dont_care = k == 2;
    s.words.push_back(w);
    for (int64_t i = 0; i < 150; ++i)
      for (int64_t j = 0; j < 240; ++j)
        if (inside_convex(quads[k], double(j) + 0.5, double(i) + 0.5))
          s.img.chw[size_t((int64_t(k) * 150 + i) * 240 + j)] = 1.0f;
  }
  return s;
}

TEST(SeglinkAugment, DeterministicPerStream) {
  Scene a = scene(), b = scene(), c = scene();
  const SeglinkAugmentInfo ia = augment_seglink(a.img, a.words, 64, 64, {}, 17, 3 * 1024);
  const SeglinkAugmentInfo ib = augment_seglink(b.img, b.words, 64, 64, {}, 17, 3 * 1024);
  augment_seglink(c.img, c.words, 64, 64, {}, 17, 4 * 1024);
  EXPECT_EQ(a.img.chw, b.img.chw);
  EXPECT_EQ(ia.crop, ib.crop);
  ASSERT_EQ(a.words.size(), b.words.size());
  for (size_t k = 0; k < a.words.size(); ++k) EXPECT_EQ(a.words[k].quad, b.words[k].quad);
  EXPECT_NE(a.img.chw, c.img.chw);
}

TEST(SeglinkAugment, QuadsStayOnTheirWords) {
  constexpr int64_t S = 96;
  std::set<int> methods;
  int64_t cropped = 0, dropped = 0, checked_points = 0;
  for (uint64_t s = 0; s < 300; ++s) {
    Scene sc = scene();
    const std::vector<IcdarWord> before = sc.words;
    const SeglinkAugmentInfo info = augment_seglink(sc.img, sc.words, S, S, {}, 7, s * 1024);
    ASSERT_EQ(sc.img.height, S);
    ASSERT_EQ(sc.img.width, S);
    ASSERT_GE(info.candidates, 1);
    ASSERT_LE(info.candidates, 7);
    methods.insert(int(info.resize));
    cropped += info.slice != std::array<int64_t, 4>{0, 0, 239, 149};
    // The words left out are those with no corner inside; the kept ones keep their order.
    size_t next = 0;
    for (const IcdarWord& w : before) {
      Quad q = w.quad;
      const bool in = project_quad(q, info.crop, S, S);
      if (!in) {
        ++dropped;
        continue;
      }
      ASSERT_LT(next, sc.words.size());
      EXPECT_EQ(sc.words[next].text, w.text);
      EXPECT_EQ(sc.words[next].dont_care, w.dont_care);
      EXPECT_EQ(sc.words[next].quad, q);
      ++next;
    }
    ASSERT_EQ(next, sc.words.size());
    // Points inside each kept quadrilateral (bilinear in its corners at 0.2 - 0.8 of its length
    // and height) that land in the image carry the word's colour, points beyond its top and
    // bottom sides (0.3 of its height out) do not: the crop, resize and projection agree.
    for (const IcdarWord& w : sc.words) {
      const int k = w.text == "###" ? 2 : w.text[1] - '0';
      const Quad& q = w.quad;
      const double side =
          std::min(std::hypot(q[6] - q[0], q[7] - q[1]), std::hypot(q[2] - q[0], q[3] - q[1]));
      if (side < 10) continue;  // too small for the resize's blur and the 1 px slice rounding
      for (double u : {0.2, 0.5, 0.8})
        for (double v : {-0.3, 0.2, 0.5, 0.8, 1.3}) {
          const double x = (1 - v) * ((1 - u) * q[0] + u * q[2]) + v * ((1 - u) * q[6] + u * q[4]);
          const double y = (1 - v) * ((1 - u) * q[1] + u * q[3]) + v * ((1 - u) * q[7] + u * q[5]);
          if (x < 0 || y < 0 || x > S - 1 || y > S - 1) continue;
          const float val = at(sc.img, k, std::lround(y), std::lround(x));
          const bool in = v > 0 && v < 1;
          ++checked_points;
          if (in) {
            EXPECT_GT(val, 0.5f) << "stream " << s << " word " << k << " at " << x << "," << y;
          } else {
            EXPECT_LT(val, 0.5f) << "stream " << s << " word " << k << " at " << x << "," << y;
          }
        }
    }
  }
  EXPECT_EQ(methods.size(), 4u);  // every interpolation drawn
  EXPECT_GT(cropped, 200);        // 1 in 7 candidates is the whole image at most
  EXPECT_GT(dropped, 50);
  EXPECT_GT(checked_points, 2000);
  std::printf("[seglink augment] 300 samples: %lld cropped, %lld words dropped, %lld points\n",
              (long long)cropped, (long long)dropped, (long long)checked_points);
}

TEST(SeglinkAugment, OffIsTheWholeImageBilinear) {
  Scene sc = scene();
  SeglinkAugmentOptions o;
  o.crop = false, o.random_interpolation = false;
  const FloatImage want = tf_resize(sc.img, 64, 64, SeglinkResize::bilinear);
  const SeglinkAugmentInfo info = augment_seglink(sc.img, sc.words, 64, 64, o, 1, 0);
  EXPECT_EQ(info.candidates, 1);
  EXPECT_EQ(sc.img.chw, want.chw);
  ASSERT_EQ(sc.words.size(), 3u);
  EXPECT_NEAR(sc.words[1].quad[0], 140 * 63 / (239 + 1e-6), 1e-9);
  EXPECT_NEAR(sc.words[1].quad[5], 130 * 63 / (149 + 1e-6), 1e-9);
}

// ---- the source
// ----------------------------------------------------------------------------------

void write_png_rgb(const fs::path& p, int w, int h, const std::vector<uint8_t>& rgb) {
  fs::create_directories(p.parent_path());
  FILE* f = std::fopen(p.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  ASSERT_EQ(setjmp(png_jmpbuf(png)), 0);
  png_init_io(png, f);
  png_set_IHDR(png, info, png_uint_32(w), png_uint_32(h), 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < h; ++y) png_write_row(png, rgb.data() + size_t(y) * size_t(w) * 3);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(f);
}

// An image with white quadrilaterals on a grey ramp, and its ground truth (the lines as given).
void write_sample(const fs::path& images, const fs::path& gts, const std::string& stem, int w,
                  int h, const std::vector<Quad>& quads, const std::string& gt_text) {
  std::vector<uint8_t> rgb(size_t(w * h * 3));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      bool on = false;
      for (const Quad& q : quads) on = on || inside_convex(q, x + 0.5, y + 0.5);
      for (int c = 0; c < 3; ++c)
        rgb[size_t((y * w + x) * 3 + c)] = on ? 255 : uint8_t(40 + (x + y + 20 * c) % 60);
    }
  write_png_rgb(images / (stem + ".jpg"), w, h, rgb);
  fs::create_directories(gts);
  std::ofstream(gts / ("gt_" + stem + ".txt"), std::ios::binary) << gt_text;
}

struct IcdarDir {
  fs::path root;
  fs::path train_img, train_gt, test_img, test_gt;
  IcdarDir() {
    root = testing::make_temp_dir("aim_icdar");
    train_img = root / "ch4_training_images";
    train_gt = root / "ch4_training_localization_transcription_gt";
    test_img = root / "ch4_test_images";
    test_gt = root / "Challenge4_Test_Task1_GT";
    // Byte order mark and CRLF as the official files; a transcription with commas; "###".
    write_sample(train_img, train_gt, "img_1", 200, 120,
                 {{20, 20, 90, 20, 90, 50, 20, 50}, {110, 60, 180, 70, 176, 100, 106, 90}},
                 "\xEF\xBB\xBF"
                 "20,20,90,20,90,50,20,50,Hello, world\r\n"
                 "110,60,180,70,176,100,106,90,###\r\n");
    write_sample(train_img, train_gt, "img_2", 160, 160, {{30, 100, 130, 60, 140, 85, 40, 125}},
                 "30,100,130,60,140,85,40,125,SLANT\n"
                 "50,10,50,10,50,10,50,10,dot\n");  // degenerate: out of the training targets
    write_sample(train_img, train_gt, "img_10", 180, 100, {}, "");
    write_sample(test_img, test_gt, "img_1", 200, 100, {{40, 30, 160, 30, 160, 70, 40, 70}},
                 "40,30,160,30,160,70,40,70,TEST\n10,80,30,80,30,95,10,95,###\n");
    write_sample(test_img, test_gt, "img_2", 120, 150, {{20, 20, 100, 20, 100, 60, 20, 60}},
                 "20,20,100,20,100,60,20,60,TWO\n");
  }
  ~IcdarDir() { fs::remove_all(root); }
};

IcdarSourceConfig small(const IcdarDir& d) {
  IcdarSourceConfig c;
  c.root = d.root.string();
  c.size = 160;
  c.seed = 3;
  return c;
}

TEST(IcdarSource, ReadsTheChallenge4Layout) {
  IcdarDir d;
  IcdarSource src(small(d));
  ASSERT_EQ(src.epoch_size(), 3);
  ASSERT_EQ(src.eval_size(), 2);
  // Natural order: img_1, img_2, img_10.
  EXPECT_EQ(fs::path(src.train_items()[1].image).filename(), "img_2.jpg");
  EXPECT_EQ(fs::path(src.train_items()[2].image).filename(), "img_10.jpg");
  EXPECT_EQ(fs::path(src.train_items()[2].gt).filename(), "gt_img_10.txt");
  EXPECT_EQ(src.train_items()[0].words[0].text, "Hello, world");
  EXPECT_TRUE(src.train_items()[0].words[1].dont_care);
  EXPECT_EQ(src.train_items()[1].words.size(), 1u);  // the degenerate word left out
  EXPECT_EQ(src.max_words(), 2);
  EXPECT_NE(src.describe().find("1 degenerate training words left out"), std::string::npos)
      << src.describe();

  // Evaluation: every word (don't-care flagged), scaled by size / width and size / height.
  const TensorMap e = src.eval_batch(0, 2);
  EXPECT_EQ(e.at("images").sizes(), Shape({2, 3, 160, 160}));
  EXPECT_EQ(e.at("quads").sizes(), Shape({2, 2, 8}));
  EXPECT_EQ(e.at("num_boxes").to_vector<int64_t>(), std::vector<int64_t>({2, 1}));
  EXPECT_EQ(e.at("dont_care").to_vector<uint8_t>(), std::vector<uint8_t>({0, 1, 0, 0}));
  EXPECT_EQ(e.at("orig_size").to_vector<int64_t>(), std::vector<int64_t>({100, 200, 150, 120}));
  EXPECT_EQ(e.at("index").to_vector<int64_t>(), std::vector<int64_t>({0, 1}));
  const std::vector<float> q = e.at("quads").to_vector<float>();
  EXPECT_FLOAT_EQ(q[0], 40 * 0.8f);
  EXPECT_FLOAT_EQ(q[1], 30 * 1.6f);
  EXPECT_FLOAT_EQ(q[16], 20 * 160.0f / 120);  // image 2, x1
  EXPECT_FLOAT_EQ(q[17], 20 * 160.0f / 150);  // image 2, y1
  EXPECT_EQ(q[24], 0.0f);                     // padding
  // Back to the original pixels (the evaluation's metric runs there): the file's corners; a
  // detection is also clipped to the image and rounded, as the reference's result files.
  Quad back{};
  for (int j = 0; j < 8; ++j) back[size_t(j)] = q[size_t(16 + j)];
  const Quad orig = icdar_to_original(back, 150, 120, 160, false);
  const Quad file = src.eval_items()[1].words[0].quad;
  for (int j = 0; j < 8; ++j) EXPECT_NEAR(orig[size_t(j)], file[size_t(j)], 1e-4) << j;
  EXPECT_EQ(icdar_to_original({-8, 10.3, 170, 10.3, 170, 161, -8, 161}, 150, 120, 160, true),
            Quad({0, 10, 119, 10, 119, 149, 0, 149}));
  // The image is the TF1 bilinear resize: the word's inside is white.
  const std::vector<float> im = e.at("images").to_vector<float>();
  EXPECT_NEAR(im[size_t(80 * 160 + 80)], 1.0f, 1e-6);  // (x 100, y 50) of image 1
  EXPECT_EQ(im, src.eval_batch(0, 2).at("images").to_vector<float>());
  AIM_EXPECT_ERROR(src.eval_batch(1, 2), "outside the evaluation set of 2");

  // :train evaluates on the training images.
  IcdarSourceConfig c = small(d);
  c.eval_split = "train";
  EXPECT_EQ(IcdarSource(c).eval_size(), 3);
  EXPECT_EQ(IcdarSource(c).eval_items()[1].words.size(), 2u);  // evaluation keeps every word
}

TEST(IcdarSource, TrainingBatchesAreDeterministicAndResumable) {
  IcdarDir d;
  IcdarSource a(small(d)), b(small(d));
  const TensorMap a1 = a.next(4), a2 = a.next(4);
  EXPECT_EQ(a.position(), 8);
  EXPECT_EQ(a1.at("images").sizes(), Shape({4, 3, 160, 160}));
  EXPECT_EQ(a1.at("quads").sizes(), Shape({4, 2, 8}));
  EXPECT_EQ(a1.at("num_boxes").sizes(), Shape({4}));
  EXPECT_EQ(a1.at("dont_care").sizes(), Shape({4, 2}));
  EXPECT_EQ(a1.count("orig_size"), 0u);
  b.seek(4);
  const TensorMap b2 = b.next(4);
  EXPECT_EQ(a2.at("images").to_vector<float>(), b2.at("images").to_vector<float>());
  EXPECT_EQ(a2.at("quads").to_vector<float>(), b2.at("quads").to_vector<float>());
  EXPECT_EQ(a2.at("num_boxes").to_vector<int64_t>(), b2.at("num_boxes").to_vector<int64_t>());
  EXPECT_EQ(a2.at("dont_care").to_vector<uint8_t>(), b2.at("dont_care").to_vector<uint8_t>());
  IcdarSourceConfig other = small(d);
  other.seed = 4;
  EXPECT_NE(IcdarSource(other).next(4).at("images").to_vector<float>(),
            a1.at("images").to_vector<float>());
  // Every position's words are its augmented sample's, in the layout's rows.
  const std::vector<float> q = a1.at("quads").to_vector<float>();
  const std::vector<int64_t> n = a1.at("num_boxes").to_vector<int64_t>();
  const std::vector<uint8_t> dc = a1.at("dont_care").to_vector<uint8_t>();
  for (int64_t p = 0; p < 4; ++p) {
    SeglinkAugmentInfo info;
    const std::vector<IcdarWord> w = a.train_sample(p, nullptr, &info);
    ASSERT_EQ(n[size_t(p)], int64_t(w.size()));
    for (size_t k = 0; k < w.size(); ++k) {
      EXPECT_EQ(dc[size_t(p * 2) + k], w[k].dont_care);
      for (int j = 0; j < 8; ++j)
        EXPECT_FLOAT_EQ(q[size_t((p * 2 + int64_t(k)) * 8 + j)], float(w[k].quad[size_t(j)]));
    }
  }
  // Without augmentation: the whole image, the "###" word kept and flagged (the reference keeps
  // don't-care words as text), corners scaled by (size - 1) / (side - 1) as project_polygons.
  IcdarSourceConfig off = small(d);
  off.augment = false;
  IcdarSource plain(off);
  for (int64_t p = 0; p < 3; ++p) {
    const std::vector<IcdarWord> w = plain.train_sample(p, nullptr, nullptr);
    if (w.size() != 2) continue;  // image img_1 (the epoch order is shuffled)
    EXPECT_FALSE(w[0].dont_care);
    EXPECT_TRUE(w[1].dont_care);
    EXPECT_NEAR(w[0].quad[2], 90 * 159 / (199 + 1e-6), 1e-9);
    EXPECT_NEAR(w[0].quad[5], 50 * 159 / (119 + 1e-6), 1e-9);
  }
}

TEST(IcdarSource, ErrorsNameTheFile) {
  {
    IcdarDir d;
    fs::remove_all(d.test_gt);
    AIM_EXPECT_ERROR(IcdarSource(small(d)), "Challenge4_Test_Task1_GT: no such folder");
    IcdarSourceConfig c = small(d);
    c.eval_split = "train";
    EXPECT_EQ(IcdarSource(c).eval_size(), 3);  // the test folders are not needed
  }
  {
    IcdarDir d;  // an image without its ground truth
    fs::remove(d.train_gt / "gt_img_2.txt");
    AIM_EXPECT_ERROR(IcdarSource(small(d)), "gt_img_2.txt: missing ground truth of " +
                                                (d.train_img / "img_2.jpg").string());
  }
  {
    IcdarDir d;  // ground truth without its image
    fs::remove(d.test_img / "img_2.jpg");
    AIM_EXPECT_ERROR(IcdarSource(small(d)),
                     "gt_img_2.txt: no image " + (d.test_img / "img_2").string() + ".jpg");
  }
  {
    IcdarDir d;  // a malformed line
    std::ofstream(d.train_gt / "gt_img_10.txt") << "1,2,3,4,5,6,7,8,ok\n1,2,3,x,5,6,7,8,bad\n";
    AIM_EXPECT_ERROR(IcdarSource(small(d)), "gt_img_10.txt:2: coordinate 4 is 'x', not a number");
    std::ofstream(d.train_gt / "gt_img_10.txt") << "1,2,3,4,5,6,7\n";
    AIM_EXPECT_ERROR(IcdarSource(small(d)), "gt_img_10.txt:1: expected 8 coordinates");
  }
  {
    IcdarDir d;  // an image that does not decode: at batch time, naming it
    std::ofstream(d.test_img / "img_1.jpg") << "not an image";
    IcdarSource src(small(d));
    AIM_EXPECT_ERROR(src.eval_batch(0, 1), (d.test_img / "img_1.jpg").string());
  }
  {
    IcdarDir d;
    for (const auto& e : fs::directory_iterator(d.train_img)) fs::remove(e.path());
    for (const auto& e : fs::directory_iterator(d.train_gt)) fs::remove(e.path());
    AIM_EXPECT_ERROR(IcdarSource(small(d)), "ch4_training_images: no .jpg images");
  }
  IcdarSourceConfig c;
  c.root = "/nonexistent/icdar";
  AIM_EXPECT_ERROR(IcdarSource{c}, "/nonexistent/icdar/ch4_training_images: no such folder");
}

// aim-train seglink --config size=tiny --data icdar:DIR --steps 2, as the trainer drives the
// registry: two steps on augmented training images, then the ICDAR evaluation on the test split.
TEST(IcdarSource, AimTrainSeglinkOnIcdarFolders) {
  IcdarDir d;
  const models::ModelEntry& e = models::find_model("seglink");
  const models::ModelConfig cfg = e.parse_config({"size=tiny"});
  auto src = e.source(cfg, "icdar:" + d.root.string(), 1);
  EXPECT_EQ(src->eval_size(), 2);
  auto on_train = e.source(cfg, "icdar:" + d.root.string() + ":train", 1);
  EXPECT_EQ(on_train->eval_size(), 3);
  const TensorMap want = e.source(cfg, "synthetic", 1)->next(2), got = src->next(2);
  for (const auto& [k, t] : want) {  // the synthetic source's layout (G differs)
    ASSERT_TRUE(got.count(k)) << k;
    EXPECT_EQ(got.at(k).dtype(), t.dtype()) << k;
    EXPECT_EQ(got.at(k).dim(), t.dim()) << k;
    EXPECT_EQ(got.at(k).size(0), 2) << k;
  }
  EXPECT_EQ(got.at("images").sizes(), want.at("images").sizes());
  AIM_EXPECT_ERROR(e.source(cfg, "icdar:", 1), "expected icdar:ROOT[:train|:test]");
  AIM_EXPECT_ERROR(e.source(cfg, "voc:x", 1), "expected synthetic or icdar:ROOT");
  AIM_EXPECT_ERROR(e.source(e.parse_config({"size=tiny", "image_size=100"}), "synthetic", 1),
                   "image_size='100'");

  train::TrainOptions o;
  o.steps = 2;
  o.batch_size = 2;
  o.optim.name = "adam";
  o.optim.lr = 1e-3;
  o.eval_every = 0;
  o.eval_samples = 2;
  o.data = "icdar:" + d.root.string();
  std::ostringstream log;
  const train::TrainResult r = train::train_model(e, cfg, o, log);
  ASSERT_EQ(r.losses.size(), 2u) << log.str();
  for (double l : r.losses) EXPECT_TRUE(std::isfinite(l)) << log.str();
  EXPECT_NE(r.data_description.find("icdar2015"), std::string::npos) << r.data_description;
  for (const char* k : {"hmean", "precision", "recall"}) {
    ASSERT_TRUE(r.final_metrics.count(k)) << k;
    EXPECT_GE(r.final_metrics.at(k), 0) << k;
    EXPECT_LE(r.final_metrics.at(k), 1) << k;
  }
}

}  // namespace
}  // namespace aim::data
