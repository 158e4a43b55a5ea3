// BERT (MODELS.md §3.1; Devlin et al. 2019) in Hugging Face's BertModel layout, with its three
// task heads. Definitions, measurements and the reference mapping: docs/bert.md.
//
//   emb = LayerNorm(word[input_ids] + position[0..T) + token_type[token_type_ids]); dropout
//   per layer (post-LN):
//     q, k, v = h Wq^T + bq, ...                      [B, T, H] -> [B, NH, T, HS]
//     ctx  = softmax(q k^T / sqrt(HS) + mask) v       (fused attention, dropout on the
//     probabilities) h    = LayerNorm(h + dropout(ctx Wo^T + bo)) h    = LayerNorm(h +
//     dropout(GELU(h Wi^T + bi) Wout^T + bout))
//   mask = (1 - attention_mask) * lowest(f32), additive over the keys [B, 1, 1, T] (HF's)
//   pooler = tanh([CLS] state Wp^T + bp)
// Tasks (Hugging Face's heads and names, each module under "bert."):
//   squad:    qa_outputs H -> 2: start_logits, end_logits [B, T]; loss = (CE(start) + CE(end)) / 2
//             with positions clamped to [0, T] and T ignored (BertForQuestionAnswering); no pooler.
//   pretrain: cls.predictions: dense H -> H, GELU, LayerNorm, decoder tied to the word embeddings
//             + cls.predictions.bias -> prediction_logits [B, T, V]; cls.seq_relationship on the
//             pooled [CLS] -> seq_relationship_logits [B, 2]; loss = CE(masked LM, -100 ignored)
//             + CE(next sentence) (BertForPreTraining). The training loss projects only the
//             predicted positions onto the vocabulary (the same loss and gradients; the other
//             rows' logits are never read).
//   classify: dropout, classifier H -> num_labels on the pooled [CLS] -> logits [B, num_labels];
//             loss = CE (BertForSequenceClassification).
// With fused (default), GELU takes the FFN's bias (bias_gelu) and each residual + LayerNorm is one
// kernel (add_layer_norm); `--config fused=off` runs the unfused ops.
// Initialisation as Hugging Face's _init_weights: Linear and Embedding weights N(0, 0.02), biases
// 0, LayerNorm 1 / 0, the padding row (id 0) of the word embeddings 0.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/random/random.h"
#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "models/model.h"

namespace aim::models {

struct BertConfig {
  int64_t vocab_size = 30522, hidden = 1024, layers = 24, heads = 16, intermediate = 4096;
  int64_t max_position = 512, type_vocab = 2;
  double hidden_dropout = 0.1, attention_dropout = 0.1, layer_norm_eps = 1e-12;
  double init_range = 0.02;
  bool gelu_tanh = false;      // Hugging Face: exact erf GELU ("gelu")
  std::string task = "squad";  // squad | pretrain | classify
  int64_t num_labels = 2;      // classify
  // Fused bias + GELU and residual + LayerNorm kernels (autograd/functions/fused_bias.h); false:
  // the unfused ops (GEMM with its bias, gelu, add, layer_norm). Same values and gradients.
  bool fused = true;
  uint64_t seed = 0;

  int64_t head_size() const { return hidden / heads; }
  static BertConfig large() { return BertConfig(); }
  static BertConfig base() {
    BertConfig c;
    c.hidden = 768, c.layers = 12, c.heads = 12, c.intermediate = 3072;
    return c;
  }
  // CI size: 2 layers of 128 (2 heads of 64), FFN 512.
  static BertConfig tiny() {
    BertConfig c;
    c.hidden = 128, c.layers = 2, c.heads = 2, c.intermediate = 512;
    return c;
  }
};

// A named container for Hugging Face's nesting ("attention.output.dense"): children by name.
class BertNode : public layers::Module {
 public:
  explicit BertNode(std::string type) : type_(std::move(type)) {}
  template <class M>
  std::shared_ptr<M> add(const std::string& name, std::shared_ptr<M> m) {
    return child(name, std::move(m));
  }
  layers::Parameter add_param(const std::string& name, Tensor t) { return param(name, t); }
  std::string type_name() const override { return type_; }

 private:
  std::string type_;
};

class BertEmbeddings : public layers::Module {
 public:
  BertEmbeddings(const BertConfig& c, kernels::Generator& gen);
  Variable forward(const Tensor& input_ids, const Tensor& token_type_ids);
  std::string type_name() const override { return "BertEmbeddings"; }
  std::shared_ptr<layers::Embedding> word_embeddings, position_embeddings, token_type_embeddings;
  std::shared_ptr<layers::LayerNorm> LayerNorm;
  std::shared_ptr<layers::Dropout> dropout;
};

// attention.self.{query,key,value}, attention.output.{dense,LayerNorm}, intermediate.dense,
// output.{dense,LayerNorm}.
class BertLayer : public layers::Module {
 public:
  BertLayer(const BertConfig& c, kernels::Generator& gen);
  // h [B, T, H], mask additive [B, 1, 1, T] f32 -> [B, T, H].
  Variable forward(const Variable& h, const Tensor& mask);
  std::string type_name() const override { return "BertLayer"; }
  std::shared_ptr<layers::Linear> query, key, value, attention_dense, intermediate_dense,
      output_dense;
  std::shared_ptr<layers::LayerNorm> attention_norm, output_norm;
  std::shared_ptr<layers::Dropout> attention_dropout, output_dropout;

 private:
  // LayerNorm(residual + dropout(dense(x))): add_layer_norm (the dense's bias in it when dropout
  // is off) or the unfused add and layer_norm.
  Variable dense_residual_norm(layers::Linear& dense, layers::Dropout& drop, layers::LayerNorm& ln,
                               const Variable& x, const Variable& residual);
  BertConfig c_;
  kernels::Generator attention_gen_;  // dropout on the attention probabilities
};

class Bert : public Model {
 public:
  explicit Bert(const BertConfig& cfg = BertConfig());

  // The encoder's last hidden state [B, T, H] (embeddings + layers).
  Variable encode(const Tensor& input_ids, const Tensor& token_type_ids,
                  const Tensor& attention_mask);
  // tanh(dense(state[:, 0])) [B, H]: pretrain and classify.
  Variable pool(const Variable& state);
  // pretrain: the vocabulary logits of hidden states [..., H] -> [..., V] (transform, tied
  // decoder).
  Variable mlm_logits(const Variable& state);

  // Inputs (all tasks): input_ids, token_type_ids, attention_mask i64 [B, T]. Labels: squad
  // start_positions, end_positions [B]; pretrain labels [B, T] (-100 not predicted),
  // next_sentence_label [B]; classify labels [B].
  std::vector<TensorSpec> input_specs() const override;
  std::vector<TensorSpec> label_specs() const override;
  std::vector<TensorSpec> output_specs() const override;
  std::vector<Fp32Params> amp_fp32_params() const override;
  TensorMap infer(const TensorMap& batch) override;
  Variable training_loss(const TensorMap& batch) override;
  double forward_flops(const TensorMap& batch) const override;
  // pretrain: 3x the forward with the vocabulary projection on the predicted rows only.
  double train_flops(const TensorMap& batch) const override;
  // pretrain: "mlm_rows" (flat [B * T] positions whose label is not -100) and "mlm_targets"
  // (their labels), i64 [M] on the host, so a step on a GPU reads nothing back for them.
  TensorMap host_metadata(const TensorMap& host_batch) const override;
  std::string type_name() const override { return "Bert"; }
  const BertConfig& config() const { return cfg_; }

  // The task's loss from a forward pass (the graph attached).
  Variable loss(const TensorMap& batch);
  // The task head's outputs, by Hugging Face's names.
  TensorMap forward_outputs(const TensorMap& batch);

  std::shared_ptr<BertNode> bert;  // "bert": embeddings, encoder.layer.N, pooler
  std::shared_ptr<BertEmbeddings> embeddings;
  std::vector<std::shared_ptr<BertLayer>> layer;
  std::shared_ptr<layers::Linear> pooler;  // bert.pooler.dense (pretrain, classify)
  // squad
  std::shared_ptr<layers::Linear> qa_outputs;
  // pretrain: cls.predictions.transform.{dense,LayerNorm}, cls.predictions.bias,
  // cls.seq_relationship
  std::shared_ptr<layers::Linear> transform_dense, seq_relationship;
  std::shared_ptr<layers::LayerNorm> transform_norm;
  layers::Parameter decoder_bias;
  // classify
  std::shared_ptr<layers::Dropout> classifier_dropout;
  std::shared_ptr<layers::Linear> classifier;

 private:
  Tensor additive_mask(const Tensor& attention_mask) const;
  BertConfig cfg_;
};

}  // namespace aim::models
