// A tiny SQuAD v1.1 directory for the tests of data/squad_source.h and BERT's `--data DIR`: three
// articles, train-v1.1.json (one answer per question, as the real file), dev-v1.1.json (several
// answers per question, as the real file), and a vocab.txt of the texts' basic tokens in which
// "playing" splits into "play ##ing" and "zyzzyva" is [UNK]. Contexts of ~40-90 tokens, so that
// windows of a 64-token sequence split them.
#pragma once
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "data/text/wordpiece.h"

namespace aim::testing {

struct TinySquadQuestion {
  std::string id, question;
  std::vector<std::string> answers;  // the first is the training answer
};
struct TinySquadParagraph {
  std::string title, context;
  std::vector<TinySquadQuestion> train, dev;
};

inline std::vector<TinySquadParagraph> tiny_squad_paragraphs() {
  return {{"Paris",
           "Paris is the capital and most populous city of France. The river Seine flows through "
           "the city, and the Eiffel Tower, built in 1889 for the World's Fair, stands on its left "
           "bank. Paris has many museums: the Louvre, the most visited art museum in the world, "
           "holds the Mona Lisa. Writers were playing chess at the Café de Flore, which opened in "
           "1887.",
           {{"t1", "What is the capital of France?", {"Paris"}},
            {"t2", "When was the Eiffel Tower built?", {"1889"}},
            {"t3", "Which museum holds the Mona Lisa?", {"the Louvre"}},
            {"t4", "What were writers playing at the cafe?", {"chess"}}},
           {{"d1", "What city is the capital of France?", {"Paris", "Paris", "Paris"}},
            {"d2", "In what year did the Café de Flore open?", {"1887", "1887"}},
            {"d3", "What is the most visited art museum?", {"the Louvre", "Louvre"}},
            {"d4", "Where were writers playing chess?", {"Café de Flore", "the Café de Flore"}},
            {"d5", "When was the Eiffel Tower built?", {"1889"}}}},
          {"Rivers",
           "The Amazon is the largest river by discharge of water in the world. It flows through "
           "Brazil, Peru and Colombia before reaching the Atlantic Ocean. The Nile, in Africa, was "
           "long considered the longest river; its length is about 6650 kilometres (4130 miles).",
           {{"t5", "Which river is the largest by discharge?", {"The Amazon"}},
            {"t6", "How long is the Nile?", {"about 6650 kilometres"}}},
           {{"d6",
             "Which ocean does the Amazon reach?",
             {"the Atlantic Ocean", "Atlantic Ocean", "Atlantic"}},
            {"d7", "How long is the Nile in miles?", {"4130 miles", "4130"}}}},
          {"Weevils",
           "The zyzzyva is a weevil found in South America, where it lives on palm trees.",
           {{"t7", "What is the zyzzyva?", {"a weevil"}}},
           {{"d8", "Which insect lives on palm trees?", {"The zyzzyva", "zyzzyva"}}}}};
}

// SQuAD's JSON of the paragraphs' train or dev questions; `first_answer_only` keeps one answer
// (a dev file readable as training data: its answer positions).
inline nlohmann::json tiny_squad_json(bool dev, bool first_answer_only = false) {
  nlohmann::json data = nlohmann::json::array();
  for (const TinySquadParagraph& p : tiny_squad_paragraphs()) {
    nlohmann::json qas = nlohmann::json::array();
    for (const TinySquadQuestion& q : dev ? p.dev : p.train) {
      nlohmann::json answers = nlohmann::json::array();
      for (const std::string& a : q.answers) {
        // answer_start in code points, as SQuAD: the first occurrence in the context.
        const size_t byte = p.context.find(a);
        int64_t cps = 0;
        for (size_t i = 0; i < byte; ++i)
          cps += (static_cast<unsigned char>(p.context[i]) & 0xC0) != 0x80;
        answers.push_back({{"text", a}, {"answer_start", cps}});
        if (first_answer_only) break;
      }
      qas.push_back({{"id", q.id}, {"question", q.question}, {"answers", answers}});
    }
    data.push_back({{"title", p.title}, {"paragraphs", {{{"context", p.context}, {"qas", qas}}}}});
  }
  return {{"version", "1.1"}, {"data", data}};
}

// Writes train-v1.1.json, dev-v1.1.json and vocab.txt into `dir` (created); `extra_tokens` more
// vocabulary lines ("[unused0]", ...) make a vocabulary too large for a model.
inline void write_tiny_squad(const std::string& dir, int64_t extra_tokens = 0) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/train-v1.1.json") << tiny_squad_json(false).dump(1);
  std::ofstream(dir + "/dev-v1.1.json") << tiny_squad_json(true).dump(1);
  const data::WordPieceTokenizer basic({"[UNK]"});
  std::set<std::string> words;
  for (const TinySquadParagraph& p : tiny_squad_paragraphs()) {
    std::vector<std::string> texts = {p.context};
    for (const auto* qs : {&p.train, &p.dev})
      for (const TinySquadQuestion& q : *qs) texts.push_back(q.question);
    for (const std::string& t : texts)
      for (const std::string& w : basic.basic_tokenize(t)) words.insert(w);
  }
  words.erase("playing");
  words.erase("zyzzyva");
  words.insert("play");
  words.insert("##ing");
  std::ofstream v(dir + "/vocab.txt");
  v << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
  for (const std::string& w : words) v << w << "\n";
  for (int64_t i = 0; i < extra_tokens; ++i) v << "[unused" << i << "]\n";
}

}  // namespace aim::testing
