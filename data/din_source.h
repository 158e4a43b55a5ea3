// DIN's batch sources (data/source.h): the synthetic generator (default) and, when --data names a
// directory, the DIN export of the reference's dataset.pkl (docs/din-data.md).
#pragma once
#include <memory>
#include <string>

#include "data/din_export.h"
#include "data/din_synthetic.h"
#include "data/source.h"

namespace aim::data {

class DinSyntheticSource : public BatchSource {
 public:
  explicit DinSyntheticSource(const DinSyntheticConfig& cfg) : gen_(cfg) {}
  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override { return gen_.next(batch_size).to_map(); }
  int64_t position() const override { return gen_.position(); }
  void seek(int64_t position) override { gen_.seek(position); }
  int64_t epoch_size() const override { return gen_.config().epoch_size; }
  int64_t eval_size() const override { return gen_.config().heldout_size; }
  TensorMap eval_batch(int64_t start, int64_t count) const override {
    return gen_.heldout(start, count).to_map();
  }
  const DinSynthetic& generator() const { return gen_; }

 private:
  DinSynthetic gen_;
};

// The DIN export (data/din_export.h): the training stream walks train.tsv in a fresh shuffled
// order each epoch (epoch_order(n, seed, epoch)), skipping each epoch's last partial batch as the
// reference does; the evaluation set is test.tsv in file order (pos then neg line per user).
// The stream position is the number of samples consumed, so resuming needs the same batch size.
class DinExportSource : public BatchSource {
 public:
  DinExportSource(const std::string& dir, uint64_t seed);
  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return pos_; }
  void seek(int64_t position) override { pos_ = position; }
  int64_t epoch_size() const override { return data_.size(DinSplit::Train); }
  int64_t eval_size() const override { return data_.size(DinSplit::Test); }
  TensorMap eval_batch(int64_t start, int64_t count) const override {
    return data_.batch(DinSplit::Test, start, count).to_map();
  }
  const DinExport& data() const { return data_; }

 private:
  std::string dir_;
  uint64_t seed_;
  DinExport data_;
  int64_t pos_ = 0;
  int64_t order_epoch_ = -1;  // epoch whose permutation order_ holds
  std::vector<int64_t> order_;
};

}  // namespace aim::data
