#include "data/dien_synthetic.h"

#include <sstream>

#include "data/philox_draw.h"
#include "tensor/check.h"
#include "tensor/philox.h"

namespace aim::data {
namespace {

constexpr uint64_t kTagNoclk = 20;  // Philox key tag of the no-click draws (DinSynthetic uses <20)

}  // namespace

DienSynthetic::DienSynthetic(const DienSyntheticConfig& cfg) : cfg_(cfg), base_(cfg.base) {
  AIM_CHECK(cfg.base.n_items >= 2, "DienSynthetic: need at least 2 items to sample non-clicks");
}

DienExample DienSynthetic::example(Stream s, int64_t index, double* p) const {
  DienExample e;
  e.rec = base_.example(s, index, p);
  const int64_t L = int64_t(e.rec.hist_item.size()), n = cfg_.base.n_items;
  const uint64_t key = philox_key(cfg_.base.seed, kTagNoclk + uint64_t(s));
  e.noclk_item.resize(size_t(L));
  e.noclk_cate.resize(size_t(L));
  const std::vector<int64_t>& cate = base_.item_to_cate();
  for (int64_t t = 0; t < L; ++t) {
    // Uniform over the n - 1 items other than the clicked one.
    const philox::U4 w = philox::block_words(key, (uint64_t(index) << 12) + uint64_t(t));
    int64_t it = int64_t((uint64_t(w.x) * uint64_t(n - 1)) >> 32);
    if (it >= e.rec.hist_item[size_t(t)]) ++it;
    e.noclk_item[size_t(t)] = it;
    e.noclk_cate[size_t(t)] = cate[size_t(it)];
  }
  return e;
}

TensorMap DienSynthetic::batch(Stream s, int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0, "DienSynthetic::batch: bad range [", start, ", ",
            start + count, ")");
  std::vector<RecExample> rec;
  std::vector<DienExample> ex;
  ex.reserve(size_t(count));
  rec.reserve(size_t(count));
  for (int64_t i = 0; i < count; ++i) {
    ex.push_back(example(s, start + i));
    rec.push_back(ex.back().rec);
  }
  TensorMap m = collate(rec).to_map();
  const int64_t T = m.at("hist_item").size(1);
  std::vector<int64_t> ni(size_t(count * T), 0), nc(size_t(count * T), 0);
  for (int64_t b = 0; b < count; ++b)
    for (size_t t = 0; t < ex[size_t(b)].noclk_item.size(); ++t) {
      ni[size_t(b * T) + t] = ex[size_t(b)].noclk_item[t];
      nc[size_t(b * T) + t] = ex[size_t(b)].noclk_cate[t];
    }
  m["noclk_item"] = Tensor::from_vector(ni, {count, T});
  m["noclk_cate"] = Tensor::from_vector(nc, {count, T});
  return m;
}

std::string DienSyntheticSource::describe() const {
  const DinSyntheticConfig& c = gen_.config().base;
  std::ostringstream os;
  os << "dien-synthetic (seed " << c.seed << ", " << c.n_users << " users, " << c.n_items
     << " items, " << c.n_cates << " categories, histories 1.." << c.max_hist_len << ")";
  return os.str();
}

std::string DienSyntheticSource::fingerprint() const {
  const DinSyntheticConfig& c = gen_.config().base;
  std::ostringstream os;
  os << "dien-synthetic:seed=" << c.seed << ",users=" << c.n_users << ",items=" << c.n_items
     << ",cates=" << c.n_cates << ",hist=" << c.max_hist_len << ",fav=" << c.max_fav << ",a=" << c.a
     << ",b=" << c.b << ",heldout=" << c.heldout_size;
  return os.str();
}

TensorMap DienSyntheticSource::next(int64_t batch_size) {
  AIM_CHECK(batch_size > 0, "DienSyntheticSource::next: batch_size must be > 0, got ", batch_size);
  TensorMap m = gen_.batch(DienSynthetic::Stream::train, pos_, batch_size);
  pos_ += batch_size;
  return m;
}

TensorMap DienSyntheticSource::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0 && start + count <= eval_size(), "dien-synthetic: evaluation [",
            start, ", ", start + count, ") outside the held-out set of ", eval_size());
  return gen_.batch(DienSynthetic::Stream::heldout, start, count);
}

}  // namespace aim::data
