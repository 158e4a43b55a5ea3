#include "models/bert.h"

#include <cmath>
#include <limits>
#include <optional>

#include "autograd/functions/attention.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/fused_bias.h"
#include "autograd/functions/index.h"
#include "autograd/functions/layer_norm.h"
#include "autograd/functions/loss.h"
#include "autograd/functions/matmul.h"
#include "autograd/functions/shape.h"
#include "kernels/elementwise/unary.h"
#include "layers/init.h"
#include "profiler/profiler.h"
#include "tensor/check.h"

namespace aim::models {
namespace ag = autograd;
using profiler::Scope;
using profiler::ScopeKind;

namespace {

// Hugging Face's _init_weights for a Linear: weight N(0, range), bias 0.
std::shared_ptr<layers::Linear> dense(int64_t in, int64_t out, double range,
                                      kernels::Generator& gen) {
  auto l = std::make_shared<layers::Linear>(in, out);
  l->weight.data().copy_(layers::normal_init({out, in}, 0.0, range, gen));
  l->bias.data().zero_();
  return l;
}

std::shared_ptr<layers::Embedding> table(int64_t n, int64_t dim, double range,
                                         kernels::Generator& gen, bool padding_row = false) {
  auto e = padding_row ? std::make_shared<layers::Embedding>(n, dim, 0)
                       : std::make_shared<layers::Embedding>(n, dim);
  Tensor w = layers::normal_init({n, dim}, 0.0, range, gen);
  if (padding_row) w.select(0, 0).zero_();
  e->weight.data().copy_(w);
  return e;
}

// gelu(x W^T + b): the bias in the GELU kernel (fused) or in the GEMM.
Variable dense_gelu(const layers::Linear& dense, const Variable& x, bool fused, bool tanh) {
  if (!fused) return ag::gelu(ag::linear(x, dense.weight, dense.bias), tanh);
  return ag::bias_gelu(ag::linear(x, dense.weight), dense.bias, tanh);
}

double gelu_flops(bool tanh) {
  return kernels::unary_flops_per_element(tanh ? kernels::UnaryKind::gelu_tanh
                                               : kernels::UnaryKind::gelu_erf);
}

}  // namespace

// ---- embeddings --------------------------------------------------------------------------------

BertEmbeddings::BertEmbeddings(const BertConfig& c, kernels::Generator& gen) {
  const double r = c.init_range;
  word_embeddings = child("word_embeddings", table(c.vocab_size, c.hidden, r, gen, true));
  position_embeddings = child("position_embeddings", table(c.max_position, c.hidden, r, gen));
  token_type_embeddings = child("token_type_embeddings", table(c.type_vocab, c.hidden, r, gen));
  LayerNorm = child("LayerNorm", std::make_shared<layers::LayerNorm>(c.hidden, c.layer_norm_eps));
  dropout = child("dropout", std::make_shared<layers::Dropout>(c.hidden_dropout, c.seed + 1));
}

Variable BertEmbeddings::forward(const Tensor& input_ids, const Tensor& token_type_ids) {
  const int64_t T = input_ids.size(1);
  AIM_CHECK(T <= position_embeddings->num_embeddings(), "bert: sequence length ", T,
            " exceeds max_position ", position_embeddings->num_embeddings());
  const Tensor positions = Tensor::arange(T, DType::i64, input_ids.device());
  const Variable e = ag::add(
      ag::add(word_embeddings->forward(input_ids), token_type_embeddings->forward(token_type_ids)),
      position_embeddings->forward(positions));
  return dropout->forward(LayerNorm->forward(e));
}

// ---- one encoder layer -------------------------------------------------------------------------

BertLayer::BertLayer(const BertConfig& c, kernels::Generator& gen)
    : c_(c), attention_gen_(gen.seed() + 7919 * (gen.offset() + 1)) {
  const int64_t H = c.hidden, I = c.intermediate;
  const double r = c.init_range;
  auto attention = child("attention", std::make_shared<BertNode>("BertAttention"));
  auto self = attention->add("self", std::make_shared<BertNode>("BertSelfAttention"));
  query = self->add("query", dense(H, H, r, gen));
  key = self->add("key", dense(H, H, r, gen));
  value = self->add("value", dense(H, H, r, gen));
  auto out = attention->add("output", std::make_shared<BertNode>("BertSelfOutput"));
  attention_dense = out->add("dense", dense(H, H, r, gen));
  attention_norm = out->add("LayerNorm", std::make_shared<layers::LayerNorm>(H, c.layer_norm_eps));
  attention_dropout = out->add(
      "dropout", std::make_shared<layers::Dropout>(c.hidden_dropout, gen.seed() + gen.offset()));
  auto inter = child("intermediate", std::make_shared<BertNode>("BertIntermediate"));
  intermediate_dense = inter->add("dense", dense(H, I, r, gen));
  auto output = child("output", std::make_shared<BertNode>("BertOutput"));
  output_dense = output->add("dense", dense(I, H, r, gen));
  output_norm = output->add("LayerNorm", std::make_shared<layers::LayerNorm>(H, c.layer_norm_eps));
  output_dropout = output->add("dropout", std::make_shared<layers::Dropout>(
                                              c.hidden_dropout, gen.seed() + gen.offset() + 1));
}

Variable BertLayer::dense_residual_norm(layers::Linear& dense, layers::Dropout& drop,
                                        layers::LayerNorm& ln, const Variable& x,
                                        const Variable& residual) {
  if (!c_.fused) return ln.forward(ag::add(drop.forward(dense.forward(x)), residual));
  if (drop.is_training() && drop.p() > 0)  // the bias goes through dropout with the product
    return ag::add_layer_norm(drop.forward(dense.forward(x)), Variable(), residual, ln.weight,
                              ln.bias, ln.eps());
  return ag::add_layer_norm(ag::linear(x, dense.weight), dense.bias, residual, ln.weight, ln.bias,
                            ln.eps());
}

Variable BertLayer::forward(const Variable& h, const Tensor& mask) {
  const int64_t B = h.size(0), T = h.size(1), H = c_.hidden, NH = c_.heads, HS = c_.head_size();
  // [B, T, H] -> [B, NH, T, HS]
  auto heads = [&](const Variable& x) {
    return ag::contiguous(ag::permute(ag::reshape(x, {B, T, NH, HS}), {0, 2, 1, 3}));
  };
  const Variable q = heads(query->forward(h)), k = heads(key->forward(h)),
                 v = heads(value->forward(h));
  ag::AttentionOptions o;
  o.mask = mask;
  o.dropout_p = c_.attention_dropout;
  o.training = is_training();
  o.gen = &attention_gen_;
  const Variable ctx = ag::reshape(
      ag::contiguous(ag::permute(ag::scaled_dot_product_attention(q, k, v, o), {0, 2, 1, 3})),
      {B, T, H});
  const Variable a =
      dense_residual_norm(*attention_dense, *attention_dropout, *attention_norm, ctx, h);
  const Variable i = dense_gelu(*intermediate_dense, a, c_.fused, c_.gelu_tanh);
  return dense_residual_norm(*output_dense, *output_dropout, *output_norm, i, a);
}

// ---- the model ---------------------------------------------------------------------------------

Bert::Bert(const BertConfig& cfg) : cfg_(cfg) {
  AIM_CHECK(cfg.hidden > 0 && cfg.heads > 0 && cfg.hidden % cfg.heads == 0, "bert: hidden size ",
            cfg.hidden, " must be a positive multiple of heads ", cfg.heads);
  AIM_CHECK(cfg.layers > 0 && cfg.intermediate > 0 && cfg.vocab_size > 5 && cfg.max_position > 0 &&
                cfg.type_vocab > 0,
            "bert: layers, intermediate, vocab_size, max_position and type_vocab must be > 0");
  AIM_CHECK(cfg.task == "squad" || cfg.task == "pretrain" || cfg.task == "classify", "bert: task '",
            cfg.task, "' (allowed: squad, pretrain, classify)");
  AIM_CHECK(cfg.task != "classify" || cfg.num_labels >= 2, "bert: num_labels must be >= 2");
  kernels::Generator gen(cfg.seed);
  const int64_t H = cfg.hidden;
  const double r = cfg.init_range;
  bert = child("bert", std::make_shared<BertNode>("BertModel"));
  embeddings = bert->add("embeddings", std::make_shared<BertEmbeddings>(cfg, gen));
  auto encoder = bert->add("encoder", std::make_shared<BertNode>("BertEncoder"));
  auto list = encoder->add("layer", std::make_shared<BertNode>("ModuleList"));
  for (int64_t l = 0; l < cfg.layers; ++l)
    layer.push_back(list->add(std::to_string(l), std::make_shared<BertLayer>(cfg, gen)));
  if (cfg.task != "squad") {
    auto p = bert->add("pooler", std::make_shared<BertNode>("BertPooler"));
    pooler = p->add("dense", dense(H, H, r, gen));
  }
  if (cfg.task == "squad") {
    qa_outputs = child("qa_outputs", dense(H, 2, r, gen));
  } else if (cfg.task == "pretrain") {
    auto cls = child("cls", std::make_shared<BertNode>("BertPreTrainingHeads"));
    auto pred = cls->add("predictions", std::make_shared<BertNode>("BertLMPredictionHead"));
    decoder_bias = pred->add_param("bias", Tensor::zeros({cfg.vocab_size}));
    auto transform =
        pred->add("transform", std::make_shared<BertNode>("BertPredictionHeadTransform"));
    transform_dense = transform->add("dense", dense(H, H, r, gen));
    transform_norm =
        transform->add("LayerNorm", std::make_shared<layers::LayerNorm>(H, cfg.layer_norm_eps));
    seq_relationship = cls->add("seq_relationship", dense(H, 2, r, gen));
  } else {
    classifier_dropout =
        child("dropout", std::make_shared<layers::Dropout>(cfg.hidden_dropout, cfg.seed + 2));
    classifier = child("classifier", dense(H, cfg.num_labels, r, gen));
  }
}

Tensor Bert::additive_mask(const Tensor& attention_mask) const {
  // (1 - m) * lowest as m * (-lowest) + lowest: exactly 0 where m = 1 (Hugging Face's mask).
  ag::NoGradGuard ng;
  const double lowest = std::numeric_limits<float>::lowest();
  const Variable m(attention_mask.to(DType::f32));
  const Variable add = ag::add(ag::mul(m, -lowest), lowest);
  return add.data().reshape({attention_mask.size(0), 1, 1, attention_mask.size(1)});
}

Variable Bert::encode(const Tensor& input_ids, const Tensor& token_type_ids,
                      const Tensor& attention_mask) {
  std::optional<Scope> scope(std::in_place, "embeddings", ScopeKind::Layer);
  Variable h = embeddings->forward(input_ids, token_type_ids);
  const Tensor mask = additive_mask(attention_mask);
  for (size_t l = 0; l < layer.size(); ++l) {
    scope.reset();
    scope.emplace("layer." + std::to_string(l), ScopeKind::Layer);
    h = layer[l]->forward(h, mask);
  }
  return h;
}

Variable Bert::pool(const Variable& state) {
  Scope s("pooler", ScopeKind::Layer);
  return ag::tanh(pooler->forward(ag::select(state, 1, 0)));
}

Variable Bert::mlm_logits(const Variable& state) {
  Scope s("cls.predictions", ScopeKind::Layer);
  const Variable t =
      transform_norm->forward(dense_gelu(*transform_dense, state, cfg_.fused, cfg_.gelu_tanh));
  return ag::linear(t, embeddings->word_embeddings->weight, decoder_bias);  // tied decoder
}

std::vector<TensorSpec> Bert::input_specs() const {
  const std::string v = std::to_string(cfg_.vocab_size);
  return {{"input_ids", DType::i64, {"B", "T"}, "WordPiece ids in [0, " + v + "), 0 = [PAD]"},
          {"token_type_ids", DType::i64, {"B", "T"}, "segment: 0 (question / A) or 1"},
          {"attention_mask", DType::i64, {"B", "T"}, "1 real token, 0 padding"}};
}

std::vector<TensorSpec> Bert::label_specs() const {
  if (cfg_.task == "squad")
    return {{"start_positions", DType::i64, {"B"}, "answer's first token in [0, T)"},
            {"end_positions", DType::i64, {"B"}, "answer's last token in [0, T)"}};
  if (cfg_.task == "pretrain")
    return {{"labels", DType::i64, {"B", "T"}, "masked-LM target id, -100 where not predicted"},
            {"next_sentence_label", DType::i64, {"B"}, "0: B follows A, 1: random"}};
  return {{"labels", DType::i64, {"B"}, "class in [0, " + std::to_string(cfg_.num_labels) + ")"}};
}

std::vector<TensorSpec> Bert::output_specs() const {
  if (cfg_.task == "squad")
    return {{"start_logits", DType::f32, {"B", "T"}, "span start scores"},
            {"end_logits", DType::f32, {"B", "T"}, "span end scores"}};
  if (cfg_.task == "pretrain")
    return {{"prediction_logits",
             DType::f32,
             {"B", "T", std::to_string(cfg_.vocab_size)},
             "masked-LM vocabulary scores"},
            {"seq_relationship_logits", DType::f32, {"B", "2"}, "next-sentence scores"}};
  return {{"logits", DType::f32, {"B", std::to_string(cfg_.num_labels)}, "class scores"}};
}

std::vector<Model::Fp32Params> Bert::amp_fp32_params() const {
  return {{"\\.(word|position|token_type)_embeddings\\.",
           "embedding tables are read by row (a gather, not a GEMM)"}};
}

TensorMap Bert::forward_outputs(const TensorMap& batch) {
  const Variable h =
      encode(batch.at("input_ids"), batch.at("token_type_ids"), batch.at("attention_mask"));
  if (cfg_.task == "squad") {
    Scope s("qa_outputs", ScopeKind::Layer);
    const Variable logits = qa_outputs->forward(h);  // [B, T, 2]
    return {{"start_logits", ag::contiguous(ag::select(logits, 2, 0)).data()},
            {"end_logits", ag::contiguous(ag::select(logits, 2, 1)).data()}};
  }
  if (cfg_.task == "pretrain") {
    const Variable pooled = pool(h);
    const Variable nsp = seq_relationship->forward(pooled);
    return {{"prediction_logits", mlm_logits(h).data()}, {"seq_relationship_logits", nsp.data()}};
  }
  const Variable pooled = pool(h);
  Scope s("classifier", ScopeKind::Layer);
  return {{"logits", classifier->forward(classifier_dropout->forward(pooled)).data()}};
}

TensorMap Bert::infer(const TensorMap& batch) {
  check_batch(input_specs(), batch, "bert inputs");
  return forward_outputs(batch);
}

Variable Bert::loss(const TensorMap& batch) {
  const Tensor& ids = batch.at("input_ids");
  const int64_t B = ids.size(0), T = ids.size(1);
  const Variable h = encode(ids, batch.at("token_type_ids"), batch.at("attention_mask"));
  if (cfg_.task == "squad") {
    const Variable logits = qa_outputs->forward(h);
    Scope s("loss", ScopeKind::Layer);
    // BertForQuestionAnswering: positions outside [0, T) ignored (index T).
    const Variable start = ag::contiguous(ag::select(logits, 2, 0)),
                   end = ag::contiguous(ag::select(logits, 2, 1));
    return ag::mul(
        ag::add(ag::cross_entropy(start, batch.at("start_positions"), kernels::Reduction::mean, T),
                ag::cross_entropy(end, batch.at("end_positions"), kernels::Reduction::mean, T)),
        0.5);
  }
  if (cfg_.task == "pretrain") {
    const Variable nsp_logits = seq_relationship->forward(pool(h));
    // Only the predicted positions reach the vocabulary projection (rows and targets from the
    // host batch: host_metadata()).
    const TensorMap rows = batch.count("mlm_rows") ? batch : host_metadata(batch);
    const Device d = ids.device();
    const Variable picked =
        ag::index_select(ag::reshape(h, {B * T, cfg_.hidden}), 0, rows.at("mlm_rows").to(d));
    const Variable mlm = mlm_logits(picked);
    Scope s("loss", ScopeKind::Layer);
    return ag::add(ag::cross_entropy(mlm, rows.at("mlm_targets").to(d)),
                   ag::cross_entropy(nsp_logits, batch.at("next_sentence_label")));
  }
  const Variable logits = classifier->forward(classifier_dropout->forward(pool(h)));
  Scope s("loss", ScopeKind::Layer);
  return ag::cross_entropy(logits, batch.at("labels"));
}

Variable Bert::training_loss(const TensorMap& batch) {
  std::vector<TensorSpec> specs = input_specs();
  for (const TensorSpec& s : label_specs()) specs.push_back(s);
  check_batch(specs, batch, "bert batch");
  return loss(batch);
}

TensorMap Bert::host_metadata(const TensorMap& host_batch) const {
  if (cfg_.task != "pretrain" || !host_batch.count("labels")) return {};
  const Tensor labels = host_batch.at("labels").to(kCPU).contiguous();
  std::vector<int64_t> rows, targets;
  const int64_t* l = labels.data<int64_t>();
  for (int64_t i = 0; i < labels.numel(); ++i)
    if (l[i] != -100) rows.push_back(i), targets.push_back(l[i]);
  AIM_CHECK(!rows.empty(), "bert pretrain: the batch has no masked-LM label (all -100)");
  const int64_t M = int64_t(rows.size());
  return {{"mlm_rows", Tensor::from_vector(rows, {M})},
          {"mlm_targets", Tensor::from_vector(targets, {M})}};
}

double Bert::train_flops(const TensorMap& batch) const {
  if (cfg_.task != "pretrain") return 3 * forward_flops(batch);
  // The training loss projects only the predicted rows onto the vocabulary.
  const Tensor& ids = batch.at("input_ids");
  const double BT = double(ids.numel()), H = double(cfg_.hidden), V = double(cfg_.vocab_size);
  const TensorMap rows = batch.count("mlm_rows") ? batch : host_metadata(batch);
  const double M = double(rows.at("mlm_rows").numel());
  const double head =
      2 * H * H + (gelu_flops(cfg_.gelu_tanh) + (cfg_.fused ? 1 : 0)) * H + 8 * H + 2 * H * V;
  return 3 * (forward_flops(batch) - BT * head + M * head);
}

double Bert::forward_flops(const TensorMap& batch) const {
  const Tensor& ids = batch.at("input_ids");
  const double B = double(ids.size(0)), T = double(ids.size(1)), BT = B * T;
  const double H = double(cfg_.hidden), I = double(cfg_.intermediate), NH = double(cfg_.heads),
               HS = double(cfg_.head_size()), V = double(cfg_.vocab_size);
  const double gelu = gelu_flops(cfg_.gelu_tanh);
  const double ln = 8;  // kernels/norm layernorm_fwd_cost per element
  // Embeddings: two adds and LayerNorm; the mask: a multiply and an add per position.
  double f = 2 * BT * H + ln * BT * H + 2 * BT;
  double per_layer = 2 * BT * H * H * 4               // q, k, v, attention output
                     + B * NH * T * T * (4 * HS + 5)  // fused attention (attention_fwd_cost)
                     + 2 * BT * H * I * 2             // FFN
                     + gelu * BT * I                  // GELU
                     + (cfg_.fused ? BT * I : 0)      // bias_gelu's add (in the GEMM unfused)
                     + 2 * (cfg_.fused ? 10 * BT * H  // add_layernorm_fwd_cost
                                       : BT * H + ln * BT * H);  // residual adds, LayerNorms
  f += double(cfg_.layers) * per_layer;
  const double tanh = kernels::unary_flops_per_element(kernels::UnaryKind::tanh);
  const double pooled = 2 * B * H * H + tanh * B * H;
  if (cfg_.task == "squad") return f + 2 * BT * H * 2;
  if (cfg_.task == "pretrain") {
    // infer(): every position through the transform and the tied decoder; the training loss
    // projects only the predicted rows (counted by train_flops()).
    return f + pooled + 2 * B * H * 2 + 2 * BT * H * H + (gelu + (cfg_.fused ? 1 : 0)) * BT * H +
           ln * BT * H + 2 * BT * H * V;
  }
  return f + pooled + 2 * B * H * double(cfg_.num_labels);
}

}  // namespace aim::models
