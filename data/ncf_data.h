// NCF data (MODELS.md §4.3): the synthetic latent-factor generator (default) and the reader of
// our flat int32 files converted once from the reference's train_data.npy / test_data.npy by
// tools/ncf_npy_export.py. Definitions, constants, the file format, the measured oracle HR@10
// and every error message: docs/ncf-data.md.
//
// Batches (both sources) are CPU tensors, B rows:
//   user  [B] i64   user id in [0, users)
//   item  [B] i64   item id in [0, items)
//   label [B] i64   1 = an interaction (training positive / held-out positive), 0 = a negative
// Training rows come in groups of 1 positive followed by `negatives` (4) sampled negatives, as
// the reference's train_data.npy. The evaluation set is one group of kNcfGroup = 100
// consecutive rows per user: the held-out positive first (label 1), then 99 negatives (label 0),
// as the reference's test_data.npy (whose label column holds item ids; the exporter turns it into
// 1 for the first row of each group and 0 for the others).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/source.h"

namespace aim::data {

// Rows per evaluation group: one held-out positive + 99 negatives (reference test_neg = 99).
constexpr int64_t kNcfGroup = 100;

// Rows of (user, item, label), any split.
struct NcfRows {
  std::vector<int64_t> user, item, label;
  int64_t size() const { return int64_t(user.size()); }
  // {"user", "item", "label"}: i64 [B] CPU tensors.
  TensorMap to_map() const;
};

// HR@k, NDCG@k and MRR@k of one set of groups (data/metrics.h defines them and the tie rule).
struct NcfRanking {
  double hr = 0, ndcg = 0, mrr = 0;
};

struct NcfSyntheticConfig {
  uint64_t seed = 1;
  int64_t n_users = 6040, n_items = 3706;  // MovieLens-1M as the reference (MODELS.md §4.3)
  int64_t factors = 4;                     // latent dimension d of the user and item vectors
  // Affinity a(u, j) = <x_u, y_j> + pop * z_j (x, y ~ N(0, 1/sqrt(d)) per element, so the dot
  // product has variance 1; z_j ~ N(0, 1) is the item's popularity). A positive of user u is
  // item j with probability proportional to sigmoid(beta * a(u, j) + offset).
  double beta = 3.0, offset = -5.0, pop = 0.5;
  int64_t negatives = 4;         // training negatives per positive (reference negative_num)
  int64_t epoch_size = 4971008;  // training rows per "epoch": the reference's train_data.npy

  // Small vocabularies for CPU tests (same generator).
  static NcfSyntheticConfig tiny(uint64_t seed = 1) {
    NcfSyntheticConfig c;
    c.seed = seed;
    c.n_users = 200;
    c.n_items = 300;
    c.epoch_size = 50000;
    return c;
  }
};

class NcfSynthetic {
 public:
  explicit NcfSynthetic(const NcfSyntheticConfig& cfg = NcfSyntheticConfig());
  const NcfSyntheticConfig& config() const { return cfg_; }

  // True affinity a(u, j) (the oracle's score; positives are drawn increasing in it).
  double affinity(int64_t user, int64_t item) const;
  // The held-out positive of user u (first row of u's evaluation group; never a training row of
  // u, neither positive nor negative).
  int64_t heldout_item(int64_t user) const { return heldout_[size_t(user)]; }

  // Rows [start, start + count) of the endless training stream; a pure function of (seed, row).
  NcfRows train_rows(int64_t start, int64_t count) const;
  // Rows [start, start + count) of the evaluation set (eval_size() = users * 100 rows; group g
  // = rows [100 g, 100 g + 100) = user g).
  NcfRows eval_rows(int64_t start, int64_t count) const;
  int64_t eval_size() const { return cfg_.n_users * kNcfGroup; }

  // The oracle: HR/NDCG/MRR@k of ranking each of the first n_groups evaluation groups by the
  // true affinity. No model beats it in expectation.
  NcfRanking attainable(int64_t n_groups, int64_t k = 10) const;

 private:
  uint64_t key(uint64_t tag) const;
  NcfSyntheticConfig cfg_;
  std::vector<float> user_f_, item_f_;  // [users, d], [items, d]
  std::vector<float> item_pop_;         // pop * z_j
  std::vector<int64_t> heldout_;        // [users]
};

class NcfSyntheticSource : public BatchSource {
 public:
  explicit NcfSyntheticSource(const NcfSyntheticConfig& cfg) : gen_(cfg) {}
  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return pos_; }
  void seek(int64_t position) override { pos_ = position; }
  int64_t epoch_size() const override { return gen_.config().epoch_size; }
  int64_t eval_size() const override { return gen_.eval_size(); }
  TensorMap eval_batch(int64_t start, int64_t count) const override;
  const NcfSynthetic& generator() const { return gen_; }

 private:
  NcfSynthetic gen_;
  int64_t pos_ = 0;
};

// ---- the flat files (format "AIMNCF01", docs/ncf-data.md) ----------------------------------

enum class NcfSplit : int32_t { Train = 0, Test = 1 };

struct NcfFile {
  int64_t users = 0, items = 0;  // id bounds from the header
  std::vector<int32_t> user, item, label;
  int64_t rows() const { return int64_t(user.size()); }
};

// Reads and checks a whole file: magic, split, counts, size, every id against the header's
// bounds, labels 0/1; test files also: rows a multiple of 100, one user per group, the first row
// of each group the only positive. Errors throw aim::Error "path: what is wrong".
NcfFile read_ncf_file(const std::string& path, NcfSplit split);

// DIR/train.bin (training stream, a fresh Philox permutation each epoch: epoch_order() of
// data/din_export.h, the last partial batch of an epoch skipped) and DIR/test.bin (evaluation
// set, file order). Both files must agree on users and items.
class NcfFileSource : public BatchSource {
 public:
  NcfFileSource(const std::string& dir, uint64_t seed);
  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return pos_; }
  void seek(int64_t position) override { pos_ = position; }
  int64_t epoch_size() const override { return train_.rows(); }
  int64_t eval_size() const override { return test_.rows(); }
  TensorMap eval_batch(int64_t start, int64_t count) const override;
  int64_t n_users() const { return train_.users; }
  int64_t n_items() const { return train_.items; }

 private:
  std::string dir_;
  uint64_t seed_;
  NcfFile train_, test_;
  int64_t pos_ = 0;
  int64_t order_epoch_ = -1;
  std::vector<int64_t> order_;
};

}  // namespace aim::data
