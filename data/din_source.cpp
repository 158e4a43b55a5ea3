#include "data/din_source.h"

#include <sstream>

#include "tensor/check.h"

namespace aim::data {

std::string DinSyntheticSource::describe() const {
  const DinSyntheticConfig& c = gen_.config();
  std::ostringstream os;
  os << "din-synthetic (seed " << c.seed << ", " << c.n_users << " users, " << c.n_items
     << " items, " << c.n_cates << " categories, histories 1.." << c.max_hist_len << ")";
  return os.str();
}

std::string DinSyntheticSource::fingerprint() const {
  const DinSyntheticConfig& c = gen_.config();
  std::ostringstream os;
  os << "din-synthetic:seed=" << c.seed << ",users=" << c.n_users << ",items=" << c.n_items
     << ",cates=" << c.n_cates << ",hist=" << c.max_hist_len << ",fav=" << c.max_fav << ",a=" << c.a
     << ",b=" << c.b;
  return os.str();
}

DinExportSource::DinExportSource(const std::string& dir, uint64_t seed)
    : dir_(dir), seed_(seed), data_(DinExport::load(dir)) {
  AIM_CHECK(data_.size(DinSplit::Train) > 0 && data_.size(DinSplit::Test) > 0, dir,
            ": the DIN export needs training and test samples");
}

std::string DinExportSource::describe() const {
  std::ostringstream os;
  os << "din-export " << dir_ << " (" << data_.size(DinSplit::Train) << " train, "
     << data_.size(DinSplit::Test) << " test samples, shuffle seed " << seed_ << ")";
  return os.str();
}

std::string DinExportSource::fingerprint() const {
  std::ostringstream os;
  os << "din-export:train=" << data_.size(DinSplit::Train) << ",test=" << data_.size(DinSplit::Test)
     << ",items=" << data_.n_items() << ",seed=" << seed_;
  return os.str();
}

TensorMap DinExportSource::next(int64_t batch_size) {
  const int64_t n = data_.size(DinSplit::Train);
  AIM_CHECK(batch_size > 0 && batch_size <= n, "din-export ", dir_, ": batch size ", batch_size,
            " must be in [1, ", n, "] (training samples)");
  const int64_t per_epoch = (n / batch_size) * batch_size;  // last partial batch skipped
  const int64_t epoch = pos_ / per_epoch, index = pos_ % per_epoch;
  AIM_CHECK(index % batch_size == 0, "din-export ", dir_, ": stream position ", pos_,
            " is not a multiple of the batch size ", batch_size,
            " (resume with the batch size of the checkpoint)");
  if (epoch != order_epoch_) {
    order_ = epoch_order(n, seed_, epoch);
    order_epoch_ = epoch;
  }
  pos_ += batch_size;
  return data_.gather(DinSplit::Train, order_, index, batch_size).to_map();
}

}  // namespace aim::data
