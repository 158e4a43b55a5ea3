// Image data: the synthetic source, the JPEG/PNG decoders, the torchvision-style transform and the
// image-folder reader. Test images are written here with libjpeg/libpng (no Python needed).
#include <gtest/gtest.h>
// jpeglib.h uses size_t and FILE without declaring them (the comment keeps this order).
#include <cstddef>
#include <cstdio>
//
#include <jpeglib.h>
#include <png.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "data/image_decode.h"
#include "data/image_folder.h"
#include "data/image_synthetic.h"
#include "tensor/check.h"

namespace aim::data {
namespace {

namespace fs = std::filesystem;

// ---- helpers -----------------------------------------------------------------------------------

std::vector<float> floats(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}
std::vector<int64_t> longs(const Tensor& t) {
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
}

// The message of the aim::Error that f throws ("" if it throws none).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A fresh directory, removed with its contents at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    static int counter = 0;
    path = fs::temp_directory_path() /
           ("aim_image_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void write_bytes(const fs::path& p, const std::vector<uint8_t>& b) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)),
                              std::istreambuf_iterator<char>());
}

// PNG of any libpng colour type / depth; rows are packed as libpng expects (16-bit big-endian).
void write_png(const fs::path& p, int w, int h, int color_type, int depth,
               const std::vector<uint8_t>& data, const std::vector<png_color>& palette = {},
               const std::vector<uint8_t>& trns = {}) {
  fs::create_directories(p.parent_path());
  FILE* f = std::fopen(p.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  ASSERT_EQ(setjmp(png_jmpbuf(png)), 0);
  png_init_io(png, f);
  png_set_IHDR(png, info, png_uint_32(w), png_uint_32(h), depth, color_type, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (!palette.empty()) png_set_PLTE(png, info, palette.data(), int(palette.size()));
  if (!trns.empty()) png_set_tRNS(png, info, trns.data(), int(trns.size()), nullptr);
  png_write_info(png, info);
  const size_t stride = data.size() / size_t(h);
  for (int y = 0; y < h; ++y) png_write_row(png, data.data() + size_t(y) * stride);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(f);
}

void write_png_rgb(const fs::path& p, int w, int h, const std::vector<uint8_t>& rgb) {
  write_png(p, w, h, PNG_COLOR_TYPE_RGB, 8, rgb);
}

// JPEG with `components` channels in colour space cs (JCS_RGB, JCS_GRAYSCALE, JCS_CMYK).
void write_jpeg(const fs::path& p, int w, int h, int components, J_COLOR_SPACE cs,
                const std::vector<uint8_t>& pixels, int quality = 95) {
  fs::create_directories(p.parent_path());
  FILE* f = std::fopen(p.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = JDIMENSION(w);
  c.image_height = JDIMENSION(h);
  c.input_components = components;
  c.in_color_space = cs;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(pixels.data()) + size_t(c.next_scanline) * w * components;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::fclose(f);
}

std::vector<uint8_t> solid(int w, int h, std::vector<uint8_t> px) {
  std::vector<uint8_t> v;
  for (int i = 0; i < w * h; ++i) v.insert(v.end(), px.begin(), px.end());
  return v;
}

void expect_solid(const Image& img, int w, int h, int r, int g, int b, int tol) {
  ASSERT_EQ(img.width, w);
  ASSERT_EQ(img.height, h);
  ASSERT_EQ(img.rgb.size(), size_t(w * h * 3));
  int worst = 0;
  for (size_t i = 0; i < img.rgb.size(); i += 3) {
    worst = std::max(worst, std::abs(int(img.rgb[i]) - r));
    worst = std::max(worst, std::abs(int(img.rgb[i + 1]) - g));
    worst = std::max(worst, std::abs(int(img.rgb[i + 2]) - b));
  }
  EXPECT_LE(worst, tol);
}

// ---- synthetic source --------------------------------------------------------------------------

TEST(ImageSynthetic, SameSeedAndPositionGiveTheSameBatch) {
  ImageSyntheticSource a(ImageSyntheticConfig::tiny(7)), b(ImageSyntheticConfig::tiny(7));
  const TensorMap a1 = a.next(8);
  EXPECT_EQ(a.position(), 8);
  // Independent of how the stream is cut into batches.
  const TensorMap b1 = b.next(3), b2 = b.next(5);
  std::vector<float> bx = floats(b1.at("input")), bx2 = floats(b2.at("input"));
  bx.insert(bx.end(), bx2.begin(), bx2.end());
  EXPECT_EQ(floats(a1.at("input")), bx);
  std::vector<int64_t> by = longs(b1.at("label")), by2 = longs(b2.at("label"));
  by.insert(by.end(), by2.begin(), by2.end());
  EXPECT_EQ(longs(a1.at("label")), by);
  // seek() replays exactly.
  const TensorMap a2 = a.next(4);
  a.seek(8);
  const TensorMap a2again = a.next(4);
  EXPECT_EQ(floats(a2.at("input")), floats(a2again.at("input")));
  EXPECT_EQ(longs(a2.at("label")), longs(a2again.at("label")));
  // Another seed is other data.
  ImageSyntheticSource c(ImageSyntheticConfig::tiny(8));
  EXPECT_NE(floats(c.next(8).at("input")), floats(a1.at("input")));
}

TEST(ImageSynthetic, BatchShapesAndLabelRange) {
  ImageSyntheticSource s(ImageSyntheticConfig::tiny(1));
  const TensorMap b = s.next(500);
  ASSERT_EQ(b.at("input").sizes(), Shape({500, 3, 32, 32}));
  ASSERT_EQ(b.at("input").dtype(), DType::f32);
  ASSERT_EQ(b.at("label").sizes(), Shape({500}));
  ASSERT_EQ(b.at("label").dtype(), DType::i64);
  std::vector<int64_t> count(10, 0);
  for (int64_t y : longs(b.at("label"))) {
    ASSERT_GE(y, 0);
    ASSERT_LT(y, 10);
    ++count[size_t(y)];
  }
  for (int64_t c : count) {  // uniform: 50 expected per class
    EXPECT_GT(c, 25);
    EXPECT_LT(c, 80);
  }
  EXPECT_NE(error_of([&] { s.next(0); }).find("batch_size must be > 0"), std::string::npos);
}

TEST(ImageSynthetic, PrototypesHaveUnitRmsAndAreSmooth) {
  ImageSyntheticConfig cfg = ImageSyntheticConfig::tiny(3);
  cfg.height = 24;
  cfg.width = 40;  // not square: both axes' scaling is checked
  ImageSyntheticSource s(cfg);
  for (int64_t c = 0; c < cfg.classes; ++c) {
    const std::vector<float> p = s.prototype(c);
    ASSERT_EQ(p.size(), size_t(3 * 24 * 40));
    for (int ch = 0; ch < 3; ++ch) {
      // Smooth: the mean squared difference of vertical and horizontal neighbours is far below
      // white noise's 2 * mean square.
      double ss = 0.0, dx = 0.0, dy = 0.0;
      for (int y = 0; y < 24; ++y)
        for (int x = 0; x < 40; ++x) {
          const float* v = p.data() + (ch * 24 + y) * 40 + x;
          ss += double(v[0]) * v[0];
          if (x > 0) dx += double(v[0] - v[-1]) * (v[0] - v[-1]);
          if (y > 0) dy += double(v[0] - v[-40]) * (v[0] - v[-40]);
        }
      EXPECT_NEAR(std::sqrt(ss / (24 * 40)), 1.0, 1e-4) << "class " << c << " channel " << ch;
      EXPECT_LT(dx / (24 * 39), 0.1) << "class " << c << " channel " << ch;
      EXPECT_LT(dy / (23 * 40), 0.2) << "class " << c << " channel " << ch;
    }
  }
  EXPECT_NE(s.prototype(0), s.prototype(1));
  EXPECT_NE(error_of([&] { s.prototype(10); }).find("outside [0, 10)"), std::string::npos);
}

TEST(ImageSynthetic, InputIsSignalTimesPrototypePlusUnitNoise) {
  const ImageSyntheticConfig cfg = ImageSyntheticConfig::tiny(1);
  ImageSyntheticSource s(cfg);
  const TensorMap b = s.next(64);
  const std::vector<float> x = floats(b.at("input"));
  const std::vector<int64_t> y = longs(b.at("label"));
  const size_t D = 3 * 32 * 32;
  double sum = 0.0, sq = 0.0;
  for (size_t i = 0; i < y.size(); ++i) {
    const std::vector<float> p = s.prototype(y[i]);
    for (size_t d = 0; d < D; ++d) {
      const double n = x[i * D + d] - cfg.signal * p[d];
      sum += n;
      sq += n * n;
    }
  }
  const double N = double(y.size() * D), mean = sum / N;
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(sq / N - mean * mean, 1.0, 0.03);
}

TEST(ImageSynthetic, EvalSetIsFixedAndDisjointFromTraining) {
  ImageSyntheticSource s(ImageSyntheticConfig::tiny(1));
  const TensorMap e1 = s.eval_batch(10, 4);
  s.next(16);  // the stream does not move the evaluation set
  const TensorMap e2 = s.eval_batch(10, 4);
  EXPECT_EQ(floats(e1.at("input")), floats(e2.at("input")));
  std::vector<float> x(4 * 3 * 32 * 32);
  std::vector<int64_t> y(4);
  s.samples(ImageSyntheticSource::kEvalOffset + 10, 4, x.data(), y.data());
  EXPECT_EQ(floats(e1.at("input")), x);
  EXPECT_EQ(longs(e1.at("label")), y);
  s.samples(10, 4, x.data(), y.data());
  EXPECT_NE(floats(e1.at("input")), x);
  EXPECT_NE(error_of([&] { s.eval_batch(999, 2); }).find("outside the evaluation set of 1000"),
            std::string::npos);
}

TEST(ImageSynthetic, OracleAccuracy) {
  // docs/image-data.md: the default tiny signal (0.2) is perfectly separable for the oracle; at
  // signal 0.05 the oracle gets 0.859 on 5000 samples.
  ImageSyntheticSource s(ImageSyntheticConfig::tiny(1));
  EXPECT_GE(s.oracle_accuracy(1000), 0.999);
  ImageSyntheticConfig weak = ImageSyntheticConfig::tiny(1);
  weak.signal = 0.05;
  const double a = ImageSyntheticSource(weak).oracle_accuracy(2000);
  EXPECT_GT(a, 0.82);
  EXPECT_LT(a, 0.90);
  weak.signal = 0.0;  // no signal: chance level
  EXPECT_LT(ImageSyntheticSource(weak).oracle_accuracy(1000), 0.16);
}

TEST(ImageSynthetic, DescribeAndFingerprint) {
  ImageSyntheticSource s{ImageSyntheticConfig()};
  EXPECT_EQ(s.describe(), "image-synthetic seed 1 (1000 classes, 224x224)");
  EXPECT_EQ(s.epoch_size(), 1281167);
  EXPECT_EQ(s.eval_size(), 50000);
  ImageSyntheticConfig other;
  other.signal = 0.3;
  EXPECT_NE(ImageSyntheticSource(other).fingerprint(), s.fingerprint());
  other = ImageSyntheticConfig();
  other.grid = 5;
  EXPECT_NE(ImageSyntheticSource(other).fingerprint(), s.fingerprint());
  EXPECT_NE(s.fingerprint().find("classes=1000"), std::string::npos);
}

// ---- decoding ----------------------------------------------------------------------------------

TEST(ImageDecode, PngVariantsDecodeExactly) {
  TempDir d;
  const int w = 5, h = 3;
  write_png_rgb(d.path / "rgb.png", w, h, solid(w, h, {200, 100, 7}));
  expect_solid(decode_image_file((d.path / "rgb.png").string()), w, h, 200, 100, 7, 0);
  // RGBA: alpha dropped, as PIL's convert("RGB").
  write_png(d.path / "rgba.png", w, h, PNG_COLOR_TYPE_RGBA, 8, solid(w, h, {10, 20, 30, 0}));
  expect_solid(decode_image_file((d.path / "rgba.png").string()), w, h, 10, 20, 30, 0);
  // Gray, gray + alpha, 1-bit gray.
  write_png(d.path / "g.png", w, h, PNG_COLOR_TYPE_GRAY, 8, solid(w, h, {77}));
  expect_solid(decode_image_file((d.path / "g.png").string()), w, h, 77, 77, 77, 0);
  write_png(d.path / "ga.png", w, h, PNG_COLOR_TYPE_GRAY_ALPHA, 8, solid(w, h, {66, 128}));
  expect_solid(decode_image_file((d.path / "ga.png").string()), w, h, 66, 66, 66, 0);
  write_png(d.path / "g1.png", 8, 2, PNG_COLOR_TYPE_GRAY, 1, {0xFF, 0xFF});  // 8 white pixels/row
  expect_solid(decode_image_file((d.path / "g1.png").string()), 8, 2, 255, 255, 255, 0);
  // 16-bit RGB: the high byte.
  write_png(d.path / "rgb16.png", w, h, PNG_COLOR_TYPE_RGB, 16,
            solid(w, h, {0x12, 0x34, 0xAB, 0xCD, 0x00, 0xFF}));
  expect_solid(decode_image_file((d.path / "rgb16.png").string()), w, h, 0x12, 0xAB, 0x00, 0);
  // Palette (with a tRNS chunk, which is dropped).
  const std::vector<png_color> pal = {{1, 2, 3}, {250, 128, 64}};
  write_png(d.path / "pal.png", w, h, PNG_COLOR_TYPE_PALETTE, 8, solid(w, h, {1}), pal, {255, 0});
  expect_solid(decode_image_file((d.path / "pal.png").string()), w, h, 250, 128, 64, 0);
}

TEST(ImageDecode, PngPixelOrder) {
  TempDir d;
  std::vector<uint8_t> rgb;
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 4; ++x) rgb.insert(rgb.end(), {uint8_t(x), uint8_t(y), uint8_t(x * y)});
  write_png_rgb(d.path / "o.png", 4, 3, rgb);
  EXPECT_EQ(decode_image_file((d.path / "o.png").string()).rgb, rgb);
}

TEST(ImageDecode, JpegColourSpaces) {
  TempDir d;
  const int w = 16, h = 8;
  write_jpeg(d.path / "rgb.jpg", w, h, 3, JCS_RGB, solid(w, h, {200, 100, 30}));
  expect_solid(decode_image_file((d.path / "rgb.jpg").string()), w, h, 200, 100, 30, 2);
  write_jpeg(d.path / "gray.jpeg", w, h, 1, JCS_GRAYSCALE, solid(w, h, {90}));
  expect_solid(decode_image_file((d.path / "gray.jpeg").string()), w, h, 90, 90, 90, 2);
  // libjpeg writes CMYK with an Adobe marker: inverted storage, R = C' * K' / 255.
  write_jpeg(d.path / "cmyk.JPG", w, h, 4, JCS_CMYK, solid(w, h, {200, 100, 50, 255}));
  expect_solid(decode_image_file((d.path / "cmyk.JPG").string()), w, h, 200, 100, 50, 2);
  write_jpeg(d.path / "cmyk2.jpg", w, h, 4, JCS_CMYK, solid(w, h, {255, 255, 255, 102}));
  expect_solid(decode_image_file((d.path / "cmyk2.jpg").string()), w, h, 102, 102, 102, 2);
}

TEST(ImageDecode, FormatComesFromTheContent) {
  TempDir d;
  // ImageNet has a PNG named .JPEG.
  write_png_rgb(d.path / "png.JPEG", 2, 2, solid(2, 2, {1, 2, 3}));
  expect_solid(decode_image_file((d.path / "png.JPEG").string()), 2, 2, 1, 2, 3, 0);
  write_jpeg(d.path / "jpeg.png", 8, 8, 3, JCS_RGB, solid(8, 8, {50, 60, 70}));
  expect_solid(decode_image_file((d.path / "jpeg.png").string()), 8, 8, 50, 60, 70, 2);
}

TEST(ImageDecode, CorruptFilesAreErrorsNamingTheFile) {
  TempDir d;
  write_jpeg(d.path / "full.jpg", 64, 64, 3, JCS_RGB, solid(64, 64, {10, 200, 10}));
  std::vector<uint8_t> bytes = read_bytes(d.path / "full.jpg");
  bytes.resize(bytes.size() / 2);
  const std::string trunc = (d.path / "trunc.jpg").string();
  write_bytes(trunc, bytes);
  std::string e = error_of([&] { decode_image_file(trunc); });
  EXPECT_NE(e.find(trunc + ": Premature end of JPEG file"), std::string::npos) << e;

  std::vector<uint8_t> junk(300);
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = uint8_t(i * 37 + 11);
  const std::string junk_png = (d.path / "junk.png").string();
  write_bytes(junk_png, junk);
  e = error_of([&] { decode_image_file(junk_png); });
  EXPECT_NE(e.find(junk_png + ": Not a PNG file"), std::string::npos) << e;

  const std::string junk_jpg = (d.path / "junk.jpg").string();
  write_bytes(junk_jpg, junk);
  e = error_of([&] { decode_image_file(junk_jpg); });
  EXPECT_NE(e.find(junk_jpg + ": Not a JPEG file: starts with 0x0b 0x30"), std::string::npos) << e;

  write_png_rgb(d.path / "full.png", 32, 32, solid(32, 32, {1, 2, 3}));
  bytes = read_bytes(d.path / "full.png");
  bytes.resize(bytes.size() - 30);  // into the image data
  const std::string trunc_png = (d.path / "trunc.png").string();
  write_bytes(trunc_png, bytes);
  e = error_of([&] { decode_image_file(trunc_png); });
  EXPECT_NE(e.find(trunc_png + ": "), std::string::npos) << e;

  const std::string missing = (d.path / "missing.jpg").string();
  e = error_of([&] { decode_image_file(missing); });
  EXPECT_NE(e.find(missing + ": cannot open"), std::string::npos) << e;
}

// ---- transform ---------------------------------------------------------------------------------

// Independent reference: the whole resized image by the textbook formulas, then the crop.
double ref_weight_sum(int64_t in, int64_t out, int64_t o, bool aa, const std::vector<double>& v) {
  const double scale = double(in) / double(out);
  if (!aa) {
    double s = (o + 0.5) * scale - 0.5;
    if (s < 0) s = 0;
    const int64_t i0 = std::min<int64_t>(int64_t(std::floor(s)), in - 1);
    const int64_t i1 = std::min<int64_t>(i0 + 1, in - 1);
    const double l = s - double(i0);
    return (1 - l) * v[size_t(i0)] + l * v[size_t(i1)];
  }
  const double fs = std::max(scale, 1.0), center = (o + 0.5) * scale;
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < in; ++i) {
    const double t = std::fabs((i + 0.5 - center) / fs);
    const double w = t < 1 ? 1 - t : 0;
    num += w * v[size_t(i)];
    den += w;
  }
  return num / den;
}

std::vector<float> ref_transform(const Image& img, const ImageTransform& t) {
  const int64_t H = img.height, W = img.width;
  const int64_t rh = W <= H ? int64_t(double(t.resize) * H / W) : t.resize;
  const int64_t rw = W <= H ? t.resize : int64_t(double(t.resize) * W / H);
  const int64_t top = int64_t(std::nearbyint((rh - t.crop) / 2.0));
  const int64_t left = int64_t(std::nearbyint((rw - t.crop) / 2.0));
  std::vector<float> out(size_t(3 * t.crop * t.crop));
  for (int c = 0; c < 3; ++c) {
    // Horizontal then vertical.
    std::vector<std::vector<double>> rows(static_cast<size_t>(H),
                                          std::vector<double>(static_cast<size_t>(rw)));
    for (int64_t y = 0; y < H; ++y) {
      std::vector<double> v(static_cast<size_t>(W));
      for (int64_t x = 0; x < W; ++x) v[size_t(x)] = img.rgb[size_t((y * W + x) * 3 + c)];
      for (int64_t o = 0; o < rw; ++o)
        rows[size_t(y)][size_t(o)] = ref_weight_sum(W, rw, o, t.antialias, v);
    }
    for (int64_t o = 0; o < rw; ++o) {
      std::vector<double> v(static_cast<size_t>(H));
      for (int64_t y = 0; y < H; ++y) v[size_t(y)] = rows[size_t(y)][size_t(o)];
      for (int64_t p = 0; p < rh; ++p) {
        const int64_t cy = p - top, cx = o - left;
        if (cy < 0 || cy >= t.crop || cx < 0 || cx >= t.crop) continue;
        const double px = ref_weight_sum(H, rh, p, t.antialias, v);
        out[size_t((c * t.crop + cy) * t.crop + cx)] =
            float((px / 255.0 - t.mean[size_t(c)]) / t.stddev[size_t(c)]);
      }
    }
  }
  return out;
}

Image pattern(int64_t h, int64_t w) {
  Image img;
  img.height = h;
  img.width = w;
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      img.rgb.insert(img.rgb.end(),
                     {uint8_t((x * 37 + y * 11) % 256), uint8_t((x * x + 3 * y) % 256),
                      uint8_t((y * y * 5 + x) % 256)});
  return img;
}

TEST(ImageTransformTest, MatchesTheReferenceResizeAndCrop) {
  // Down- and upsampling, portrait and landscape, odd crop offsets (round half to even).
  const struct {
    int64_t h, w, resize, crop;
  } cases[] = {
      {40, 20, 16, 8}, {20, 47, 16, 7}, {9, 13, 31, 30}, {33, 33, 17, 17}, {100, 61, 29, 24}};
  for (const auto& k : cases)
    for (bool aa : {false, true}) {
      SCOPED_TRACE(testing::Message() << k.h << "x" << k.w << " resize " << k.resize << " crop "
                                      << k.crop << (aa ? " antialias" : ""));
      ImageTransform t;
      t.resize = k.resize;
      t.crop = k.crop;
      t.antialias = aa;
      const Image img = pattern(k.h, k.w);
      std::vector<float> got(size_t(3 * k.crop * k.crop));
      preprocess(img, t, got.data());
      const std::vector<float> want = ref_transform(img, t);
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i)
        worst = std::max(worst, double(std::fabs(got[i] - want[i])));
      EXPECT_LT(worst, 2e-4);
      // flip mirrors the crop.
      std::vector<float> flipped(got.size());
      preprocess(img, t, flipped.data(), /*flip=*/true);
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t y = 0; y < k.crop; ++y)
          for (int64_t x = 0; x < k.crop; ++x)
            ASSERT_EQ(flipped[size_t((c * k.crop + y) * k.crop + x)],
                      got[size_t((c * k.crop + y) * k.crop + k.crop - 1 - x)]);
    }
}

TEST(ImageTransformTest, SolidColourNormalisation) {
  Image img;
  img.height = 50;
  img.width = 70;
  img.rgb = solid(70, 50, {255, 0, 128});
  ImageTransform t;  // 256 / 224, ImageNet mean and std
  std::vector<float> out(size_t(3 * 224 * 224));
  preprocess(img, t, out.data());
  const double want[3] = {(1.0 - 0.485) / 0.229, (0.0 - 0.456) / 0.224,
                          (128 / 255.0 - 0.406) / 0.225};
  for (int c = 0; c < 3; ++c)
    for (int64_t i = 0; i < 224 * 224; ++i)
      ASSERT_NEAR(out[size_t(c * 224 * 224 + i)], want[c], 1e-5) << "channel " << c;
  t.resize = 100;
  t.crop = 101;
  EXPECT_NE(error_of([&] { preprocess(img, t, out.data()); }).find("need resize >= crop"),
            std::string::npos);
}

// ---- image folder ------------------------------------------------------------------------------

// Colour of file k of class c (distinct for every file, exact in PNG).
std::vector<uint8_t> colour(int c, int k) { return {uint8_t(40 * c + 10), uint8_t(7 * k), 99}; }

// root/train/<cls>/<k>.png for k < n_train and root/val/<cls>/<k>.png for k < n_val.
void make_imagenet_tree(const fs::path& root, const std::vector<std::string>& cls, int n_train,
                        int n_val) {
  for (size_t c = 0; c < cls.size(); ++c) {
    for (int k = 0; k < n_train; ++k)
      write_png_rgb(root / "train" / cls[c] / ("f" + std::to_string(k) + ".png"), 6, 4,
                    solid(6, 4, colour(int(c), k)));
    for (int k = 0; k < n_val; ++k)
      write_png_rgb(root / "val" / cls[c] / ("v" + std::to_string(k) + ".PNG"), 4, 6,
                    solid(4, 6, colour(int(c), 30 + k)));
  }
}

ImageFolderConfig small_config(const fs::path& root) {
  ImageFolderConfig cfg;
  cfg.root = root.string();
  cfg.transform.resize = 4;
  cfg.transform.crop = 3;
  return cfg;
}

// The (class, file) colour of sample i of a batch, recovered from the normalised input.
std::vector<int> recovered(const TensorMap& b, const ImageTransform& t, int64_t i) {
  const float* x = b.at("input").data<float>() + i * 3 * t.crop * t.crop;
  std::vector<int> rgb;
  for (int c = 0; c < 3; ++c)
    rgb.push_back(
        int(std::lround((x[c * t.crop * t.crop] * t.stddev[size_t(c)] + t.mean[size_t(c)]) * 255)));
  return rgb;
}

TEST(ImageFolder, ImageNetLayoutClassesAndEvaluation) {
  TempDir d;
  // Written out of order: classes are sorted by name.
  make_imagenet_tree(d.path, {"n02", "n01", "n10"}, 4, 2);
  write_bytes(d.path / "train" / "n01" / "notes.txt", {1, 2, 3});  // ignored, counted
  ImageFolderSource s(small_config(d.path));
  EXPECT_TRUE(s.imagenet_layout());
  EXPECT_EQ(s.classes(), std::vector<std::string>({"n01", "n02", "n10"}));
  EXPECT_EQ(s.epoch_size(), 12);
  EXPECT_EQ(s.eval_size(), 6);
  EXPECT_NE(s.describe().find("1 other files ignored"), std::string::npos) << s.describe();
  const TensorMap e = s.eval_batch(0, 6);
  ASSERT_EQ(e.at("input").sizes(), Shape({6, 3, 3, 3}));
  EXPECT_EQ(longs(e.at("label")), std::vector<int64_t>({0, 0, 1, 1, 2, 2}));
  // Eval order: class-major, file names sorted; class n01 was written as index 1.
  EXPECT_EQ(recovered(e, s.config().transform, 0), std::vector<int>({50, 210, 99}));
  EXPECT_EQ(recovered(e, s.config().transform, 3), std::vector<int>({10, 217, 99}));
}

TEST(ImageFolder, TrainingStreamShufflesEachEpochAndSeeks) {
  TempDir d;
  make_imagenet_tree(d.path, {"a", "b", "c"}, 5, 1);  // 15 training images
  ImageFolderConfig cfg = small_config(d.path);
  ImageFolderSource s(cfg);
  // Batch 4: 3 batches per epoch, the last 3 files of each epoch's order are skipped.
  std::vector<std::vector<int>> epoch0, epoch1;
  std::set<std::vector<int>> seen;
  for (int b = 0; b < 3; ++b) {
    const TensorMap m = s.next(4);
    for (int64_t i = 0; i < 4; ++i) {
      epoch0.push_back(recovered(m, cfg.transform, i));
      // The label is that of the file's class (red channel = 40 * class + 10).
      EXPECT_EQ(epoch0.back()[0], 40 * m.at("label").data<int64_t>()[i] + 10);
    }
  }
  seen.insert(epoch0.begin(), epoch0.end());
  EXPECT_EQ(seen.size(), 12u);  // no file twice in an epoch
  EXPECT_EQ(s.position(), 12);
  for (int b = 0; b < 3; ++b) {
    const TensorMap m = s.next(4);
    for (int64_t i = 0; i < 4; ++i) epoch1.push_back(recovered(m, cfg.transform, i));
  }
  EXPECT_NE(epoch0, epoch1);  // a fresh order
  // seek() replays; a second reader with more threads gives the same batches.
  cfg.threads = 3;
  ImageFolderSource t(cfg);
  t.seek(16);
  const TensorMap m = t.next(4);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(recovered(m, cfg.transform, i), epoch1[size_t(4 + i)]);
  t.seek(6);
  EXPECT_NE(error_of([&] { t.next(4); }).find("not a multiple of the batch size 4"),
            std::string::npos);
  EXPECT_NE(error_of([&] { t.next(16); }).find("batch size 16 must be in [1, 15]"),
            std::string::npos);
}

TEST(ImageFolder, TrainFlipsAreDeterministic) {
  TempDir d;
  // One class, one asymmetric image (left half dark, right half bright).
  std::vector<uint8_t> rgb;
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 8; ++x) rgb.insert(rgb.end(), 3, uint8_t(x < 4 ? 0 : 255));
  for (int k = 0; k < 2; ++k) {
    write_png_rgb(d.path / "train" / "only" / ("f" + std::to_string(k) + ".png"), 8, 8, rgb);
    write_png_rgb(d.path / "val" / "only" / ("v" + std::to_string(k) + ".png"), 8, 8, rgb);
  }
  ImageFolderConfig cfg = small_config(d.path);
  cfg.transform.resize = 8;
  cfg.transform.crop = 8;
  cfg.train_flip = true;
  ImageFolderSource a(cfg), b(cfg);
  int flips = 0;
  for (int step = 0; step < 16; ++step) {
    const TensorMap ma = a.next(2), mb = b.next(2);
    EXPECT_EQ(floats(ma.at("input")), floats(mb.at("input")));
    for (int64_t i = 0; i < 2; ++i) flips += ma.at("input").data<float>()[i * 3 * 64] > 0.f;
  }
  EXPECT_GT(flips, 4);  // 32 samples, about half flipped
  EXPECT_LT(flips, 28);
  const TensorMap e = a.eval_batch(0, 2);  // evaluation is never flipped
  EXPECT_LT(e.at("input").data<float>()[0], 0.f);
}

TEST(ImageFlat, EveryNthFileIsHeldOut) {
  TempDir d;
  for (int c = 0; c < 2; ++c)
    for (int k = 0; k < 5; ++k)
      write_jpeg(d.path / ("cls" + std::to_string(c)) / ("img" + std::to_string(k) + ".jpg"), 8, 8,
                 3, JCS_RGB, solid(8, 8, {uint8_t(100 * c), 50, 50}));
  ImageFolderConfig cfg = small_config(d.path);
  cfg.eval_every = 3;
  ImageFolderSource s(cfg);
  EXPECT_FALSE(s.imagenet_layout());
  // Global file g = 0..9 (class-major): g % 3 == 0 -> 0, 3, 6, 9.
  ASSERT_EQ(s.eval_size(), 4);
  EXPECT_EQ(s.epoch_size(), 6);
  EXPECT_EQ(s.eval_files()[1].path, (d.path / "cls0" / "img3.jpg").string());
  EXPECT_EQ(s.eval_files()[2].path, (d.path / "cls1" / "img1.jpg").string());
  EXPECT_EQ(longs(s.eval_batch(0, 4).at("label")), std::vector<int64_t>({0, 0, 1, 1}));
  EXPECT_EQ(s.next(6).at("input").sizes(), Shape({6, 3, 3, 3}));
}

TEST(ImageFolder, LayoutErrorsNameThePath) {
  {
    TempDir d;
    make_imagenet_tree(d.path, {"a", "b"}, 1, 1);
    fs::create_directories(d.path / "train" / "c");  // empty class folder
    fs::create_directories(d.path / "val" / "c");
    const std::string e = error_of([&] { ImageFolderSource s(small_config(d.path)); });
    EXPECT_NE(e.find((d.path / "train" / "c").string() + ": class folder has no image files"),
              std::string::npos)
        << e;
  }
  {
    TempDir d;
    make_imagenet_tree(d.path, {"a", "b"}, 1, 1);
    fs::remove_all(d.path / "val" / "b");
    const std::string e = error_of([&] { ImageFolderSource s(small_config(d.path)); });
    EXPECT_NE(e.find((d.path / "val" / "b").string() + " is missing"), std::string::npos) << e;
  }
  {
    TempDir d;
    make_imagenet_tree(d.path, {"a", "b"}, 1, 1);
    write_png_rgb(d.path / "val" / "zebra" / "z.png", 2, 2, solid(2, 2, {0, 0, 0}));
    const std::string e = error_of([&] { ImageFolderSource s(small_config(d.path)); });
    EXPECT_NE(e.find((d.path / "val" / "zebra").string() + " is not a class of"), std::string::npos)
        << e;
  }
  {
    TempDir d;
    make_imagenet_tree(d.path, {"a"}, 1, 0);
    fs::remove_all(d.path / "val");
    const std::string e = error_of([&] { ImageFolderSource s(small_config(d.path)); });
    EXPECT_NE(e.find((d.path / "val").string() + ": not a directory"), std::string::npos) << e;
  }
  const std::string e = error_of([] { ImageFolderSource s(small_config("/nonexistent/aim")); });
  EXPECT_NE(e.find("image folder: /nonexistent/aim: not a directory"), std::string::npos) << e;
}

TEST(ImageFolder, CorruptFileIsAnErrorNamingIt) {
  TempDir d;
  make_imagenet_tree(d.path, {"a"}, 2, 2);
  const std::string bad = (d.path / "val" / "a" / "v1.PNG").string();
  write_bytes(bad, std::vector<uint8_t>(100, 0x42));
  ImageFolderConfig cfg = small_config(d.path);
  cfg.threads = 2;
  ImageFolderSource s(cfg);
  EXPECT_NO_THROW(s.eval_batch(0, 1));
  const std::string e = error_of([&] { s.eval_batch(0, 2); });
  EXPECT_NE(e.find("image folder: " + bad + ": Not a PNG file"), std::string::npos) << e;
}

}  // namespace
}  // namespace aim::data
