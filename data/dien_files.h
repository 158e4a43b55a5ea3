// DIEN's real data (MODELS.md §4.2, docs/dien-data.md): `aim-train dien --data DIR` where DIR holds
//   local_train_splitByUser, local_test_splitByUser   six TAB fields, 0x02-joined histories
//   uid_voc.txt, mid_voc.txt, cat_voc.txt              plain-text vocabularies (data/dien_tsv.h;
//                                                      tools/dien_vocab_from_pkl.py converts the
//                                                      reference's *_voc.pkl once)
//   item-info                                          asin \t category
//   reviews-info                                       user \t asin \t rating \t unixtime
// as the reference's data_iterator.py reads them: training lines in buffers of 20 batches, each
// buffer sorted by history length and served longest first; for every history position
// `negatives` (5) no-click items drawn uniformly over the review occurrences of reviews-info,
// never the clicked item itself, with their categories from item-info.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/dien_tsv.h"
#include "data/source.h"

namespace aim::data {

// The no-click sampler: reviews-info's asins as item ids (unknown asins become id 0, as in the
// reference's mid_list_for_random) and item-info's first category of each asin.
class DienNegativeSampler {
 public:
  DienNegativeSampler(const std::string& item_info, const std::string& reviews_info,
                      const Vocab& mid, const Vocab& cat);

  int64_t occurrences() const { return int64_t(occ_.size()); }
  // Items of mid's vocabulary with no item-info line (their no-clicks get category 0, the
  // reference's default_cat; the reference would stop with a KeyError).
  int64_t items_without_category() const { return missing_cate_; }
  int64_t category(int64_t item) const { return item_cate_[size_t(item)]; }

  // The k-th no-click item (k < 256) for history position t (< 4096) of sample `index`, under
  // the Philox key `key`: uniform over the occurrences, redrawn while it equals `positive`.
  int64_t draw(uint64_t key, int64_t index, int64_t t, int64_t k, int64_t positive) const;

 private:
  std::vector<int32_t> occ_;        // item id per review occurrence
  std::vector<int32_t> item_cate_;  // category id per item id
  int64_t missing_cate_ = 0;
  std::string reviews_path_;
};

struct DienFilesOptions {
  int64_t max_hist_len = 100;   // the reference's maxlen: keep the most recent positions
  int64_t negatives = 5;        // no-click items per history position (the model reads the first)
  int64_t buffer_batches = 20;  // lines sorted together: buffer_batches x batch size
};

// Batches carry RecBatch's tensors plus
//   noclk_item, noclk_cate   [B, T] i64: the first no-click draw per position (the model's input)
//   noclk_items, noclk_cates [B, T, K] i64: all K = negatives draws, as the reference feeds them
// padded with 0 like the history.
// Training stream: epoch e reads the training file in order (the reference does not shuffle),
// cut into buffers of buffer_batches x B lines, each sorted longest history first; each epoch's
// last partial batch is skipped; the no-clicks are drawn afresh every epoch. position() counts
// samples, so resuming needs the checkpoint's batch size. Evaluation: the test file in file
// order, no-clicks fixed by the seed.
class DienFileSource : public BatchSource {
 public:
  DienFileSource(const std::string& dir, uint64_t seed, const DienFilesOptions& opt = {});
  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return pos_; }
  void seek(int64_t position) override { pos_ = position; }
  int64_t epoch_size() const override { return train_.size(); }
  int64_t eval_size() const override { return test_.size(); }
  TensorMap eval_batch(int64_t start, int64_t count) const override;

  const DienTsvReader& train() const { return train_; }
  const DienTsvReader& test() const { return test_; }
  const DienNegativeSampler& sampler() const { return sampler_; }
  // The training file's sample indices in serving order for batch size B (one epoch).
  std::vector<int64_t> serving_order(int64_t batch_size) const;

 private:
  TensorMap gather(const DienTsvReader& r, const int64_t* idx, int64_t count, uint64_t key) const;

  std::string dir_;
  uint64_t seed_;
  DienFilesOptions opt_;
  DienTsvReader train_, test_;
  DienNegativeSampler sampler_;
  int64_t pos_ = 0;
  int64_t order_batch_ = 0;  // batch size order_ was built for
  std::vector<int64_t> order_;
};

}  // namespace aim::data
