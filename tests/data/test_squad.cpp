// data/squad (SQuAD v1.1): the reader, BERT's feature windows, the n-best answer extraction
// (get_final_text, write_predictions) and the official evaluation equal to their references
// (tests/data/squad/reference.py wrote expected.json from sample.json, predictions.json and fixed
// logits), the reader's errors; data/squad_source (the files as BERT's batch source): batches,
// the shuffled resumable stream, answers from logits forced to the truth scoring 100, bad
// directories.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/squad.h"
#include "data/squad_source.h"
#include "tensor/check.h"
#include "tests/support/common.h"
#include "tests/support/squad_dir.h"

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
  // Found by tools/fuzz.sh (fuzz/corpus/squad/regression-id-not-string.json): fields of the wrong
  // JSON type were nlohmann's uncaught type_error.
  expect_error(R"({"data": [{"paragraphs": [{"context": "a", "qas": [{"id": 12}]}]}]})",
               "\"id\" is number, expected a string");
  expect_error(R"({"data": [{"paragraphs": {"context": "a"}}]})",
               "\"paragraphs\" is object, expected a list");
  expect_error(
      R"({"data": [{"paragraphs": [{"context": "a b", "qas": [{"id": "z", "question": "q",)"
      R"( "answers": [{"text": "b", "answer_start": "2"}]}]}]}]})",
      "\"answer_start\" is string, expected an integer");
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

SquadSourceConfig tiny_config(const std::string& d) {
  SquadSourceConfig c;
  c.dir = d;
  c.features.max_seq_length = 64;
  c.features.doc_stride = 8;
  c.features.max_query_length = 16;
  c.seed = 3;
  return c;
}

std::vector<std::string> row_tokens(const WordPieceTokenizer& tok, const Tensor& ids, int64_t b) {
  const int64_t T = ids.size(1);
  std::vector<std::string> out;
  for (int64_t t = 0; t < T; ++t) out.push_back(tok.token(ids.data<int64_t>()[b * T + t]));
  return out;
}

// The training stream: the synthetic span task's names and shapes, [CLS] question [SEP] window
// [SEP] rows whose positions point at the answer's tokens (or at [CLS] when the window lacks it),
// every window once per epoch in a seeded order, a fresh order each epoch, resumable by seek().
TEST(SquadSource, TrainingWindowsBatchesAndStream) {
  const std::string d = testing::make_temp_dir("aim_squad_source");
  testing::write_tiny_squad(d);
  SquadFileSource src(tiny_config(d));
  const WordPieceTokenizer& tok = src.tokenizer();
  EXPECT_EQ(src.train_questions(), 7);
  EXPECT_EQ(src.eval_examples().size(), 8u);
  EXPECT_GT(src.epoch_size(), 7 * 2);  // documents split into several windows
  EXPECT_GT(src.eval_size(), 8 * 2);
  EXPECT_NE(src.describe().find(d), std::string::npos);
  EXPECT_NE(src.fingerprint().find("dev-v1.1.json="), std::string::npos);

  // The answers' tokens, to check what each row's positions point at.
  std::set<std::string> answers;
  for (const auto& p : testing::tiny_squad_paragraphs())
    for (const auto& q : p.train) {
      std::string a;
      for (const std::string& t : tok.tokenize(q.answers[0])) a += (a.empty() ? "" : " ") + t;
      answers.insert(a);
    }
  const int64_t B = 4, n = src.epoch_size(), steps = n / B;
  std::multiset<std::vector<int64_t>> seen;
  int64_t with_answer = 0;
  std::vector<TensorMap> epoch0;
  for (int64_t s = 0; s < steps; ++s) {
    const TensorMap b = src.next(B);
    epoch0.push_back(b);
    ASSERT_EQ(b.size(), 5u);
    for (const char* k : {"input_ids", "token_type_ids", "attention_mask"}) {
      EXPECT_EQ(b.at(k).dtype(), DType::i64) << k;
      EXPECT_EQ(b.at(k).sizes(), (Shape{B, 64})) << k;
    }
    for (const char* k : {"start_positions", "end_positions"}) {
      EXPECT_EQ(b.at(k).dtype(), DType::i64) << k;
      EXPECT_EQ(b.at(k).sizes(), (Shape{B})) << k;
    }
    for (int64_t r = 0; r < B; ++r) {
      const std::vector<std::string> t = row_tokens(tok, b.at("input_ids"), r);
      const int64_t* ty = b.at("token_type_ids").data<int64_t>() + r * 64;
      const int64_t* ma = b.at("attention_mask").data<int64_t>() + r * 64;
      const int64_t* id = b.at("input_ids").data<int64_t>() + r * 64;
      seen.insert(std::vector<int64_t>(id, id + 64));
      EXPECT_EQ(t[0], "[CLS]");
      int64_t len = 0, seps = 0, first_type1 = -1;
      for (int64_t i = 0; i < 64; ++i) {
        len += ma[i];
        seps += t[size_t(i)] == "[SEP]";
        if (ty[i] == 1 && first_type1 < 0) first_type1 = i;
        if (!ma[i]) {
          EXPECT_EQ(t[size_t(i)], "[PAD]");
        }
      }
      EXPECT_EQ(seps, 2);
      EXPECT_EQ(t[size_t(first_type1 - 1)], "[SEP]");
      EXPECT_EQ(t[size_t(len - 1)], "[SEP]");
      EXPECT_EQ(ty[len - 1], 1);
      const int64_t s0 = b.at("start_positions").data<int64_t>()[r],
                    e0 = b.at("end_positions").data<int64_t>()[r];
      if (s0 == 0) {
        EXPECT_EQ(e0, 0);
        continue;
      }
      ++with_answer;
      ASSERT_GE(s0, first_type1);
      ASSERT_LT(e0, len - 1);
      ASSERT_LE(s0, e0);
      std::string a;
      for (int64_t i = s0; i <= e0; ++i) a += (i > s0 ? " " : "") + t[size_t(i)];
      EXPECT_TRUE(answers.count(a)) << "positions point at '" << a << "'";
    }
  }
  EXPECT_GE(with_answer, 7);  // every question's answer is in at least one of its windows
  EXPECT_LT(with_answer, steps * B);
  // Every window once in the epoch (the last partial batch skipped).
  std::multiset<std::vector<int64_t>> all;
  for (const auto& w : src.train_windows()) {
    std::vector<int64_t> ids(w.ids.begin(), w.ids.end());
    ids.resize(64, 0);
    all.insert(ids);
  }
  for (const auto& r : seen) EXPECT_LE(seen.count(r), all.count(r));
  EXPECT_EQ(int64_t(seen.size()), steps * B);

  // Resume: a fresh source at the position gives the same batches; the next epoch another order,
  // another seed another order.
  auto ids_of = [](const TensorMap& b) { return b.at("input_ids").to_vector<int64_t>(); };
  SquadFileSource again(tiny_config(d));
  again.seek(2 * B);
  EXPECT_EQ(ids_of(again.next(B)), ids_of(epoch0[2]));
  EXPECT_EQ(again.position(), 3 * B);
  SquadFileSource next_epoch(tiny_config(d)), reseeded([&] {
    SquadSourceConfig c = tiny_config(d);
    c.seed = 4;
    return c;
  }());
  next_epoch.seek(steps * B);
  bool epoch_differs = false, seed_differs = false;
  for (int64_t s = 0; s < steps; ++s) {
    epoch_differs |= ids_of(next_epoch.next(B)) != ids_of(epoch0[size_t(s)]);
    seed_differs |= ids_of(reseeded.next(B)) != ids_of(epoch0[size_t(s)]);
  }
  EXPECT_TRUE(epoch_differs);
  EXPECT_TRUE(seed_differs);
  EXPECT_NE(reseeded.fingerprint(), src.fingerprint());
  AIM_EXPECT_ERROR(src.next(n + 1), "batch size");
  AIM_EXPECT_ERROR(src.eval_batch(src.eval_size() - 1, 2), "evaluation windows");
  fs::remove_all(d);
}

// The evaluation set is the dev windows; logits forced to each question's first answer give its
// answer text back through write_predictions, so exact match and F1 are 100; the same logits one
// token late score less.
TEST(SquadSource, AnswersFromLogitsForcedToTheTruthScore100) {
  const std::string d = testing::make_temp_dir("aim_squad_truth");
  testing::write_tiny_squad(d);
  const SquadFileSource src(tiny_config(d));
  const std::vector<SquadFeature>& f = src.eval_features();
  const int64_t T = 64, n = src.eval_size();
  // The dev questions with their first answer only, read as training data: the answer's token
  // positions in each window (the same windows as the evaluation's).
  std::ofstream(d + "/dev-first.json") << testing::tiny_squad_json(true, true).dump();
  const std::vector<SquadFeature> truth = squad_features(
      read_squad(d + "/dev-first.json", true), src.tokenizer(), tiny_config(d).features, true);
  ASSERT_EQ(int64_t(truth.size()), n);
  const TensorMap all = src.eval_batch(0, n);
  std::vector<float> start(size_t(n * T), 0.f), end(size_t(n * T), 0.f), late = start;
  int64_t answered = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(truth[size_t(i)].input_ids, f[size_t(i)].input_ids);
    const auto ids = std::vector<int64_t>(all.at("input_ids").data<int64_t>() + i * T,
                                          all.at("input_ids").data<int64_t>() + (i + 1) * T);
    EXPECT_EQ(ids, f[size_t(i)].input_ids);
    const int64_t s = truth[size_t(i)].start_position, e = truth[size_t(i)].end_position;
    if (s == 0) continue;
    ++answered;
    start[size_t(i * T + s)] = 10, end[size_t(i * T + e)] = 10;
    late[size_t(i * T + s + 1)] = 10;
  }
  EXPECT_GT(answered, 8);  // answers in several windows
  const std::vector<std::string> pred =
      squad_predictions(src.eval_examples(), f, n, start, end, src.tokenizer());
  std::map<std::string, std::string> p;
  for (size_t e = 0; e < pred.size(); ++e) p[src.eval_examples()[e].id] = pred[e];
  EXPECT_EQ(p.at("d4"), "Café de Flore");  // accents and case back from the tokens
  EXPECT_EQ(p.at("d7"), "4130 miles");     // "(4130 miles)." without its punctuation
  EXPECT_EQ(p.at("d8"), "The zyzzyva");    // an [UNK] word: the original words
  const SquadScore s = squad_evaluate(src.eval_examples(), p);
  EXPECT_DOUBLE_EQ(s.exact_match, 100.0);
  EXPECT_DOUBLE_EQ(s.f1, 100.0);
  std::vector<float> late_end = end;
  for (int64_t i = 0; i < n; ++i)
    if (truth[size_t(i)].start_position > 0 &&
        truth[size_t(i)].start_position == truth[size_t(i)].end_position)
      late_end[size_t(i * T + truth[size_t(i)].end_position + 1)] = 10;
  const std::vector<std::string> off =
      squad_predictions(src.eval_examples(), f, n, late, late_end, src.tokenizer());
  std::map<std::string, std::string> q;
  for (size_t e = 0; e < off.size(); ++e) q[src.eval_examples()[e].id] = off[e];
  EXPECT_LT(squad_evaluate(src.eval_examples(), q).exact_match, 100.0);
  fs::remove_all(d);
}

TEST(SquadSource, BadDirectoriesAreClearErrors) {
  const std::string d = testing::make_temp_dir("aim_squad_bad");
  AIM_EXPECT_ERROR(SquadFileSource{tiny_config(d + "/nowhere")}, "not a directory");
  testing::write_tiny_squad(d);
  fs::remove(d + "/dev-v1.1.json");
  fs::remove(d + "/vocab.txt");
  const std::string missing = testing::error_of([&] { SquadFileSource{tiny_config(d)}; });
  EXPECT_NE(missing.find("no dev-v1.1.json, vocab.txt"), std::string::npos) << missing;
  EXPECT_NE(missing.find("train-v1.1.json and dev-v1.1.json"), std::string::npos) << missing;
  testing::write_tiny_squad(d);
  std::ofstream(d + "/train-v1.1.json") << "{\"data\": [ {\"paragraphs\": ";
  const std::string bad = testing::error_of([&] { SquadFileSource{tiny_config(d)}; });
  EXPECT_NE(bad.find(d + "/train-v1.1.json"), std::string::npos) << bad;
  EXPECT_NE(bad.find("not JSON"), std::string::npos) << bad;
  testing::write_tiny_squad(d, 2000);
  SquadSourceConfig c = tiny_config(d);
  c.model_vocab_size = 1024;
  c.model = "bert --config size=tiny";
  AIM_EXPECT_ERROR(SquadFileSource{c}, "but bert --config size=tiny embeds only 1024");
  c.model_vocab_size = 4096;
  EXPECT_NO_THROW(SquadFileSource{c});
  fs::remove_all(d);
}

}  // namespace
}  // namespace aim::data
