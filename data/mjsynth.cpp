#include "data/mjsynth.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/image_decode.h"
#include "data/text_font.h"
#include "tensor/check.h"
#include "tensor/philox.h"

namespace aim::data {

namespace fs = std::filesystem;

std::vector<std::string> read_mjsynth_lexicon(const std::string& path) {
  std::ifstream f(path);
  AIM_CHECK(f.good(), path, ": cannot open the lexicon (MJSynth layout: docs/crnn.md)");
  std::vector<std::string> words;
  std::string line;
  int64_t n = 0;
  while (std::getline(f, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    AIM_CHECK(!line.empty(), path, ":", n, ": empty lexicon line");
    words.push_back(line);
  }
  AIM_CHECK(!words.empty(), path, ": the lexicon is empty");
  return words;
}

MjsynthSplit read_mjsynth_split(const std::string& root, const std::string& annotation,
                                const std::vector<std::string>& lexicon,
                                const std::string& lexicon_file) {
  std::ifstream f(annotation);
  AIM_CHECK(f.good(), annotation, ": cannot open the annotation file");
  MjsynthSplit s;
  s.file = annotation;
  std::string line;
  int64_t n = 0;
  while (std::getline(f, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::istringstream is(line);
    std::string rel, idx, extra;
    AIM_CHECK(is >> rel >> idx, annotation, ":", n,
              ": expected '<relative image path> <lexicon index>', got '", line, "'");
    AIM_CHECK(!(is >> extra), annotation, ":", n, ": expected 2 fields, got more ('", line, "')");
    size_t used = 0;
    int64_t k = -1;
    try {
      k = std::stoll(idx, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    AIM_CHECK(used == idx.size() && !idx.empty(), annotation, ":", n, ": lexicon index '", idx,
              "' is not an integer");
    AIM_CHECK(k >= 0 && k < int64_t(lexicon.size()), annotation, ":", n, ": lexicon index ", k,
              " outside [0, ", lexicon.size(), ") of ", lexicon_file);
    std::string w = lexicon[size_t(k)];
    for (char& c : w) c = char(std::tolower(static_cast<unsigned char>(c)));
    for (char c : w)
      AIM_CHECK(text_class(c) >= 0, annotation, ":", n, ": word '", lexicon[size_t(k)], "' (",
                lexicon_file, ":", k + 1, ") has a character outside 0-9a-z: '", c, "'");
    AIM_CHECK(int64_t(w.size()) <= MjsynthSource::kMaxLabel, annotation, ":", n, ": word '", w,
              "' has ", w.size(), " characters, more than the reference's maximum of ",
              MjsynthSource::kMaxLabel);
    const fs::path p = fs::path(rel).is_absolute() ? fs::path(rel) : fs::path(root) / rel;
    s.paths.push_back(p.lexically_normal().string());
    s.words.push_back(std::move(w));
  }
  AIM_CHECK(!s.paths.empty(), annotation, ": no annotation lines");
  return s;
}

void resize_bgr_planes(const uint8_t* rgb, int64_t h, int64_t w, int64_t out_h, int64_t out_w,
                       float* out) {
  AIM_CHECK(h >= 1 && w >= 1 && out_h >= 1 && out_w >= 1, "resize_bgr_planes: empty image ", h, "x",
            w, " -> ", out_h, "x", out_w);
  // cv2 INTER_LINEAR: src = (dst + 0.5) * scale - 0.5, clamped to [0, n - 1] at the edges.
  auto taps = [](int64_t in, int64_t o, std::vector<int64_t>& i0, std::vector<float>& f) {
    i0.resize(size_t(o));
    f.resize(size_t(o));
    const double scale = double(in) / double(o);
    for (int64_t d = 0; d < o; ++d) {
      double sx = (double(d) + 0.5) * scale - 0.5;
      int64_t x = int64_t(std::floor(sx));
      double fx = sx - double(x);
      if (x < 0) x = 0, fx = 0;
      if (x >= in - 1) x = in - 1, fx = 0;
      i0[size_t(d)] = x;
      f[size_t(d)] = float(fx);
    }
  };
  std::vector<int64_t> y0, x0;
  std::vector<float> fy, fx;
  taps(h, out_h, y0, fy);
  taps(w, out_w, x0, fx);
  for (int64_t y = 0; y < out_h; ++y) {
    const int64_t ya = y0[size_t(y)], yb = std::min(ya + 1, h - 1);
    const float wy = fy[size_t(y)];
    for (int64_t x = 0; x < out_w; ++x) {
      const int64_t xa = x0[size_t(x)], xb = std::min(xa + 1, w - 1);
      const float wx = fx[size_t(x)];
      for (int c = 0; c < 3; ++c) {
        auto px = [&](int64_t yy, int64_t xx) { return float(rgb[(yy * w + xx) * 3 + c]); };
        const float top = px(ya, xa) + wx * (px(ya, xb) - px(ya, xa));
        const float bot = px(yb, xa) + wx * (px(yb, xb) - px(yb, xa));
        const float v = std::nearbyint(top + wy * (bot - top));
        out[((2 - c) * out_h + y) * out_w + x] = std::min(255.0f, std::max(0.0f, v));  // BGR
      }
    }
  }
}

MjsynthSource::MjsynthSource(const std::string& root, uint64_t seed) : root_(root), seed_(seed) {
  AIM_CHECK(fs::is_directory(root), "--data '", root,
            "': crnn reads 'synthetic' or an MJSynth directory (lexicon.txt, "
            "annotation_train.txt, annotation_val.txt; docs/crnn.md); no such directory");
  const std::string lex = (fs::path(root) / "lexicon.txt").string();
  const std::vector<std::string> lexicon = read_mjsynth_lexicon(lex);
  train_ =
      read_mjsynth_split(root, (fs::path(root) / "annotation_train.txt").string(), lexicon, lex);
  std::string val = (fs::path(root) / "annotation_val.txt").string();
  if (!fs::exists(val)) val = (fs::path(root) / "annotation_test.txt").string();
  AIM_CHECK(fs::exists(val), root,
            ": no annotation_val.txt or annotation_test.txt for the held-out set");
  eval_ = read_mjsynth_split(root, val, lexicon, lex);
  // The held-out images are read at the evaluations, the last one after all training: a missing
  // one is named now. (Every annotation line is one image, so line = index + 1; the training
  // images, millions in MJSynth, are named when first read, at the start of the run.)
  for (size_t i = 0; i < eval_.paths.size(); ++i) {
    // The error_code form: a path the system refuses to look up (a name over 255 bytes, a loop of
    // links) is this line's error too, not a std::filesystem_error escaping the reader.
    std::error_code ec;
    const bool found = fs::is_regular_file(eval_.paths[i], ec);
    AIM_CHECK(!ec || ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory,
              val, ":", i + 1, ": image ", eval_.paths[i], " cannot be looked up: ", ec.message());
    AIM_CHECK(found, val, ":", i + 1, ": image ", eval_.paths[i],
              " does not exist (held-out images are checked before training)");
  }
}

std::string MjsynthSource::describe() const {
  std::ostringstream os;
  os << "mjsynth " << root_ << " (" << train_.paths.size() << " train, " << eval_.paths.size()
     << " held-out)";
  return os.str();
}

std::string MjsynthSource::fingerprint() const {
  std::ostringstream os;
  os << "mjsynth:" << fs::absolute(root_).lexically_normal().string()
     << ",train=" << train_.paths.size() << ",eval=" << eval_.paths.size() << ",seed=" << seed_;
  return os.str();
}

int64_t MjsynthSource::train_row(int64_t position) {
  const int64_t n = epoch_size(), epoch = position / n;
  if (epoch != perm_epoch_) {
    // Fisher-Yates with Philox words keyed by (seed, epoch).
    perm_.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) perm_[size_t(i)] = i;
    const uint64_t key = seed_ * 0x9E3779B97F4A7C15ull + uint64_t(epoch) + 1;
    for (int64_t i = n - 1; i > 0; --i) {
      const philox::U4 w = philox::block_words(key, uint64_t(i));
      const uint64_t r = (uint64_t(w.x) << 32) | w.y;
      std::swap(perm_[size_t(i)], perm_[size_t(r % uint64_t(i + 1))]);
    }
    perm_epoch_ = epoch;
  }
  return perm_[size_t(position % n)];
}

TensorMap MjsynthSource::batch(const MjsynthSplit& s, const std::vector<int64_t>& rows) const {
  const int64_t B = int64_t(rows.size());
  int64_t S = 1;
  for (int64_t r : rows) S = std::max<int64_t>(S, int64_t(s.words[size_t(r)].size()));
  Tensor x = Tensor::empty({B, 3, kHeight, kWidth}, DType::f32);
  Tensor y = Tensor::full({B, S}, -1.0, DType::i64);
  Tensor len = Tensor::empty({B}, DType::i64);
  float* xp = x.data<float>();
  int64_t* yp = y.data<int64_t>();
  int64_t* lp = len.data<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    const size_t r = size_t(rows[size_t(b)]);
    const Image img = decode_image_file(s.paths[r]);
    resize_bgr_planes(img.rgb.data(), img.height, img.width, kHeight, kWidth,
                      xp + b * 3 * kHeight * kWidth);
    const std::string& w = s.words[r];
    lp[b] = int64_t(w.size());
    for (size_t k = 0; k < w.size(); ++k) yp[b * S + int64_t(k)] = text_class(w[k]);
  }
  return TensorMap{{"input", x}, {"label", y}, {"label_length", len}};
}

TensorMap MjsynthSource::next(int64_t batch_size) {
  AIM_CHECK(batch_size > 0, "mjsynth: batch_size must be > 0, got ", batch_size);
  std::vector<int64_t> rows(static_cast<size_t>(batch_size));
  for (int64_t b = 0; b < batch_size; ++b) rows[size_t(b)] = train_row(pos_ + b);
  pos_ += batch_size;
  return batch(train_, rows);
}

void MjsynthSource::seek(int64_t position) {
  AIM_CHECK(position >= 0, "mjsynth: negative position ", position);
  pos_ = position;
}

TensorMap MjsynthSource::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0 && start + count <= eval_size(), "mjsynth: eval samples [",
            start, ", ", start + count, ") outside the held-out set of ", eval_size());
  std::vector<int64_t> rows(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) rows[size_t(i)] = start + i;
  return batch(eval_, rows);
}

}  // namespace aim::data
