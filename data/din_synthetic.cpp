#include "data/din_synthetic.h"

#include <cmath>

#include "data/philox_draw.h"
#include "tensor/check.h"
#include "tensor/philox.h"

namespace aim::data {
namespace {

// Tags of the independent Philox keys derived from the seed.
constexpr uint64_t kTagCates = 10, kTagUsers = 11, kTagUserBias = 12, kTagItemBias = 13;
constexpr int kSampleBlockShift = 20;  // each sample owns 2^20 counter blocks of its stream

}  // namespace

DinSynthetic::DinSynthetic(const DinSyntheticConfig& cfg) : cfg_(cfg) {
  AIM_CHECK(cfg_.n_users > 0 && cfg_.n_cates > 0 && cfg_.n_items >= cfg_.n_cates,
            "DinSynthetic: need n_users > 0 and n_items >= n_cates > 0");
  AIM_CHECK(cfg_.max_hist_len >= 1 && cfg_.max_hist_len <= 100000,
            "DinSynthetic: max_hist_len must be in 1..100000");
  AIM_CHECK(cfg_.max_fav >= 1 && cfg_.heldout_size >= 0, "DinSynthetic: bad max_fav/heldout_size");
  // Items 0..n_cates-1 get category = id (so no category is empty); the rest uniform.
  item_cate_.resize(size_t(cfg_.n_items));
  PhiloxDraw d(key(kTagCates), 0);
  for (int64_t i = 0; i < cfg_.n_items; ++i)
    item_cate_[size_t(i)] = i < cfg_.n_cates ? i : d.below(cfg_.n_cates);
  cate_off_.assign(size_t(cfg_.n_cates + 1), 0);
  for (int64_t c : item_cate_) ++cate_off_[size_t(c + 1)];
  for (int64_t c = 0; c < cfg_.n_cates; ++c) cate_off_[size_t(c + 1)] += cate_off_[size_t(c)];
  cate_items_.resize(size_t(cfg_.n_items));
  std::vector<int64_t> fill(cate_off_.begin(), cate_off_.end() - 1);
  for (int64_t i = 0; i < cfg_.n_items; ++i)
    cate_items_[size_t(fill[size_t(item_cate_[size_t(i)])]++)] = i;
}

uint64_t DinSynthetic::key(uint64_t tag) const { return philox_key(cfg_.seed, tag); }

std::vector<int64_t> DinSynthetic::favourites(int64_t uid) const {
  PhiloxDraw d(key(kTagUsers), uint64_t(uid) << 4);
  std::vector<int64_t> fav(size_t(1 + d.below(cfg_.max_fav)));
  for (int64_t& c : fav) c = d.below(cfg_.n_cates);
  return fav;
}

Tensor DinSynthetic::cate_table() const { return Tensor::from_vector(item_cate_, {cfg_.n_items}); }

RecExample DinSynthetic::example(Stream s, int64_t index, double* p) const {
  AIM_CHECK(index >= 0, "DinSynthetic: negative sample index ", index);
  PhiloxDraw d(key(uint64_t(s)), uint64_t(index) << kSampleBlockShift);
  auto item_in = [&](int64_t c) {
    const int64_t lo = cate_off_[size_t(c)], n = cate_off_[size_t(c + 1)] - lo;
    return cate_items_[size_t(lo + d.below(n))];
  };
  RecExample e;
  e.uid = d.below(cfg_.n_users);
  const int64_t L = 1 + d.below(cfg_.max_hist_len);
  const std::vector<int64_t> fav = favourites(e.uid);
  e.hist_item.resize(size_t(L));
  e.hist_cate.resize(size_t(L));
  for (int64_t t = 0; t < L; ++t) {
    int64_t it;
    if (d.unit() < cfg_.taste_prob)
      it = item_in(fav[size_t(d.below(int64_t(fav.size())))]);
    else
      it = d.below(cfg_.n_items);
    e.hist_item[size_t(t)] = it;
    e.hist_cate[size_t(t)] = item_cate_[size_t(it)];
  }
  if (d.unit() < cfg_.cand_from_hist)
    e.item = item_in(e.hist_cate[size_t(d.below(L))]);
  else
    e.item = d.below(cfg_.n_items);
  e.cate = item_cate_[size_t(e.item)];
  int64_t same = 0;
  for (int64_t c : e.hist_cate) same += c == e.cate;
  const double frac = double(same) / double(L);
  const double logit = cfg_.a * frac + cfg_.b +
                       cfg_.user_noise * philox::normal(key(kTagUserBias), 0, uint64_t(e.uid)) +
                       cfg_.item_noise * philox::normal(key(kTagItemBias), 0, uint64_t(e.item));
  const double prob = 1.0 / (1.0 + std::exp(-logit));
  e.label = d.unit() < prob ? 1 : 0;
  if (p) *p = prob;
  return e;
}

RecBatch DinSynthetic::next(int64_t batch_size) {
  AIM_CHECK(batch_size > 0, "DinSynthetic::next: batch_size must be > 0, got ", batch_size);
  std::vector<RecExample> ex;
  ex.reserve(size_t(batch_size));
  for (int64_t i = 0; i < batch_size; ++i) ex.push_back(example(Stream::train, pos_ + i));
  pos_ += batch_size;
  return collate(ex);
}

RecBatch DinSynthetic::heldout(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0 && start + count <= cfg_.heldout_size,
            "DinSynthetic::heldout: [", start, ", ", start + count,
            ") outside the held-out set of ", cfg_.heldout_size);
  std::vector<RecExample> ex;
  ex.reserve(size_t(count));
  for (int64_t i = 0; i < count; ++i) ex.push_back(example(Stream::heldout, start + i));
  return collate(ex);
}

std::vector<double> DinSynthetic::probabilities(Stream s, int64_t start, int64_t count) const {
  std::vector<double> p(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) example(s, start + i, &p[size_t(i)]);
  return p;
}

double DinSynthetic::attainable_auc(int64_t n) const {
  AIM_CHECK(n > 1, "attainable_auc: n must be > 1");
  std::vector<double> p(static_cast<size_t>(n));
  std::vector<int64_t> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[size_t(i)] = example(Stream::heldout, i, &p[size_t(i)]).label;
  return auc(p, y);
}

}  // namespace aim::data
