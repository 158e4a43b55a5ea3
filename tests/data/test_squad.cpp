// data/squad (SQuAD v1.1): the reader, BERT's feature windows, the n-best answer extraction
// (get_final_text, write_predictions) and the official evaluation equal to their references
// (tests/data/squad/reference.py wrote expected.json from sample.json, predictions.json and fixed
// logits), and the reader's errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/squad.h"
#include "tensor/check.h"
#include "tests/support/common.h"

namespace aim::data {
namespace {

namespace fs = std::filesystem;

std::string dir() { return testing::source_root() + "/tests/data/squad"; }

nlohmann::json load(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f) << path;
  nlohmann::json j;
  f >> j;
  return j;
}

void expect_features(const std::vector<SquadFeature>& got, const nlohmann::json& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const SquadFeature& f = got[i];
    const nlohmann::json& w = want[i];
    SCOPED_TRACE("feature " + std::to_string(i));
    EXPECT_EQ(f.unique_id, w["unique_id"].get<int64_t>());
    EXPECT_EQ(f.example_index, w["example_index"].get<int64_t>());
    EXPECT_EQ(f.doc_span_index, w["doc_span_index"].get<int64_t>());
    EXPECT_EQ(f.tokens, w["tokens"].get<std::vector<std::string>>());
    EXPECT_EQ(f.input_ids, w["input_ids"].get<std::vector<int64_t>>());
    EXPECT_EQ(f.input_mask, w["input_mask"].get<std::vector<int64_t>>());
    EXPECT_EQ(f.segment_ids, w["segment_ids"].get<std::vector<int64_t>>());
    EXPECT_EQ(f.start_position, w["start_position"].get<int64_t>());
    EXPECT_EQ(f.end_position, w["end_position"].get<int64_t>());
    ASSERT_EQ(f.token_to_orig.size(), w["token_to_orig"].size());
    for (const auto& [k, v] : f.token_to_orig) {
      EXPECT_EQ(v, w["token_to_orig"][std::to_string(k)].get<int64_t>()) << "token " << k;
      EXPECT_EQ(f.token_is_max_context.at(k),
                w["token_is_max_context"][std::to_string(k)].get<bool>())
          << "token " << k;
    }
  }
}

TEST(Squad, ReaderFeaturesAndScoreMatchTheReference) {
  const nlohmann::json want = load(dir() + "/expected.json");
  const WordPieceTokenizer tok = WordPieceTokenizer::from_vocab_file(
      testing::source_root() + "/tests/data/wordpiece/vocab.txt");
  SquadFeatureOptions o;
  o.max_seq_length = want["options"]["max_seq_length"];
  o.doc_stride = want["options"]["doc_stride"];
  o.max_query_length = want["options"]["max_query_length"];

  SquadReadStats st;
  const std::vector<SquadExample> train = read_squad(dir() + "/sample.json", true, &st);
  EXPECT_EQ(st.skipped, want["train_skipped"].get<int64_t>());
  ASSERT_EQ(train.size(), want["train_ids"].size());
  for (size_t i = 0; i < train.size(); ++i) {
    EXPECT_EQ(train[i].id, want["train_ids"][i].get<std::string>());
    EXPECT_EQ(train[i].start_word, want["train_words"][i][0].get<int64_t>()) << train[i].id;
    EXPECT_EQ(train[i].end_word, want["train_words"][i][1].get<int64_t>()) << train[i].id;
  }
  expect_features(squad_features(train, tok, o, true), want["train_features"]);

  const std::vector<SquadExample> eval = read_squad(dir() + "/sample.json", false);
  expect_features(squad_features(eval, tok, o, false), want["eval_features"]);

  const nlohmann::json preds = load(dir() + "/predictions.json");
  std::map<std::string, std::string> p;
  for (const auto& [k, v] : preds.items()) {
    p[k] = v.get<std::string>();
    EXPECT_EQ(squad_normalize_answer(p[k]), want["normalized"][p[k]].get<std::string>());
  }
  const SquadScore s = squad_evaluate(eval, p);
  EXPECT_NEAR(s.exact_match, want["score"]["exact_match"].get<double>(), 1e-9);
  EXPECT_NEAR(s.f1, want["score"]["f1"].get<double>(), 1e-9);
  EXPECT_EQ(s.questions, int64_t(eval.size()));
  EXPECT_EQ(s.unanswered, 1);
}

TEST(Squad, OfficialNormalisationAndF1) {
  EXPECT_EQ(squad_normalize_answer("The  Quick, brown fox!"), "quick brown fox");
  EXPECT_EQ(squad_normalize_answer("an apple a day"), "apple day");
  EXPECT_EQ(squad_normalize_answer("theatre anchor"), "theatre anchor");  // not whole words
  EXPECT_DOUBLE_EQ(squad_exact_match("the Eiffel tower", "Eiffel Tower."), 1.0);
  EXPECT_DOUBLE_EQ(squad_f1("red blue", "blue green"), 0.5);
  EXPECT_DOUBLE_EQ(squad_f1("", "anything"), 0.0);
}

TEST(Squad, BadFilesAreErrorsNamingTheFileAndQuestion) {
  const fs::path d = fs::temp_directory_path() / "aim_squad_test";
  fs::create_directories(d);
  auto expect_error = [&](const std::string& body, const std::string& needle) {
    const std::string p = (d / "bad.json").string();
    std::ofstream(p) << body;
    try {
      read_squad(p, true);
      ADD_FAILURE() << "no error for " << body;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  };
  expect_error("{not json", "not JSON");
  expect_error(R"({"version": "1.1"})", "no \"data\"");
  expect_error(
      R"({"data": [{"paragraphs": [{"context": "a b", "qas": [{"id": "x", "question": "q",)"
      R"( "answers": [{"text": "b", "answer_start": 7}]}]}]}]})",
      "question x: answer_start 7");
  expect_error(
      R"({"data": [{"paragraphs": [{"context": "a b", "qas": [{"id": "y", "question": "q",)"
      R"( "answers": []}]}]}]})",
      "exactly one answer");
  fs::remove_all(d);
}

WordPieceTokenizer sample_tokenizer() {
  return WordPieceTokenizer::from_vocab_file(testing::source_root() +
                                             "/tests/data/wordpiece/vocab.txt");
}

TEST(Squad, FinalTextMatchesTheReference) {
  const nlohmann::json want = load(dir() + "/expected.json");
  const WordPieceTokenizer tok = sample_tokenizer();
  ASSERT_GE(want["final_text"].size(), 15u);
  for (const auto& c : want["final_text"]) {
    const std::string pred = c[0], orig = c[1], text = c[2];
    EXPECT_EQ(squad_final_text(pred, orig, tok), text) << "'" << pred << "' in '" << orig << "'";
  }
  // The hard cases by hand, beside the reference's output.
  EXPECT_EQ(squad_final_text("e", "Café", tok), "é");
  EXPECT_EQ(squad_final_text("1895 - 1943", "(1895-1943).", tok), "1895-1943");
  EXPECT_EQ(squad_final_text("play", "playing", tok), "play");
  EXPECT_EQ(squad_final_text("[UNK] world", "Zzyzx world", tok), "Zzyzx world");
}

// write_predictions on the sample's evaluation windows with the reference's fixed logits (quarter
// steps, many equal: the order of equal candidates matters): every n-best list (texts and logits),
// the predictions and their official score.
TEST(Squad, NbestAndPredictionsMatchTheReference) {
  const nlohmann::json want = load(dir() + "/expected.json");
  const WordPieceTokenizer tok = sample_tokenizer();
  SquadFeatureOptions o;
  o.max_seq_length = want["options"]["max_seq_length"];
  o.doc_stride = want["options"]["doc_stride"];
  o.max_query_length = want["options"]["max_query_length"];
  SquadPredictOptions po;
  po.n_best_size = want["predict_options"]["n_best_size"];
  po.max_answer_length = want["predict_options"]["max_answer_length"];
  const std::vector<SquadExample> eval = read_squad(dir() + "/sample.json", false);
  const std::vector<SquadFeature> features = squad_features(eval, tok, o, false);
  const int64_t T = o.max_seq_length;
  std::vector<float> start, end;
  for (const SquadFeature& f : features) {
    const nlohmann::json& l = want["eval_logits"][std::to_string(f.unique_id)];
    for (double v : l[0]) start.push_back(float(v));
    for (double v : l[1]) end.push_back(float(v));
  }
  ASSERT_EQ(int64_t(start.size()), int64_t(features.size()) * T);
  for (size_t e = 0; e < eval.size(); ++e) {
    SCOPED_TRACE("question " + eval[e].id);
    std::vector<SquadWindowLogits> w;
    for (size_t i = 0; i < features.size(); ++i)
      if (features[i].example_index == int64_t(e))
        w.push_back({&features[i], &start[i * size_t(T)], &end[i * size_t(T)]});
    const std::vector<SquadNbestEntry> got = squad_nbest(eval[e], w, tok, po);
    const nlohmann::json& best = want["nbest"][eval[e].id];
    ASSERT_EQ(got.size(), best.size());
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(got[k].text, best[k][0].get<std::string>()) << "entry " << k;
      EXPECT_EQ(got[k].start_logit, best[k][1].get<float>()) << "entry " << k;
      EXPECT_EQ(got[k].end_logit, best[k][2].get<float>()) << "entry " << k;
    }
  }
  const std::vector<std::string> pred =
      squad_predictions(eval, features, int64_t(features.size()), start, end, tok, po);
  ASSERT_EQ(pred.size(), eval.size());
  std::map<std::string, std::string> p;
  for (size_t e = 0; e < eval.size(); ++e) {
    EXPECT_EQ(pred[e], want["predictions"][eval[e].id].get<std::string>()) << eval[e].id;
    p[eval[e].id] = pred[e];
  }
  const SquadScore s = squad_evaluate(eval, p);
  EXPECT_NEAR(s.exact_match, want["predicted_score"]["exact_match"].get<double>(), 1e-9);
  EXPECT_NEAR(s.f1, want["predicted_score"]["f1"].get<double>(), 1e-9);

  // A prefix of the windows: whole examples only, the same answers.
  const int64_t k = squad_whole_example_windows(features, 1);
  ASSERT_GT(k, 1);  // the first question has several windows
  EXPECT_EQ(features[size_t(k)].example_index, 1);
  EXPECT_EQ(squad_whole_example_windows(features, k), k);
  EXPECT_EQ(squad_whole_example_windows(features, 1 << 20), int64_t(features.size()));
  const std::vector<float> s0(start.begin(), start.begin() + k * T),
      e0(end.begin(), end.begin() + k * T);
  EXPECT_EQ(squad_predictions(eval, features, k, s0, e0, tok, po),
            std::vector<std::string>{pred[0]});
  AIM_EXPECT_ERROR(
      squad_predictions(eval, features, k - 1,
                        std::vector<float>(start.begin(), start.begin() + (k - 1) * T),
                        std::vector<float>(end.begin(), end.begin() + (k - 1) * T), tok, po),
      "end inside the windows of question " + eval[0].id);
  // No candidate at all (every window's best starts outside the document): "empty".
  EXPECT_EQ(squad_nbest(eval[0], {}, tok, po)[0].text, "empty");
}

}  // namespace
}  // namespace aim::data
