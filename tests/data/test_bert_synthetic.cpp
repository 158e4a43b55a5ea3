// data/bert_synthetic (BERT pre-training data from a grammar): layout of [CLS] A [SEP] B [SEP],
// determinism, BERT's masking rates, balanced next-sentence labels, grammatical agreement (what
// makes masked tokens predictable), the held-out set and resuming.
#include <gtest/gtest.h>

#include <set>

#include "data/bert_synthetic.h"
#include "tensor/check.h"

namespace aim::data {
namespace {

using S = BertPretrainSynthetic;

TEST(BertSynthetic, LayoutOfEverySample) {
  BertSyntheticConfig c;
  c.seq_len = 64;
  const S src(c);
  for (int64_t i = 0; i < 200; ++i) {
    const S::Sample s = src.sample(i);
    ASSERT_EQ(s.input_ids.size(), 64u);
    EXPECT_EQ(s.input_ids[0], S::kCls);
    int seps = 0;
    int64_t first_sep = -1;
    for (int64_t t = 0; t < 64; ++t) {
      const int64_t id = s.input_ids[size_t(t)];
      EXPECT_GE(id, 0);
      EXPECT_LT(id, int64_t(src.vocabulary().size()));
      if (id == S::kSep) {
        if (seps++ == 0) first_sep = t;
      }
      // Segment 0 up to the first [SEP], 1 after; every position is real (the budget is filled).
      EXPECT_EQ(s.token_type_ids[size_t(t)], first_sep < 0 || t == first_sep ? 0 : 1) << t;
      EXPECT_EQ(s.attention_mask[size_t(t)], 1);
      if (s.labels[size_t(t)] != S::kIgnore) {
        EXPECT_NE(s.labels[size_t(t)], S::kCls);
        EXPECT_NE(s.labels[size_t(t)], S::kSep);
      }
    }
    EXPECT_EQ(seps, 2) << "sample " << i;
    EXPECT_EQ(s.input_ids[63], S::kSep);
    EXPECT_TRUE(s.next_sentence_label == 0 || s.next_sentence_label == 1);
  }
}

TEST(BertSynthetic, MaskingRatesAndBalancedLabels) {
  BertSyntheticConfig c;
  const S src(c);
  int64_t predicted = 0, words = 0, masked = 0, kept = 0, nsp = 0;
  const int64_t n = 2000;
  for (int64_t i = 0; i < n; ++i) {
    const S::Sample s = src.sample(i);
    nsp += s.next_sentence_label;
    for (size_t t = 0; t < s.input_ids.size(); ++t) {
      if (s.labels[t] == S::kIgnore) {
        words += s.input_ids[t] != S::kCls && s.input_ids[t] != S::kSep;
        continue;
      }
      ++predicted;
      ++words;
      masked += s.input_ids[t] == S::kMask;
      kept += s.input_ids[t] == s.labels[t];
    }
  }
  EXPECT_NEAR(double(predicted) / double(words), 0.15, 0.01);
  EXPECT_NEAR(double(masked) / double(predicted), 0.8, 0.02);
  EXPECT_NEAR(double(kept) / double(predicted), 0.1, 0.02);  // (and a random word can be itself)
  EXPECT_NEAR(double(nsp) / double(n), 0.5, 0.05);
}

TEST(BertSynthetic, DeterminersAgreeWithTheirNouns) {
  // In the unmasked text, each determiner is followed by an adjective or a noun of its gender:
  // the same (determiner, next word) pairs never appear with both genders' determiners.
  BertSyntheticConfig c;
  c.mask_prob = 0.01;  // one prediction per sample
  const S src(c);
  std::set<std::pair<int64_t, int64_t>> pairs;  // (gender of the determiner, next word)
  for (int64_t i = 0; i < 300; ++i) {
    const S::Sample s = src.sample(i);
    for (size_t t = 0; t + 1 < s.input_ids.size(); ++t) {
      const int64_t a = s.input_ids[t], b = s.input_ids[t + 1];
      if (s.labels[t] != S::kIgnore || s.labels[t + 1] != S::kIgnore) continue;
      if (a >= 6 && a < 10 && b >= 10) pairs.insert({(a - 6) / 2, b});
    }
  }
  ASSERT_FALSE(pairs.empty());
  for (const auto& [g, w] : pairs) EXPECT_EQ(pairs.count({1 - g, w}), 0u) << "word " << w;
}

TEST(BertSynthetic, DeterministicHeldOutAndResumable) {
  BertSyntheticConfig c;
  c.seq_len = 32;
  S a(c), b(c);
  const TensorMap x = a.next(8);
  EXPECT_EQ(x.at("input_ids").sizes(), (Shape{8, 32}));
  EXPECT_EQ(x.at("next_sentence_label").sizes(), (Shape{8}));
  b.seek(4);
  const TensorMap y = b.next(4);
  EXPECT_EQ(y.at("input_ids").to_vector<int64_t>(),
            x.at("input_ids").narrow(0, 4, 4).contiguous().to_vector<int64_t>());
  const TensorMap e = a.eval_batch(0, 8);
  EXPECT_NE(e.at("input_ids").to_vector<int64_t>(), x.at("input_ids").to_vector<int64_t>());
  EXPECT_EQ(e.at("labels").to_vector<int64_t>(),
            a.eval_batch(0, 8).at("labels").to_vector<int64_t>());
  EXPECT_THROW(a.eval_batch(c.eval_size - 1, 2), Error);
  c.seq_len = 8;
  EXPECT_THROW(S{c}, Error);
}

}  // namespace
}  // namespace aim::data
