// InstanceSyntheticSource: synthetic instance segmentation (issue 22, Mask R-CNN): the images of
// DetectionSyntheticSource (data/detection_synthetic.h, the same config and seed give the same
// pixels) with each object's exact visible pixel mask: the pixels where it is painted on top.
// As COCO annotates what is visible, an object's box is the tight extent of its visible mask
// (x2, y2 exclusive), and an object that later objects hide entirely is not an object here.
//
// Batches: "images" f32 [B, 3, H, W]; "boxes" f32 [B, G, 4]; "labels" i64 [B, G] (0: padding);
// "num_boxes" i64 [B]; "masks" u8 [B, G, H, W], 1 on object g's visible pixels (G = max_objects).
// The training stream is samples 0, 1, ...; the evaluation set is DetectionSyntheticSource's.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/coco_eval_segm.h"
#include "data/detection_synthetic.h"
#include "data/source.h"

namespace aim::data {

struct SyntheticInstance {
  SyntheticObject object;     // label and visible box
  std::vector<uint8_t> mask;  // [H, W] row-major, 1 on the visible pixels
};

class InstanceSyntheticSource : public BatchSource {
 public:
  explicit InstanceSyntheticSource(const DetectionSyntheticConfig& cfg = {});

  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return pos_; }
  void seek(int64_t position) override;
  int64_t epoch_size() const override { return shapes_.epoch_size(); }
  int64_t eval_size() const override { return shapes_.eval_size(); }
  TensorMap eval_batch(int64_t start, int64_t count) const override;

  const DetectionSyntheticConfig& config() const { return shapes_.config(); }
  // Stream sample `index`: its instances, its image into img [3, H, W] when img != nullptr.
  std::vector<SyntheticInstance> sample(int64_t index, float* img) const;
  // The mask AP ground truth of evaluation samples [start, start + count): image id = the
  // evaluation index, category = label, area = visible pixels, annotation ids from 1.
  std::vector<CocoSegmGt> eval_ground_truth(int64_t start, int64_t count) const;

 private:
  TensorMap batch(int64_t first, int64_t count) const;
  DetectionSyntheticSource shapes_;
  int64_t pos_ = 0;
};

}  // namespace aim::data
