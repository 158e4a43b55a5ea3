// IcdarSource: ICDAR 2015 Challenge 4 (incidental scene text) on disk, for SegLink (issue 21;
// MODELS.md §5.2; docs/seglink.md "ICDAR 2015 folders"). aim-train seglink --data
// icdar:ROOT[:split].
//
// ROOT holds the competition's folders as they unzip:
//   ch4_training_images/img_<n>.jpg                              1000 training images
//   ch4_training_localization_transcription_gt/gt_img_<n>.txt    their words (data/icdar.h)
//   ch4_test_images/img_<n>.jpg                                  500 test images
//   Challenge4_Test_Task1_GT/gt_img_<n>.txt                      their words
// Images: the files of the image folder ending in .jpg, .jpeg or .png (any case; the content
// decides the decoder, data/image_decode.h), in natural order of their names (img_2 before
// img_10); image <stem>.<ext> has ground truth gt_<stem>.txt. A missing folder, an image without
// its ground truth, a ground-truth file without its image, an empty folder or a malformed line are
// errors naming the file (and line). The evaluation split is "test" (default) or "train"
// (evaluate on the training images, e.g. without the test ground truth); the training split is
// always the training folders.
//
// Training samples (stream position p: image stream_indices(p, ...) of data/detection_batch.h, a
// shuffled order per epoch) go through SegLink's augmentation (data/seglink_augment.h: random
// crop, polygon projection, random interpolation) into size x size, keyed by (seed, p); with
// augment = false they are resized whole (TF1 bilinear, as the augmentation's "whole image"
// case). "###" words stay in the training targets, flagged don't-care, as the reference's
// ICDAR 2015 records keep them (the model decides: models/detection/seglink.h ignore_dont_care);
// quadrilaterals that cannot be a word's box (a side of length 0, no height) are left out of the
// training targets and counted (describe()). Evaluation images are resized whole to size x size
// (TF1 bilinear, the reference's test_preprocess with a fixed size), every word kept.
//
// Batches (the synthetic text source's layout, data/text_detection_synthetic.h): "images" f32
// [B, 3, size, size] in [0, 1]; "quads" f32 [B, G, 8] pixels of the resized image (x scaled by
// size / width, y by size / height in evaluation), zero rows as padding; "num_boxes" i64 [B];
// "dont_care" u8 [B, G]. Evaluation adds "orig_size" i64 [B, 2] (height, width) and "index" i64
// [B]. G = the most words of any image of both splits (at least 1).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "data/icdar.h"
#include "data/seglink_augment.h"
#include "data/source.h"

namespace aim::data {

struct IcdarSourceConfig {
  std::string root;
  std::string eval_split = "test";  // test | train
  int64_t size = 384;               // the reference's training size (exp/sgd/pretrain.json)
  bool augment = true;
  SeglinkAugmentOptions augment_options;
  uint64_t seed = 1;
};

struct IcdarItem {
  std::string image, gt;  // paths
  std::vector<IcdarWord> words;
};

class IcdarSource : public BatchSource {
 public:
  explicit IcdarSource(const IcdarSourceConfig& cfg);

  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return pos_; }
  void seek(int64_t position) override;
  int64_t epoch_size() const override { return int64_t(train_.size()); }
  int64_t eval_size() const override { return int64_t(eval_.size()); }
  TensorMap eval_batch(int64_t start, int64_t count) const override;

  const std::vector<IcdarItem>& train_items() const { return train_; }
  const std::vector<IcdarItem>& eval_items() const { return eval_; }
  int64_t max_words() const { return max_words_; }
  // Training sample at stream position p: its image [3, size, size] into img (when not null)
  // and its words in the resized image's pixels; info (when not null) the augmentation's choices.
  std::vector<IcdarWord> train_sample(int64_t p, float* img, SeglinkAugmentInfo* info) const;

 private:
  TensorMap pack(const std::vector<std::vector<IcdarWord>>& words, Tensor images) const;
  IcdarSourceConfig cfg_;
  std::vector<IcdarItem> train_, eval_;
  int64_t max_words_ = 1, degenerate_ = 0;
  uint64_t aug_key_ = 0;
  int64_t pos_ = 0;
};

// Reads split "train" or "test" of ROOT: the images and their parsed ground truth (errors above).
std::vector<IcdarItem> read_icdar_split(const std::string& root, const std::string& split);

// A quadrilateral of an evaluation batch (size x size pixels) in its image's original pixels:
// x width / size, y height / size; as_detection also clips to [0, width - 1] x [0, height - 1]
// and rounds, as the reference's evaluate.py writes its result files (res_img_N.txt).
std::array<double, 8> icdar_to_original(const std::array<double, 8>& q, int64_t height,
                                        int64_t width, int64_t size, bool as_detection);

// Whether a quadrilateral can be encoded as a word's box (models/detection/rbox.h quad_to_rbox's
// conditions: top (1-2) and bottom (4-3) sides of non-zero length, non-zero height).
bool icdar_quad_usable(const std::array<double, 8>& q);

}  // namespace aim::data
