// ImageFolderSource: an image classification data set on disk, read as torchvision's ImageFolder
// with the ImageNet evaluation transform (data/image_decode.h). Details: docs/image-data.md.
//
// Layouts (class index = position of the class folder name in byte-wise sorted order):
//   root/train/<class>/*.{jpg,jpeg,png} + root/val/<class>/*   ImageNet layout; val/ must have the
//                                                              same class folders as train/
//   root/<class>/*                                             flat: file g of the class-major,
//                                                              name-sorted list is an evaluation
//                                                              file when g % eval_every == 0
// Extensions are matched case-insensitively (ImageNet's files end in .JPEG); other files are
// ignored and counted in describe(); hidden entries (".*") are skipped. An empty class folder, a
// class set mismatch or an undecodable file is an error naming the path.
//
// Training stream: epoch e visits the training files in the order epoch_order(n, seed, e)
// (data/din_export.h); as DinExportSource, position() counts samples, an epoch is the
// n / batch_size full batches (the last partial batch is skipped) and the position must be a
// multiple of the batch size. Evaluation: the evaluation files in class-major, name order.
// Batches: "input" f32 [B, 3, crop, crop], "label" i64 [B].
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/image_decode.h"
#include "data/source.h"

namespace aim::data {

struct ImageFolderConfig {
  std::string root;
  uint64_t seed = 1;  // epoch order and flips
  ImageTransform transform;
  // Random horizontal flip of training samples, a pure function of (seed, stream position).
  bool train_flip = false;
  // Decoding threads per batch. Plain std::threads, not OpenMP: next() runs on the prefetch
  // thread, which must not open OpenMP regions (data/prefetch.h). 1 decodes on the caller.
  int threads = 1;
  int64_t eval_every = 50;  // flat layout only
};

class ImageFolderSource : public BatchSource {
 public:
  struct File {
    std::string path;
    int64_t label;
  };

  explicit ImageFolderSource(const ImageFolderConfig& cfg);

  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return pos_; }
  void seek(int64_t position) override;
  int64_t epoch_size() const override { return int64_t(train_.size()); }
  int64_t eval_size() const override { return int64_t(eval_.size()); }
  TensorMap eval_batch(int64_t start, int64_t count) const override;

  const ImageFolderConfig& config() const { return cfg_; }
  const std::vector<std::string>& classes() const { return classes_; }
  const std::vector<File>& train_files() const { return train_; }
  const std::vector<File>& eval_files() const { return eval_; }
  bool imagenet_layout() const { return imagenet_layout_; }

 private:
  // Decodes and transforms files[index[i]] into sample i of a new batch.
  TensorMap load(const std::vector<File>& files, const std::vector<int64_t>& index,
                 const std::vector<uint8_t>& flip) const;

  ImageFolderConfig cfg_;
  bool imagenet_layout_ = false;
  std::vector<std::string> classes_;
  std::vector<File> train_, eval_;
  int64_t ignored_ = 0;     // files without a supported extension
  uint64_t list_hash_ = 0;  // FNV-1a of the relative paths and labels (fingerprint)
  uint64_t flip_key_ = 0;
  int64_t pos_ = 0;
  int64_t order_epoch_ = -1;  // epoch whose permutation order_ holds
  std::vector<int64_t> order_;
};

}  // namespace aim::data
