// NmtSyntheticSource: GNMT's synthetic translation task (MODELS.md "Defaults every model
// follows": a deterministic transduction): the target is the source reversed and mapped through a
// fixed permutation of the vocabulary, so attention must learn a length-dependent alignment.
// Token ids as vocab.bpe.32000: 0 <unk>, 1 <s> (SOS), 2 </s> (EOS); content tokens 3 .. V-1.
//
// Deterministic by Philox(seed):
//   map        a permutation of the content tokens (stream tag 1), the same for every sample
//   training   batch at position p: a length bucket k ~ U{0 .. buckets-1} (tag 2, block p), then
//              sample p + j: length ~ U[lo_k, hi_k] (the buckets split [min_len, max_len] evenly,
//              TF NMT's num_buckets = 5) and tokens ~ U{3 .. V-1} (tag 3, block p + j)
//   evaluation sample j: length ~ U[min_len, max_len], tokens as above (tag 4, block j)
//   target     map(source[len-1]), ..., map(source[0])
// Batches: source [B, S] i64 (EOS padded, TF's src padding), source_length [B] i64,
// target_input [B, T] = SOS + target (EOS padded), target_output [B, T] = target + EOS (EOS
// padded), target_length [B] = len + 1; S and T are the batch's longest.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/source.h"

namespace aim::data {

struct NmtSyntheticConfig {
  int64_t vocab = 36549;  // source and target vocabulary (with the 3 special tokens)
  int64_t min_len = 1, max_len = 50;
  int64_t buckets = 5;
  uint64_t seed = 1;
  int64_t epoch_size = 4500000;  // about WMT16 en-de's training pairs
  int64_t eval_size = 3000;      // about newstest2015's size

  static NmtSyntheticConfig tiny(uint64_t seed = 1) {
    NmtSyntheticConfig c;
    c.vocab = 24;
    c.min_len = 3;
    c.max_len = 8;
    c.seed = seed;
    c.epoch_size = 100000;
    c.eval_size = 256;
    return c;
  }
};

class NmtSyntheticSource : public BatchSource {
 public:
  static constexpr int64_t kUnk = 0, kSos = 1, kEos = 2;
  explicit NmtSyntheticSource(const NmtSyntheticConfig& cfg = NmtSyntheticConfig());

  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return pos_; }
  void seek(int64_t position) override { pos_ = position; }
  int64_t epoch_size() const override { return cfg_.epoch_size; }
  int64_t eval_size() const override { return cfg_.eval_size; }
  TensorMap eval_batch(int64_t start, int64_t count) const override;

  // The target of a source sentence (map, then reverse).
  std::vector<int64_t> target_of(const std::vector<int64_t>& source) const;
  const NmtSyntheticConfig& config() const { return cfg_; }

 private:
  NmtSyntheticConfig cfg_;
  std::vector<int64_t> map_;  // token -> mapped token (specials map to themselves)
  int64_t pos_ = 0;
};

// Source/target sentence pairs as a batch (the layout above); sentences need >= 1 token.
TensorMap nmt_pairs_to_batch(const std::vector<std::vector<int64_t>>& sources,
                             const std::vector<std::vector<int64_t>>& targets);

}  // namespace aim::data
