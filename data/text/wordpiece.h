// BERT's tokenizer: the basic tokenizer (clean text, spaces around CJK ideographs, optional
// lower-casing with accents stripped, split on punctuation) and WordPiece (greedy longest match
// first over a vocab.txt, "##" continuation prefix, [UNK] for words that do not split or are longer
// than 100 characters), equal to google-research/bert's tokenization.py (FullTokenizer) and Hugging
// Face's BertTokenizer with do_lower_case (uncased models) or without it (cased).
//
// Text is UTF-8; bytes that are not valid UTF-8 are dropped, as tokenization.py's
// convert_to_unicode (errors="ignore"). Unicode properties (categories, NFD, lower case) come from
// tables generated from Python's unicodedata (data/text/unicode_tables.h), so the tokens are those
// of the reference run with that Python's Unicode version (unicode::kUnicodeVersion).
// Tests: tests/data/test_wordpiece.cpp against tests/data/wordpiece/ (reference.py's output).
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace aim::data {

class WordPieceTokenizer {
 public:
  // One token per line (line i has id i; surrounding whitespace stripped). The vocabulary must
  // hold `unk_token`. Errors name the file and line.
  static WordPieceTokenizer from_vocab_file(const std::string& path, bool lower_case = true);
  WordPieceTokenizer(std::vector<std::string> vocab, bool lower_case = true,
                     std::string unk_token = "[UNK]", int64_t max_chars_per_word = 100);

  // The basic tokenizer's words (before WordPiece).
  std::vector<std::string> basic_tokenize(const std::string& text) const;
  // WordPiece tokens of `text`.
  std::vector<std::string> tokenize(const std::string& text) const;
  // Token ids of `text`.
  std::vector<int64_t> encode(const std::string& text) const;

  int64_t id(const std::string& token) const;  // -1 when the vocabulary lacks it
  const std::string& token(int64_t id) const;  // an error when out of range
  int64_t size() const { return int64_t(vocab_.size()); }
  int64_t unk_id() const { return unk_id_; }

 private:
  void wordpiece(const std::string& word, std::vector<std::string>& out) const;

  std::vector<std::string> vocab_;
  std::unordered_map<std::string, int64_t> ids_;
  bool lower_case_;
  std::string unk_;
  int64_t unk_id_ = -1, max_chars_;
};

}  // namespace aim::data
