// The NMT registry entry (MODELS.md §3.2): GNMT v2 on the synthetic reversal task
// (data/nmt_synthetic.h) or the WMT16 layout (data/nmt_text.h), evaluated by sacreBLEU-equal
// corpus BLEU (data/bleu.h) of greedy or beam-search translations; SGD lr 1.0, clip 5 (the
// recipe). docs/nmt.md.
#include <algorithm>

#include "autograd/variable.h"
#include "data/bleu.h"
#include "data/nmt_synthetic.h"
#include "data/nmt_text.h"
#include "models/nmt.h"
#include "models/registry.h"
#include "tensor/check.h"

namespace aim::models {
namespace {

data::NmtSyntheticConfig synthetic_config(const ModelConfig& c, uint64_t seed) {
  data::NmtSyntheticConfig d =
      c.at("size") == "tiny" ? data::NmtSyntheticConfig::tiny(seed) : data::NmtSyntheticConfig();
  d.seed = seed;
  return d;
}

}  // namespace

NmtConfig nmt_config(const ModelConfig& c, uint64_t seed) {
  NmtConfig m = c.at("size") == "tiny" ? NmtConfig::tiny() : NmtConfig();
  if (c.at("units") != "default") m.units = config_int(c, "units", 1);
  if (c.at("vocab") != "default") m.src_vocab = m.tgt_vocab = config_int(c, "vocab", 4);
  if (c.at("dropout") != "default") m.dropout = config_number(c, "dropout", 0, 0.99);
  m.label_smoothing = config_number(c, "label_smoothing", 0, 1);
  m.share_embeddings = c.at("share_embeddings") == "true";
  m.decoder = c.at("decoder");
  if (c.at("beam_width") != "default") m.beam_width = config_int(c, "beam_width", 1, kMaxBeamWidth);
  m.length_penalty = config_number(c, "length_penalty", 0, 10);
  m.coverage_penalty = config_number(c, "coverage_penalty", 0, 10);
  m.max_length = config_int(c, "max_length", 0, kMaxDecodeLength);
  m.seed = seed;
  return m;
}

namespace {

std::string words_of(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t x : ids) s += (s.empty() ? "w" : " w") + std::to_string(x);
  return s;
}

Metrics nmt_evaluate(Model& m, const data::BatchSource& src, int64_t n, Device dev) {
  AIM_CHECK(n > 0 && n <= src.eval_size(), "nmt evaluation: ", n,
            " sentences asked, the evaluation set has ", src.eval_size());
  autograd::NoGradGuard ng;
  const bool was_training = m.is_training();
  m.eval();
  std::vector<std::string> hyp, ref;
  constexpr int64_t kChunk = 128;
  for (int64_t s = 0; s < n; s += kChunk) {
    const TensorMap b = src.eval_batch(s, std::min(kChunk, n - s));
    const TensorMap out = m.infer(batch_to_device(m, b, dev));
    const Tensor tr = out.at("translation"), tl = out.at("translation_length");
    const std::vector<int64_t> ids = tr.to_vector<int64_t>(), lens = tl.to_vector<int64_t>();
    const std::vector<int64_t> tgt = b.at("target_output").to_vector<int64_t>(),
                               tlen = b.at("target_length").to_vector<int64_t>();
    const int64_t L = tr.size(1), T = b.at("target_output").size(1);
    const auto* text = dynamic_cast<const data::NmtTextSource*>(&src);
    for (size_t i = 0; i < lens.size(); ++i) {
      if (text) {  // BLEU on the BPE-merged tokenised text, as TF NMT scores newstest
        hyp.push_back(text->target_vocab().decode(std::vector<int64_t>(
            ids.begin() + int64_t(i) * L, ids.begin() + int64_t(i) * L + lens[i])));
        ref.push_back(text->target_vocab().decode(std::vector<int64_t>(
            tgt.begin() + int64_t(i) * T, tgt.begin() + int64_t(i) * T + tlen[i] - 1)));
        continue;
      }
      hyp.push_back(words_of(std::vector<int64_t>(ids.begin() + int64_t(i) * L,
                                                  ids.begin() + int64_t(i) * L + lens[i])));
      ref.push_back(words_of(std::vector<int64_t>(tgt.begin() + int64_t(i) * T,
                                                  tgt.begin() + int64_t(i) * T + tlen[i] - 1)));
    }
  }
  m.train(was_training);
  return {{"bleu", data::corpus_bleu(hyp, ref).score}};
}

}  // namespace

void add_nmt_model(std::vector<ModelEntry>& r) {
  ModelEntry e;
  e.name = "nmt";
  e.infer_defaults = {"--batch-size=64"};  // MODELS.md §1.1
  e.task = "nlp";
  e.description =
      "GNMT v2 as benchmarked by AI Matrix (MODELS.md \xC2\xA7"
      "3.2): 4+4 LSTM 1024, bidirectional first layer, residuals, normalised Bahdanau "
      "attention, beam search";
  e.config = {
      {"size", "full", {"full", "tiny"}, "full: 1024 units, vocab 36549; tiny: 32 units, vocab 24"},
      {"units", "default", {}, "LSTM units = embedding width (the reduced benchmark: 256)"},
      {"vocab", "default", {}, "source and target vocabulary size (with unk, sos, eos)"},
      {"dropout", "default", {}, "dropout on every LSTM input in training (full: 0.2)"},
      {"label_smoothing", "0", {}, "label smoothing of the training loss (the recipe: 0)"},
      {"share_embeddings", "false", {"false", "true"}, "one embedding table for both sides"},
      {"decoder", "beam", {"beam", "greedy"}, "translation search"},
      {"beam_width", "default", {}, "beam width (full: 10, tiny: 4)"},
      {"length_penalty", "1.0", {}, "GNMT length penalty alpha"},
      {"coverage_penalty", "0.0", {}, "GNMT coverage penalty beta"},
      {"max_length", "0", {}, "decoding limit in tokens (0: twice the longest source)"}};
  e.data_doc =
      "'synthetic' (reversal with a vocabulary map), or a directory of the WMT16 layout: "
      "train.tok.clean.bpe.32000.{de,en}, newstest2015.tok.bpe.32000.{de,en}, "
      "vocab.bpe.32000.{de,en} (data/nmt_text.h, docs/nmt.md)";
  e.metrics = {"bleu"};
  // MODELS.md §3.2: SGD lr 1.0, clip global norm 5.0 (luong10 decay: docs/nmt.md).
  e.train_defaults = {"--optimizer=sgd", "--lr=1.0", "--clip-norm=5"};
  e.build = [](const ModelConfig& c, uint64_t seed) -> std::unique_ptr<Model> {
    return std::make_unique<Nmt>(nmt_config(c, seed));
  };
  e.source = [](const ModelConfig& c, const std::string& data,
                uint64_t seed) -> std::unique_ptr<data::BatchSource> {
    if (data == "synthetic")
      return std::make_unique<data::NmtSyntheticSource>(synthetic_config(c, seed));
    data::NmtTextConfig t;
    t.dir = data;
    auto s = std::make_unique<data::NmtTextSource>(t);
    const NmtConfig m = nmt_config(c, seed);
    for (const auto* v : {&s->source_vocab(), &s->target_vocab()})
      AIM_CHECK(int64_t(v->tokens.size()) <= m.src_vocab, v->path, ": ", v->tokens.size(),
                " tokens, more than the model's vocabulary of ", m.src_vocab,
                " (set --config vocab=", v->tokens.size(), ")");
    return s;
  };
  e.evaluate = nmt_evaluate;
  r.push_back(std::move(e));
}

}  // namespace aim::models
