// NMT: GNMT v2 as benchmarked by AI Matrix (MODELS.md §3.2, TensorFlow NMT's gnmt encoder and
// gnmt_v2 attention); commands, figures and what is missing: docs/nmt.md.
//
//   source [B, S] -> encoder_embedding                               -> [S, B, E] (time-major)
//   encoder_bi     bidirectional LSTM H (fw ++ bw)                     -> [S, B, 2H]
//   encoder_rnn1   LSTM H; encoder_rnn2.. LSTM H with residual (+ input)  -> memory [S, B, H]
//   attention      normalised Bahdanau (kernels/additive_attention): keys = memory_layer(memory),
//                  score = g v/||v|| . tanh(keys + query_layer(q) + b), source positions past the
//                  length masked; context = sum align * memory
//   decoder_rnn0   LSTM H on [target embedding ++ previous context] ("attention input feeding");
//                  its output is the query of this step's attention (GNMT v2: the new context)
//   decoder_rnnl   l >= 1: LSTM H on [output of l-1 ++ this step's context], residual (output of
//                  l-1 added) on the top num_layers - 2 layers (TF: num_decoder_residual_layers)
//   output_projection  linear H -> V_tgt, no bias                   -> logits [T, B, V]
// Initial decoder states (TF pass_hidden_state): layer 0 from the bi layer's backward direction,
// layer l from encoder layer l's final state; the first context is 0. Dropout (training) on every
// LSTM's input, the residual adds the undropped input (TF's DropoutWrapper inside
// ResidualWrapper). Init as TF's recipe: every weight U(-0.1, 0.1), LSTM biases 0 with the forget
// bias (1.0) in bias_ih's f rows, attention b = 0 and g = sqrt(1/H).
//
// Loss: TF's sum over target tokens t < target_length of the cross entropy, divided by the batch
// size; label_smoothing > 0 smooths the targets as torch's cross_entropy. Padded steps do not
// change any state or the loss (lengths through the recurrent kernels and the attention mask).
//
// Parameter names equal tests/peers/nmt.py's PyTorch module: encoder_embedding.weight,
// decoder_embedding.weight (absent with share_embeddings), encoder_bi.{weight,bias}_{ih,hh}_l0
// [_reverse], encoder_rnn{1..}.*_l0, attention.memory_layer.weight, attention.query_layer.weight,
// attention.v, attention.g, attention.b, decoder_rnn{0..}.*_l0, output_projection.weight.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/random/random.h"
#include "layers/embedding.h"
#include "layers/linear.h"
#include "layers/rnn.h"
#include "models/model.h"

namespace aim::models {

constexpr int64_t kNmtUnk = 0, kNmtSos = 1, kNmtEos = 2;  // vocab.bpe.32000 lines 0-2

struct NmtConfig {
  int64_t units = 1024;  // LSTM units = embedding width (num_units)
  int64_t src_vocab = 36549, tgt_vocab = 36549;
  int64_t encoder_layers = 4, decoder_layers = 4;
  double dropout = 0.2;
  double label_smoothing = 0;
  double forget_bias = 1.0, init_weight = 0.1;
  bool share_embeddings = false;  // one table for source and target (needs equal vocabs)
  std::string decoder = "beam";   // greedy | beam
  int64_t beam_width = 10;
  double length_penalty = 1.0;    // GNMT's alpha: ((5 + |Y|) / 6)^alpha
  double coverage_penalty = 0.0;  // GNMT's beta
  int64_t max_length = 0;         // decoding limit; 0: twice the longest source of the batch
  uint64_t seed = 0;

  static NmtConfig tiny() {
    NmtConfig c;
    c.units = 32;
    c.src_vocab = c.tgt_vocab = 24;
    c.dropout = 0;
    c.beam_width = 4;
    return c;
  }
};

// The normalised Bahdanau attention's parameters (TF: memory_layer, query_layer, attention_v,
// attention_g, attention_b).
class NmtAttention : public layers::Module {
 public:
  NmtAttention(int64_t units, double init_weight, kernels::Generator& gen);
  std::string type_name() const override { return "NmtAttention"; }
  std::shared_ptr<layers::Linear> memory_layer, query_layer;
  layers::Parameter v, g, b;
};

// One decoding step's state of the whole decoder (per layer h, c [N, H]; context [N, H]).
struct NmtDecoderState {
  std::vector<Variable> h, c;
  Variable context;
  Variable align;  // [N, S]: the last step's attention weights (coverage penalty)
};

// The encoder's results a decoder needs.
struct NmtEncoded {
  Variable memory;  // [B, S, H] batch-major (the attention's values)
  Variable keys;    // [B, S, H] memory_layer(memory)
  Tensor lengths;   // [B] i32 on the model's device (the attention mask)
  NmtDecoderState initial;
};

class Nmt : public Model {
 public:
  explicit Nmt(const NmtConfig& cfg = NmtConfig());

  // source [B, S] i64 and its lengths (host, [B] i32 or i64).
  NmtEncoded encode(const Tensor& source, const Tensor& source_length);
  // Teacher-forced logits [T, B, V] of target_input [B, T] with target lengths (host).
  Variable decode_train(const NmtEncoded& enc, const Tensor& target_input,
                        const Tensor& target_length);
  // One decoding step for tokens [N] (i64, on the device): logits [N, V]; `st` advanced.
  Variable decode_step(const NmtEncoded& enc, const Tensor& tokens, NmtDecoderState& st);
  // TF's loss (see above) of logits [T, B, V] against target_output [B, T] (host) and lengths.
  Variable loss(const Variable& logits, const Tensor& target_output,
                const Tensor& target_length) const;

  // Greedy and beam decoding (models/nmt_search.cpp): one token list per sentence, without EOS.
  std::vector<std::vector<int64_t>> greedy(const Tensor& source, const Tensor& source_length);
  std::vector<std::vector<int64_t>> beam_search(const Tensor& source, const Tensor& source_length);
  // The configured decoder.
  std::vector<std::vector<int64_t>> translate(const Tensor& source, const Tensor& source_length);

  // Inputs: source i64 [B, S] (padded with EOS), source_length i64 [B]. Labels: target_input
  // [B, T] (SOS + target), target_output [B, T] (target + EOS), target_length [B] (target + 1).
  // Outputs: translation [B, L] i64 (EOS-padded) and translation_length [B].
  std::vector<TensorSpec> input_specs() const override;
  std::vector<TensorSpec> label_specs() const override;
  std::vector<TensorSpec> output_specs() const override;
  std::vector<Fp32Params> amp_fp32_params() const override;
  TensorMap infer(const TensorMap& batch) override;
  // "tokens": the translated tokens (translation_length summed), for aim-infer's tokens/s.
  std::pair<std::string, int64_t> output_units(const TensorMap& host_outputs) const override;
  // The lengths and target_output stay on the host: the recurrent kernels plan their steps from
  // the lengths, and the loss's padding mask is made there.
  TensorMap host_metadata(const TensorMap& host_batch) const override;
  Variable training_loss(const TensorMap& batch) override;
  // Training mode: the teacher-forced network and the loss on the padded shapes. Eval mode: the
  // encoder and the decoding steps of the last infer() on a batch of this shape (a search's
  // work depends on when its beams finish); before any, the step limit.
  double forward_flops(const TensorMap& batch) const override;
  std::string type_name() const override { return "Nmt"; }
  const NmtConfig& config() const { return cfg_; }
  // Analytic FLOPs: the encoder on B sentences padded to S; the decoder for T steps of N rows
  // (teacher forcing: N = B; beam search: N = B * beam_width) over a source of S.
  double encoder_flops(int64_t B, int64_t S) const;
  double decoder_flops(int64_t N, int64_t S, int64_t T) const;

  std::shared_ptr<layers::Embedding> encoder_embedding, decoder_embedding;
  std::shared_ptr<layers::LSTM> encoder_bi;
  std::vector<std::shared_ptr<layers::LSTM>> encoder_rnn;  // [0] unused (the bi layer)
  std::shared_ptr<NmtAttention> attention;
  std::vector<std::shared_ptr<layers::LSTM>> decoder_rnn;
  std::shared_ptr<layers::Linear> output_projection;

 private:
  layers::Embedding& target_embedding() const {
    return cfg_.share_embeddings ? *encoder_embedding : *decoder_embedding;
  }
  bool decoder_residual(int64_t l) const { return l >= cfg_.decoder_layers - residual_layers(); }
  bool encoder_residual(int64_t l) const { return l >= cfg_.encoder_layers - residual_layers(); }
  int64_t residual_layers() const { return std::max<int64_t>(cfg_.encoder_layers - 2, 0); }
  Variable drop(const Variable& x);

  NmtConfig cfg_;
  kernels::Generator dropout_gen_;
  struct LastDecode {
    int64_t rows = -1, source_len = -1, steps = -1;
  } last_decode_;  // written by greedy() / beam_search() for forward_flops()
};

}  // namespace aim::models
