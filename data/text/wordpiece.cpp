#include "data/text/wordpiece.h"

#include <algorithm>
#include <fstream>

#include "data/text/unicode.h"
#include "data/text/unicode_tables.h"
#include "tensor/check.h"

namespace aim::data {
namespace {

// tokenization.py's predicates.
bool is_whitespace(uint32_t cp) {
  if (cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r') return true;
  return text::in_ranges(cp, unicode::kSpaceSeparator, unicode::kSpaceSeparator_size);
}
bool is_control(uint32_t cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;
  return text::in_ranges(cp, unicode::kOther, unicode::kOther_size);
}
bool is_punctuation(uint32_t cp) {
  // ASCII symbols that Unicode files under S* ("$", "+", "^", "`", ...) count as punctuation too.
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
      (cp >= 123 && cp <= 126))
    return true;
  return text::in_ranges(cp, unicode::kPunctuation, unicode::kPunctuation_size);
}
bool is_cjk(uint32_t cp) {  // the CJK Unified Ideographs blocks (not Hangul, kana)
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// Python's str.split(): on str.isspace() (which, after cleaning, still splits on U+2028/U+2029).
std::vector<std::vector<uint32_t>> split_whitespace(const std::vector<uint32_t>& cps) {
  std::vector<std::vector<uint32_t>> words;
  std::vector<uint32_t> cur;
  for (uint32_t c : cps) {
    if (text::is_python_space(c)) {
      if (!cur.empty()) words.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) words.push_back(std::move(cur));
  return words;
}

// Python's str.strip().
std::string strip(const std::string& s) {
  const std::vector<uint32_t> cps = text::decode_utf8(s);
  size_t a = 0, b = cps.size();
  while (a < b && text::is_python_space(cps[a])) ++a;
  while (b > a && text::is_python_space(cps[b - 1])) --b;
  return text::encode_utf8(std::vector<uint32_t>(cps.begin() + long(a), cps.begin() + long(b)));
}

}  // namespace

WordPieceTokenizer WordPieceTokenizer::from_vocab_file(const std::string& path, bool lower_case) {
  std::ifstream f(path, std::ios::binary);
  AIM_CHECK(f, "vocabulary ", path, ": cannot open");
  std::vector<std::string> vocab;
  std::string line;
  while (std::getline(f, line)) vocab.push_back(strip(line));
  AIM_CHECK(!vocab.empty(), "vocabulary ", path, ": empty (expected one token per line)");
  try {
    return WordPieceTokenizer(std::move(vocab), lower_case);
  } catch (const Error& e) {
    AIM_FAIL("vocabulary ", path, ": ", e.what());
  }
}

WordPieceTokenizer::WordPieceTokenizer(std::vector<std::string> vocab, bool lower_case,
                                       std::string unk_token, int64_t max_chars_per_word)
    : vocab_(std::move(vocab)),
      lower_case_(lower_case),
      unk_(std::move(unk_token)),
      max_chars_(max_chars_per_word) {
  for (size_t i = 0; i < vocab_.size(); ++i) ids_[vocab_[i]] = int64_t(i);  // the last wins
  auto it = ids_.find(unk_);
  AIM_CHECK(it != ids_.end(), "no ", unk_, " token (line ", vocab_.size(),
            " lines read): WordPiece needs it for words it cannot split");
  unk_id_ = it->second;
}

std::vector<std::string> WordPieceTokenizer::basic_tokenize(const std::string& text) const {
  // Clean: drop NUL, U+FFFD and control characters; whitespace becomes a space; spaces around
  // CJK ideographs (each one is a word).
  std::vector<uint32_t> clean;
  for (uint32_t c : text::decode_utf8(text)) {
    if (c == 0 || c == 0xFFFD || is_control(c)) continue;
    if (is_whitespace(c)) {
      clean.push_back(' ');
    } else if (is_cjk(c)) {
      clean.push_back(' ');
      clean.push_back(c);
      clean.push_back(' ');
    } else {
      clean.push_back(c);
    }
  }
  std::vector<std::string> out;
  for (std::vector<uint32_t> word : split_whitespace(clean)) {
    if (lower_case_) {
      // Lower case, then strip accents: NFD, the nonspacing marks dropped.
      const std::vector<uint32_t> low = text::python_lower(word);
      word.clear();
      for (uint32_t c : text::nfd(low))
        if (!text::in_ranges(c, unicode::kNonspacingMark, unicode::kNonspacingMark_size))
          word.push_back(c);
    }
    // Split on punctuation: every punctuation character is a word of its own.
    std::vector<uint32_t> cur;
    for (uint32_t c : word) {
      if (is_punctuation(c)) {
        if (!cur.empty()) out.push_back(text::encode_utf8(cur));
        cur.clear();
        out.push_back(text::encode_utf8({c}));
      } else {
        cur.push_back(c);
      }
    }
    if (!cur.empty()) out.push_back(text::encode_utf8(cur));
  }
  return out;
}

void WordPieceTokenizer::wordpiece(const std::string& word, std::vector<std::string>& out) const {
  const std::vector<uint32_t> cps = text::decode_utf8(word);
  if (int64_t(cps.size()) > max_chars_) {
    out.push_back(unk_);
    return;
  }
  std::vector<std::string> pieces;
  size_t start = 0;
  while (start < cps.size()) {
    size_t end = cps.size();
    std::string found;
    for (; end > start; --end) {  // the longest piece in the vocabulary
      std::string piece = text::encode_utf8(
          std::vector<uint32_t>(cps.begin() + long(start), cps.begin() + long(end)));
      if (start > 0) piece = "##" + piece;
      if (ids_.count(piece)) {
        found = std::move(piece);
        break;
      }
    }
    if (end == start) {  // no piece fits: the whole word is unknown
      out.push_back(unk_);
      return;
    }
    pieces.push_back(std::move(found));
    start = end;
  }
  out.insert(out.end(), pieces.begin(), pieces.end());
}

std::vector<std::string> WordPieceTokenizer::tokenize(const std::string& text) const {
  std::vector<std::string> out;
  for (const std::string& w : basic_tokenize(text)) wordpiece(w, out);
  return out;
}

std::vector<int64_t> WordPieceTokenizer::encode(const std::string& text) const {
  std::vector<int64_t> ids;
  for (const std::string& t : tokenize(text)) ids.push_back(ids_.at(t));
  return ids;
}

int64_t WordPieceTokenizer::id(const std::string& token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

const std::string& WordPieceTokenizer::token(int64_t id) const {
  AIM_CHECK(id >= 0 && id < int64_t(vocab_.size()), "token id ", id, " is outside the vocabulary (",
            vocab_.size(), " tokens)");
  return vocab_[size_t(id)];
}

}  // namespace aim::data
