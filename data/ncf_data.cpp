#include "data/ncf_data.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "data/din_export.h"  // epoch_order
#include "data/metrics.h"
#include "data/philox_draw.h"
#include "tensor/check.h"
#include "tensor/philox.h"

namespace aim::data {
namespace {

// Tags of the independent Philox keys derived from the seed (docs/ncf-data.md).
constexpr uint64_t kTagTrain = 1, kTagHeldout = 2, kTagEvalNeg = 3, kTagUserF = 10, kTagItemF = 11,
                   kTagPop = 12;
constexpr int kGroupBlockShift = 20;  // each group owns 2^20 counter blocks of its stream
// Proposals per positive before giving up; the expected number is 1 / acceptance (about 11
// with the defaults), so this only trips on a configuration whose acceptance is ~0.
constexpr int64_t kMaxProposals = 200000;

}  // namespace

TensorMap NcfRows::to_map() const {
  const int64_t n = size();
  return {{"user", Tensor::from_vector(user, {n})},
          {"item", Tensor::from_vector(item, {n})},
          {"label", Tensor::from_vector(label, {n})}};
}

// ---- NcfSynthetic ---------------------------------------------------------------------------

namespace {

// Rejection sampling of a positive of user u: propose a uniform item, accept it with
// probability sigmoid(beta * a + offset); `exclude` (>= 0) is never returned.
template <class Affinity>
int64_t draw_positive(PhiloxDraw& d, int64_t n_items, int64_t user, int64_t exclude, double beta,
                      double offset, const Affinity& affinity) {
  for (int64_t t = 0; t < kMaxProposals; ++t) {
    const int64_t j = d.below(n_items);
    const double u = d.unit();
    if (j == exclude) continue;
    if (u * (1.0 + std::exp(-(beta * affinity(user, j) + offset))) < 1.0) return j;
  }
  AIM_FAIL("NcfSynthetic: no positive accepted for user ", user, " in ", kMaxProposals,
           " proposals (beta ", beta, ", offset ", offset, " make sigmoid(beta a + offset) ~ 0)");
}

// `count` distinct uniform items, none equal to a or b (b may be -1), appended to out.
void draw_negatives(PhiloxDraw& d, int64_t n_items, int64_t count, int64_t a, int64_t b,
                    std::vector<int64_t>& out) {
  const size_t first = out.size();
  while (int64_t(out.size() - first) < count) {
    const int64_t j = d.below(n_items);
    bool seen = j == a || j == b;
    for (size_t i = first; i < out.size() && !seen; ++i) seen = out[i] == j;
    if (!seen) out.push_back(j);
  }
}

}  // namespace

NcfSynthetic::NcfSynthetic(const NcfSyntheticConfig& cfg) : cfg_(cfg) {
  AIM_CHECK(cfg_.n_users >= 1 && cfg_.factors >= 1, "NcfSynthetic: need n_users >= 1 and ",
            "factors >= 1, got ", cfg_.n_users, " and ", cfg_.factors);
  AIM_CHECK(cfg_.n_items >= kNcfGroup + 1, "NcfSynthetic: n_items must be >= ", kNcfGroup + 1,
            " (an evaluation group needs 99 distinct negatives besides the held-out item), got ",
            cfg_.n_items);
  AIM_CHECK(cfg_.negatives >= 1 && cfg_.negatives + 2 <= cfg_.n_items && cfg_.epoch_size >= 1,
            "NcfSynthetic: need 1 <= negatives <= n_items - 2 and epoch_size >= 1");
  AIM_CHECK(std::isfinite(cfg_.beta) && std::isfinite(cfg_.offset) && std::isfinite(cfg_.pop),
            "NcfSynthetic: beta, offset and pop must be finite");
  const int64_t d = cfg_.factors;
  const double s = std::pow(double(d), -0.25);  // <x, y> of two such vectors has variance 1
  user_f_.resize(size_t(cfg_.n_users * d));
  item_f_.resize(size_t(cfg_.n_items * d));
  item_pop_.resize(size_t(cfg_.n_items));
  const uint64_t ku = key(kTagUserF), ki = key(kTagItemF), kp = key(kTagPop);
  for (size_t i = 0; i < user_f_.size(); ++i) user_f_[i] = float(s * philox::normal(ku, 0, i));
  for (size_t i = 0; i < item_f_.size(); ++i) item_f_[i] = float(s * philox::normal(ki, 0, i));
  for (size_t j = 0; j < item_pop_.size(); ++j)
    item_pop_[j] = float(cfg_.pop * philox::normal(kp, 0, j));
  heldout_.resize(size_t(cfg_.n_users));
  auto aff = [this](int64_t u, int64_t j) { return affinity(u, j); };
  for (int64_t u = 0; u < cfg_.n_users; ++u) {
    PhiloxDraw dr(key(kTagHeldout), uint64_t(u) << kGroupBlockShift);
    heldout_[size_t(u)] = draw_positive(dr, cfg_.n_items, u, -1, cfg_.beta, cfg_.offset, aff);
  }
}

uint64_t NcfSynthetic::key(uint64_t tag) const { return philox_key(cfg_.seed, tag); }

double NcfSynthetic::affinity(int64_t user, int64_t item) const {
  const int64_t d = cfg_.factors;
  const float* x = user_f_.data() + user * d;
  const float* y = item_f_.data() + item * d;
  double a = item_pop_[size_t(item)];
  for (int64_t k = 0; k < d; ++k) a += double(x[k]) * double(y[k]);
  return a;
}

NcfRows NcfSynthetic::train_rows(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0, "NcfSynthetic::train_rows: bad range start ", start,
            ", count ", count);
  const int64_t G = 1 + cfg_.negatives;  // rows per group: the positive, then its negatives
  NcfRows r;
  r.user.reserve(size_t(count));
  r.item.reserve(size_t(count));
  r.label.reserve(size_t(count));
  auto aff = [this](int64_t u, int64_t j) { return affinity(u, j); };
  std::vector<int64_t> items;
  for (int64_t g = start / G; g * G < start + count; ++g) {
    PhiloxDraw dr(key(kTagTrain), uint64_t(g) << kGroupBlockShift);
    const int64_t u = dr.below(cfg_.n_users), held = heldout_[size_t(u)];
    items.assign(1, draw_positive(dr, cfg_.n_items, u, held, cfg_.beta, cfg_.offset, aff));
    draw_negatives(dr, cfg_.n_items, cfg_.negatives, items[0], held, items);
    for (int64_t s = 0; s < G; ++s) {
      const int64_t row = g * G + s;
      if (row < start || row >= start + count) continue;
      r.user.push_back(u);
      r.item.push_back(items[size_t(s)]);
      r.label.push_back(s == 0 ? 1 : 0);
    }
  }
  return r;
}

NcfRows NcfSynthetic::eval_rows(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0 && start + count <= eval_size(), "NcfSynthetic::eval_rows: [",
            start, ", ", start + count, ") outside the evaluation set of ", eval_size(), " rows");
  NcfRows r;
  r.user.reserve(size_t(count));
  r.item.reserve(size_t(count));
  r.label.reserve(size_t(count));
  std::vector<int64_t> items;
  for (int64_t g = start / kNcfGroup; g * kNcfGroup < start + count; ++g) {
    PhiloxDraw dr(key(kTagEvalNeg), uint64_t(g) << kGroupBlockShift);
    items.assign(1, heldout_[size_t(g)]);
    draw_negatives(dr, cfg_.n_items, kNcfGroup - 1, items[0], -1, items);
    for (int64_t s = 0; s < kNcfGroup; ++s) {
      const int64_t row = g * kNcfGroup + s;
      if (row < start || row >= start + count) continue;
      r.user.push_back(g);
      r.item.push_back(items[size_t(s)]);
      r.label.push_back(s == 0 ? 1 : 0);
    }
  }
  return r;
}

NcfRanking NcfSynthetic::attainable(int64_t n_groups, int64_t k) const {
  AIM_CHECK(n_groups >= 1 && n_groups <= cfg_.n_users, "NcfSynthetic::attainable: n_groups ",
            n_groups, " outside [1, ", cfg_.n_users, "] (one group per user)");
  const NcfRows r = eval_rows(0, n_groups * kNcfGroup);
  std::vector<double> score(size_t(r.size()));
  for (int64_t i = 0; i < r.size(); ++i)
    score[size_t(i)] = affinity(r.user[size_t(i)], r.item[size_t(i)]);
  return {hr_at_k(score, r.label, kNcfGroup, k), ndcg_at_k(score, r.label, kNcfGroup, k),
          mrr_at_k(score, r.label, kNcfGroup, k)};
}

std::string NcfSyntheticSource::describe() const {
  const NcfSyntheticConfig& c = gen_.config();
  std::ostringstream os;
  os << "ncf-synthetic (seed " << c.seed << ", " << c.n_users << " users, " << c.n_items
     << " items, " << c.factors << " latent factors, " << c.negatives << " negatives per positive)";
  return os.str();
}

std::string NcfSyntheticSource::fingerprint() const {
  const NcfSyntheticConfig& c = gen_.config();
  std::ostringstream os;
  os << "ncf-synthetic:seed=" << c.seed << ",users=" << c.n_users << ",items=" << c.n_items
     << ",factors=" << c.factors << ",beta=" << c.beta << ",offset=" << c.offset << ",pop=" << c.pop
     << ",neg=" << c.negatives;
  return os.str();
}

TensorMap NcfSyntheticSource::next(int64_t batch_size) {
  AIM_CHECK(batch_size > 0, "ncf-synthetic: batch size must be > 0, got ", batch_size);
  const NcfRows r = gen_.train_rows(pos_, batch_size);
  pos_ += batch_size;
  return r.to_map();
}

TensorMap NcfSyntheticSource::eval_batch(int64_t start, int64_t count) const {
  return gen_.eval_rows(start, count).to_map();
}

// ---- the flat files -------------------------------------------------------------------------

namespace {

constexpr char kMagic[8] = {'A', 'I', 'M', 'N', 'C', 'F', '0', '1'};
constexpr int64_t kHeaderBytes = 24;  // magic[8], int32 split, users, items, rows
constexpr int64_t kRowBytes = 12;     // int32 user, item, label

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Error(str(path, ": ", what));
}

int32_t le32(const unsigned char* p) {
  return int32_t(uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
                 uint32_t(p[3]) << 24);
}

const char* split_name(int32_t s) { return s == 0 ? "train" : s == 1 ? "test" : "unknown"; }

std::string printable(const unsigned char* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (p[i] >= 32 && p[i] < 127) {
      s += char(p[i]);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", p[i]);
      s += buf;
    }
  }
  return s;
}

}  // namespace

NcfFile read_ncf_file(const std::string& path, NcfSplit split) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, "cannot open for reading (an NCF file, tools/ncf_npy_export.py)");
  in.seekg(0, std::ios::end);
  const int64_t size = int64_t(in.tellg());
  in.seekg(0, std::ios::beg);
  if (size < kHeaderBytes)
    bad(path, str("truncated: ", size, " bytes, shorter than the ", kHeaderBytes, "-byte header"));
  unsigned char h[kHeaderBytes];
  if (!in.read(reinterpret_cast<char*>(h), kHeaderBytes)) bad(path, "cannot read the header");
  if (std::memcmp(h, kMagic, 8) != 0)
    bad(path, str("bad magic '", printable(h, 8),
                  "' (expected 'AIMNCF01': an NCF file written by tools/ncf_npy_export.py)"));
  const int32_t sp = le32(h + 8), users = le32(h + 12), items = le32(h + 16), rows = le32(h + 20);
  if (sp != int32_t(split))
    bad(path, str("header split ", sp, " (", split_name(sp), "), expected ", int32_t(split), " (",
                  split_name(int32_t(split)), ")"));
  if (users < 1 || items < 1)
    bad(path, str("header users ", users, " and items ", items, " must both be >= 1"));
  if (rows < 1) bad(path, str("header rows ", rows, " must be >= 1"));
  const int64_t want = kHeaderBytes + kRowBytes * int64_t(rows);
  if (size != want)
    bad(path,
        str(size < want ? "truncated" : "trailing data", ": the header's ", rows, " rows need ",
            want, " bytes (", kHeaderBytes, " + 12 per row), the file has ", size));
  std::vector<unsigned char> raw(size_t(kRowBytes * rows));
  if (!in.read(reinterpret_cast<char*>(raw.data()), std::streamsize(raw.size())))
    bad(path, "cannot read the rows");
  NcfFile f;
  f.users = users;
  f.items = items;
  f.user.resize(size_t(rows));
  f.item.resize(size_t(rows));
  f.label.resize(size_t(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const unsigned char* p = raw.data() + r * kRowBytes;
    const int32_t u = le32(p), it = le32(p + 4), l = le32(p + 8);
    if (u < 0 || u >= users)
      bad(path,
          str("row ", r, ": user ", u, " out of range (expected 0 <= user < users = ", users, ")"));
    if (it < 0 || it >= items)
      bad(path, str("row ", r, ": item ", it, " out of range (expected 0 <= item < items = ", items,
                    ")"));
    if (l != 0 && l != 1) bad(path, str("row ", r, ": label ", l, " is not 0 or 1"));
    f.user[size_t(r)] = u;
    f.item[size_t(r)] = it;
    f.label[size_t(r)] = l;
  }
  if (split == NcfSplit::Test) {
    if (rows % kNcfGroup != 0)
      bad(path, str(rows, " test rows is not a multiple of ", kNcfGroup,
                    " (each user's group is 1 held-out positive + 99 negatives)"));
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t g = r / kNcfGroup, first = g * kNcfGroup;
      if (f.user[size_t(r)] != f.user[size_t(first)])
        bad(path, str("row ", r, ": user ", f.user[size_t(r)], " in the group of user ",
                      f.user[size_t(first)], " (rows ", first, "..", first + kNcfGroup - 1,
                      " are one user's candidates)"));
      if (r == first && f.label[size_t(r)] != 1)
        bad(path, str("row ", r, ": label 0 on the first row of group ", g,
                      " (expected 1: the held-out positive comes first)"));
      if (r != first && f.label[size_t(r)] != 0)
        bad(path, str("row ", r, ": label 1 inside group ", g,
                      " (only the first row of each group is the positive)"));
    }
  }
  return f;
}

NcfFileSource::NcfFileSource(const std::string& dir, uint64_t seed)
    : dir_(dir),
      seed_(seed),
      train_(read_ncf_file(dir + "/train.bin", NcfSplit::Train)),
      test_(read_ncf_file(dir + "/test.bin", NcfSplit::Test)) {
  AIM_CHECK(train_.users == test_.users && train_.items == test_.items, dir, ": train.bin has ",
            train_.users, " users and ", train_.items, " items, test.bin has ", test_.users,
            " and ", test_.items, " (must be equal)");
}

std::string NcfFileSource::describe() const {
  std::ostringstream os;
  os << "ncf-files " << dir_ << " (" << train_.rows() << " train rows, " << test_.rows() / kNcfGroup
     << " test users x " << kNcfGroup << ", " << train_.users << " users, " << train_.items
     << " items, shuffle seed " << seed_ << ")";
  return os.str();
}

std::string NcfFileSource::fingerprint() const {
  std::ostringstream os;
  os << "ncf-files:train=" << train_.rows() << ",test=" << test_.rows() << ",users=" << train_.users
     << ",items=" << train_.items << ",seed=" << seed_;
  return os.str();
}

TensorMap NcfFileSource::next(int64_t batch_size) {
  const int64_t n = train_.rows();
  AIM_CHECK(batch_size > 0 && batch_size <= n, "ncf-files ", dir_, ": batch size ", batch_size,
            " must be in [1, ", n, "] (training rows)");
  const int64_t per_epoch = (n / batch_size) * batch_size;  // last partial batch skipped
  const int64_t epoch = pos_ / per_epoch, index = pos_ % per_epoch;
  AIM_CHECK(index % batch_size == 0, "ncf-files ", dir_, ": stream position ", pos_,
            " is not a multiple of the batch size ", batch_size,
            " (resume with the batch size of the checkpoint)");
  if (epoch != order_epoch_) {
    order_ = epoch_order(n, seed_, epoch);
    order_epoch_ = epoch;
  }
  pos_ += batch_size;
  NcfRows r;
  r.user.resize(size_t(batch_size));
  r.item.resize(size_t(batch_size));
  r.label.resize(size_t(batch_size));
  for (int64_t i = 0; i < batch_size; ++i) {
    const size_t k = size_t(order_[size_t(index + i)]);
    r.user[size_t(i)] = train_.user[k];
    r.item[size_t(i)] = train_.item[k];
    r.label[size_t(i)] = train_.label[k];
  }
  return r.to_map();
}

TensorMap NcfFileSource::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0 && start + count <= test_.rows(), "ncf-files ", dir_,
            ": evaluation rows [", start, ", ", start + count, ") outside the ", test_.rows(),
            " test rows");
  NcfRows r;
  for (int64_t i = start; i < start + count; ++i) {
    r.user.push_back(test_.user[size_t(i)]);
    r.item.push_back(test_.item[size_t(i)]);
    r.label.push_back(test_.label[size_t(i)]);
  }
  return r.to_map();
}

}  // namespace aim::data
