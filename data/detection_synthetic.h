// DetectionSyntheticSource: deterministic synthetic object detection data (issue 21): shapes of
// several classes at random positions and sizes on textured backgrounds, so that a detector's mAP
// can rise from zero in a CI-sized run. docs/detection.md.
//
// Sample i is a pure function of (seed, i) through Philox-4x32-10 (data/philox_draw.h):
//   background: a smooth random colour gradient plus per-pixel noise (sigma `noise`);
//   1..max_objects objects, each a filled shape of class c in 1..classes: shape (c - 1) % 5 of
//   {rectangle, ellipse, triangle, cross, ring} in colour (c - 1) / 5 of a fixed palette (with
//   per-object brightness jitter); sizes uniform in [min_size, max_size] of the image side, aspect
//   in [0.5, 2]; placed fully inside the image, redrawn (up to 20 times, then dropped) when its box
//   overlaps an earlier one at IoU > 0.3; later objects are painted over earlier ones.
// Boxes are the shapes' tight pixel extents: (x1, y1, x2, y2) with x2, y2 exclusive (continuous
// coordinates: a pixel column j spans [j, j + 1)), as torchvision's detection models expect.
// Batches: "images" f32 [B, 3, H, W] in [0, 1]; "boxes" f32 [B, G, 4]; "labels" i64 [B, G] with
// 0 for padding (G = max_objects); "num_boxes" i64 [B]. The training stream is samples 0, 1, ...;
// the evaluation set is samples kEvalOffset + [0, eval_size).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/source.h"

namespace aim::data {

struct DetectionSyntheticConfig {
  int64_t classes = 20, height = 300, width = 300, max_objects = 6;
  double min_size = 0.1, max_size = 0.5;  // of the shorter image side
  double noise = 0.08;
  uint64_t seed = 1;
  int64_t epoch_size = 16551;  // VOC07+12 trainval images
  int64_t eval_size = 4952;    // VOC07 test images
};

struct SyntheticObject {
  int64_t label = 0;  // 1..classes
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
};

class DetectionSyntheticSource : public BatchSource {
 public:
  static constexpr int64_t kEvalOffset = int64_t(1) << 40;
  static constexpr int kShapes = 5, kColours = 8;

  explicit DetectionSyntheticSource(const DetectionSyntheticConfig& cfg = {});

  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return pos_; }
  void seek(int64_t position) override;
  int64_t epoch_size() const override { return cfg_.epoch_size; }
  int64_t eval_size() const override { return cfg_.eval_size; }
  TensorMap eval_batch(int64_t start, int64_t count) const override;

  const DetectionSyntheticConfig& config() const { return cfg_; }
  // The palette colour (RGB in [0, 1]) of class `label` (objects are painted at 0.8-1 times it).
  static void colour(int64_t label, float rgb[3]);
  // Stream sample `index`: its objects, and its image into img [3, H, W] when img != nullptr.
  // owner [H, W], when given: k + 1 where the returned object k is painted on top, else 0 (the
  // visible pixel masks of data/instance_synthetic.h); it does not change the sample.
  std::vector<SyntheticObject> sample(int64_t index, float* img, uint8_t* owner = nullptr) const;

 private:
  TensorMap batch(int64_t first, int64_t count) const;
  DetectionSyntheticConfig cfg_;
  uint64_t layout_key_ = 0, noise_key_ = 0;
  int64_t pos_ = 0;
};

}  // namespace aim::data
