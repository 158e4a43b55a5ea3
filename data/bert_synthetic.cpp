#include "data/bert_synthetic.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "data/philox_draw.h"
#include "tensor/check.h"

namespace aim::data {
namespace {

constexpr uint64_t kTag = 0xBE27;           // the stream of the samples under the seed
constexpr int64_t kEvalOffset = 1LL << 40;  // held-out samples: kEvalOffset + j
constexpr uint64_t kBlocksPerSample = 1 << 12;
constexpr int64_t kSentence = 7;  // tokens of a sentence

// Pronounceable, distinct 4- and 6-letter words: consonant-vowel syllables.
std::string word(int64_t i) {
  static const char* cons = "bdfgklmnprstvz";
  static const char* vows = "aeiou";
  auto syl = [&](int64_t k) { return std::string(1, cons[k / 5]) + vows[k % 5]; };  // 70
  std::string w = syl(i % 70) + syl((i / 70) % 70);
  if (i >= 70 * 70) w += syl((i / 4900) % 70);
  return w;
}

// Rows of i64 [count, width] tensors filled per sample.
struct Rows {
  std::vector<std::pair<std::string, Tensor>> t;
  Rows(std::initializer_list<const char*> names, int64_t count, int64_t width) {
    for (const char* n : names) t.emplace_back(n, Tensor::empty({count, width}, DType::i64));
  }
  void set(size_t k, int64_t row, const std::vector<int64_t>& v) {
    std::copy(v.begin(), v.end(), t[k].second.data<int64_t>() + row * int64_t(v.size()));
  }
};

// [CLS] a [SEP] b [SEP] padded to T: ids, token types (0 through the first [SEP]), mask.
void pack_pair(const std::vector<int64_t>& a, const std::vector<int64_t>& b, int64_t T,
               std::vector<int64_t>& ids, std::vector<int64_t>& types, std::vector<int64_t>& mask) {
  using S = BertSyntheticSource;
  ids = {S::kCls};
  ids.insert(ids.end(), a.begin(), a.end());
  ids.push_back(S::kSep);
  types.assign(ids.size(), 0);
  if (!b.empty()) {
    ids.insert(ids.end(), b.begin(), b.end());
    ids.push_back(S::kSep);
    types.resize(ids.size(), 1);
  }
  AIM_CHECK(int64_t(ids.size()) <= T, "bert synthetic: ", ids.size(), " tokens exceed seq_len ", T);
  mask.assign(ids.size(), 1);
  ids.resize(size_t(T), S::kPad);
  types.resize(size_t(T), 0);
  mask.resize(size_t(T), 0);
}

}  // namespace

// ---- the grammar -----------------------------------------------------------------------------

BertGrammar::BertGrammar(const BertSyntheticConfig& c) : c_(c) {
  AIM_CHECK(c_.topics >= 2 && c_.nouns_per_topic >= 2 && c_.adjectives_per_topic >= 1 &&
                c_.verbs_per_topic >= 1,
            "bert synthetic: at least 2 topics, 2 nouns, 1 adjective and 1 verb per topic");
  vocab_ = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "."};
  period_ = 5;
  det_ = int64_t(vocab_.size());  // det(gender, definite)
  int64_t w = 0;
  for (int k = 0; k < 4; ++k) vocab_.push_back(word(w++));
  first_topic_word_ = int64_t(vocab_.size());
  words_per_topic_ = c_.nouns_per_topic + 2 * c_.adjectives_per_topic + c_.verbs_per_topic;
  for (int64_t i = 0; i < c_.topics * words_per_topic_; ++i) vocab_.push_back(word(w++));
}

std::vector<int64_t> BertGrammar::sentence(int64_t topic, PhiloxDraw& d, int64_t subject,
                                           int64_t verb) const {
  const int64_t N = c_.nouns_per_topic, A = c_.adjectives_per_topic, V = c_.verbs_per_topic;
  const int64_t base = first_topic_word_ + topic * words_per_topic_;
  auto noun = [&](int64_t k) { return base + k; };
  auto adj = [&](int64_t k, int64_t g) { return base + N + 2 * k + g; };
  auto verb_id = [&](int64_t k) { return base + N + 2 * A + k; };
  auto det = [&](int64_t g, int64_t definite) { return det_ + 2 * g + definite; };
  const int64_t s = subject >= 0 ? subject : d.below(N), v = verb >= 0 ? verb : d.below(V);
  // A verb takes two objects of its topic.
  const int64_t o = d.below(2) ? (3 * v + 5) % N : (3 * v + 1) % N;
  return {det(s % 2, d.below(2)),
          adj(d.below(A), s % 2),
          noun(s),
          verb_id(v),
          det(o % 2, d.below(2)),
          noun(o),
          period_};
}

std::string BertGrammar::text(const int64_t* begin, const int64_t* end) const {
  std::string r;
  for (const int64_t* p = begin; p < end; ++p) {
    AIM_CHECK(*p >= 0 && *p < int64_t(vocab_.size()), "bert synthetic: token id ", *p,
              " outside the vocabulary of ", vocab_.size());
    if (!r.empty()) r += ' ';
    r += vocab_[size_t(*p)];
  }
  return r;
}

// ---- the source --------------------------------------------------------------------------------

BertSyntheticSource::BertSyntheticSource(BertSyntheticConfig c, std::string task)
    : c_(c), grammar_(c), task_(std::move(task)) {
  AIM_CHECK(c_.seq_len >= 16, "bert synthetic: seq_len must be >= 16, got ", c_.seq_len);
  AIM_CHECK(c_.epoch_size > 0 && c_.eval_size > 0, "bert synthetic: epoch and eval sizes > 0");
}

std::string BertSyntheticSource::describe() const {
  return str("bert-synthetic ", task_, " seed ", c_.seed, " (seq ", c_.seq_len, ", ", c_.topics,
             " topics, ", vocabulary().size(), " tokens)");
}

std::string BertSyntheticSource::fingerprint() const {
  return str("bert-synthetic:", task_, ":", c_.seed, ":", c_.seq_len, ":", c_.topics, ":",
             c_.nouns_per_topic, ":", c_.adjectives_per_topic, ":", c_.verbs_per_topic, ":",
             c_.mask_prob, ":", c_.num_labels, ":", c_.span_sentences_min, ":",
             c_.span_sentences_max);
}

PhiloxDraw BertSyntheticSource::draw(int64_t index) const {
  return PhiloxDraw(philox_key(c_.seed, kTag), uint64_t(index) * kBlocksPerSample);
}

TensorMap BertSyntheticSource::next(int64_t batch_size) {
  AIM_CHECK(batch_size > 0, "bert synthetic: batch size must be > 0, got ", batch_size);
  TensorMap m = batch(position_, batch_size);
  position_ += batch_size;
  return m;
}

void BertSyntheticSource::seek(int64_t position) {
  AIM_CHECK(position >= 0 && position < kEvalOffset, "bert synthetic: cannot seek to ", position);
  position_ = position;
}

TensorMap BertSyntheticSource::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0 && start + count <= c_.eval_size,
            "bert synthetic: eval samples [", start, ", ", start + count, ") outside [0, ",
            c_.eval_size, ")");
  return batch(kEvalOffset + start, count);
}

// ---- pre-training ------------------------------------------------------------------------------

BertPretrainSynthetic::BertPretrainSynthetic(BertSyntheticConfig c)
    : BertSyntheticSource(c, "pretrain") {
  AIM_CHECK(c_.mask_prob > 0 && c_.mask_prob < 1, "bert synthetic: mask_prob must be in (0, 1)");
}

BertPretrainSynthetic::Sample BertPretrainSynthetic::sample(int64_t index) const {
  PhiloxDraw d = draw(index);
  const int64_t T = c_.seq_len, budget = T - 3;
  Sample s;
  s.next_sentence_label = d.below(2);
  const int64_t ta = d.below(c_.topics);
  const int64_t tb = s.next_sentence_label ? (ta + 1 + d.below(c_.topics - 1)) % c_.topics : ta;
  // A: whole sentences up to half of the budget (at least one, truncated if it must be).
  std::vector<int64_t> a, b;
  const int64_t a_sentences =
      std::max<int64_t>(1, 1 + d.below(std::max<int64_t>(1, budget / (2 * kSentence))));
  for (int64_t k = 0; k < a_sentences && int64_t(a.size()) < budget / 2; ++k) {
    const std::vector<int64_t> t = grammar_.sentence(ta, d);
    a.insert(a.end(), t.begin(), t.end());
  }
  a.resize(std::min<int64_t>(int64_t(a.size()), budget - 1));
  // B: sentences of its topic filling the rest (the last one truncated).
  while (int64_t(a.size() + b.size()) < budget) {
    const std::vector<int64_t> t = grammar_.sentence(tb, d);
    b.insert(b.end(), t.begin(), t.end());
  }
  b.resize(size_t(budget - int64_t(a.size())));
  std::vector<int64_t>& ids = s.input_ids;
  pack_pair(a, b, T, ids, s.token_type_ids, s.attention_mask);
  // Masking: BERT's 15% of the word positions, 80/10/10.
  std::vector<int64_t> cand;
  for (int64_t i = 0; i < T; ++i)
    if (ids[size_t(i)] != kCls && ids[size_t(i)] != kSep && ids[size_t(i)] != kPad)
      cand.push_back(i);
  for (int64_t i = int64_t(cand.size()) - 1; i > 0; --i)
    std::swap(cand[size_t(i)], cand[size_t(d.below(i + 1))]);
  const int64_t n = std::max<int64_t>(1, std::llround(double(cand.size()) * c_.mask_prob));
  s.labels.assign(size_t(T), kIgnore);
  const int64_t period = grammar_.period(), V = int64_t(vocabulary().size());
  for (int64_t k = 0; k < n && k < int64_t(cand.size()); ++k) {
    const size_t p = size_t(cand[size_t(k)]);
    s.labels[p] = ids[p];
    const double r = d.unit();
    if (r < 0.8)
      ids[p] = kMask;
    else if (r >= 0.9)
      ids[p] = period + d.below(V - period);  // a random word
  }
  return s;
}

TensorMap BertPretrainSynthetic::batch(int64_t first, int64_t count) const {
  const int64_t T = c_.seq_len;
  Rows r({"input_ids", "token_type_ids", "attention_mask", "labels"}, count, T);
  Tensor nsp = Tensor::empty({count}, DType::i64);
#pragma omp parallel for if (count >= 16)
  for (int64_t b = 0; b < count; ++b) {
    const Sample s = sample(first + b);
    r.set(0, b, s.input_ids), r.set(1, b, s.token_type_ids), r.set(2, b, s.attention_mask);
    r.set(3, b, s.labels);
    nsp.data<int64_t>()[b] = s.next_sentence_label;
  }
  TensorMap m(r.t.begin(), r.t.end());
  m["next_sentence_label"] = nsp;
  return m;
}

// ---- spans -------------------------------------------------------------------------------------

BertSpanSynthetic::BertSpanSynthetic(BertSyntheticConfig c) : BertSyntheticSource(c, "squad") {
  AIM_CHECK(c_.seq_len >= 4 + 3 + kSentence,
            "bert synthetic span task: seq_len must be >= ", 4 + 3 + kSentence, ", got ",
            c_.seq_len);
  AIM_CHECK(c_.span_sentences_min >= 1 && c_.span_sentences_min <= c_.span_sentences_max,
            "bert synthetic span task: context sentences must satisfy 1 <= min <= max, got ",
            c_.span_sentences_min, "..", c_.span_sentences_max);
}

BertSpanSynthetic::Sample BertSpanSynthetic::sample(int64_t index) const {
  PhiloxDraw d = draw(index);
  const int64_t T = c_.seq_len, N = c_.nouns_per_topic, V = c_.verbs_per_topic;
  const int64_t topic = d.below(c_.topics);
  // Whole sentences after [CLS] question(4) [SEP] ... [SEP], each with its own subject noun and
  // its own verb: either identifies the sentence the question copies.
  const int64_t most = std::min({c_.span_sentences_max, (T - 7) / kSentence, N, V});
  const int64_t least = std::min(c_.span_sentences_min, most);
  const int64_t n = least + d.below(most - least + 1);
  std::vector<int64_t> subjects(static_cast<size_t>(N)), verbs(static_cast<size_t>(V));
  for (int64_t i = 0; i < N; ++i) subjects[size_t(i)] = i;
  for (int64_t i = 0; i < V; ++i) verbs[size_t(i)] = i;
  std::vector<int64_t> context;
  for (int64_t k = 0; k < n; ++k) {  // partial Fisher-Yates draws of n subjects and n verbs
    std::swap(subjects[size_t(k)], subjects[size_t(k + d.below(N - k))]);
    std::swap(verbs[size_t(k)], verbs[size_t(k + d.below(V - k))]);
    const std::vector<int64_t> t =
        grammar_.sentence(topic, d, subjects[size_t(k)], verbs[size_t(k)]);
    context.insert(context.end(), t.begin(), t.end());
  }
  const int64_t asked = d.below(n);
  const int64_t* sent = context.data() + asked * kSentence;
  const std::vector<int64_t> question(sent, sent + 4);  // DET ADJ NOUN VERB
  Sample s;
  pack_pair(question, context, T, s.input_ids, s.token_type_ids, s.attention_mask);
  s.start_position = 1 + 4 + 1 + asked * kSentence + 4;  // the object's determiner
  s.end_position = s.start_position + 1;                 // and noun
  return s;
}

TensorMap BertSpanSynthetic::batch(int64_t first, int64_t count) const {
  const int64_t T = c_.seq_len;
  Rows r({"input_ids", "token_type_ids", "attention_mask"}, count, T);
  Tensor start = Tensor::empty({count}, DType::i64), end = Tensor::empty({count}, DType::i64);
#pragma omp parallel for if (count >= 16)
  for (int64_t b = 0; b < count; ++b) {
    const Sample s = sample(first + b);
    r.set(0, b, s.input_ids), r.set(1, b, s.token_type_ids), r.set(2, b, s.attention_mask);
    start.data<int64_t>()[b] = s.start_position;
    end.data<int64_t>()[b] = s.end_position;
  }
  TensorMap m(r.t.begin(), r.t.end());
  m["start_positions"] = start;
  m["end_positions"] = end;
  return m;
}

// ---- topics ------------------------------------------------------------------------------------

BertTopicSynthetic::BertTopicSynthetic(BertSyntheticConfig c) : BertSyntheticSource(c, "classify") {
  AIM_CHECK(c_.num_labels >= 2 && c_.num_labels <= c_.topics,
            "bert synthetic classification: num_labels must be in [2, topics = ", c_.topics,
            "], got ", c_.num_labels);
}

TensorMap BertTopicSynthetic::batch(int64_t first, int64_t count) const {
  const int64_t T = c_.seq_len;
  Rows r({"input_ids", "token_type_ids", "attention_mask"}, count, T);
  Tensor labels = Tensor::empty({count}, DType::i64);
#pragma omp parallel for if (count >= 16)
  for (int64_t b = 0; b < count; ++b) {
    PhiloxDraw d = draw(first + b);
    const int64_t topic = d.below(c_.topics);
    const int64_t n = 1 + d.below(std::max<int64_t>(1, (T - 2) / kSentence));
    std::vector<int64_t> text, ids, types, mask;
    for (int64_t k = 0; k < n; ++k) {
      const std::vector<int64_t> t = grammar_.sentence(topic, d);
      text.insert(text.end(), t.begin(), t.end());
    }
    pack_pair(text, {}, T, ids, types, mask);
    r.set(0, b, ids), r.set(1, b, types), r.set(2, b, mask);
    labels.data<int64_t>()[b] = topic * c_.num_labels / c_.topics;
  }
  TensorMap m(r.t.begin(), r.t.end());
  m["labels"] = labels;
  return m;
}

}  // namespace aim::data
