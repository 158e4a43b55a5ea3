// data/text_synthetic (CRNN's rendered strings: font, determinism, shapes, labels, held-out set)
// and data/mjsynth (the MJSynth annotation layout: labels, BGR resize, and every error on a small
// fake MJSynth directory written here).
#include <gtest/gtest.h>
#include <png.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "data/mjsynth.h"
#include "data/text_font.h"
#include "data/text_synthetic.h"
#include "tests/support/common.h"

namespace aim::data {
namespace {

namespace fs = std::filesystem;

TEST(TextFont, GlyphsAreWellFormedAndDistinct) {
  std::set<std::string> seen;
  for (int k = 0; k < kTextClasses; ++k) {
    std::string all;
    int ink = 0;
    for (int r = 0; r < kGlyphH; ++r) {
      const std::string row = kTextGlyphs[k][r];
      ASSERT_EQ(row.size(), size_t(kGlyphW)) << kTextAlphabet[k] << " row " << r;
      for (char c : row) {
        ASSERT_TRUE(c == '#' || c == '.') << kTextAlphabet[k];
        ink += c == '#';
      }
      all += row;
    }
    EXPECT_GE(ink, 7) << kTextAlphabet[k];
    EXPECT_TRUE(seen.insert(all).second) << kTextAlphabet[k] << " duplicates another glyph";
    EXPECT_EQ(text_class(kTextAlphabet[k]), k);
  }
  EXPECT_EQ(text_class('A'), -1);
  EXPECT_EQ(text_class('-'), -1);
}

TEST(TextSynthetic, DeterministicShapesAndLabels) {
  TextSyntheticSource a(TextSyntheticConfig::tiny(3)), b(TextSyntheticConfig::tiny(3));
  const TensorMap x = a.next(16);
  a.next(5);
  b.seek(16);
  const TensorMap y2 = b.next(5);
  EXPECT_EQ(x.at("input").sizes(), (Shape{16, 3, 32, 100}));
  EXPECT_EQ(x.at("label").sizes(), (Shape{16, 10}));
  EXPECT_EQ(x.at("label_length").sizes(), (Shape{16}));
  // Same (seed, index) -> same sample, wherever it is read from.
  TextSyntheticSource c(TextSyntheticConfig::tiny(3));
  c.seek(16);
  const TensorMap y1 = c.next(5);
  EXPECT_EQ(y1.at("input").to_vector<float>(), y2.at("input").to_vector<float>());
  b.seek(0);
  EXPECT_EQ(b.next(16).at("input").to_vector<float>(), x.at("input").to_vector<float>());
  // Another seed gives other strings.
  TextSyntheticSource d(TextSyntheticConfig::tiny(4));
  EXPECT_NE(d.next(16).at("label").to_vector<int64_t>(), x.at("label").to_vector<int64_t>());

  const auto lab = x.at("label").to_vector<int64_t>();
  const auto len = x.at("label_length").to_vector<int64_t>();
  const auto img = x.at("input").to_vector<float>();
  for (int64_t i = 0; i < 16; ++i) {
    const std::string s = a.text(i);
    ASSERT_EQ(int64_t(s.size()), len[size_t(i)]);
    EXPECT_GE(len[size_t(i)], 1);
    EXPECT_LE(len[size_t(i)], 10);
    for (int64_t k = 0; k < 10; ++k) {
      const int64_t v = lab[size_t(i * 10 + k)];
      if (k < len[size_t(i)])
        EXPECT_EQ(v, text_class(s[size_t(k)]));
      else
        EXPECT_EQ(v, -1);
    }
  }
  for (float v : img) {
    ASSERT_GE(v, 0.0f);
    ASSERT_LE(v, 255.0f);
    ASSERT_EQ(v, std::nearbyint(v));  // 8-bit pixel values
  }
}

TEST(TextSynthetic, StringsCoverTheAlphabetAndLengths) {
  TextSyntheticSource s(TextSyntheticConfig::tiny(1));
  std::vector<int> chars(kTextClasses, 0), lens(11, 0);
  for (int64_t i = 0; i < 3000; ++i) {
    const std::string t = s.text(i);
    ++lens[t.size()];
    for (char c : t) ++chars[size_t(text_class(c))];
  }
  for (int k = 0; k < kTextClasses; ++k) EXPECT_GT(chars[size_t(k)], 250) << kTextAlphabet[k];
  EXPECT_EQ(lens[0], 0);
  for (int n = 1; n <= 10; ++n) EXPECT_GT(lens[size_t(n)], 220) << n;
}

// The ink is where the text is: a sample's columns far from any glyph are plain paper (up to the
// noise), and the images vary (the model has something to read).
TEST(TextSynthetic, ImagesCarryTheText) {
  TextSyntheticConfig cfg = TextSyntheticConfig::tiny(2);
  cfg.noise_max = 0;
  TextSyntheticSource s(cfg);
  const TensorMap b = s.next(32);
  const auto img = b.at("input").to_vector<float>();
  int with_ink = 0;
  for (int64_t i = 0; i < 32; ++i) {
    const float* p = img.data() + i * 3 * 3200;
    float lo = 255, hi = 0;
    for (int64_t e = 0; e < 3200; ++e) lo = std::min(lo, p[e]), hi = std::max(hi, p[e]);
    with_ink += hi - lo >= 60;  // contrast_min 70, partly covered pixels included
    // Row 0 and column 0 are margins: one paper value (no noise here).
    for (int64_t x = 1; x < 100; ++x) EXPECT_EQ(p[x], p[0]) << "sample " << i;
  }
  EXPECT_EQ(with_ink, 32);
  AIM_EXPECT_ERROR(s.eval_batch(990, 20), "outside the held-out set of 1000");
  TextSyntheticConfig bad = cfg;
  bad.max_len = 13;
  AIM_EXPECT_ERROR(TextSyntheticSource{bad}, "max_len <= 12");
}

// ---- MJSynth --------------------------------------------------------------------------------

void write_png_rgb(const fs::path& p, int w, int h, const std::vector<uint8_t>& rgb) {
  FILE* f = std::fopen(p.c_str(), "wb");
  ASSERT_NE(f, nullptr) << p;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  ASSERT_EQ(setjmp(png_jmpbuf(png)), 0);
  png_init_io(png, f);
  png_set_IHDR(png, info, png_uint_32(w), png_uint_32(h), 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < h; ++y)
    png_write_row(png, const_cast<uint8_t*>(rgb.data()) + size_t(y) * size_t(w) * 3);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(f);
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p);
  f << text;
}

// A fake MJSynth directory: 3 training and 2 held-out images (PNG content, MJSynth-style names).
std::string make_fake_mjsynth() {
  const std::string root = testing::make_temp_dir("aim_mjsynth");
  fs::create_directories(fs::path(root) / "1" / "2");
  for (int i = 0; i < 5; ++i) {
    std::vector<uint8_t> rgb(size_t(40 * 120 * 3));
    for (size_t e = 0; e < rgb.size(); ++e) rgb[e] = uint8_t((e * 7 + size_t(i) * 31) % 256);
    write_png_rgb(fs::path(root) / "1" / "2" / ("img" + std::to_string(i) + ".jpg"), 120, 40, rgb);
  }
  write_file(fs::path(root) / "lexicon.txt", "Hello\nworld\nABC123\nz\n");
  write_file(fs::path(root) / "annotation_train.txt",
             "./1/2/img0.jpg 0\n./1/2/img1.jpg 1\n./1/2/img2.jpg 2\n");
  write_file(fs::path(root) / "annotation_val.txt", "./1/2/img3.jpg 3\n./1/2/img4.jpg 0\n");
  return root;
}

TEST(Mjsynth, ReadsTheLayout) {
  const std::string root = make_fake_mjsynth();
  MjsynthSource s(root, 1);
  EXPECT_EQ(s.epoch_size(), 3);
  EXPECT_EQ(s.eval_size(), 2);
  EXPECT_EQ(s.train().words, (std::vector<std::string>{"hello", "world", "abc123"}));
  const TensorMap e = s.eval_batch(0, 2);
  EXPECT_EQ(e.at("input").sizes(), (Shape{2, 3, 32, 100}));
  EXPECT_EQ(e.at("label").sizes(), (Shape{2, 5}));  // the longest label of the batch
  EXPECT_EQ(e.at("label").to_vector<int64_t>(),
            (std::vector<int64_t>{35, -1, -1, -1, -1, 17, 14, 21, 21, 24}));  // z, hello
  EXPECT_EQ(e.at("label_length").to_vector<int64_t>(), (std::vector<int64_t>{1, 5}));
  // One epoch of the training stream visits every row once; same seed, same order.
  std::multiset<int64_t> lens;
  for (int64_t v : s.next(3).at("label_length").to_vector<int64_t>()) lens.insert(v);
  EXPECT_EQ(lens, (std::multiset<int64_t>{5, 5, 6}));
  MjsynthSource t(root, 1);
  s.seek(3);
  t.seek(3);
  EXPECT_EQ(s.next(3).at("label").to_vector<int64_t>(), t.next(3).at("label").to_vector<int64_t>());
  fs::remove_all(root);
}

// The BGR planes of the resize: channel order reversed, cv2's INTER_LINEAR rule.
TEST(Mjsynth, ResizeIsBgrBilinear) {
  // 2x2 RGB image upscaled to 4x4: cv2 gives rows/cols weights 0, .25, .75, 1 (edge clamp).
  const std::vector<uint8_t> rgb = {0, 10, 200, 100, 10, 200, 0, 10, 200, 100, 10, 200};
  std::vector<float> out(3 * 4 * 4);
  resize_bgr_planes(rgb.data(), 2, 2, 4, 4, out.data());
  const float* b = out.data();
  const float* r = out.data() + 32;
  EXPECT_EQ(b[0], 200.0f);  // blue plane first
  EXPECT_EQ(r[0], 0.0f);
  EXPECT_EQ(r[1], 25.0f);
  EXPECT_EQ(r[2], 75.0f);
  EXPECT_EQ(r[3], 100.0f);
  EXPECT_EQ(r[4 * 3 + 2], 75.0f);
}

TEST(Mjsynth, ErrorsNameFileLineAndWord) {
  const std::string root = make_fake_mjsynth();
  const fs::path ann = fs::path(root) / "annotation_train.txt";
  auto expect = [&](const std::string& body, const std::string& what) {
    write_file(ann, body);
    AIM_EXPECT_ERROR(MjsynthSource(root, 1), what);
  };
  expect("./1/2/img0.jpg 0\n./1/2/img1.jpg\n", "annotation_train.txt:2: expected '<relative");
  expect("./1/2/img0.jpg 0 7\n", "annotation_train.txt:1: expected 2 fields");
  expect("./1/2/img0.jpg x1\n", "annotation_train.txt:1: lexicon index 'x1' is not an integer");
  expect("./1/2/img0.jpg 9\n", "annotation_train.txt:1: lexicon index 9 outside [0, 4)");
  write_file(fs::path(root) / "lexicon.txt", "Hello\nwor-ld\n");
  expect("./1/2/img0.jpg 0\n./1/2/img1.jpg 1\n", "annotation_train.txt:2: word 'wor-ld' (" +
                                                     (fs::path(root) / "lexicon.txt").string() +
                                                     ":2) has a character outside 0-9a-z: '-'");
  write_file(fs::path(root) / "lexicon.txt", "abcdefghijklmnopqrstuvwxyz\n");
  expect("./1/2/img0.jpg 0\n", "has 26 characters, more than the reference's maximum of 25");
  write_file(fs::path(root) / "lexicon.txt", "ok\n\n");
  expect("./1/2/img0.jpg 0\n", "lexicon.txt:2: empty lexicon line");
  // A missing image is reported by the decoder when its batch is made, naming the file.
  write_file(fs::path(root) / "lexicon.txt", "ok\n");
  write_file(fs::path(root) / "annotation_val.txt", "./1/2/img3.jpg 0\n");
  write_file(ann, "./1/2/missing.jpg 0\n");
  MjsynthSource s(root, 1);
  AIM_EXPECT_ERROR(s.next(1), "missing.jpg");
  // A missing held-out image is named before training (it is first read at an evaluation).
  write_file(fs::path(root) / "annotation_val.txt", "./1/2/img3.jpg 0\n./1/2/gone.jpg 0\n");
  AIM_EXPECT_ERROR(MjsynthSource(root, 1),
                   "annotation_val.txt:2: image " + root + "/1/2/gone.jpg does not exist");
  fs::remove(fs::path(root) / "annotation_val.txt");
  AIM_EXPECT_ERROR(MjsynthSource(root, 1), "no annotation_val.txt or annotation_test.txt");
  AIM_EXPECT_ERROR(MjsynthSource("/nonexistent_mjsynth", 1), "no such directory");
  fs::remove_all(root);
}

}  // namespace
}  // namespace aim::data
