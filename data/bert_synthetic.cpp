#include "data/bert_synthetic.h"

#include <algorithm>
#include <cmath>

#include "data/philox_draw.h"
#include "tensor/check.h"

namespace aim::data {
namespace {

constexpr uint64_t kTag = 0xBE27;           // the stream of the samples under the seed
constexpr int64_t kEvalOffset = 1LL << 40;  // held-out samples: kEvalOffset + j
constexpr uint64_t kBlocksPerSample = 1 << 12;

// Pronounceable, distinct 4- and 6-letter words: consonant-vowel syllables.
std::string word(int64_t i) {
  static const char* cons = "bdfgklmnprstvz";
  static const char* vows = "aeiou";
  auto syl = [&](int64_t k) { return std::string(1, cons[k / 5]) + vows[k % 5]; };  // 70
  std::string w = syl(i % 70) + syl((i / 70) % 70);
  if (i >= 70 * 70) w += syl((i / 4900) % 70);
  return w;
}

}  // namespace

BertPretrainSynthetic::BertPretrainSynthetic(BertSyntheticConfig c) : c_(c) {
  AIM_CHECK(c_.seq_len >= 16, "bert synthetic: seq_len must be >= 16, got ", c_.seq_len);
  AIM_CHECK(c_.topics >= 2 && c_.nouns_per_topic >= 2 && c_.adjectives_per_topic >= 1 &&
                c_.verbs_per_topic >= 1,
            "bert synthetic: at least 2 topics, 2 nouns, 1 adjective and 1 verb per topic");
  AIM_CHECK(c_.mask_prob > 0 && c_.mask_prob < 1, "bert synthetic: mask_prob must be in (0, 1)");
  AIM_CHECK(c_.epoch_size > 0 && c_.eval_size > 0, "bert synthetic: epoch and eval sizes > 0");
  vocab_ = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "."};
  period_ = 5;
  det_ = int64_t(vocab_.size());  // det(gender, definite)
  int64_t w = 0;
  for (int k = 0; k < 4; ++k) vocab_.push_back(word(w++));
  first_topic_word_ = int64_t(vocab_.size());
  words_per_topic_ = c_.nouns_per_topic + 2 * c_.adjectives_per_topic + c_.verbs_per_topic;
  for (int64_t i = 0; i < c_.topics * words_per_topic_; ++i) vocab_.push_back(word(w++));
}

std::string BertPretrainSynthetic::describe() const {
  return str("bert-synthetic seed ", c_.seed, " (seq ", c_.seq_len, ", ", c_.topics, " topics, ",
             vocab_.size(), " tokens)");
}

std::string BertPretrainSynthetic::fingerprint() const {
  return str("bert-synthetic:", c_.seed, ":", c_.seq_len, ":", c_.topics, ":", c_.nouns_per_topic,
             ":", c_.adjectives_per_topic, ":", c_.verbs_per_topic, ":", c_.mask_prob);
}

std::vector<int64_t> BertPretrainSynthetic::sentence(int64_t topic, PhiloxDraw& d) const {
  const int64_t N = c_.nouns_per_topic, A = c_.adjectives_per_topic, V = c_.verbs_per_topic;
  const int64_t base = first_topic_word_ + topic * words_per_topic_;
  auto noun = [&](int64_t k) { return base + k; };
  auto adj = [&](int64_t k, int64_t g) { return base + N + 2 * k + g; };
  auto verb = [&](int64_t k) { return base + N + 2 * A + k; };
  auto det = [&](int64_t g, int64_t definite) { return det_ + 2 * g + definite; };
  const int64_t s = d.below(N), v = d.below(V);
  // A verb takes two objects of its topic.
  const int64_t o = d.below(2) ? (3 * v + 5) % N : (3 * v + 1) % N;
  return {det(s % 2, d.below(2)),
          adj(d.below(A), s % 2),
          noun(s),
          verb(v),
          det(o % 2, d.below(2)),
          noun(o),
          period_};
}

BertPretrainSynthetic::Sample BertPretrainSynthetic::sample(int64_t index) const {
  PhiloxDraw d(philox_key(c_.seed, kTag), uint64_t(index) * kBlocksPerSample);
  const int64_t T = c_.seq_len, budget = T - 3;
  Sample s;
  s.next_sentence_label = d.below(2);
  const int64_t ta = d.below(c_.topics);
  const int64_t tb = s.next_sentence_label ? (ta + 1 + d.below(c_.topics - 1)) % c_.topics : ta;
  // A: whole sentences up to half of the budget (at least one, truncated if it must be).
  std::vector<int64_t> a, b;
  const int64_t a_sentences = std::max<int64_t>(1, 1 + d.below(std::max<int64_t>(1, budget / 14)));
  for (int64_t k = 0; k < a_sentences && int64_t(a.size()) < budget / 2; ++k) {
    const std::vector<int64_t> t = sentence(ta, d);
    a.insert(a.end(), t.begin(), t.end());
  }
  a.resize(std::min<int64_t>(int64_t(a.size()), budget - 1));
  // B: sentences of its topic filling the rest (the last one truncated).
  while (int64_t(a.size() + b.size()) < budget) {
    const std::vector<int64_t> t = sentence(tb, d);
    b.insert(b.end(), t.begin(), t.end());
  }
  b.resize(size_t(budget - int64_t(a.size())));
  // [CLS] A [SEP] B [SEP], no padding left (the budget is filled).
  std::vector<int64_t>& ids = s.input_ids;
  ids.push_back(kCls);
  ids.insert(ids.end(), a.begin(), a.end());
  ids.push_back(kSep);
  s.token_type_ids.assign(ids.size(), 0);
  ids.insert(ids.end(), b.begin(), b.end());
  ids.push_back(kSep);
  s.token_type_ids.resize(ids.size(), 1);
  s.attention_mask.assign(ids.size(), 1);
  ids.resize(size_t(T), kPad);
  s.token_type_ids.resize(size_t(T), 0);
  s.attention_mask.resize(size_t(T), 0);
  // Masking: BERT's 15% of the word positions, 80/10/10.
  std::vector<int64_t> cand;
  for (int64_t i = 0; i < T; ++i)
    if (ids[size_t(i)] != kCls && ids[size_t(i)] != kSep && ids[size_t(i)] != kPad)
      cand.push_back(i);
  for (int64_t i = int64_t(cand.size()) - 1; i > 0; --i)
    std::swap(cand[size_t(i)], cand[size_t(d.below(i + 1))]);
  const int64_t n = std::max<int64_t>(1, std::llround(double(cand.size()) * c_.mask_prob));
  s.labels.assign(size_t(T), kIgnore);
  for (int64_t k = 0; k < n && k < int64_t(cand.size()); ++k) {
    const size_t p = size_t(cand[size_t(k)]);
    s.labels[p] = ids[p];
    const double r = d.unit();
    if (r < 0.8)
      ids[p] = kMask;
    else if (r >= 0.9)
      ids[p] = period_ + d.below(int64_t(vocab_.size()) - period_);  // a random word
  }
  return s;
}

TensorMap BertPretrainSynthetic::batch(int64_t first, int64_t count) const {
  const int64_t T = c_.seq_len;
  Tensor ids = Tensor::empty({count, T}, DType::i64), types = Tensor::empty({count, T}, DType::i64),
         mask = Tensor::empty({count, T}, DType::i64),
         labels = Tensor::empty({count, T}, DType::i64), nsp = Tensor::empty({count}, DType::i64);
#pragma omp parallel for if (count >= 16)
  for (int64_t b = 0; b < count; ++b) {
    const Sample s = sample(first + b);
    std::copy(s.input_ids.begin(), s.input_ids.end(), ids.data<int64_t>() + b * T);
    std::copy(s.token_type_ids.begin(), s.token_type_ids.end(), types.data<int64_t>() + b * T);
    std::copy(s.attention_mask.begin(), s.attention_mask.end(), mask.data<int64_t>() + b * T);
    std::copy(s.labels.begin(), s.labels.end(), labels.data<int64_t>() + b * T);
    nsp.data<int64_t>()[b] = s.next_sentence_label;
  }
  return {{"input_ids", ids},
          {"token_type_ids", types},
          {"attention_mask", mask},
          {"labels", labels},
          {"next_sentence_label", nsp}};
}

TensorMap BertPretrainSynthetic::next(int64_t batch_size) {
  AIM_CHECK(batch_size > 0, "bert synthetic: batch size must be > 0, got ", batch_size);
  TensorMap m = batch(position_, batch_size);
  position_ += batch_size;
  return m;
}

void BertPretrainSynthetic::seek(int64_t position) {
  AIM_CHECK(position >= 0 && position < kEvalOffset, "bert synthetic: cannot seek to ", position);
  position_ = position;
}

TensorMap BertPretrainSynthetic::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0 && start + count <= c_.eval_size,
            "bert synthetic: eval samples [", start, ", ", start + count, ") outside [0, ",
            c_.eval_size, ")");
  return batch(kEvalOffset + start, count);
}

}  // namespace aim::data
