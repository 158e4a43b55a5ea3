// ImageSyntheticSource: deterministic synthetic image classification data for the CNN models,
// shaped like ImageNet (1000 classes, 224x224, 1281167 training images, 50000 eval images) with a
// learnable signal. Definition, constants and the measured attainable accuracy: docs/image-data.md.
//
// Sample i is a pure function of (seed, i) through Philox-4x32-10:
//   label ~ uniform [0, classes)
//   input = signal * prototype[label] + N(0, 1) per pixel          [3, H, W]
// prototype[c] (per channel): a coarse grid x grid of N(0, 1) values, bilinearly upsampled to
// H x W (grid corners on the image corners), scaled to unit RMS per channel. The training stream
// is samples 0, 1, 2, ...; the evaluation set is samples kEvalOffset + [0, eval_size).
// Batches: "input" f32 [B, 3, H, W], "label" i64 [B].
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/source.h"

namespace aim::data {

struct ImageSyntheticConfig {
  int64_t classes = 1000, height = 224, width = 224;
  uint64_t seed = 1;
  int64_t epoch_size = 1281167;  // ImageNet-1k training images
  int64_t eval_size = 50000;     // ImageNet-1k validation images
  int64_t grid = 4;              // prototype resolution before upsampling (grid x grid)
  double signal = 0.2;           // prototype amplitude against unit noise (docs/image-data.md)

  // 10 classes of 32x32 (CIFAR-sized) for CPU tests and short training runs.
  static ImageSyntheticConfig tiny(uint64_t seed = 1) {
    ImageSyntheticConfig c;
    c.classes = 10;
    c.height = c.width = 32;
    c.seed = seed;
    c.epoch_size = 10000;
    c.eval_size = 1000;
    return c;
  }
};

class ImageSyntheticSource : public BatchSource {
 public:
  // Evaluation sample j is stream sample kEvalOffset + j: disjoint from any training position.
  static constexpr int64_t kEvalOffset = int64_t(1) << 40;

  explicit ImageSyntheticSource(const ImageSyntheticConfig& cfg = ImageSyntheticConfig());

  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return pos_; }
  void seek(int64_t position) override;
  int64_t epoch_size() const override { return cfg_.epoch_size; }
  int64_t eval_size() const override { return cfg_.eval_size; }
  TensorMap eval_batch(int64_t start, int64_t count) const override;

  const ImageSyntheticConfig& config() const { return cfg_; }
  // Stream samples [first, first + count) (training: first = position; evaluation: kEvalOffset +
  // index). input: [count, 3, H, W] floats, labels: [count].
  void samples(int64_t first, int64_t count, float* input, int64_t* labels) const;
  // Label of stream sample `index`.
  int64_t label(int64_t index) const;
  // prototype[c] rendered: [3, H, W], unit RMS per channel.
  std::vector<float> prototype(int64_t c) const;

  // Accuracy of the nearest-prototype classifier (argmax_c <x, prototype[c]>, Bayes-optimal for
  // this model: equal priors, equal prototype norms, white Gaussian noise) on evaluation samples
  // [0, n) (n may exceed eval_size: the stream is unbounded): the best attainable accuracy.
  double oracle_accuracy(int64_t n) const;

 private:
  // grid_ [classes, 3, grid, grid], already scaled to unit RMS after upsampling. The upsampling
  // is separable: wy_/wx_ give, per output row/column, the lower grid index and its weight.
  std::vector<float> grid_;
  std::vector<int32_t> y0_, x0_;
  std::vector<float> wy_, wx_;
  ImageSyntheticConfig cfg_;
  uint64_t noise_key_ = 0, label_key_ = 0;
  int64_t pos_ = 0;

  // Adds signal * prototype[c] to img [3, H, W].
  void add_prototype(int64_t c, float scale, float* img) const;
};

}  // namespace aim::data
