// TextSyntheticSource: CRNN's synthetic data (MODELS.md "Defaults every model follows": rendered
// strings), shaped as the reference's MJSynth records (§5.1): 32x100 BGR images of random
// strings over 0-9a-z, drawn with the built-in 5x7 bitmap font (data/text_font.h). Definition,
// constants and how fast the models learn it: docs/crnn.md.
//
// Sample i is a pure function of (seed, i) through Philox-4x32-10:
//   length   ~ uniform [min_len, max_len]; characters ~ uniform over the 36 classes
//   layout   glyph scale sy ~ U[2.4, 3.6] px per font row, letter spacing ~ U[0.6, 1.4] font
//            columns, sx ~ U[1.0, 2.0] px per font column (shrunk so the string fits in
//            width - 4 px), position ~ uniform over the places where the string fits
//   colours  background level ~ U[0, 255], stroke contrast ~ U[contrast_min, 200] (ink darker or
//            lighter, whichever fits), a tint ~ U[-20, 20] per channel on both
//   noise    coverage from 2x2 supersampling of the glyph bitmap, then N(0, s^2) per value with
//            s ~ U[0, noise_max]; values rounded and clamped to [0, 255] (8-bit pixels)
// The training stream is samples 0, 1, 2, ...; the held-out set is samples kEvalOffset + j.
// Batches: "input" f32 [B, 3, H, W] BGR pixel values in [0, 255] (the model divides by 255),
// "label" i64 [B, max_len] class indices (0-9 digits, 10-35 letters) padded with -1,
// "label_length" i64 [B].
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/source.h"

namespace aim::data {

struct TextSyntheticConfig {
  int64_t height = 32, width = 100;
  int64_t min_len = 1, max_len = 10;
  double noise_max = 20;     // largest per-image noise standard deviation (pixel levels)
  double contrast_min = 70;  // smallest ink / paper difference (pixel levels)
  uint64_t seed = 1;
  int64_t epoch_size = 7224612;  // MJSynth's annotation_train.txt lines
  int64_t eval_size = 10000;

  // The tiny model's data (tests, CI): the same images and strings, a 100k-sample epoch and a
  // 1000-image held-out set.
  static TextSyntheticConfig tiny(uint64_t seed = 1) {
    TextSyntheticConfig c;
    c.seed = seed;
    c.epoch_size = 100000;
    c.eval_size = 1000;
    return c;
  }
};

class TextSyntheticSource : public BatchSource {
 public:
  static constexpr int64_t kEvalOffset = int64_t(1) << 40;

  explicit TextSyntheticSource(const TextSyntheticConfig& cfg = TextSyntheticConfig());

  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return pos_; }
  void seek(int64_t position) override;
  int64_t epoch_size() const override { return cfg_.epoch_size; }
  int64_t eval_size() const override { return cfg_.eval_size; }
  TensorMap eval_batch(int64_t start, int64_t count) const override;

  const TextSyntheticConfig& config() const { return cfg_; }
  // The string of stream sample `index` (0-9a-z).
  std::string text(int64_t index) const;
  // Stream samples [first, first + count): images [count, 3, H, W], labels [count, max_len]
  // (-1 padded), lengths [count].
  void samples(int64_t first, int64_t count, float* images, int64_t* labels,
               int64_t* lengths) const;

 private:
  TensorMap batch(int64_t first, int64_t count) const;
  TextSyntheticConfig cfg_;
  uint64_t text_key_ = 0, style_key_ = 0, noise_key_ = 0;
  int64_t pos_ = 0;
};

}  // namespace aim::data
