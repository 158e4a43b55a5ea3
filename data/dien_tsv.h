// Reader for DIEN's preprocessed Amazon Books sample files (MODELS.md §4.2):
//   label \t uid \t mid \t cat \t mid_history \t cat_history
// label "0"/"1"; histories are tokens joined by byte 0x02, oldest -> newest, equally long.
// Tokens become ids through plain-text vocabularies (one token per line, 0-based line number = id;
// tokens not in the vocabulary map to id 0, the "unknown"/default slot). Format: docs/din-data.md.
// Malformed input throws aim::Error whose message starts with "path:line: ".
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/rec_batch.h"

namespace aim::data {

class Vocab {
 public:
  // Loads a vocabulary file: line k (0-based) holds the token with id k. Empty tokens, duplicate
  // tokens and an empty file are errors ("path:line: ..."). A final '\r' on a line is dropped.
  static Vocab load(const std::string& path);
  static Vocab from_tokens(const std::vector<std::string>& tokens);  // tokens[k] has id k

  int64_t id(const std::string& token) const;  // 0 when unknown
  bool contains(const std::string& token) const { return ids_.count(token) != 0; }
  int64_t size() const { return int64_t(tokens_.size()); }
  const std::string& token(int64_t id) const { return tokens_.at(size_t(id)); }

 private:
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int64_t> ids_;
};

struct DienTsvOptions {
  std::string uid_voc, mid_voc, cat_voc;  // vocabulary files (required)
  int64_t max_hist_len = 100;             // keep only the most recent max_hist_len positions
};

class DienTsvReader {
 public:
  // Reads and checks the whole file up front (errors name path:line).
  DienTsvReader(const std::string& path, const DienTsvOptions& opt);
  DienTsvReader(const std::string& path, Vocab uid, Vocab mid, Vocab cat,
                int64_t max_hist_len = 100);
  // Another file read with `like`'s vocabularies and history limit (e.g. the test file).
  DienTsvReader(const std::string& path, const DienTsvReader& like);

  int64_t size() const { return int64_t(examples_.size()); }
  const std::vector<RecExample>& examples() const { return examples_; }
  // History length of sample i in the file, before truncation to max_hist_len.
  int64_t file_hist_len(int64_t i) const { return file_len_[size_t(i)]; }
  int64_t max_hist_len() const { return max_hist_len_; }
  const Vocab& uid_vocab() const { return uid_; }
  const Vocab& mid_vocab() const { return mid_; }
  const Vocab& cat_vocab() const { return cat_; }

  // Samples [start, start + count) in file order, padded to their longest history.
  RecBatch batch(int64_t start, int64_t count) const;
  // Sequential batches in file order; the last one may be short (drop_last skips it).
  // Returns false at the end of the file; reset() starts over.
  bool next(int64_t batch_size, RecBatch* out, bool drop_last = false);
  void reset() { pos_ = 0; }

 private:
  void read(const std::string& path);

  Vocab uid_, mid_, cat_;
  int64_t max_hist_len_;
  std::vector<RecExample> examples_;
  std::vector<int64_t> file_len_;
  int64_t pos_ = 0;
};

}  // namespace aim::data
