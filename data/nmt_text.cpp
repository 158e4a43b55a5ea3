// NmtTextSource (data/nmt_text.h).
#include "data/nmt_text.h"

#include <fstream>
#include <sstream>
#include <tuple>

#include "data/bleu.h"
#include "data/nmt_synthetic.h"
#include "tensor/check.h"

namespace aim::data {

namespace {

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  AIM_CHECK(in.good(), path, ": cannot open");
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    lines.push_back(std::move(l));
  }
  return lines;
}

std::string at(const std::string& path, size_t i) { return path + ":" + std::to_string(i + 1); }

}  // namespace

NmtVocab NmtVocab::load(const std::string& path) {
  NmtVocab v;
  v.path = path;
  v.tokens = read_lines(path);
  AIM_CHECK(v.tokens.size() >= 3, path, ": a vocabulary needs at least 3 lines (<unk> or a token, ",
            "<s>, </s>), got ", v.tokens.size());
  AIM_CHECK(v.tokens[1] == "<s>", at(path, 1), ": expected <s> (id 1, TF NMT's order), got '",
            v.tokens[1], "'");
  AIM_CHECK(v.tokens[2] == "</s>", at(path, 2), ": expected </s> (id 2, TF NMT's order), got '",
            v.tokens[2], "'");
  v.has_unk = v.tokens[0] == "<unk>";
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const std::string& t = v.tokens[i];
    AIM_CHECK(!t.empty() && t.find(' ') == std::string::npos, at(path, i),
              ": a vocabulary line must be one token, got '", t, "'");
    AIM_CHECK(v.ids.emplace(t, int64_t(i)).second, at(path, i), ": token '", t,
              "' already on line ", v.ids.at(t) + 1);
  }
  return v;
}

std::vector<int64_t> NmtVocab::encode(const std::string& line, const std::string& where) const {
  std::istringstream in(line);
  std::vector<int64_t> out;
  for (std::string w; in >> w;) {
    auto it = ids.find(w);
    if (it != ids.end()) {
      out.push_back(it->second);
      continue;
    }
    AIM_CHECK(has_unk, where, ": unknown token '", w, "' and ", path,
              " has no <unk> entry (line 1 is '", tokens[0], "')");
    out.push_back(0);
  }
  AIM_CHECK(!out.empty(), where, ": empty sentence");
  return out;
}

std::string NmtVocab::decode(const std::vector<int64_t>& ids) const {
  std::string s;
  for (int64_t i : ids) {
    AIM_CHECK(i >= 0 && i < int64_t(tokens.size()), path, ": id ", i, " outside the vocabulary of ",
              tokens.size());
    if (!s.empty()) s += ' ';
    s += tokens[size_t(i)];
  }
  return undo_bpe(s);
}

NmtParallel read_parallel(const std::string& src_path, const std::string& tgt_path,
                          const NmtVocab& src_vocab, const NmtVocab& tgt_vocab, int64_t truncate,
                          int64_t hard_max_len) {
  const std::vector<std::string> s = read_lines(src_path), t = read_lines(tgt_path);
  AIM_CHECK(s.size() == t.size(), src_path, " has ", s.size(), " lines but ", tgt_path, " has ",
            t.size(), ": a parallel pair needs equal line counts");
  NmtParallel p;
  for (size_t i = 0; i < s.size(); ++i) {
    for (const auto& [path, line, vocab, out] :
         {std::tuple{&src_path, &s[i], &src_vocab, &p.src},
          std::tuple{&tgt_path, &t[i], &tgt_vocab, &p.tgt}}) {
      std::vector<int64_t> ids = vocab->encode(*line, at(*path, i));
      AIM_CHECK(int64_t(ids.size()) <= hard_max_len, at(*path, i), ": ", ids.size(),
                " tokens, over the limit of ", hard_max_len, " (hard_max_len)");
      if (truncate > 0 && int64_t(ids.size()) > truncate) ids.resize(size_t(truncate));
      out->push_back(std::move(ids));
    }
  }
  AIM_CHECK(!p.src.empty(), src_path, ": no sentences");
  return p;
}

NmtTextSource::NmtTextSource(const NmtTextConfig& cfg) : cfg_(cfg) {
  const std::string d = cfg.dir + "/";
  src_vocab_ = NmtVocab::load(d + cfg.vocab_prefix + "." + cfg.src);
  tgt_vocab_ = NmtVocab::load(d + cfg.vocab_prefix + "." + cfg.tgt);
  train_ = read_parallel(d + cfg.train_prefix + "." + cfg.src, d + cfg.train_prefix + "." + cfg.tgt,
                         src_vocab_, tgt_vocab_, cfg.max_len, cfg.hard_max_len);
  eval_ = read_parallel(d + cfg.eval_prefix + "." + cfg.src, d + cfg.eval_prefix + "." + cfg.tgt,
                        src_vocab_, tgt_vocab_, 0, cfg.hard_max_len);
}

std::string NmtTextSource::describe() const {
  return "nmt-text " + cfg_.dir + " (" + cfg_.src + " -> " + cfg_.tgt + ", " +
         std::to_string(train_.src.size()) + " training pairs, " +
         std::to_string(eval_.src.size()) + " evaluation pairs)";
}

std::string NmtTextSource::fingerprint() const {
  return "nmt-text:" + cfg_.dir + ":" + cfg_.src + ":" + cfg_.tgt + ":" +
         std::to_string(train_.src.size()) + ":" + std::to_string(src_vocab_.tokens.size()) + ":" +
         std::to_string(tgt_vocab_.tokens.size());
}

TensorMap NmtTextSource::next(int64_t batch_size) {
  AIM_CHECK(batch_size >= 1, "nmt text: batch size must be >= 1, got ", batch_size);
  const int64_t n = epoch_size();
  std::vector<std::vector<int64_t>> s, t;
  for (int64_t j = 0; j < batch_size; ++j) {
    const size_t i = size_t((pos_ + j) % n);
    s.push_back(train_.src[i]);
    t.push_back(train_.tgt[i]);
  }
  pos_ += batch_size;
  return nmt_pairs_to_batch(s, t);
}

TensorMap NmtTextSource::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count >= 1 && start + count <= eval_size(),
            "nmt text: evaluation pairs [", start, ", ", start + count, ") outside the set of ",
            eval_size());
  std::vector<std::vector<int64_t>> s(eval_.src.begin() + start, eval_.src.begin() + start + count),
      t(eval_.tgt.begin() + start, eval_.tgt.begin() + start + count);
  return nmt_pairs_to_batch(s, t);
}

}  // namespace aim::data
