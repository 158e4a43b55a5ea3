// The BERT registry entry (MODELS.md §3.1): Hugging Face's BertModel with the squad, pretrain or
// classify head, on the synthetic tasks of data/bert_synthetic.h or (task squad, --data DIR) the
// SQuAD v1.1 files (data/squad_source.h) (docs/bert.md): masked-LM and next-sentence accuracy,
// span exact match and F1 (the official SQuAD normalisation; on SQuAD after run_squad.py's n-best
// answer extraction), class accuracy.
#include <algorithm>

#include "autograd/variable.h"
#include "data/bert_synthetic.h"
#include "data/squad.h"
#include "data/squad_source.h"
#include "models/bert.h"
#include "models/registry.h"
#include "tensor/check.h"

namespace aim::models {
namespace {

// seq_len=auto: the task's sequence (squad 384 as §3.1, else 128); 64 for the tiny model.
int64_t seq_len(const ModelConfig& c) {
  if (c.at("seq_len") != "auto") return config_int(c, "seq_len", 1);
  if (c.at("size") == "tiny") return 64;
  return c.at("task") == "squad" ? 384 : 128;
}

BertConfig bert_config(const ModelConfig& c, uint64_t seed) {
  const std::string& size = c.at("size");
  BertConfig m = size == "tiny"   ? BertConfig::tiny()
                 : size == "base" ? BertConfig::base()
                                  : BertConfig::large();
  // The tiny model's vocabulary covers the synthetic language (~500 words) with room to spare.
  if (size == "tiny") m.vocab_size = 1024;
  m.task = c.at("task");
  m.gelu_tanh = c.at("gelu") == "tanh";
  m.fused = c.at("fused") == "on";
  m.num_labels = config_int(c, "num_labels", 1);
  AIM_CHECK(seq_len(c) <= m.max_position, "--config seq_len=", seq_len(c), ": BERT has ",
            m.max_position, " positions");
  m.seed = seed;
  return m;
}

// --data DIR's windows: doc_stride and max_query_length auto are SQuAD's 128 and 64 (MODELS.md
// §3.1), scaled down below seq_len 384 (seq_len / 3 and seq_len / 6) so that a short sequence
// still holds a query and a document window.
data::SquadFeatureOptions squad_options(const ModelConfig& c) {
  data::SquadFeatureOptions o;
  o.max_seq_length = seq_len(c);
  o.doc_stride = c.at("doc_stride") == "auto"
                     ? std::max<int64_t>(1, std::min<int64_t>(128, o.max_seq_length / 3))
                     : config_int(c, "doc_stride", 1);
  o.max_query_length = c.at("max_query_length") == "auto"
                           ? std::max<int64_t>(1, std::min<int64_t>(64, o.max_seq_length / 6))
                           : config_int(c, "max_query_length", 1);
  AIM_CHECK(o.max_seq_length > o.max_query_length + 3,
            "--config max_query_length=", o.max_query_length,
            " leaves no document tokens in seq_len=", o.max_seq_length,
            " ([CLS] query [SEP] document [SEP])");
  return o;
}

data::BertSyntheticConfig synthetic_config(const ModelConfig& c, uint64_t seed) {
  data::BertSyntheticConfig d;
  d.seq_len = seq_len(c);
  d.num_labels = config_int(c, "num_labels", 1);
  d.seed = seed;
  return d;
}

std::unique_ptr<data::BatchSource> bert_source(const ModelConfig& c, const std::string& data,
                                               uint64_t seed) {
  const std::string& task = c.at("task");
  if (data != "synthetic") {
    AIM_CHECK(task == "squad", "bert: --data ", data, " with --config task=", task,
              ": a data directory is SQuAD v1.1 (task=squad); task=", task,
              " trains on 'synthetic' only");
    data::SquadSourceConfig s;
    s.dir = data;
    s.features = squad_options(c);
    s.seed = seed;
    s.model_vocab_size = bert_config(c, seed).vocab_size;
    s.model = "bert --config size=" + c.at("size");
    return std::make_unique<data::SquadFileSource>(s);
  }
  const data::BertSyntheticConfig d = synthetic_config(c, seed);
  if (task == "pretrain") return std::make_unique<data::BertPretrainSynthetic>(d);
  if (task == "squad") return std::make_unique<data::BertSpanSynthetic>(d);
  return std::make_unique<data::BertTopicSynthetic>(d);
}

// Batches of the evaluation set small enough that the pretrain logits [b, T, V] stay under ~256 MB.
int64_t eval_chunk(const Bert& m, const data::BatchSource& src) {
  const Tensor ids = src.eval_batch(0, 1).at("input_ids");
  const int64_t per = ids.size(1) * (m.config().task == "pretrain" ? m.config().vocab_size : 1);
  return std::clamp<int64_t>((64LL << 20) / std::max<int64_t>(per, 1), 1, 64);
}

std::vector<int64_t> host_i64(const Tensor& t) {
  return t.to(kCPU).contiguous().to_vector<int64_t>();
}
std::vector<float> host_f32(const Tensor& t) {
  return t.to(kCPU).to(DType::f32).contiguous().to_vector<float>();
}

// The best span of one window as BERT's SQuAD prediction: start <= end, at most 30 tokens, both
// in the context (token type 1, not the final [SEP]); the highest start + end logit.
std::pair<int64_t, int64_t> best_span(const float* start, const float* end, const int64_t* types,
                                      const int64_t* ids, int64_t T) {
  constexpr int64_t kMaxAnswer = 30;
  std::pair<int64_t, int64_t> best{-1, -1};
  float score = -std::numeric_limits<float>::infinity();
  auto in_context = [&](int64_t i) {
    return types[i] == 1 && ids[i] != data::BertSyntheticSource::kSep;
  };
  for (int64_t s = 0; s < T; ++s) {
    if (!in_context(s)) continue;
    for (int64_t e = s; e < std::min(T, s + kMaxAnswer); ++e)
      if (in_context(e) && start[s] + end[e] > score) score = start[s] + end[e], best = {s, e};
  }
  return best;
}

// SQuAD files (data/squad_source.h): the model's logits of the windows of every dev question whose
// first window is among the first n, each question's answer by run_squad.py's write_predictions
// (n-best 20, at most 30 tokens, get_final_text), scored by evaluate-v1.1.py over its answers.
Metrics squad_files_evaluate(Bert& m, const data::BatchSource& src, const data::SquadEvalData& sq,
                             int64_t n, Device dev) {
  AIM_CHECK(m.config().task == "squad", "bert evaluation: SQuAD files need task=squad, got ",
            m.config().task);
  const std::vector<data::SquadFeature>& features = sq.eval_features();
  const int64_t windows = data::squad_whole_example_windows(features, n);
  autograd::NoGradGuard ng;
  const bool was_training = m.is_training();
  m.eval();
  const int64_t chunk = eval_chunk(m, src);
  std::vector<float> start, end;
  for (int64_t s = 0; s < windows; s += chunk) {
    const TensorMap out =
        m.infer(batch_to_device(m, src.eval_batch(s, std::min(chunk, windows - s)), dev));
    const std::vector<float> st = host_f32(out.at("start_logits")),
                             en = host_f32(out.at("end_logits"));
    start.insert(start.end(), st.begin(), st.end());
    end.insert(end.end(), en.begin(), en.end());
  }
  m.train(was_training);
  const std::vector<data::SquadExample>& examples = sq.eval_examples();
  const std::vector<std::string> answers =
      data::squad_predictions(examples, features, windows, start, end, sq.tokenizer());
  const std::vector<data::SquadExample> asked(examples.begin(),
                                              examples.begin() + int64_t(answers.size()));
  std::map<std::string, std::string> predictions;
  for (size_t i = 0; i < answers.size(); ++i) predictions[asked[i].id] = answers[i];
  const data::SquadScore score = data::squad_evaluate(asked, predictions);
  return {{"f1", score.f1}, {"exact_match", score.exact_match}};
}

Metrics bert_evaluate(Model& model, const data::BatchSource& src, int64_t n, Device dev) {
  AIM_CHECK(n > 0 && n <= src.eval_size(), "bert evaluation: ", n,
            " samples asked, the evaluation set has ", src.eval_size());
  auto& m = dynamic_cast<Bert&>(model);
  if (const auto* sq = dynamic_cast<const data::SquadEvalData*>(&src))
    return squad_files_evaluate(m, src, *sq, n, dev);
  const auto* syn = dynamic_cast<const data::BertSyntheticSource*>(&src);
  AIM_CHECK(syn != nullptr, "bert evaluation: needs the synthetic source or the SQuAD files");
  autograd::NoGradGuard ng;
  const bool was_training = m.is_training();
  m.eval();
  const std::string& task = m.config().task;
  const int64_t chunk = eval_chunk(m, src);
  double hits = 0, count = 0, nsp_hits = 0, em = 0, f1 = 0;
  for (int64_t s = 0; s < n; s += chunk) {
    const int64_t b = std::min(chunk, n - s);
    const TensorMap batch = src.eval_batch(s, b);
    const TensorMap out = m.infer(batch_to_device(m, batch, dev));
    const std::vector<int64_t> ids = host_i64(batch.at("input_ids"));
    const int64_t T = batch.at("input_ids").size(1);
    if (task == "pretrain") {
      const Tensor logits = out.at("prediction_logits").to(kCPU).to(DType::f32).contiguous();
      const int64_t V = logits.size(2);
      const float* p = logits.data<float>();
      const std::vector<int64_t> labels = host_i64(batch.at("labels"));
      for (size_t i = 0; i < labels.size(); ++i) {
        if (labels[i] == data::BertSyntheticSource::kIgnore) continue;
        const float* row = p + int64_t(i) * V;
        hits += int64_t(std::max_element(row, row + V) - row) == labels[i];
        ++count;
      }
      const std::vector<float> nsp = host_f32(out.at("seq_relationship_logits"));
      const std::vector<int64_t> nl = host_i64(batch.at("next_sentence_label"));
      for (int64_t i = 0; i < b; ++i)
        nsp_hits += int64_t(nsp[size_t(2 * i + 1)] > nsp[size_t(2 * i)]) == nl[size_t(i)];
    } else if (task == "squad") {
      const std::vector<float> st = host_f32(out.at("start_logits")),
                               en = host_f32(out.at("end_logits"));
      const std::vector<int64_t> types = host_i64(batch.at("token_type_ids")),
                                 s0 = host_i64(batch.at("start_positions")),
                                 e0 = host_i64(batch.at("end_positions"));
      for (int64_t i = 0; i < b; ++i) {
        const int64_t o = i * T;
        const auto [ps, pe] =
            best_span(&st[size_t(o)], &en[size_t(o)], &types[size_t(o)], &ids[size_t(o)], T);
        const std::string truth = syn->grammar().text(&ids[size_t(o + s0[size_t(i)])],
                                                      &ids[size_t(o + e0[size_t(i)])] + 1);
        const std::string pred =
            ps < 0 ? "" : syn->grammar().text(&ids[size_t(o + ps)], &ids[size_t(o + pe)] + 1);
        em += data::squad_exact_match(pred, truth);
        f1 += data::squad_f1(pred, truth);
      }
    } else {
      const Tensor logits = out.at("logits").to(kCPU).to(DType::f32).contiguous();
      const int64_t L = logits.size(1);
      const std::vector<int64_t> labels = host_i64(batch.at("labels"));
      for (int64_t i = 0; i < b; ++i) {
        const float* row = logits.data<float>() + i * L;
        hits += int64_t(std::max_element(row, row + L) - row) == labels[size_t(i)];
      }
    }
  }
  m.train(was_training);
  if (task == "pretrain")
    return {{"mlm_accuracy", count > 0 ? hits / count : 0}, {"nsp_accuracy", nsp_hits / double(n)}};
  if (task == "squad") return {{"f1", 100 * f1 / double(n)}, {"exact_match", 100 * em / double(n)}};
  return {{"accuracy", hits / double(n)}};
}

}  // namespace

void add_bert_model(std::vector<ModelEntry>& r) {
  ModelEntry e;
  e.name = "bert";
  e.infer_defaults = {"--batch-size=1"};  // MODELS.md §1.1
  e.task = "nlp";
  e.description =
      "BERT as benchmarked by AI Matrix (MODELS.md \xC2\xA7"
      "3.1): Hugging Face's BertModel layout (post-LN, GELU, fused attention) with the SQuAD "
      "span head (default), masked LM + next sentence, or [CLS] classification";
  e.config = {
      {"size",
       "large",
       {"large", "base", "tiny"},
       "large: 24 x 1024, 16 heads (the reference's SQuAD model); base: 12 x 768; tiny: 2 x 128, "
       "vocabulary 1024"},
      {"task",
       "squad",
       {"squad", "pretrain", "classify"},
       "squad: span start/end logits; pretrain: masked LM (tied decoder) + next sentence; "
       "classify: pooled [CLS] -> num_labels"},
      {"seq_len",
       "auto",
       {},
       "tokens per sequence; auto: squad 384, pretrain/classify 128, tiny 64"},
      {"gelu",
       "erf",
       {"erf", "tanh"},
       "erf: exact GELU (Hugging Face); tanh: the approximation "
       "(the original TF code)"},
      {"num_labels", "2", {}, "classify: classes (the synthetic topics are grouped into them)"},
      {"doc_stride",
       "auto",
       {},
       "--data DIR (SQuAD files): tokens between document windows; auto: 128, at most seq_len / 3"},
      {"max_query_length",
       "auto",
       {},
       "--data DIR (SQuAD files): question tokens kept; auto: 64, at most seq_len / 6"},
      {"fused",
       "on",
       {"on", "off"},
       "on: bias+GELU and residual+LayerNorm kernels; off: the unfused ops (same values)"}};
  e.data_doc =
      "DIR (task=squad): SQuAD v1.1's train-v1.1.json and dev-v1.1.json with BERT's uncased "
      "vocab.txt (no larger than the model's vocabulary: size=base or large for the real one), "
      "evaluated by run_squad.py's n-best answers and the official EM/F1; 'synthetic': the "
      "grammar's span task (squad), masked LM + next sentence (pretrain), topic classes "
      "(classify) (docs/bert.md)";
  // By task: squad f1, exact_match; pretrain mlm_accuracy, nsp_accuracy; classify accuracy.
  e.metrics = {"f1", "exact_match", "mlm_accuracy", "nsp_accuracy", "accuracy"};
  // MODELS.md §3.1: AdamW (wd 0.01, betas 0.9/0.999, eps 1e-6), 10% linear warmup then linear
  // decay; NVIDIA's PyTorch fine-tuning: lr 3e-5, batch 4..16.
  e.train_defaults = {"--optimizer=bert_adamw", "--lr=3e-5", "--schedule=warmup_linear",
                      "--warmup=10%", "--batch-size=8"};
  // Hugging Face's / the reference's parameter groups: no weight decay for biases and LayerNorm
  // weights (names containing "bias" or "LayerNorm.weight"), 0.01 for the rest; eps 1e-6.
  auto recipe = [](const std::string& kind, double lr) {
    const std::map<std::string, double> decay = {{"lr", lr}, {"eps", 1e-6}, {"weight_decay", 0.01}},
                                        none = {{"lr", lr}, {"eps", 1e-6}, {"weight_decay", 0}};
    return std::vector<OptimizerGroup>{{"", kind, none, {"bias", "LayerNorm.weight"}},
                                       {"", kind, decay}};
  };
  e.optimizers = {
      {"bert_adamw",
       "AdamW (betas 0.9/0.999, eps 1e-6), weight decay 0.01 except biases and LayerNorm weights "
       "(the reference's AdamWeightDecay)",
       3e-5, recipe("adamw", 3e-5)},
      {"bert_lamb",
       "LAMB (apex FusedLAMB: eps 1e-6, per-tensor trust ratio), weight decay 0.01 except biases "
       "and LayerNorm weights (BERT pre-training at large batch)",
       1e-3, recipe("lamb", 1e-3)}};
  e.build = [](const ModelConfig& c, uint64_t seed) -> std::unique_ptr<Model> {
    return std::make_unique<Bert>(bert_config(c, seed));
  };
  e.source = bert_source;
  e.evaluate = bert_evaluate;
  r.push_back(std::move(e));
}

}  // namespace aim::models
