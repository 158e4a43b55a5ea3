// SQuAD v1.1 on disk as a batch source (data/source.h) for BERT's span task (MODELS.md §3.1,
// docs/bert.md): a directory with the reference's three files
//     train-v1.1.json  dev-v1.1.json  vocab.txt (BERT's uncased WordPiece vocabulary)
// read by data/squad.h into BERT's feature windows (convert_examples_to_features: max_seq_length,
// doc_stride, max_query_length).
// Training stream: the training windows (each question's windows; those without the answer point
// at [CLS], as the reference trains) in a fresh shuffled order each epoch (epoch_order(n, seed,
// epoch)), the last partial batch of an epoch skipped; position() counts windows consumed, so a
// resume needs the checkpoint's batch size. Evaluation set: the dev windows in file order;
// evaluation itself (write_predictions, the official EM/F1) needs the dev questions and windows,
// which SquadEvalData gives.
// Batches (the synthetic span task's names, data/bert_synthetic.h): input_ids, token_type_ids,
// attention_mask i64 [B, max_seq_length]; training also start_positions, end_positions i64 [B].
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/source.h"
#include "data/squad.h"

namespace aim::data {

// What SQuAD evaluation needs of a source's evaluation set: the questions with all their answers,
// their windows (the evaluation set's samples, in order) and the tokenizer (get_final_text).
class SquadEvalData {
 public:
  virtual ~SquadEvalData() = default;
  virtual const std::vector<SquadExample>& eval_examples() const = 0;
  virtual const std::vector<SquadFeature>& eval_features() const = 0;
  virtual const WordPieceTokenizer& tokenizer() const = 0;
};

struct SquadSourceConfig {
  std::string dir;
  SquadFeatureOptions features;  // max_seq_length = the model's sequence
  uint64_t seed = 1;
  // The model's vocabulary: a vocab.txt with more tokens is refused, naming `model` (the
  // configuration, e.g. "bert --config size=tiny"). 0: no limit.
  int64_t model_vocab_size = 0;
  std::string model;
};

class SquadFileSource : public BatchSource, public SquadEvalData {
 public:
  explicit SquadFileSource(SquadSourceConfig c);
  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return pos_; }
  void seek(int64_t position) override;
  int64_t epoch_size() const override { return int64_t(train_.size()); }
  int64_t eval_size() const override { return int64_t(dev_features_.size()); }
  TensorMap eval_batch(int64_t start, int64_t count) const override;

  const std::vector<SquadExample>& eval_examples() const override { return dev_; }
  const std::vector<SquadFeature>& eval_features() const override { return dev_features_; }
  const WordPieceTokenizer& tokenizer() const override { return tok_; }

  // The training windows, compact (a real train-v1.1.json has ~88k of them): ids unpadded,
  // the first `query_tokens` of them ([CLS] query [SEP]) of token type 0.
  struct Window {
    std::vector<int32_t> ids;
    int32_t query_tokens = 0;
    int32_t start_position = 0, end_position = 0;
  };
  const std::vector<Window>& train_windows() const { return train_; }
  const SquadReadStats& train_stats() const { return train_stats_; }
  int64_t train_questions() const { return train_questions_; }

 private:
  SquadSourceConfig c_;
  WordPieceTokenizer tok_;
  std::string files_;  // "name=size,..." of the three files (fingerprint)
  std::vector<Window> train_;
  SquadReadStats train_stats_;
  int64_t train_questions_ = 0;
  std::vector<SquadExample> dev_;
  std::vector<SquadFeature> dev_features_;
  int64_t pos_ = 0;
  int64_t order_epoch_ = -1;  // the epoch whose permutation order_ holds
  std::vector<int64_t> order_;
};

}  // namespace aim::data
