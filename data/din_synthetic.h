// DinSynthetic: deterministic synthetic click data shaped like DIN's Amazon Electronics set
// (MODELS.md §4.1) with a learnable signal. Definition, constants and the measured best
// attainable AUC: docs/din-data.md.
//
// Every sample is a pure function of (seed, stream, index) through Philox-4x32-10, so batches are
// reproducible, independent of batch size and of how the stream was consumed before.
#pragma once
#include <cstdint>
#include <vector>

#include "data/metrics.h"
#include "data/rec_batch.h"

namespace aim::data {

struct DinSyntheticConfig {
  uint64_t seed = 1;
  // Vocabulary sizes of the benchmarked data (MODELS.md §4.1).
  int64_t n_users = 192403, n_items = 63001, n_cates = 801;
  int64_t max_hist_len = 100;   // history length uniform in 1..max_hist_len
  int64_t max_fav = 4;          // each user has 1..max_fav favourite categories (uniform)
  double taste_prob = 0.8;      // a history position comes from a favourite category, else uniform
  double cand_from_hist = 0.5;  // candidate's category = that of a random history position, else
                                // the candidate is a uniform item
  // Click probability p = sigmoid(a * frac + b + user_bias[uid] + item_bias[item]), frac = share of
  // history positions whose category equals the candidate's; biases are fixed N(0, noise^2).
  double a = 8.0, b = -1.5;
  double user_noise = 0.0, item_noise = 0.5;  // user bias 0: DIN does not see the user id
  int64_t heldout_size = 100000;              // the fixed held-out set: samples [0, heldout_size)
  int64_t epoch_size = 2608764;  // training samples per "epoch" (the real set's, for --epochs)

  // Small vocabularies and histories for CPU tests (same generator).
  static DinSyntheticConfig tiny(uint64_t seed = 1) {
    DinSyntheticConfig c;
    c.seed = seed;
    c.n_users = 100;
    c.n_items = 200;
    c.n_cates = 10;
    c.max_hist_len = 20;
    c.max_fav = 2;
    c.heldout_size = 1000;
    c.epoch_size = 10000;
    return c;
  }
};

class DinSynthetic {
 public:
  enum class Stream : uint64_t { train = 1, heldout = 2 };

  explicit DinSynthetic(const DinSyntheticConfig& cfg = DinSyntheticConfig());

  const DinSyntheticConfig& config() const { return cfg_; }
  // The fixed item -> category table [n_items] (DIN's cate_list); every category has >= 1 item.
  const std::vector<int64_t>& item_to_cate() const { return item_cate_; }
  Tensor cate_table() const;  // same as an i64 CPU tensor [n_items]

  // Next batch_size samples of the training stream (advances position()).
  RecBatch next(int64_t batch_size);
  int64_t position() const { return pos_; }
  void seek(int64_t sample_index) { pos_ = sample_index; }

  // Samples [start, start + count) of the fixed held-out set (within heldout_size).
  RecBatch heldout(int64_t start, int64_t count) const;

  // Sample `index` of a stream; *p (if given) receives its true click probability.
  RecExample example(Stream s, int64_t index, double* p = nullptr) const;
  // True click probabilities of samples [start, start + count) of a stream.
  std::vector<double> probabilities(Stream s, int64_t start, int64_t count) const;

  // Best attainable AUC: AUC of the true click probabilities against the sampled labels over
  // held-out-stream samples [0, n) (n may exceed heldout_size; the stream is unbounded).
  double attainable_auc(int64_t n) const;

 private:
  uint64_t key(uint64_t tag) const;
  std::vector<int64_t> favourites(int64_t uid) const;

  DinSyntheticConfig cfg_;
  std::vector<int64_t> item_cate_;
  std::vector<int64_t> cate_off_, cate_items_;  // CSR: items of category c
  int64_t pos_ = 0;
};

}  // namespace aim::data
