// SQuAD v1.1 (MODELS.md §3.1): the JSON reader, BERT's feature windows and the official
// evaluation, each equal to its reference (google-research/bert run_squad.py:
// read_squad_examples, convert_examples_to_features with _improve_answer_span and
// _check_is_max_context; evaluate-v1.1.py: normalize_answer, exact match and token F1).
// Tests: tests/data/test_squad.cpp against tests/data/squad/reference.py's output.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/text/wordpiece.h"

namespace aim::data {

struct SquadExample {
  std::string id, question;
  std::vector<std::string> doc_tokens;  // the context split on whitespace (run_squad's)
  std::vector<std::string> answers;     // every given answer's text
  // Training: the first answer's words in doc_tokens (inclusive); -1 when not training.
  int64_t start_word = -1, end_word = -1;
};

struct SquadReadStats {
  int64_t questions = 0;
  int64_t skipped = 0;  // training: the answer text is not in the context's words (logged once)
};

// Reads a SQuAD v1.1 JSON file. `training`: each question must have exactly one answer, whose
// character offset places it in the context; questions whose answer text is not found at that
// place are skipped (counted in stats), as the reference does. Errors name the file and question.
std::vector<SquadExample> read_squad(const std::string& path, bool training,
                                     SquadReadStats* stats = nullptr);

struct SquadFeatureOptions {
  int64_t max_seq_length = 384, doc_stride = 128, max_query_length = 64;
};

// One window of a document: [CLS] query [SEP] doc-window [SEP], padded to max_seq_length.
struct SquadFeature {
  int64_t unique_id = 0;  // 1000000000, 1000000001, ... over all windows
  int64_t example_index = 0, doc_span_index = 0;
  std::vector<std::string> tokens;           // unpadded
  std::map<int64_t, int64_t> token_to_orig;  // token position -> word of doc_tokens
  std::map<int64_t, bool> token_is_max_context;
  std::vector<int64_t> input_ids, input_mask, segment_ids;  // max_seq_length each
  int64_t start_position = 0, end_position = 0;  // training: the answer's tokens (0, 0 outside)
};

std::vector<SquadFeature> squad_features(const std::vector<SquadExample>& examples,
                                         const WordPieceTokenizer& tokenizer,
                                         const SquadFeatureOptions& o, bool training);

// evaluate-v1.1.py's normalize_answer: lower case, ASCII punctuation removed, the articles a, an,
// the removed, whitespace collapsed.
std::string squad_normalize_answer(const std::string& s);
double squad_exact_match(const std::string& prediction, const std::string& truth);
double squad_f1(const std::string& prediction, const std::string& truth);

struct SquadScore {
  double exact_match = 0, f1 = 0;  // percent over every question of the dataset
  int64_t questions = 0, unanswered = 0;
};
// The official score of `predictions` (question id -> answer text) over a dataset's examples
// (their answers); a question without a prediction scores 0.
SquadScore squad_evaluate(const std::vector<SquadExample>& dataset,
                          const std::map<std::string, std::string>& predictions);

}  // namespace aim::data
