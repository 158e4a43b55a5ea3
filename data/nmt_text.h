// NmtTextSource: GNMT's on-disk layout (MODELS.md §3.2, TF NMT's wmt16_en_de.sh): in one
// directory, Moses-tokenised, BPE-applied text, one sentence per line, tokens separated by single
// spaces, the BPE continuation marker "@@ ":
//   <train_prefix>.<src>, <train_prefix>.<tgt>   training pairs (train.tok.clean.bpe.32000)
//   <eval_prefix>.<src>, <eval_prefix>.<tgt>     evaluation pairs (newstest2015.tok.bpe.32000)
//   <vocab_prefix>.<src>, <vocab_prefix>.<tgt>   vocabularies (vocab.bpe.32000), id = line index
// Vocabulary: line 2 must be "<s>" and line 3 "</s>" (TF NMT's check_vocab order: ids 1, 2);
// line 1 "<unk>" gives unknown tokens id 0, any other first line means the vocabulary has no unk
// entry and an unknown token is an error. Duplicate or empty vocabulary lines are errors.
// Errors name file:line and the reason: unequal line counts of a pair of files, an empty line, an
// unknown token without an unk entry, a sentence over hard_max_len tokens. Training pairs longer
// than max_len are truncated to max_len tokens per side (TF NMT's src_max_len / tgt_max_len = 50);
// evaluation pairs are not.
// Batches as data/nmt_synthetic.h; training batches are consecutive pairs in file order, wrapping
// at the end (no length bucketing yet: docs/nmt.md).
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/source.h"

namespace aim::data {

struct NmtTextConfig {
  std::string dir;
  std::string src = "de", tgt = "en";  // AI Matrix: WMT16 German -> English
  std::string train_prefix = "train.tok.clean.bpe.32000";
  std::string eval_prefix = "newstest2015.tok.bpe.32000";
  std::string vocab_prefix = "vocab.bpe.32000";
  int64_t max_len = 50;        // training truncation per side (0: none)
  int64_t hard_max_len = 250;  // longer lines are errors
};

// A vocabulary file: token -> id (line index), and back.
struct NmtVocab {
  std::string path;
  std::vector<std::string> tokens;
  std::unordered_map<std::string, int64_t> ids;
  bool has_unk = false;
  static NmtVocab load(const std::string& path);
  // The ids of one line's tokens; `where` is "file:line" for errors.
  std::vector<int64_t> encode(const std::string& line, const std::string& where) const;
  // Tokens joined by spaces, the BPE merge undone (for BLEU).
  std::string decode(const std::vector<int64_t>& ids) const;
};

// Both sides of a parallel text file pair as token ids.
struct NmtParallel {
  std::vector<std::vector<int64_t>> src, tgt;
};
NmtParallel read_parallel(const std::string& src_path, const std::string& tgt_path,
                          const NmtVocab& src_vocab, const NmtVocab& tgt_vocab, int64_t truncate,
                          int64_t hard_max_len);

class NmtTextSource : public BatchSource {
 public:
  explicit NmtTextSource(const NmtTextConfig& cfg);
  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return pos_; }
  void seek(int64_t position) override { pos_ = position; }
  int64_t epoch_size() const override { return int64_t(train_.src.size()); }
  int64_t eval_size() const override { return int64_t(eval_.src.size()); }
  TensorMap eval_batch(int64_t start, int64_t count) const override;
  const NmtVocab& source_vocab() const { return src_vocab_; }
  const NmtVocab& target_vocab() const { return tgt_vocab_; }

 private:
  NmtTextConfig cfg_;
  NmtVocab src_vocab_, tgt_vocab_;
  NmtParallel train_, eval_;
  int64_t pos_ = 0;
};

}  // namespace aim::data
