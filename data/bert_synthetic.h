// Synthetic BERT data from a small generative grammar, so that what is asked is predictable and the
// metrics must rise (MODELS.md "Defaults every model follows"): pre-training (masked LM + next
// sentence, BertPretrainSynthetic), a SQuAD-like span task (BertSpanSynthetic) and topic
// classification (BertTopicSynthetic).
//
// The language: `topics` topics, each with its own nouns (2 genders), adjectives and verbs; the
// function words are shared. A sentence is
//     DET(g1) ADJ(g1) NOUN(g1) VERB DET(g2) NOUN(g2) .
// where the determiner and the adjective's form agree with the noun's gender (a masked determiner
// or adjective form is predictable from its noun), the verb is one of its topic's, and the object
// is one of the two nouns its verb takes (a masked object is one of two). A document is sentences
// of one topic. Pre-training sample i (a pure function of (seed, i) through Philox) is
//     [CLS] A [SEP] B [SEP] [PAD]...
// A: one or more consecutive sentences of a document, B: the sentences that follow (label 0,
// IsNext, half of the samples) or sentences of a document of another topic (label 1), packed to
// seq_len and truncated at a sentence boundary where possible. Masking as BERT: 15% of the
// tokens that are not [CLS]/[SEP]/[PAD] are predicted (at least one); of those 80% become
// [MASK], 10% a random word, 10% stay.
// Batches (Hugging Face's names): "input_ids", "token_type_ids" (0 for [CLS] A [SEP], 1 after),
// "attention_mask" (1 real, 0 padding), "labels" (the original id where predicted, -100
// elsewhere), all i64 [B, seq_len]; "next_sentence_label" i64 [B].
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/source.h"

namespace aim::data {

class PhiloxDraw;

struct BertSyntheticConfig {
  int64_t seq_len = 128;
  int64_t topics = 16;
  int64_t nouns_per_topic = 12, adjectives_per_topic = 6, verbs_per_topic = 6;
  double mask_prob = 0.15;  // pretrain
  int64_t num_labels = 2;   // classify: topic t has label t * num_labels / topics
  // squad: sentences in a context, uniform in [min, max] (capped by seq_len and by the topic's
  // nouns and verbs: each sentence has its own subject and verb).
  int64_t span_sentences_min = 2, span_sentences_max = 4;
  uint64_t seed = 1;
  int64_t epoch_size = 1000000;
  int64_t eval_size = 2000;
};

// The language the synthetic tasks share: its vocabulary and sentences.
class BertGrammar {
 public:
  explicit BertGrammar(const BertSyntheticConfig& c);
  // [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4, ".", the determiners, then each topic's words
  // (as vocab.txt would list them).
  const std::vector<std::string>& vocabulary() const { return vocab_; }
  int64_t period() const { return period_; }
  // DET ADJ NOUN(subject) VERB DET NOUN(object) . of `topic`; `subject` and `verb` (indices within
  // the topic) are drawn when negative.
  std::vector<int64_t> sentence(int64_t topic, PhiloxDraw& d, int64_t subject = -1,
                                int64_t verb = -1) const;
  // Words of ids [begin, end) joined by single spaces.
  std::string text(const int64_t* begin, const int64_t* end) const;

 private:
  BertSyntheticConfig c_;
  std::vector<std::string> vocab_;
  int64_t period_ = 0, det_ = 0, first_topic_word_ = 0, words_per_topic_ = 0;
};

// What the three synthetic tasks share: the grammar, the stream position, the held-out set.
class BertSyntheticSource : public BatchSource {
 public:
  explicit BertSyntheticSource(BertSyntheticConfig c, std::string task);
  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return position_; }
  void seek(int64_t position) override;
  int64_t epoch_size() const override { return c_.epoch_size; }
  int64_t eval_size() const override { return c_.eval_size; }
  TensorMap eval_batch(int64_t start, int64_t count) const override;
  const BertGrammar& grammar() const { return grammar_; }
  const std::vector<std::string>& vocabulary() const { return grammar_.vocabulary(); }

  static constexpr int64_t kPad = 0, kUnk = 1, kCls = 2, kSep = 3, kMask = 4;
  static constexpr int64_t kIgnore = -100;  // labels of positions not predicted

 protected:
  // Samples [first, first + count) of the stream (training: first < 2^40; held out: 2^40 + j).
  virtual TensorMap batch(int64_t first, int64_t count) const = 0;
  PhiloxDraw draw(int64_t index) const;  // the numbers of sample `index`

  BertSyntheticConfig c_;
  BertGrammar grammar_;

 private:
  std::string task_;
  int64_t position_ = 0;
};

class BertPretrainSynthetic : public BertSyntheticSource {
 public:
  explicit BertPretrainSynthetic(BertSyntheticConfig c);
  struct Sample {
    std::vector<int64_t> input_ids, token_type_ids, attention_mask, labels;
    int64_t next_sentence_label = 0;
  };
  Sample sample(int64_t index) const;  // a pure function of (seed, index)

 protected:
  TensorMap batch(int64_t first, int64_t count) const override;
};

// The span task of `task=squad` (SQuAD's layout, answers found by reading): a context of
// span_sentences_min..max sentences of one topic, each with its own subject noun and its own verb,
// and the question "DET ADJ NOUN VERB" copied from one of them (uniformly chosen); the answer is
// that sentence's object phrase "DET NOUN" (two tokens). The question's noun alone (or its verb)
// identifies the sentence, so every answer is determined by reading the question against the
// context (attainable exact match and F1: 100), while a reader that ignores the question can only
// guess among the sentences (about E[1/n]; docs/bert.md gives the exact ceiling). Sample: [CLS]
// question [SEP] context [SEP] [PAD]...; batches input_ids, token_type_ids (1 on the context and
// its [SEP]), attention_mask, start_positions, end_positions (i64, inclusive token positions).
class BertSpanSynthetic : public BertSyntheticSource {
 public:
  explicit BertSpanSynthetic(BertSyntheticConfig c);
  struct Sample {
    std::vector<int64_t> input_ids, token_type_ids, attention_mask;
    int64_t start_position = 0, end_position = 0;
  };
  Sample sample(int64_t index) const;

 protected:
  TensorMap batch(int64_t first, int64_t count) const override;
};

// The classification task of `task=classify`: [CLS] sentences of one topic [SEP] [PAD]..., label
// topic * num_labels / topics (topics grouped into num_labels classes by their words); batches
// input_ids, token_type_ids (0), attention_mask, labels [B].
class BertTopicSynthetic : public BertSyntheticSource {
 public:
  explicit BertTopicSynthetic(BertSyntheticConfig c);

 protected:
  TensorMap batch(int64_t first, int64_t count) const override;
};

}  // namespace aim::data
