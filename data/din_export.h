// Reader of our DIN export: the reference's din/dataset.pkl (MODELS.md §4.1) converted once by
// tools/din_pickle_export.py into a directory of plain text files (format: docs/din-data.md,
// "DIN export"):
//   meta.txt       format aim-din-export-1 / users N / items N / cates N / train N / test N
//   cate_list.txt  line k (0-based) = category of item k, exactly `items` lines
//   train.tsv      uid \t item \t label \t hist   (hist: item ids joined by single spaces,
//   test.tsv       the same                        oldest -> newest, non-empty)
// test.tsv holds each reference test tuple (uid, hist, (pos, neg)) as two lines, label 1 then 0.
// Everything is read and checked up front; malformed input throws aim::Error whose message starts
// with "path:line: " (line 0 = the file as a whole).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/rec_batch.h"

namespace aim::data {

enum class DinSplit { Train, Test };

struct DinExportOptions {
  // Keep only the most recent max_hist_len history positions; 0 = keep all (the reference does
  // not truncate: DataInput pads to the batch's longest history).
  int64_t max_hist_len = 0;
};

class DinExport {
 public:
  static DinExport load(const std::string& dir, const DinExportOptions& opt = {});

  int64_t n_users() const { return users_; }
  int64_t n_items() const { return items_; }
  int64_t n_cates() const { return cates_; }
  const std::vector<int64_t>& cate_list() const { return cate_list_; }  // item -> category

  // Samples in file order; cate and hist_cate are filled from cate_list.
  const std::vector<RecExample>& train() const { return train_; }
  const std::vector<RecExample>& test() const { return test_; }
  const std::vector<RecExample>& examples(DinSplit s) const {
    return s == DinSplit::Train ? train_ : test_;
  }
  int64_t size(DinSplit s) const { return int64_t(examples(s).size()); }

  // Samples [start, start + count) of a split in file order, collated (rec_batch.h).
  RecBatch batch(DinSplit split, int64_t start, int64_t count) const;
  // Samples order[start], ..., order[start + count - 1] (e.g. order = epoch_order(...)).
  RecBatch gather(DinSplit split, const std::vector<int64_t>& order, int64_t start,
                  int64_t count) const;

  // uid of every test sample, in file order: the groups argument of gauc() (data/metrics.h).
  std::vector<int64_t> test_uids() const;

 private:
  int64_t users_ = 0, items_ = 0, cates_ = 0;
  std::vector<int64_t> cate_list_;
  std::vector<RecExample> train_, test_;
};

// A permutation of [0, n) for one epoch, a pure function of (n, seed, epoch): a trainer resumes
// exactly from (epoch, index) by recomputing it. Fisher-Yates driven by Philox-4x32-10
// (tensor/philox.h), so it is the same on every platform and standard library.
std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch);

}  // namespace aim::data
