// SQuAD v1.1 (MODELS.md §3.1): the JSON reader, BERT's feature windows, its answer extraction and
// the official evaluation, each equal to its reference (google-research/bert run_squad.py:
// read_squad_examples, convert_examples_to_features with _improve_answer_span and
// _check_is_max_context, write_predictions with _get_best_indexes and get_final_text;
// evaluate-v1.1.py: normalize_answer, exact match and token F1).
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

// ---- answers from the model's logits (run_squad.py's write_predictions, SQuAD v1.1) ----------

struct SquadPredictOptions {
  int64_t n_best_size = 20, max_answer_length = 30;
};

// get_final_text: the answer in the original words. `pred_text` is the predicted WordPiece tokens
// joined ("##" continuations glued), `orig_text` the document words they come from joined by
// spaces. The prediction is found in the basic tokens of orig_text (tok's basic tokenizer: lower
// case and accents stripped when tok is uncased) and its first and last characters are carried
// back through the two texts without their spaces (code points); when it is not found or the two
// texts differ in length without spaces (a dropped control character, a combining accent), the
// whole orig_text. So "york" in "York!" gives "York", "play" in "playing" gives "play".
std::string squad_final_text(const std::string& pred_text, const std::string& orig_text,
                             const WordPieceTokenizer& tok);

// One window's logits: `start` and `end` have feature->input_ids.size() (max_seq_length) values.
struct SquadWindowLogits {
  const SquadFeature* feature = nullptr;
  const float* start = nullptr;
  const float* end = nullptr;
};

struct SquadNbestEntry {
  std::string text;
  float start_logit = 0, end_logit = 0;
};

// write_predictions' n-best list of one example over its windows (in order): for each window the
// n_best_size highest start and end logits (equal logits in position order), every (start, end)
// pair kept when both are document tokens of the window, the window is the start token's maximal
// context, end >= start and the span has at most max_answer_length tokens; candidates by start +
// end logit (equal scores in the order found), their final text (squad_final_text), repeated texts
// dropped, n_best_size of them. No candidate: one entry "empty" (as the reference).
std::vector<SquadNbestEntry> squad_nbest(const SquadExample& example,
                                         const std::vector<SquadWindowLogits>& windows,
                                         const WordPieceTokenizer& tok,
                                         const SquadPredictOptions& o = {});

// The windows to run for evaluating on the first `n` windows: every window of the examples whose
// first window is among the first n of `features` (so at least one whole example).
int64_t squad_whole_example_windows(const std::vector<SquadFeature>& features, int64_t n);

// The prediction (the n-best list's first text) of examples[0, E) from the logits of features[0,
// count): E is one past the example of window count - 1, or every example when count is all the
// windows (an example without windows is predicted "empty"). start_logits and end_logits are
// [count, max_seq_length] row-major. Errors when the windows do not cover E whole examples.
std::vector<std::string> squad_predictions(const std::vector<SquadExample>& examples,
                                           const std::vector<SquadFeature>& features, int64_t count,
                                           const std::vector<float>& start_logits,
                                           const std::vector<float>& end_logits,
                                           const WordPieceTokenizer& tok,
                                           const SquadPredictOptions& o = {});

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
