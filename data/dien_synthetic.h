// DienSynthetic: DIEN's synthetic click data (MODELS.md §4.2; docs/dien-data.md). The clicks,
// histories and labels are DinSynthetic's generator (data/din_synthetic.h: a user's favourite
// categories drive the history, the click probability grows with the share of history positions
// in the candidate's category) with DIEN's vocabularies; added are the sampled no-click
// histories the reference's auxiliary loss reads: for every history position one item drawn
// uniformly from the items other than the clicked one at that position (the reference draws
// uniformly over review occurrences, != the positive), with its category.
//
// Every sample is a pure function of (seed, stream, index), as DinSynthetic's.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/din_synthetic.h"
#include "data/source.h"

namespace aim::data {

struct DienSyntheticConfig {
  DinSyntheticConfig base;  // generator of clicks, histories and labels

  // DIEN's Amazon Books vocabularies (543 060 users, 367 983 items, 1 601 categories), histories
  // up to maxlen = 100.
  static DienSyntheticConfig full(uint64_t seed = 1) {
    DienSyntheticConfig c;
    c.base.seed = seed;
    c.base.n_users = 543060;
    c.base.n_items = 367983;
    c.base.n_cates = 1601;
    c.base.max_hist_len = 100;
    c.base.heldout_size = 100000;
    c.base.epoch_size = 512000;  // the reference's TOTAL_TRAIN_SIZE
    return c;
  }
  // DinSyntheticConfig::tiny()'s sizes (100 users, 200 items, 10 categories, histories 1..20).
  static DienSyntheticConfig tiny(uint64_t seed = 1) {
    DienSyntheticConfig c;
    c.base = DinSyntheticConfig::tiny(seed);
    return c;
  }
};

// A DIEN sample: a DIN sample plus its no-click history (same length as hist_item).
struct DienExample {
  RecExample rec;
  std::vector<int64_t> noclk_item, noclk_cate;
};

class DienSynthetic {
 public:
  using Stream = DinSynthetic::Stream;
  explicit DienSynthetic(const DienSyntheticConfig& cfg);

  const DienSyntheticConfig& config() const { return cfg_; }
  const DinSynthetic& base() const { return base_; }

  // Sample `index` of a stream; *p (if given) receives its true click probability.
  DienExample example(Stream s, int64_t index, double* p = nullptr) const;
  // Samples [start, start + count) of a stream as a batch: RecBatch's tensors (uid, item, cate,
  // hist_item, hist_cate, mask, lengths, label) plus noclk_item, noclk_cate [B, T] i64, padded
  // with 0 like the history.
  TensorMap batch(Stream s, int64_t start, int64_t count) const;
  // Best attainable AUC over held-out samples [0, n): the true click probabilities as scores.
  double attainable_auc(int64_t n) const { return base_.attainable_auc(n); }

 private:
  DienSyntheticConfig cfg_;
  DinSynthetic base_;
};

// The BatchSource of aim-train dien (data = "synthetic"): the training stream is Stream::train
// from position 0, the evaluation set the first heldout_size samples of Stream::heldout.
class DienSyntheticSource : public BatchSource {
 public:
  explicit DienSyntheticSource(const DienSyntheticConfig& cfg) : gen_(cfg) {}
  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return pos_; }
  void seek(int64_t position) override { pos_ = position; }
  int64_t epoch_size() const override { return gen_.config().base.epoch_size; }
  int64_t eval_size() const override { return gen_.config().base.heldout_size; }
  TensorMap eval_batch(int64_t start, int64_t count) const override;
  const DienSynthetic& generator() const { return gen_; }

 private:
  DienSynthetic gen_;
  int64_t pos_ = 0;
};

}  // namespace aim::data
