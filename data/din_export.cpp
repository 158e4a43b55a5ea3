#include "data/din_export.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <string_view>
#include <utility>

#include "tensor/check.h"
#include "tensor/philox.h"

namespace aim::data {
namespace {

constexpr const char* kFormat = "aim-din-export-1";
// meta.txt's counts are checked against the files' lines only after reading them, so they size
// a reservation up to this many elements at most (a corrupt `items 99999999999` must end as the
// line-count error, not as an allocation of the claimed size).
constexpr int64_t kMaxReserve = int64_t(1) << 20;

[[noreturn]] void bad(const std::string& path, int64_t line, const std::string& what) {
  throw Error(str(path, ":", line, ": ", what));
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    const size_t k = s.find(sep);
    out.push_back(s.substr(0, k));
    if (k == std::string_view::npos) return out;
    s.remove_prefix(k + 1);
  }
}

void chomp_cr(std::string& s) {
  if (!s.empty() && s.back() == '\r') s.pop_back();
}

// Decimal id in [0, bound): `what` names the field in the message.
int64_t parse_id(std::string_view tok, int64_t bound, const char* what, const char* bound_name,
                 const std::string& path, int64_t line) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
  if (tok.empty() || ec != std::errc() || end != tok.data() + tok.size())
    bad(path, line, str(what, " '", tok, "' is not an integer (expected a decimal id)"));
  if (v < 0 || v >= bound)
    bad(path, line,
        str(what, " ", v, " out of range (expected 0 <= ", what, " < ", bound_name, " = ", bound,
            ")"));
  return v;
}

struct Meta {
  int64_t users = 0, items = 0, cates = 0, train = 0, test = 0;
};

Meta read_meta(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, 0, "cannot open meta file for reading");
  std::map<std::string, int64_t> first_line;  // key -> line where it was seen
  Meta m;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    chomp_cr(line);
    const std::vector<std::string_view> kv = split(line, ' ');
    if (kv.size() != 2 || kv[0].empty() || kv[1].empty())
      bad(path, n, str("expected 'key value' (one space), got '", line, "'"));
    const std::string key(kv[0]);
    if (!first_line.emplace(key, n).second)
      bad(path, n, str("duplicate key '", key, "' (first at line ", first_line[key], ")"));
    if (key == "format") {
      if (kv[1] != kFormat)
        bad(path, n, str("format '", kv[1], "' is not supported (expected ", kFormat, ")"));
      continue;
    }
    int64_t* dst = key == "users"   ? &m.users
                   : key == "items" ? &m.items
                   : key == "cates" ? &m.cates
                   : key == "train" ? &m.train
                   : key == "test"  ? &m.test
                                    : nullptr;
    if (dst == nullptr)
      bad(path, n,
          str("unknown key '", key, "' (expected format, users, items, cates, train, test)"));
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(kv[1].data(), kv[1].data() + kv[1].size(), v);
    if (ec != std::errc() || end != kv[1].data() + kv[1].size() || v < 0)
      bad(path, n, str(key, " '", kv[1], "' is not a count (expected a non-negative integer)"));
    *dst = v;
  }
  if (in.bad()) bad(path, n, "read error");
  for (const char* k : {"format", "users", "items", "cates", "train", "test"})
    if (first_line.count(k) == 0) bad(path, 0, str("missing key '", k, "'"));
  for (const auto& [k, v] :
       {std::pair<const char*, int64_t>{"users", m.users}, {"items", m.items}, {"cates", m.cates}})
    if (v < 1) bad(path, first_line[k], str(k, " must be >= 1, got ", v));
  return m;
}

std::vector<int64_t> read_cate_list(const std::string& path, const Meta& m) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, 0, "cannot open category list for reading");
  std::vector<int64_t> cates;
  cates.reserve(size_t(std::min(m.items, kMaxReserve)));
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    chomp_cr(line);
    if (n > m.items)
      bad(path, n, str("more lines than items = ", m.items, " (meta.txt; line k+1 = item k)"));
    cates.push_back(parse_id(line, m.cates, "category", "cates", path, n));
  }
  if (in.bad()) bad(path, n, "read error");
  if (n != m.items)
    bad(path, 0, str(n, " lines, expected items = ", m.items, " (meta.txt; line k+1 = item k)"));
  return cates;
}

std::vector<RecExample> read_samples(const std::string& path, const Meta& m, int64_t expected,
                                     const char* count_key, const std::vector<int64_t>& cate_list,
                                     int64_t max_hist_len) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, 0, "cannot open sample file for reading");
  std::vector<RecExample> out;
  out.reserve(size_t(std::min(expected, kMaxReserve)));
  std::string line;
  std::vector<int64_t> hist;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    chomp_cr(line);
    const std::vector<std::string_view> f = split(line, '\t');
    if (f.size() != 4)
      bad(path, n, str("expected 4 tab-separated fields (uid item label hist), got ", f.size()));
    RecExample e;
    e.uid = parse_id(f[0], m.users, "uid", "users", path, n);
    e.item = parse_id(f[1], m.items, "item", "items", path, n);
    if (f[2] == "1")
      e.label = 1;
    else if (f[2] == "0")
      e.label = 0;
    else
      bad(path, n, str("label must be 0 or 1, got '", f[2], "'"));
    if (f[3].empty()) bad(path, n, "empty history (expected at least one item id)");
    hist.clear();
    for (std::string_view tok : split(f[3], ' ')) {
      if (tok.empty()) bad(path, n, "empty history token (expected item ids joined by one space)");
      hist.push_back(parse_id(tok, m.items, "history item", "items", path, n));
    }
    e.cate = cate_list[size_t(e.item)];
    const size_t keep =
        max_hist_len > 0 ? std::min(hist.size(), size_t(max_hist_len)) : hist.size();
    e.hist_item.assign(hist.end() - keep, hist.end());  // the most recent positions
    e.hist_cate.reserve(keep);
    for (int64_t it : e.hist_item) e.hist_cate.push_back(cate_list[size_t(it)]);
    out.push_back(std::move(e));
  }
  if (in.bad()) bad(path, n, "read error");
  if (n != expected)
    bad(path, 0, str(n, " samples, expected ", count_key, " = ", expected, " (meta.txt)"));
  return out;
}

}  // namespace

DinExport DinExport::load(const std::string& dir, const DinExportOptions& opt) {
  AIM_CHECK(opt.max_hist_len >= 0, "DinExport: max_hist_len must be >= 0 (0 = keep all), got ",
            opt.max_hist_len);
  const Meta m = read_meta(dir + "/meta.txt");
  DinExport d;
  d.users_ = m.users;
  d.items_ = m.items;
  d.cates_ = m.cates;
  d.cate_list_ = read_cate_list(dir + "/cate_list.txt", m);
  d.train_ = read_samples(dir + "/train.tsv", m, m.train, "train", d.cate_list_, opt.max_hist_len);
  d.test_ = read_samples(dir + "/test.tsv", m, m.test, "test", d.cate_list_, opt.max_hist_len);
  return d;
}

RecBatch DinExport::batch(DinSplit split, int64_t start, int64_t count) const {
  const std::vector<RecExample>& ex = examples(split);
  AIM_CHECK(start >= 0 && count > 0 && start + count <= int64_t(ex.size()), "DinExport::batch: [",
            start, ", ", start + count, ") outside ", ex.size(), " samples");
  return collate(std::vector<RecExample>(ex.begin() + start, ex.begin() + start + count));
}

RecBatch DinExport::gather(DinSplit split, const std::vector<int64_t>& order, int64_t start,
                           int64_t count) const {
  const std::vector<RecExample>& ex = examples(split);
  AIM_CHECK(start >= 0 && count > 0 && start + count <= int64_t(order.size()),
            "DinExport::gather: [", start, ", ", start + count, ") outside an order of ",
            order.size(), " indices");
  std::vector<RecExample> picked;
  picked.reserve(size_t(count));
  for (int64_t k = start; k < start + count; ++k) {
    const int64_t i = order[size_t(k)];
    AIM_CHECK(i >= 0 && i < int64_t(ex.size()), "DinExport::gather: order[", k, "] = ", i,
              " outside ", ex.size(), " samples");
    picked.push_back(ex[size_t(i)]);
  }
  return collate(picked);
}

std::vector<int64_t> DinExport::test_uids() const {
  std::vector<int64_t> u;
  u.reserve(test_.size());
  for (const RecExample& e : test_) u.push_back(e.uid);
  return u;
}

std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch) {
  AIM_CHECK(n >= 0 && epoch >= 0, "epoch_order: n and epoch must be >= 0, got n = ", n,
            ", epoch = ", epoch);
  // One Philox key per (seed, epoch): the top bit keeps these blocks apart from small counters.
  const philox::U4 k = philox::block_words(seed, (uint64_t(1) << 63) | uint64_t(epoch));
  const uint64_t key = uint64_t(k.x) | (uint64_t(k.y) << 32);
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[size_t(i)] = i;
  for (int64_t i = n - 1; i > 0; --i) {
    const philox::U4 w = philox::block_words(key, uint64_t(i));
    const uint64_t r = uint64_t(w.x) | (uint64_t(w.y) << 32);
    // Uniform j in [0, i] by a 64x64->128 multiply (Lemire); bias < (i+1) / 2^64.
    const int64_t j = int64_t((unsigned __int128)r * uint64_t(i + 1) >> 64);
    std::swap(order[size_t(i)], order[size_t(j)]);
  }
  return order;
}

}  // namespace aim::data
