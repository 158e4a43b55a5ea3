#include "data/dien_files.h"

#include <algorithm>
#include <fstream>
#include <numeric>
#include <sstream>
#include <unordered_map>

#include "data/philox_draw.h"
#include "tensor/check.h"
#include "tensor/philox.h"

namespace aim::data {
namespace {

constexpr uint64_t kTagNoclk = 30;  // Philox key tag of the no-click draws: + stream, epoch << 8
constexpr int64_t kMaxAttempts = 256;

[[noreturn]] void bad(const std::string& path, int64_t line, const std::string& what) {
  throw Error(str(path, ":", line, ": ", what));
}

// Calls f(line_number, fields) for each line of a TAB-separated file with at least `min_fields`
// fields.
template <class F>
void for_each_tsv_line(const std::string& path, size_t min_fields, const char* layout, F f) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, 0, "cannot open for reading");
  std::string line;
  std::vector<std::string> fields;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    fields.clear();
    size_t start = 0;
    for (;;) {
      const size_t k = line.find('\t', start);
      fields.push_back(line.substr(start, k == std::string::npos ? std::string::npos : k - start));
      if (k == std::string::npos) break;
      start = k + 1;
    }
    if (fields.size() < min_fields)
      bad(path, n,
          str("expected ", min_fields, " tab-separated fields (", layout, "), got ",
              fields.size()));  // layout: the fields read, then any ignored in [brackets]
    f(n, fields);
  }
  if (in.bad()) bad(path, n, "read error");
  if (n == 0) bad(path, 0, "empty file");
}

uint64_t noclk_key(uint64_t seed, int stream, int64_t epoch) {
  return philox_key(seed, (uint64_t(epoch) << 8) | (kTagNoclk + stream));
}

}  // namespace

DienNegativeSampler::DienNegativeSampler(const std::string& item_info,
                                         const std::string& reviews_info, const Vocab& mid,
                                         const Vocab& cat)
    : reviews_path_(reviews_info) {
  // item-info: the first line of an asin decides its category (the reference's meta_map).
  std::unordered_map<std::string, std::string> first;
  for_each_tsv_line(item_info, 2, "asin category",
                    [&](int64_t, const std::vector<std::string>& f) { first.emplace(f[0], f[1]); });
  item_cate_.assign(size_t(mid.size()), -1);
  for (const auto& [asin, c] : first)
    if (mid.contains(asin)) item_cate_[size_t(mid.id(asin))] = int32_t(cat.id(c));
  for (int32_t& c : item_cate_)
    if (c < 0) {
      c = 0;
      ++missing_cate_;
    }
  size_t unknown = 0;
  for_each_tsv_line(reviews_info, 2, "user asin [rating unixtime]",
                    [&](int64_t, const std::vector<std::string>& f) {
                      unknown += mid.contains(f[1]) ? 0 : 1;
                      occ_.push_back(int32_t(mid.id(f[1])));
                    });
  // Every item unknown (id 0): the vocabulary is another data set's, not reviews-info's fault.
  AIM_CHECK(unknown < occ_.size(), reviews_info, ": none of its ", occ_.size(),
            " reviewed items is in the item vocabulary (mid_voc, ", mid.size(),
            " items): the vocabulary files do not belong to this data");
  AIM_CHECK(occ_.size() < (uint64_t(1) << 32), reviews_info, ": ", occ_.size(),
            " review lines, at most 2^32 supported");
  const bool two = std::any_of(occ_.begin(), occ_.end(), [&](int32_t m) { return m != occ_[0]; });
  AIM_CHECK(two, reviews_info,
            ": every review names the same item; no-click items need at least two distinct items");
}

int64_t DienNegativeSampler::draw(uint64_t key, int64_t index, int64_t t, int64_t k,
                                  int64_t positive) const {
  const uint64_t base = (uint64_t(index) << 28) | (uint64_t(t) << 16) | (uint64_t(k) << 8);
  for (int64_t a = 0; a < kMaxAttempts; ++a) {
    const philox::U4 w = philox::block_words(key, base | uint64_t(a));
    const int64_t m = occ_[size_t((uint64_t(w.x) * occ_.size()) >> 32)];
    if (m != positive) return m;
  }
  throw Error(str(reviews_path_, ": ", kMaxAttempts, " draws in a row gave the clicked item ",
                  positive, "; the review occurrences are too concentrated on one item"));
}

DienFileSource::DienFileSource(const std::string& dir, uint64_t seed, const DienFilesOptions& opt)
    : dir_(dir),
      seed_(seed),
      opt_(opt),
      train_(dir + "/local_train_splitByUser", Vocab::load(dir + "/uid_voc.txt"),
             Vocab::load(dir + "/mid_voc.txt"), Vocab::load(dir + "/cat_voc.txt"),
             opt.max_hist_len),
      test_(dir + "/local_test_splitByUser", train_),
      sampler_(dir + "/item-info", dir + "/reviews-info", train_.mid_vocab(), train_.cat_vocab()) {
  AIM_CHECK(opt.max_hist_len >= 1 && opt.max_hist_len < 4096, "dien files: max_hist_len ",
            opt.max_hist_len, " must be in [1, 4095]");
  AIM_CHECK(opt.negatives >= 1 && opt.negatives < 256, "dien files: negatives ", opt.negatives,
            " must be in [1, 255]");
  AIM_CHECK(opt.buffer_batches >= 1, "dien files: buffer_batches must be >= 1");
  AIM_CHECK(train_.size() > 0, dir, "/local_train_splitByUser: no samples");
  AIM_CHECK(test_.size() > 0, dir, "/local_test_splitByUser: no samples");
}

std::string DienFileSource::describe() const {
  std::ostringstream os;
  os << "dien-files " << dir_ << " (" << train_.size() << " train, " << test_.size()
     << " test samples; " << train_.uid_vocab().size() << " users, " << train_.mid_vocab().size()
     << " items, " << train_.cat_vocab().size() << " categories; " << sampler_.occurrences()
     << " review occurrences, " << opt_.negatives << " no-clicks per position";
  if (sampler_.items_without_category() > 0)
    os << "; " << sampler_.items_without_category() << " items without item-info (category 0)";
  os << ")";
  return os.str();
}

std::string DienFileSource::fingerprint() const {
  std::ostringstream os;
  os << "dien-files:" << dir_ << ",train=" << train_.size() << ",test=" << test_.size()
     << ",voc=" << train_.uid_vocab().size() << "/" << train_.mid_vocab().size() << "/"
     << train_.cat_vocab().size() << ",reviews=" << sampler_.occurrences() << ",seed=" << seed_
     << ",maxlen=" << opt_.max_hist_len << ",neg=" << opt_.negatives
     << ",buffer=" << opt_.buffer_batches;
  return os.str();
}

std::vector<int64_t> DienFileSource::serving_order(int64_t batch_size) const {
  const int64_t n = train_.size(), chunk = opt_.buffer_batches * batch_size;
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  for (int64_t c = 0; c < n; c += chunk) {
    // Longest (untruncated) history first, as the reference pops its length-sorted buffer.
    std::stable_sort(
        order.begin() + c, order.begin() + std::min(n, c + chunk),
        [&](int64_t a, int64_t b) { return train_.file_hist_len(a) > train_.file_hist_len(b); });
  }
  return order;
}

TensorMap DienFileSource::gather(const DienTsvReader& r, const int64_t* idx, int64_t count,
                                 uint64_t key) const {
  std::vector<RecExample> ex;
  ex.reserve(size_t(count));
  for (int64_t i = 0; i < count; ++i) ex.push_back(r.examples()[size_t(idx[i])]);
  TensorMap m = collate(ex).to_map();
  const int64_t T = m.at("hist_item").size(1), K = opt_.negatives;
  std::vector<int64_t> all_i(size_t(count * T * K), 0), all_c(size_t(count * T * K), 0);
  std::vector<int64_t> first_i(size_t(count * T), 0), first_c(size_t(count * T), 0);
  for (int64_t b = 0; b < count; ++b) {
    const RecExample& e = ex[size_t(b)];
    for (int64_t t = 0; t < int64_t(e.hist_item.size()); ++t)
      for (int64_t k = 0; k < K; ++k) {
        const int64_t it = sampler_.draw(key, idx[b], t, k, e.hist_item[size_t(t)]);
        all_i[size_t((b * T + t) * K + k)] = it;
        all_c[size_t((b * T + t) * K + k)] = sampler_.category(it);
      }
    for (int64_t t = 0; t < T; ++t) {
      first_i[size_t(b * T + t)] = all_i[size_t((b * T + t) * K)];
      first_c[size_t(b * T + t)] = all_c[size_t((b * T + t) * K)];
    }
  }
  m["noclk_item"] = Tensor::from_vector(first_i, {count, T});
  m["noclk_cate"] = Tensor::from_vector(first_c, {count, T});
  m["noclk_items"] = Tensor::from_vector(all_i, {count, T, K});
  m["noclk_cates"] = Tensor::from_vector(all_c, {count, T, K});
  return m;
}

TensorMap DienFileSource::next(int64_t batch_size) {
  const int64_t n = train_.size();
  AIM_CHECK(batch_size > 0 && batch_size <= n, "dien files ", dir_, ": batch size ", batch_size,
            " must be in [1, ", n, "] (training samples)");
  const int64_t per_epoch = (n / batch_size) * batch_size;  // last partial batch skipped
  const int64_t epoch = pos_ / per_epoch, index = pos_ % per_epoch;
  AIM_CHECK(index % batch_size == 0, "dien files ", dir_, ": stream position ", pos_,
            " is not a multiple of the batch size ", batch_size,
            " (resume with the batch size of the checkpoint)");
  if (order_batch_ != batch_size) {
    order_ = serving_order(batch_size);
    order_batch_ = batch_size;
  }
  pos_ += batch_size;
  return gather(train_, order_.data() + index, batch_size, noclk_key(seed_, 0, epoch));
}

TensorMap DienFileSource::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0 && start + count <= eval_size(), "dien files ", dir_,
            ": evaluation [", start, ", ", start + count, ") outside the test file's ", eval_size(),
            " samples");
  std::vector<int64_t> idx(static_cast<size_t>(count));
  std::iota(idx.begin(), idx.end(), start);
  return gather(test_, idx.data(), count, noclk_key(seed_, 1, 0));
}

}  // namespace aim::data
