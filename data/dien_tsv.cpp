#include "data/dien_tsv.h"

#include <algorithm>
#include <fstream>
#include <utility>

#include "tensor/check.h"

namespace aim::data {
namespace {

[[noreturn]] void bad(const std::string& path, int64_t line, const std::string& what) {
  throw Error(str(path, ":", line, ": ", what));
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t k = s.find(sep, start);
    out.push_back(s.substr(start, k == std::string::npos ? std::string::npos : k - start));
    if (k == std::string::npos) return out;
    start = k + 1;
  }
}

void chomp_cr(std::string& s) {
  if (!s.empty() && s.back() == '\r') s.pop_back();
}

}  // namespace

Vocab Vocab::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, 0, "cannot open vocabulary file for reading");
  Vocab v;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    chomp_cr(line);
    if (line.empty()) bad(path, n, "empty token (one token per line; line k+1 is id k)");
    if (!v.ids_.emplace(line, n - 1).second)
      bad(path, n, str("duplicate token '", line, "' (first at line ", v.ids_[line] + 1, ")"));
    v.tokens_.push_back(line);
  }
  if (in.bad()) bad(path, n, "read error");
  if (n == 0) bad(path, 0, "empty vocabulary file");
  return v;
}

Vocab Vocab::from_tokens(const std::vector<std::string>& tokens) {
  Vocab v;
  for (const std::string& t : tokens) {
    AIM_CHECK(v.ids_.emplace(t, int64_t(v.tokens_.size())).second, "Vocab: duplicate token '", t,
              "'");
    v.tokens_.push_back(t);
  }
  return v;
}

int64_t Vocab::id(const std::string& token) const {
  const auto it = ids_.find(token);
  return it == ids_.end() ? 0 : it->second;
}

DienTsvReader::DienTsvReader(const std::string& path, const DienTsvOptions& opt)
    : DienTsvReader(path, Vocab::load(opt.uid_voc), Vocab::load(opt.mid_voc),
                    Vocab::load(opt.cat_voc), opt.max_hist_len) {}

DienTsvReader::DienTsvReader(const std::string& path, Vocab uid, Vocab mid, Vocab cat,
                             int64_t max_hist_len)
    : uid_(std::move(uid)),
      mid_(std::move(mid)),
      cat_(std::move(cat)),
      max_hist_len_(max_hist_len) {
  AIM_CHECK(max_hist_len_ >= 1, "DienTsvReader: max_hist_len must be >= 1, got ", max_hist_len_);
  read(path);
}

DienTsvReader::DienTsvReader(const std::string& path, const DienTsvReader& like)
    : uid_(like.uid_), mid_(like.mid_), cat_(like.cat_), max_hist_len_(like.max_hist_len_) {
  read(path);
}

void DienTsvReader::read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, 0, "cannot open sample file for reading");
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    chomp_cr(line);
    const std::vector<std::string> f = split(line, '\t');
    if (f.size() != 6)
      bad(path, n,
          str("expected 6 tab-separated fields (label uid mid cat mid_history cat_history), got ",
              f.size()));
    RecExample e;
    if (f[0] == "1")
      e.label = 1;
    else if (f[0] == "0")
      e.label = 0;
    else
      bad(path, n, str("label must be 0 or 1, got '", f[0], "'"));
    if (f[4].empty() || f[5].empty()) bad(path, n, "empty history");
    const std::vector<std::string> mids = split(f[4], '\x02'), cats = split(f[5], '\x02');
    if (mids.size() != cats.size())
      bad(path, n,
          str("history lengths differ: ", mids.size(), " items but ", cats.size(), " categories"));
    e.uid = uid_.id(f[1]);
    e.item = mid_.id(f[2]);
    e.cate = cat_.id(f[3]);
    const size_t keep = std::min(mids.size(), size_t(max_hist_len_));
    for (size_t k = mids.size() - keep; k < mids.size(); ++k) {
      e.hist_item.push_back(mid_.id(mids[k]));
      e.hist_cate.push_back(cat_.id(cats[k]));
    }
    examples_.push_back(std::move(e));
    file_len_.push_back(int64_t(mids.size()));
  }
  if (in.bad()) bad(path, n, "read error");
}

RecBatch DienTsvReader::batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0 && start + count <= size(), "DienTsvReader::batch: [", start,
            ", ", start + count, ") outside ", size(), " samples");
  return collate(
      std::vector<RecExample>(examples_.begin() + start, examples_.begin() + start + count));
}

bool DienTsvReader::next(int64_t batch_size, RecBatch* out, bool drop_last) {
  AIM_CHECK(batch_size > 0, "DienTsvReader::next: batch_size must be > 0");
  const int64_t left = size() - pos_;
  if (left <= 0 || (drop_last && left < batch_size)) return false;
  const int64_t n = std::min(left, batch_size);
  *out = batch(pos_, n);
  pos_ += n;
  return true;
}

}  // namespace aim::data
