// TextDetectionSyntheticSource: deterministic synthetic oriented-text detection data for SegLink
// (issue 21, docs/seglink.md): "words" made of glyph-like strokes at random angles, positions and
// scales on textured backgrounds, each word's quadrilateral as its ground truth, so that a
// detector's ICDAR hmean can rise from zero in a CI-sized run.
//
// Sample i is a pure function of (seed, i) through Philox-4x32-10 (data/philox_draw.h):
//   background: a smooth colour gradient plus two low-frequency sinusoidal ripples (a texture, not
//   text) and per-pixel noise (sigma `noise`), values kept in [0.2, 0.8] before the noise;
//   1..max_words words, each: a character height h log-uniform in [min_height, max_height] of the
//   shorter image side, 2..8 glyphs of width 0.45-0.75 h with gaps of 0.2 h, a direction theta
//   uniform in [-max_angle, max_angle] degrees, or +-90 degrees (reading downwards or upwards) with
//   probability vertical_fraction; placed fully inside the image and clear of earlier words (a
//   margin of 0.2 h; up to 20 tries, then dropped); painted in one colour, dark on light or light
//   on dark. Glyphs are stroke figures (rectangle ring, H, E, U, Z, ellipse ring; stroke 0.16 h)
//   spanning their whole cell, so the word's box is tight around its ink. A word is don't-care
//   with probability dont_care_fraction: painted at a quarter of the contrast (illegible, as
//   ICDAR's "###" words mostly are).
// Ground truth: the word's rectangle as a quadrilateral, corners clockwise on the image from the
// word's top left (models/detection/rbox.h's rbox_to_quad order: ICDAR 2015's).
// Batches: "images" f32 [B, 3, H, W] in [0, 1]; "quads" f32 [B, G, 8] pixels (x1, y1, ..., y4),
// zero rows as padding (G = max_words); "num_boxes" i64 [B]; "dont_care" u8 [B, G]. The training
// stream is samples 0, 1, ...; the evaluation set is samples kEvalOffset + [0, eval_size).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "data/source.h"

namespace aim::data {

struct TextDetectionSyntheticConfig {
  int64_t height = 384, width = 384, max_words = 8;  // SegLink's training size
  double min_height = 0.03, max_height = 0.25;       // character height, of the shorter side
  double max_angle = 45;                             // degrees
  double vertical_fraction = 0.1;
  double dont_care_fraction = 0;
  double noise = 0.04;
  uint64_t seed = 1;
  int64_t epoch_size = 858750;  // SynthText's images
  int64_t eval_size = 500;      // ICDAR 2015 Challenge 4 test images
};

struct SyntheticWord {
  std::array<double, 8> quad{};  // x1, y1, ..., x4, y4
  bool dont_care = false;
  double cx = 0, cy = 0, w = 0, h = 0, theta = 0;  // the word's rectangle (theta in radians)
  int64_t glyphs = 0;
  std::array<float, 3> rgb{};  // the ink colour
};

class TextDetectionSyntheticSource : public BatchSource {
 public:
  static constexpr int64_t kEvalOffset = int64_t(1) << 40;
  static constexpr int kGlyphKinds = 6;

  explicit TextDetectionSyntheticSource(const TextDetectionSyntheticConfig& cfg = {});

  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return pos_; }
  void seek(int64_t position) override;
  int64_t epoch_size() const override { return cfg_.epoch_size; }
  int64_t eval_size() const override { return cfg_.eval_size; }
  TensorMap eval_batch(int64_t start, int64_t count) const override;

  const TextDetectionSyntheticConfig& config() const { return cfg_; }
  // Stream sample `index`: its words, and its image into img [3, H, W] when img != nullptr.
  std::vector<SyntheticWord> sample(int64_t index, float* img) const;

 private:
  TensorMap batch(int64_t first, int64_t count) const;
  TextDetectionSyntheticConfig cfg_;
  uint64_t layout_key_ = 0, noise_key_ = 0;
  int64_t pos_ = 0;
};

}  // namespace aim::data
