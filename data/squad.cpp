#include "data/squad.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "data/text/unicode.h"
#include "tensor/check.h"

namespace aim::data {
namespace {

using text::decode_utf8;
using text::encode_utf8;

// run_squad.py's is_whitespace (not str.isspace: U+202F too, no other Unicode space).
bool squad_space(uint32_t c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == 0x202F;
}

// str.split() on UTF-8.
std::vector<std::string> python_split(const std::string& s) {
  std::vector<std::string> out;
  std::vector<uint32_t> cur;
  for (uint32_t c : decode_utf8(s)) {
    if (text::is_python_space(c)) {
      if (!cur.empty()) out.push_back(encode_utf8(cur));
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) out.push_back(encode_utf8(cur));
  return out;
}

std::string join(const std::vector<std::string>& v, size_t a, size_t b) {  // [a, b)
  std::string r;
  for (size_t i = a; i < b; ++i) r += (i > a ? " " : "") + v[i];
  return r;
}

const nlohmann::json& field(const nlohmann::json& j, const char* key, const std::string& where) {
  AIM_CHECK(j.is_object() && j.contains(key), where, ": no \"", key, "\"");
  return j.at(key);
}
std::string string_field(const nlohmann::json& j, const char* key, const std::string& where) {
  const nlohmann::json& v = field(j, key, where);
  AIM_CHECK(v.is_string(), where, ": \"", key, "\" is ", v.type_name(), ", expected a string");
  return v.get<std::string>();
}
const nlohmann::json& array_field(const nlohmann::json& j, const char* key,
                                  const std::string& where) {
  const nlohmann::json& v = field(j, key, where);
  AIM_CHECK(v.is_array(), where, ": \"", key, "\" is ", v.type_name(), ", expected a list");
  return v;
}

// _improve_answer_span: the tokens that spell the answer exactly, when some sub-span does.
std::pair<int64_t, int64_t> improve_span(const std::vector<std::string>& doc, int64_t start,
                                         int64_t end, const WordPieceTokenizer& tok,
                                         const std::string& answer) {
  const std::vector<std::string> a = tok.tokenize(answer);
  const std::string want = join(a, 0, a.size());
  for (int64_t s = start; s <= end; ++s)
    for (int64_t e = end; e >= s; --e)
      if (join(doc, size_t(s), size_t(e + 1)) == want) return {s, e};
  return {start, end};
}

struct DocSpan {
  int64_t start, length;
};

// _check_is_max_context: is `span` the window where `pos` has the most context (ties: the
// earliest window with the best score min(left, right) + 0.01 * length).
bool is_max_context(const std::vector<DocSpan>& spans, size_t span, int64_t pos) {
  double best = -1;
  size_t best_index = 0;
  bool any = false;
  for (size_t i = 0; i < spans.size(); ++i) {
    const int64_t end = spans[i].start + spans[i].length - 1;
    if (pos < spans[i].start || pos > end) continue;
    const double score =
        double(std::min(pos - spans[i].start, end - pos)) + 0.01 * double(spans[i].length);
    if (!any || score > best) {
      best = score;
      best_index = i;
      any = true;
    }
  }
  return any && best_index == span;
}

}  // namespace

std::vector<SquadExample> read_squad(const std::string& path, bool training,
                                     SquadReadStats* stats) {
  std::ifstream f(path, std::ios::binary);
  AIM_CHECK(f, "SQuAD file ", path, ": cannot open");
  nlohmann::json j;
  try {
    f >> j;
  } catch (const std::exception& e) {
    AIM_FAIL("SQuAD file ", path, ": not JSON: ", e.what());
  }
  const nlohmann::json& data = field(j, "data", "SQuAD file " + path);
  AIM_CHECK(data.is_array(), "SQuAD file ", path, ": \"data\" is not a list");
  SquadReadStats st;
  std::vector<SquadExample> out;
  for (size_t a = 0; a < data.size(); ++a) {
    const std::string where_a = str("SQuAD file ", path, ": data[", a, "]");
    for (const auto& para : array_field(data[a], "paragraphs", where_a)) {
      const std::string context = string_field(para, "context", where_a);
      // Words on whitespace, and the word of each character (run_squad's char_to_word_offset).
      std::vector<std::vector<uint32_t>> words;
      std::vector<int64_t> char_word;
      bool prev_space = true;
      for (uint32_t c : decode_utf8(context)) {
        if (squad_space(c)) {
          prev_space = true;
        } else {
          if (prev_space) words.emplace_back();
          words.back().push_back(c);
          prev_space = false;
        }
        char_word.push_back(int64_t(words.size()) - 1);
      }
      std::vector<std::string> doc;
      for (const auto& w : words) doc.push_back(encode_utf8(w));
      for (const auto& qa : array_field(para, "qas", where_a)) {
        SquadExample e;
        e.id = string_field(qa, "id", where_a);
        const std::string where = where_a + " question " + e.id;
        e.question = string_field(qa, "question", where);
        e.doc_tokens = doc;
        const nlohmann::json& answers = array_field(qa, "answers", where);
        for (const auto& ans : answers) e.answers.push_back(string_field(ans, "text", where));
        ++st.questions;
        if (training) {
          AIM_CHECK(answers.size() == 1, where,
                    ": a training question has exactly one answer, got ", answers.size());
          const std::string text = e.answers[0];
          const nlohmann::json& start = field(answers[0], "answer_start", where);
          AIM_CHECK(start.is_number_integer(), where, ": \"answer_start\" is ", start.type_name(),
                    ", expected an integer");
          const int64_t offset = start.get<int64_t>();
          const int64_t length = int64_t(decode_utf8(text).size());
          AIM_CHECK(length > 0 && offset >= 0 && offset + length <= int64_t(char_word.size()),
                    where, ": answer_start ", offset, " + ", length,
                    " characters is outside the context (", char_word.size(), " characters)");
          e.start_word = char_word[size_t(offset)];
          e.end_word = char_word[size_t(offset + length - 1)];
          const std::string actual = join(doc, size_t(e.start_word), size_t(e.end_word + 1));
          const std::vector<std::string> cleaned = python_split(text);
          if (actual.find(join(cleaned, 0, cleaned.size())) == std::string::npos) {
            ++st.skipped;  // "Could not find answer" in the reference
            continue;
          }
        }
        out.push_back(std::move(e));
      }
    }
  }
  if (stats) *stats = st;
  return out;
}

std::vector<SquadFeature> squad_features(const std::vector<SquadExample>& examples,
                                         const WordPieceTokenizer& tok,
                                         const SquadFeatureOptions& o, bool training) {
  AIM_CHECK(o.max_seq_length > o.max_query_length + 3 && o.doc_stride > 0,
            "SQuAD features: max_seq_length (", o.max_seq_length,
            ") must exceed max_query_length (", o.max_query_length, ") + 3 and doc_stride (",
            o.doc_stride, ") be > 0");
  const int64_t cls = tok.id("[CLS]"), sep = tok.id("[SEP]");
  AIM_CHECK(cls >= 0 && sep >= 0, "SQuAD features: the vocabulary has no [CLS] or [SEP]");
  std::vector<SquadFeature> out;
  int64_t unique_id = 1000000000;
  for (size_t ei = 0; ei < examples.size(); ++ei) {
    const SquadExample& e = examples[ei];
    std::vector<std::string> query = tok.tokenize(e.question);
    if (int64_t(query.size()) > o.max_query_length) query.resize(size_t(o.max_query_length));
    std::vector<int64_t> tok_to_orig, orig_to_tok;
    std::vector<std::string> doc;
    for (size_t i = 0; i < e.doc_tokens.size(); ++i) {
      orig_to_tok.push_back(int64_t(doc.size()));
      for (std::string& t : tok.tokenize(e.doc_tokens[i])) {
        tok_to_orig.push_back(int64_t(i));
        doc.push_back(std::move(t));
      }
    }
    int64_t tok_start = -1, tok_end = -1;
    if (training) {
      tok_start = orig_to_tok[size_t(e.start_word)];
      tok_end = e.end_word < int64_t(e.doc_tokens.size()) - 1
                    ? orig_to_tok[size_t(e.end_word + 1)] - 1
                    : int64_t(doc.size()) - 1;
      std::tie(tok_start, tok_end) = improve_span(doc, tok_start, tok_end, tok, e.answers[0]);
    }
    // Windows of the document: as long as fits, moving by doc_stride.
    const int64_t max_doc = o.max_seq_length - int64_t(query.size()) - 3;
    std::vector<DocSpan> spans;
    for (int64_t start = 0; start < int64_t(doc.size());) {
      const int64_t length = std::min(int64_t(doc.size()) - start, max_doc);
      spans.push_back({start, length});
      if (start + length == int64_t(doc.size())) break;
      start += std::min(length, o.doc_stride);
    }
    for (size_t si = 0; si < spans.size(); ++si) {
      SquadFeature f;
      f.unique_id = unique_id++;
      f.example_index = int64_t(ei);
      f.doc_span_index = int64_t(si);
      f.tokens.push_back("[CLS]");
      f.tokens.insert(f.tokens.end(), query.begin(), query.end());
      f.tokens.push_back("[SEP]");
      f.segment_ids.assign(f.tokens.size(), 0);
      for (int64_t i = 0; i < spans[si].length; ++i) {
        const int64_t split = spans[si].start + i;
        const int64_t at = int64_t(f.tokens.size());
        f.token_to_orig[at] = tok_to_orig[size_t(split)];
        f.token_is_max_context[at] = is_max_context(spans, si, split);
        f.tokens.push_back(doc[size_t(split)]);
        f.segment_ids.push_back(1);
      }
      f.tokens.push_back("[SEP]");
      f.segment_ids.push_back(1);
      for (const std::string& t : f.tokens) f.input_ids.push_back(tok.id(t));
      f.input_mask.assign(f.input_ids.size(), 1);
      f.input_ids.resize(size_t(o.max_seq_length), 0);
      f.input_mask.resize(size_t(o.max_seq_length), 0);
      f.segment_ids.resize(size_t(o.max_seq_length), 0);
      if (training) {
        const int64_t lo = spans[si].start, hi = spans[si].start + spans[si].length - 1;
        if (tok_start >= lo && tok_end <= hi) {
          const int64_t offset = int64_t(query.size()) + 2;
          f.start_position = tok_start - lo + offset;
          f.end_position = tok_end - lo + offset;
        }
      }
      out.push_back(std::move(f));
    }
  }
  return out;
}

// ---- answers ---------------------------------------------------------------------------------

std::string squad_final_text(const std::string& pred_text, const std::string& orig_text,
                             const WordPieceTokenizer& tok) {
  const std::vector<uint32_t> orig = decode_utf8(orig_text), pred = decode_utf8(pred_text);
  const std::vector<std::string> words = tok.basic_tokenize(orig_text);
  const std::vector<uint32_t> tok_text = decode_utf8(join(words, 0, words.size()));
  // str.find: the first occurrence (at 0 for an empty prediction, whose end then maps nowhere).
  const auto at = std::search(tok_text.begin(), tok_text.end(), pred.begin(), pred.end());
  if (at == tok_text.end() && !pred.empty()) return orig_text;
  const int64_t first = int64_t(at - tok_text.begin()), last = first + int64_t(pred.size()) - 1;
  // Rank among the characters that are not spaces: position in the text -> rank (-1: a space),
  // and rank -> position.
  auto non_space = [](const std::vector<uint32_t>& t, std::vector<int64_t>& rank_of,
                      std::vector<int64_t>& pos_of) {
    rank_of.assign(t.size(), -1);
    for (size_t i = 0; i < t.size(); ++i)
      if (t[i] != ' ') {
        rank_of[i] = int64_t(pos_of.size());
        pos_of.push_back(int64_t(i));
      }
  };
  std::vector<int64_t> orig_rank, orig_pos, tok_rank, tok_pos;
  non_space(orig, orig_rank, orig_pos);
  non_space(tok_text, tok_rank, tok_pos);
  if (orig_pos.size() != tok_pos.size()) return orig_text;  // characters dropped or changed
  auto to_orig = [&](int64_t p) -> int64_t {
    if (p < 0 || p >= int64_t(tok_rank.size()) || tok_rank[size_t(p)] < 0) return -1;
    return orig_pos[size_t(tok_rank[size_t(p)])];
  };
  const int64_t a = to_orig(first), b = to_orig(last);
  if (a < 0 || b < 0) return orig_text;
  return encode_utf8(std::vector<uint32_t>(orig.begin() + a, orig.begin() + b + 1));
}

namespace {

// _get_best_indexes: the n highest logits' positions, equal logits in position order.
std::vector<int64_t> best_indexes(const float* logits, int64_t T, int64_t n) {
  std::vector<int64_t> order(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i) order[size_t(i)] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  order.resize(size_t(std::min(T, n)));
  return order;
}

// The WordPiece tokens [s, e] as text: "##" continuations glued, whitespace collapsed.
std::string piece_text(const std::vector<std::string>& tokens, int64_t s, int64_t e) {
  std::string t = join(tokens, size_t(s), size_t(e + 1)), glued;
  for (const char* cut : {" ##", "##"}) {
    const std::string c = cut;
    glued.clear();
    for (size_t i = 0; i < t.size();) {
      if (t.compare(i, c.size(), c) == 0) {
        i += c.size();
      } else {
        glued += t[i++];
      }
    }
    t = glued;
  }
  const std::vector<std::string> w = python_split(t);
  return join(w, 0, w.size());
}

}  // namespace

std::vector<SquadNbestEntry> squad_nbest(const SquadExample& example,
                                         const std::vector<SquadWindowLogits>& windows,
                                         const WordPieceTokenizer& tok,
                                         const SquadPredictOptions& o) {
  AIM_CHECK(o.n_best_size > 0 && o.max_answer_length > 0, "SQuAD n-best: n_best_size (",
            o.n_best_size, ") and max_answer_length (", o.max_answer_length, ") must be > 0");
  struct Candidate {
    size_t window;
    int64_t start, end;
    double score;
  };
  std::vector<Candidate> prelim;
  for (size_t w = 0; w < windows.size(); ++w) {
    const SquadWindowLogits& l = windows[w];
    AIM_CHECK(l.feature && l.start && l.end, "SQuAD n-best: window ", w, " of question ",
              example.id, " has no feature or logits");
    const SquadFeature& f = *l.feature;
    const int64_t T = int64_t(f.input_ids.size()), n = int64_t(f.tokens.size());
    const std::vector<int64_t> starts = best_indexes(l.start, T, o.n_best_size);
    const std::vector<int64_t> ends = best_indexes(l.end, T, o.n_best_size);
    for (int64_t s : starts) {
      for (int64_t e : ends) {
        if (s >= n || e >= n || !f.token_to_orig.count(s) || !f.token_to_orig.count(e)) continue;
        const auto ctx = f.token_is_max_context.find(s);
        if (ctx == f.token_is_max_context.end() || !ctx->second) continue;
        if (e < s || e - s + 1 > o.max_answer_length) continue;
        prelim.push_back({w, s, e, double(l.start[s]) + double(l.end[e])});
      }
    }
  }
  std::stable_sort(prelim.begin(), prelim.end(),
                   [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
  std::vector<SquadNbestEntry> out;
  std::set<std::string> seen;
  for (const Candidate& c : prelim) {
    if (int64_t(out.size()) >= o.n_best_size) break;
    const SquadWindowLogits& l = windows[c.window];
    const SquadFeature& f = *l.feature;
    const int64_t w0 = f.token_to_orig.at(c.start), w1 = f.token_to_orig.at(c.end);
    AIM_CHECK(w0 >= 0 && w0 <= w1 && w1 < int64_t(example.doc_tokens.size()),
              "SQuAD n-best: ", "window ", c.window, " of question ", example.id,
              " maps tokens to words ", w0, "..", w1, " outside its ", example.doc_tokens.size(),
              " words");
    std::string text = squad_final_text(piece_text(f.tokens, c.start, c.end),
                                        join(example.doc_tokens, size_t(w0), size_t(w1 + 1)), tok);
    if (!seen.insert(text).second) continue;
    out.push_back({std::move(text), l.start[c.start], l.end[c.end]});
  }
  if (out.empty()) out.push_back({"empty", 0, 0});
  return out;
}

int64_t squad_whole_example_windows(const std::vector<SquadFeature>& features, int64_t n) {
  int64_t k = std::clamp<int64_t>(n, 0, int64_t(features.size()));
  while (k > 0 && k < int64_t(features.size()) &&
         features[size_t(k)].example_index == features[size_t(k - 1)].example_index)
    ++k;
  return k;
}

std::vector<std::string> squad_predictions(const std::vector<SquadExample>& examples,
                                           const std::vector<SquadFeature>& features, int64_t count,
                                           const std::vector<float>& start_logits,
                                           const std::vector<float>& end_logits,
                                           const WordPieceTokenizer& tok,
                                           const SquadPredictOptions& o) {
  AIM_CHECK(count >= 0 && count <= int64_t(features.size()), "SQuAD predictions: ", count,
            " windows asked, there are ", features.size());
  const int64_t T = features.empty() ? 0 : int64_t(features[0].input_ids.size());
  AIM_CHECK(int64_t(start_logits.size()) == count * T && int64_t(end_logits.size()) == count * T,
            "SQuAD predictions: logits of ", count, " windows of ", T, " tokens need ", count * T,
            " values each, got ", start_logits.size(), " start and ", end_logits.size(), " end");
  const bool all = count == int64_t(features.size());
  const int64_t n_examples = all ? int64_t(examples.size())
                                 : (count == 0 ? 0 : features[size_t(count - 1)].example_index + 1);
  AIM_CHECK(all || features[size_t(count)].example_index >= n_examples,
            "SQuAD predictions: ", count, " windows end inside the windows of question ",
            examples[size_t(n_examples - 1)].id, " (squad_whole_example_windows)");
  std::vector<std::vector<SquadWindowLogits>> by_example(static_cast<size_t>(n_examples));
  for (int64_t i = 0; i < count; ++i) {
    const SquadFeature& f = features[size_t(i)];
    AIM_CHECK(
        f.example_index >= 0 && f.example_index < n_examples && int64_t(f.input_ids.size()) == T,
        "SQuAD predictions: window ", i, " (example ", f.example_index, ", ", f.input_ids.size(),
        " tokens) does not fit ", n_examples, " examples of ", T, " tokens");
    by_example[size_t(f.example_index)].push_back(
        {&f, start_logits.data() + i * T, end_logits.data() + i * T});
  }
  std::vector<std::string> out(static_cast<size_t>(n_examples));
  for (int64_t e = 0; e < n_examples; ++e)
    out[size_t(e)] = squad_nbest(examples[size_t(e)], by_example[size_t(e)], tok, o)[0].text;
  return out;
}

// ---- the official score ------------------------------------------------------------------------

std::string squad_normalize_answer(const std::string& s) {
  // lower, then ASCII punctuation (string.punctuation) removed
  std::vector<uint32_t> t;
  for (uint32_t c : text::python_lower(decode_utf8(s))) {
    const bool punct = (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
                       (c >= 123 && c <= 126);
    if (!punct) t.push_back(c);
  }
  // re.sub(r'\b(a|an|the)\b', ' ', t)
  std::vector<uint32_t> u;
  for (size_t i = 0; i < t.size();) {
    size_t len = 0;
    if (i == 0 || !text::is_python_word(t[i - 1])) {
      for (const char* art : {"a", "an", "the"}) {
        const size_t n = std::char_traits<char>::length(art);
        if (i + n > t.size()) continue;
        bool same = true;
        for (size_t k = 0; k < n; ++k) same &= t[i + k] == uint32_t(art[k]);
        if (same && (i + n == t.size() || !text::is_python_word(t[i + n]))) {
          len = n;
          break;
        }
      }
    }
    if (len) {
      u.push_back(' ');
      i += len;
    } else {
      u.push_back(t[i++]);
    }
  }
  // ' '.join(u.split())
  const std::vector<std::string> words = python_split(encode_utf8(u));
  return join(words, 0, words.size());
}

double squad_exact_match(const std::string& prediction, const std::string& truth) {
  return squad_normalize_answer(prediction) == squad_normalize_answer(truth) ? 1.0 : 0.0;
}

double squad_f1(const std::string& prediction, const std::string& truth) {
  const std::vector<std::string> p = python_split(squad_normalize_answer(prediction));
  const std::vector<std::string> g = python_split(squad_normalize_answer(truth));
  std::map<std::string, int64_t> count;
  for (const auto& w : g) ++count[w];
  int64_t same = 0;
  for (const auto& w : p)
    if (count[w] > 0) {
      --count[w];
      ++same;
    }
  if (same == 0) return 0.0;
  const double precision = double(same) / double(p.size());
  const double recall = double(same) / double(g.size());
  return 2 * precision * recall / (precision + recall);
}

SquadScore squad_evaluate(const std::vector<SquadExample>& dataset,
                          const std::map<std::string, std::string>& predictions) {
  SquadScore s;
  double em = 0, f1 = 0;
  for (const SquadExample& e : dataset) {
    ++s.questions;
    auto it = predictions.find(e.id);
    if (it == predictions.end()) {
      ++s.unanswered;  // scores 0
      continue;
    }
    double best_em = 0, best_f1 = 0;
    for (const std::string& t : e.answers) {
      best_em = std::max(best_em, squad_exact_match(it->second, t));
      best_f1 = std::max(best_f1, squad_f1(it->second, t));
    }
    em += best_em;
    f1 += best_f1;
  }
  if (s.questions > 0) {
    s.exact_match = 100.0 * em / double(s.questions);
    s.f1 = 100.0 * f1 / double(s.questions);
  }
  return s;
}

}  // namespace aim::data
