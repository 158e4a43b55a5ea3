// CocoSource: COCO detection data on disk (MODELS.md §6.4: train2017 / val2017 with
// instances_{train,val}2017.json) in the detection batch layout (data/detection_batch.h). Crowd
// annotations are left out of the training targets (torchvision's references) and of the
// evaluation batches' boxes (COCO's evaluation reads them from the annotation file: evaluation()
// gives the ground truth); images without any other annotation are kept. Labels are the contiguous
// 1..80 of data/coco.h. Training samples are augmented unless augment = false, each a pure function
// of (seed, stream position); the epoch order is epoch_order(n, seed, epoch). Evaluation batches
// carry "orig_size" and "index"; the COCO image id of index i is eval_image_id(i).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/coco.h"
#include "data/coco_eval.h"
#include "data/detection_batch.h"
#include "data/source.h"

namespace aim::data {

struct CocoSourceConfig {
  std::string train_images, train_annotations;  // e.g. coco/train2017, .../instances_train2017.json
  std::string eval_images, eval_annotations;
  int64_t size = 300;
  bool augment = true;
  DetectionAugmentOptions augment_options;
  uint64_t seed = 1;
  bool clip_boxes = false;
};

class CocoSource : public BatchSource {
 public:
  explicit CocoSource(const CocoSourceConfig& cfg);

  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return pos_; }
  void seek(int64_t position) override;
  int64_t epoch_size() const override { return int64_t(train_.size()); }
  int64_t eval_size() const override { return int64_t(eval_.size()); }
  TensorMap eval_batch(int64_t start, int64_t count) const override;

  int64_t max_objects() const { return max_objects_; }
  int64_t eval_image_id(int64_t index) const { return eval_ids_.at(size_t(index)); }
  // The evaluation set's ground truth, images and categories for coco_evaluate_bbox.
  const std::vector<CocoEvalGt>& eval_ground_truth() const { return eval_gt_; }
  const std::vector<int64_t>& eval_image_ids() const { return eval_ids_; }
  const std::vector<int64_t>& category_ids() const { return category_ids_; }

 private:
  CocoSourceConfig cfg_;
  std::vector<DetectionSample> train_, eval_;
  std::vector<int64_t> eval_ids_, category_ids_;
  std::vector<CocoEvalGt> eval_gt_;
  int64_t max_objects_ = 1, clipped_ = 0;
  uint64_t aug_key_ = 0;
  int64_t pos_ = 0;
};

}  // namespace aim::data
