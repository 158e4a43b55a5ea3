// VocSource: Pascal VOC detection data on disk (MODELS.md §6.1: VOC2007 test; VOC07+12 trainval
// for training) as the SSD references read it. docs/detection.md.
//
// A set is "YEAR_DIR:SPLIT", YEAR_DIR holding Annotations/, ImageSets/Main/SPLIT.txt and
// JPEGImages/ (e.g. VOCdevkit/VOC2007:trainval). Training sets are concatenated; difficult objects
// are dropped from training targets (ssd.pytorch's keep_difficult=False) and kept, flagged, in the
// evaluation batches (VOC AP ignores them). Boxes become continuous pixel coordinates
// (x1 = xmin - 1, x2 = xmax: VOC's 1-based inclusive pixels) of the image resized to size x size.
// Training samples are augmented (data/detection_augment.h) unless augment = false, each a pure
// function of (seed, stream position); the epoch order is epoch_order(n, seed, epoch).
// Batches: "images" f32 [B, 3, size, size] in [0, 1], "boxes" f32 [B, G, 4], "labels" i64 [B, G]
// (0 = padding), "num_boxes" i64 [B]; evaluation adds "difficult" u8 [B, G], "orig_size" i64
// [B, 2] (height, width) and "index" i64 [B] (position in the evaluation list). G = the most
// objects any image of the sets has.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/detection_batch.h"
#include "data/source.h"
#include "data/voc.h"

namespace aim::data {

struct VocSourceConfig {
  std::vector<std::string> train_sets;  // "DIR:split"
  std::string eval_set;                 // "DIR:split"
  int64_t size = 300;
  bool augment = true;
  DetectionAugmentOptions augment_options;
  uint64_t seed = 1;
  bool clip_boxes = false;  // annotation boxes outside their image: error (false) or clipped
};

class VocSource : public BatchSource {
 public:
  struct Item {
    VocAnnotation ann;
    DetectionSample sample;  // the JPEG and its boxes in continuous pixel coordinates
  };

  explicit VocSource(const VocSourceConfig& cfg);

  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return pos_; }
  void seek(int64_t position) override;
  int64_t epoch_size() const override { return int64_t(train_.size()); }
  int64_t eval_size() const override { return int64_t(eval_.size()); }
  TensorMap eval_batch(int64_t start, int64_t count) const override;

  const std::vector<Item>& train_items() const { return train_; }
  const std::vector<Item>& eval_items() const { return eval_; }
  int64_t max_objects() const { return max_objects_; }

 private:
  TensorMap load(const std::vector<const Item*>& items, const std::vector<int64_t>& positions,
                 bool train) const;
  VocSourceConfig cfg_;
  std::vector<Item> train_, eval_;
  int64_t max_objects_ = 1, clipped_ = 0;
  uint64_t aug_key_ = 0;
  int64_t pos_ = 0;
};

// Reads "DIR:split" into items (annotation of every listed id; the JPEG path, not opened here).
std::vector<VocSource::Item> read_voc_set(const std::string& set, bool clip_boxes,
                                          int64_t* clipped);

}  // namespace aim::data
