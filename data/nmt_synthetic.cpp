// NmtSyntheticSource (data/nmt_synthetic.h).
#include "data/nmt_synthetic.h"

#include <algorithm>
#include <numeric>

#include "data/philox_draw.h"
#include "tensor/check.h"

namespace aim::data {

namespace {
constexpr uint64_t kTagMap = 1, kTagBucket = 2, kTagTrain = 3, kTagEval = 4;
}

NmtSyntheticSource::NmtSyntheticSource(const NmtSyntheticConfig& cfg) : cfg_(cfg) {
  AIM_CHECK(cfg.vocab > 3, "nmt synthetic: vocab must exceed the 3 special tokens, got ",
            cfg.vocab);
  AIM_CHECK(cfg.min_len >= 1 && cfg.max_len >= cfg.min_len,
            "nmt synthetic: need 1 <= min_len <= max_len, got ", cfg.min_len, " and ", cfg.max_len);
  AIM_CHECK(cfg.buckets >= 1, "nmt synthetic: buckets must be >= 1, got ", cfg.buckets);
  map_.resize(size_t(cfg.vocab));
  std::iota(map_.begin(), map_.end(), int64_t(0));
  PhiloxDraw d(philox_key(cfg.seed, kTagMap), 0);
  for (int64_t i = cfg.vocab - 1; i > 3; --i)  // Fisher-Yates over the content tokens
    std::swap(map_[size_t(i)], map_[size_t(3 + d.below(i - 2))]);
}

std::string NmtSyntheticSource::describe() const {
  return "nmt-synthetic seed " + std::to_string(cfg_.seed) + " (vocab " +
         std::to_string(cfg_.vocab) + ", lengths " + std::to_string(cfg_.min_len) + ".." +
         std::to_string(cfg_.max_len) + ", reversal with a vocabulary map)";
}

std::string NmtSyntheticSource::fingerprint() const {
  return "nmt-synthetic:" + std::to_string(cfg_.seed) + ":" + std::to_string(cfg_.vocab) + ":" +
         std::to_string(cfg_.min_len) + ":" + std::to_string(cfg_.max_len) + ":" +
         std::to_string(cfg_.buckets);
}

std::vector<int64_t> NmtSyntheticSource::target_of(const std::vector<int64_t>& source) const {
  std::vector<int64_t> t(source.rbegin(), source.rend());
  for (int64_t& x : t) {
    AIM_CHECK(x >= 0 && x < cfg_.vocab, "nmt synthetic: token ", x, " outside the vocabulary");
    x = map_[size_t(x)];
  }
  return t;
}

namespace {

std::vector<int64_t> draw_sentence(uint64_t key, uint64_t block, int64_t lo, int64_t hi,
                                   int64_t vocab) {
  PhiloxDraw d(key, block * 64);  // 64 blocks (256 words) per sample: up to 255 tokens
  const int64_t len = lo + d.below(hi - lo + 1);
  std::vector<int64_t> s(static_cast<size_t>(len));
  for (int64_t& x : s) x = 3 + d.below(vocab - 3);
  return s;
}

}  // namespace

TensorMap nmt_pairs_to_batch(const std::vector<std::vector<int64_t>>& sources,
                             const std::vector<std::vector<int64_t>>& targets) {
  AIM_CHECK(sources.size() == targets.size() && !sources.empty(),
            "nmt batch: need as many targets as sources (at least one), got ", sources.size(),
            " and ", targets.size());
  const int64_t B = int64_t(sources.size());
  int64_t S = 1, T = 1;
  for (int64_t b = 0; b < B; ++b) {
    AIM_CHECK(!sources[size_t(b)].empty(), "nmt batch: source sentence ", b, " is empty");
    S = std::max<int64_t>(S, int64_t(sources[size_t(b)].size()));
    T = std::max<int64_t>(T, int64_t(targets[size_t(b)].size()) + 1);
  }
  std::vector<int64_t> src(size_t(B * S), NmtSyntheticSource::kEos), slen(static_cast<size_t>(B)),
      tin(size_t(B * T), NmtSyntheticSource::kEos), tout(size_t(B * T), NmtSyntheticSource::kEos),
      tlen(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const auto& s = sources[size_t(b)];
    const auto& t = targets[size_t(b)];
    std::copy(s.begin(), s.end(), src.begin() + b * S);
    slen[size_t(b)] = int64_t(s.size());
    tin[size_t(b * T)] = NmtSyntheticSource::kSos;
    std::copy(t.begin(), t.end(), tin.begin() + b * T + 1);
    std::copy(t.begin(), t.end(), tout.begin() + b * T);
    tlen[size_t(b)] = int64_t(t.size()) + 1;
  }
  return {{"source", Tensor::from_vector(src, {B, S})},
          {"source_length", Tensor::from_vector(slen, {B})},
          {"target_input", Tensor::from_vector(tin, {B, T})},
          {"target_output", Tensor::from_vector(tout, {B, T})},
          {"target_length", Tensor::from_vector(tlen, {B})}};
}

TensorMap NmtSyntheticSource::next(int64_t batch_size) {
  AIM_CHECK(batch_size >= 1, "nmt synthetic: batch size must be >= 1, got ", batch_size);
  PhiloxDraw bd(philox_key(cfg_.seed, kTagBucket), uint64_t(pos_));
  const int64_t k = bd.below(cfg_.buckets), span = cfg_.max_len - cfg_.min_len + 1;
  const int64_t lo = cfg_.min_len + span * k / cfg_.buckets,
                hi = std::max(lo, cfg_.min_len + span * (k + 1) / cfg_.buckets - 1);
  std::vector<std::vector<int64_t>> src, tgt;
  const uint64_t key = philox_key(cfg_.seed, kTagTrain);
  for (int64_t j = 0; j < batch_size; ++j) {
    src.push_back(draw_sentence(key, uint64_t(pos_ + j), lo, hi, cfg_.vocab));
    tgt.push_back(target_of(src.back()));
  }
  pos_ += batch_size;
  return nmt_pairs_to_batch(src, tgt);
}

TensorMap NmtSyntheticSource::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count >= 1 && start + count <= cfg_.eval_size,
            "nmt synthetic: evaluation samples [", start, ", ", start + count,
            ") outside the set of ", cfg_.eval_size);
  std::vector<std::vector<int64_t>> src, tgt;
  const uint64_t key = philox_key(cfg_.seed, kTagEval);
  for (int64_t j = start; j < start + count; ++j) {
    src.push_back(draw_sentence(key, uint64_t(j), cfg_.min_len, cfg_.max_len, cfg_.vocab));
    tgt.push_back(target_of(src.back()));
  }
  return nmt_pairs_to_batch(src, tgt);
}

}  // namespace aim::data
