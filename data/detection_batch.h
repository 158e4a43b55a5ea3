// What the detection sources share (data/voc_source.h, data/coco_source.h): decoding an image into
// [0, 1] floats, its augmentation or plain resize, and the padded batch layout of docs/detection.md
// ("images", "boxes", "labels", "num_boxes"; evaluation adds "difficult", "orig_size", "index").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/detection_augment.h"
#include "tensor/tensor.h"

namespace aim::data {

struct DetectionSample {
  std::string image;               // file to decode
  int64_t height = 0, width = 0;   // as annotated: the decoded image must agree
  std::vector<AugmentBox> boxes;   // continuous pixel coordinates of the original image
  std::vector<uint8_t> difficult;  // per box (evaluation only; may be empty)
};

struct DetectionBatchOptions {
  int64_t size = 300;       // output images are size x size
  int64_t max_objects = 1;  // G
  bool train = true;        // training: augmentation (when augment); evaluation extras
  bool augment = true;
  DetectionAugmentOptions augment_options;
  uint64_t augment_key = 0;  // Philox key; sample s uses blocks positions[s] * 64
};

// The data-set indices of stream positions [pos, pos + count) over n samples: position p is
// sample epoch_order(n, seed, p / n)[p % n] (data/din_export.h).
std::vector<int64_t> stream_indices(int64_t pos, int64_t count, int64_t n, uint64_t seed);

// Decodes, augments or resizes, and packs the samples; positions: each sample's stream position
// (training: its augmentation stream; evaluation: the "index" output).
TensorMap detection_batch(const std::vector<const DetectionSample*>& samples,
                          const std::vector<int64_t>& positions, const DetectionBatchOptions& o);

}  // namespace aim::data
