// KeypointSyntheticSource: synthetic people for the pose network (issue 22, docs/cpn.md): one
// articulated stick figure per image of the model's input size, with COCO's 17 keypoints, so that
// a keypoint OKS AP can rise from zero in a CI-sized run.
//
// Sample i is a pure function of (seed, i) through Philox-4x32-10 (data/philox_draw.h):
//   background: a colour gradient plus blobs of texture and per-pixel noise (sigma `noise`);
//   figure: pelvis position, body height (min_scale .. max_scale of the image height), a small
//   lean, and random angles for the upper/lower arms and legs and the head's turn; limbs drawn as
//   thick lines, left limbs warm and right limbs cool colours (so left and right can be told
//   apart), the head a disc with eyes and ears as dots; keypoints: nose, eyes, ears, shoulders,
//   elbows, wrists, hips, knees, ankles in COCO's order;
//   visibility: 2, or 1 for a joint covered by an occluder square (probability `occlusion`), 0 for
//   a joint outside the image (its x, y then 0, as COCO).
// Batches: "images" f32 [B, 3, H, W] RGB in [0, 1]; "keypoints" f32 [B, 17, 3] (x, y in pixels
// of the image, continuous coordinates, and v); "valid" f32 [B, 17] (v); "area" f32 [B] (half the
// box of the labelled keypoints enlarged by the head radius: about a person's segment area);
// "heatmaps" f32 [B, 4, 17, out_h, out_w]: CPN's targets (data/keypoint_heatmap.h) for the
// kernels `kernels` (tf-cpn's 23, 17, 13, 9). The training stream is samples 0, 1, ...; the
// evaluation set is samples kEvalOffset + [0, eval_size).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "data/source.h"

namespace aim::data {

struct KeypointSyntheticConfig {
  int64_t height = 384, width = 288;  // the model's input
  int64_t out_h = 96, out_w = 72;     // its heatmaps
  std::vector<int64_t> kernels = {23, 17, 13, 9};
  double min_scale = 0.55, max_scale = 0.85;  // body height / image height
  double occlusion = 0.08, noise = 0.05;
  uint64_t seed = 1;
  int64_t epoch_size = 149813;  // COCO trainval35k person instances used by tf-cpn [approx.]
  int64_t eval_size = 500;
};

class KeypointSyntheticSource : public BatchSource {
 public:
  static constexpr int64_t kEvalOffset = int64_t(1) << 40;

  explicit KeypointSyntheticSource(const KeypointSyntheticConfig& cfg = {});
  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return pos_; }
  void seek(int64_t position) override;
  int64_t epoch_size() const override { return cfg_.epoch_size; }
  int64_t eval_size() const override { return cfg_.eval_size; }
  TensorMap eval_batch(int64_t start, int64_t count) const override;

  const KeypointSyntheticConfig& config() const { return cfg_; }
  // Stream sample `index`: its keypoints (x, y, v) and area; its image into img [3, H, W] when
  // img != nullptr.
  std::array<float, 51> sample(int64_t index, float* img, float* area) const;

 private:
  TensorMap batch(int64_t first, int64_t count) const;
  KeypointSyntheticConfig cfg_;
  uint64_t layout_key_ = 0, noise_key_ = 0;
  int64_t pos_ = 0;
};

}  // namespace aim::data
