// GNMT v2 (models/nmt.h): construction, encoder, teacher-forced decoder, loss, FLOPs.
#include "models/nmt.h"

#include <algorithm>
#include <cmath>

#include "autograd/functions/additive_attention.h"
#include "autograd/functions/dropout.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/loss.h"
#include "autograd/functions/matmul.h"
#include "autograd/functions/rnn.h"
#include "autograd/functions/shape.h"
#include "kernels/additive_attention/additive_attention.h"
#include "kernels/rnn/rnn.h"
#include "layers/init.h"
#include "tensor/check.h"

namespace aim::models {

namespace ag = aim::autograd;

namespace {

const Tensor& get(const TensorMap& b, const char* name) {
  auto it = b.find(name);
  AIM_CHECK(it != b.end() && it->second.defined(), "nmt batch: missing tensor '", name, "'");
  return it->second;
}

void set_uniform(const layers::Parameter& p, double r, kernels::Generator& gen) {
  p.mutable_data().copy_(layers::uniform_init(p.sizes(), -r, r, gen));
}

// TF's recipe on a torch-layout LSTM: weights U(-r, r), biases 0, the forget bias in bias_ih's
// f rows (gate order i, f, g, o): TF adds it in the cell, the same function of a trainable bias.
void init_lstm(layers::LSTM& m, double r, double forget_bias, kernels::Generator& gen) {
  for (int64_t d = 0; d < m.num_directions(); ++d) {
    set_uniform(m.weight_ih(0, d == 1), r, gen);
    set_uniform(m.weight_hh(0, d == 1), r, gen);
    const int64_t H = m.hidden_size();
    std::vector<float> b(size_t(4 * H), 0.f);
    for (int64_t j = H; j < 2 * H; ++j) b[size_t(j)] = float(forget_bias);
    m.bias_ih(0, d == 1).mutable_data().copy_(Tensor::from_vector(b, {4 * H}));
    m.bias_hh(0, d == 1).mutable_data().zero_();
  }
}

// Lengths as [B] i32 on the CPU (what the recurrent kernels plan from).
Tensor host_i32(const Tensor& lengths) {
  AIM_CHECK(lengths.defined() && lengths.dim() == 1 && lengths.device().is_cpu(),
            "nmt: lengths must be a [B] tensor on the host, got ",
            lengths.defined() ? to_string(lengths.sizes()) + " on " + lengths.device().str()
                              : std::string("undefined"));
  return lengths.to(DType::i32).contiguous();
}

// The per-step lengths of a one-step call: 1 where step t is inside the sequence, else 0 (the
// state then passes unchanged).
Tensor step_lengths(const std::vector<int32_t>& len, int64_t t) {
  std::vector<int32_t> s(len.size());
  for (size_t b = 0; b < len.size(); ++b) s[b] = t < len[b] ? 1 : 0;
  return Tensor::from_vector(s, {int64_t(len.size())});
}

// One LSTM step of layer `m` on x [N, I] from (h, c) [N, H]: returns y [N, H], updates h and c.
Variable lstm_step(const layers::LSTM& m, const Variable& x, Variable& h, Variable& c,
                   const Tensor& lengths) {
  ag::RnnArgs a;
  a.cell = kernels::RnnCell::LSTM;
  a.x = ag::unsqueeze(x, 0);
  a.lengths = lengths;
  a.h0 = h, a.c0 = c;
  a.w_ih = m.weight_ih(0), a.w_hh = m.weight_hh(0);
  a.b_ih = m.bias_ih(0), a.b_hh = m.bias_hh(0);
  ag::RnnResult r = ag::rnn(a);
  h = r.hn, c = r.cn;
  return ag::squeeze(r.y, 0);
}

}  // namespace

NmtAttention::NmtAttention(int64_t units, double init_weight, kernels::Generator& gen) {
  memory_layer = child("memory_layer", std::make_shared<layers::Linear>(units, units, 0, false));
  query_layer = child("query_layer", std::make_shared<layers::Linear>(units, units, 0, false));
  set_uniform(memory_layer->weight, init_weight, gen);
  set_uniform(query_layer->weight, init_weight, gen);
  v = param("v", layers::uniform_init({units}, -init_weight, init_weight, gen));
  g = param("g",
            Tensor::from_vector(std::vector<float>{float(std::sqrt(1.0 / double(units)))}, {1}));
  b = param("b", Tensor::zeros({units}));
}

Nmt::Nmt(const NmtConfig& cfg) : cfg_(cfg), dropout_gen_(cfg.seed ^ 0x6e6d74ull) {
  AIM_CHECK(cfg.units > 0 && cfg.src_vocab > 3 && cfg.tgt_vocab > 3,
            "Nmt: units and vocabularies must be positive (vocab > 3: unk, sos, eos), got units ",
            cfg.units, ", vocab ", cfg.src_vocab, "/", cfg.tgt_vocab);
  AIM_CHECK(cfg.encoder_layers >= 2 && cfg.decoder_layers >= 1 &&
                cfg.decoder_layers == cfg.encoder_layers,
            "Nmt: GNMT needs encoder_layers >= 2 (a bidirectional layer, then uni layers) and as "
            "many decoder layers (the decoder starts from the encoder's states), got ",
            cfg.encoder_layers, " and ", cfg.decoder_layers);
  AIM_CHECK(!cfg.share_embeddings || cfg.src_vocab == cfg.tgt_vocab,
            "Nmt: share_embeddings needs equal vocabularies, got ", cfg.src_vocab, " and ",
            cfg.tgt_vocab);
  AIM_CHECK(cfg.dropout >= 0 && cfg.dropout < 1, "Nmt: dropout must lie in [0, 1), got ",
            cfg.dropout);
  const int64_t H = cfg.units;
  const double r = cfg.init_weight;
  kernels::Generator gen(cfg.seed);
  encoder_embedding =
      child("encoder_embedding", std::make_shared<layers::Embedding>(cfg.src_vocab, H));
  set_uniform(encoder_embedding->weight, r, gen);
  if (!cfg.share_embeddings) {
    decoder_embedding =
        child("decoder_embedding", std::make_shared<layers::Embedding>(cfg.tgt_vocab, H));
    set_uniform(decoder_embedding->weight, r, gen);
  }
  layers::RnnOptions bi;
  bi.bidirectional = true;
  encoder_bi = child("encoder_bi", std::make_shared<layers::LSTM>(H, H, bi));
  init_lstm(*encoder_bi, r, cfg.forget_bias, gen);
  encoder_rnn.resize(size_t(cfg.encoder_layers));
  for (int64_t l = 1; l < cfg.encoder_layers; ++l) {
    encoder_rnn[size_t(l)] = child("encoder_rnn" + std::to_string(l),
                                   std::make_shared<layers::LSTM>(l == 1 ? 2 * H : H, H));
    init_lstm(*encoder_rnn[size_t(l)], r, cfg.forget_bias, gen);
  }
  attention = child("attention", std::make_shared<NmtAttention>(H, r, gen));
  decoder_rnn.resize(size_t(cfg.decoder_layers));
  for (int64_t l = 0; l < cfg.decoder_layers; ++l) {
    decoder_rnn[size_t(l)] =
        child("decoder_rnn" + std::to_string(l), std::make_shared<layers::LSTM>(2 * H, H));
    init_lstm(*decoder_rnn[size_t(l)], r, cfg.forget_bias, gen);
  }
  output_projection =
      child("output_projection", std::make_shared<layers::Linear>(H, cfg.tgt_vocab, 0, false));
  set_uniform(output_projection->weight, r, gen);
}

Variable Nmt::drop(const Variable& x) {
  if (!is_training() || cfg_.dropout == 0) return x;
  return ag::dropout(x, cfg_.dropout, true, dropout_gen_);
}

NmtEncoded Nmt::encode(const Tensor& source, const Tensor& source_length) {
  AIM_CHECK(source.defined() && source.dim() == 2, "nmt: source must be [B, S], got ",
            source.defined() ? to_string(source.sizes()) : std::string("undefined"));
  const Tensor len = host_i32(source_length);
  AIM_CHECK(len.size(0) == source.size(0), "nmt: source_length has ", len.size(0),
            " entries, source ", source.size(0), " rows");
  const Device dev = source.device();
  const Variable emb = encoder_embedding->forward(source.transpose(0, 1).contiguous());  // [S,B,H]
  NmtEncoded e;
  e.initial.h.resize(size_t(cfg_.decoder_layers));
  e.initial.c.resize(size_t(cfg_.decoder_layers));
  layers::RnnOutput o = encoder_bi->forward(drop(emb), len);
  // Decoder layer 0 starts from the bi layer's backward state (TF: bi_encoder_state[1]).
  e.initial.h[0] = ag::select(o.h_n, 0, 1), e.initial.c[0] = ag::select(o.c_n, 0, 1);
  Variable x = o.output;
  for (int64_t l = 1; l < cfg_.encoder_layers; ++l) {
    layers::RnnOutput u = encoder_rnn[size_t(l)]->forward(drop(x), len);
    x = encoder_residual(l) ? ag::add(u.output, x) : u.output;
    e.initial.h[size_t(l)] = ag::select(u.h_n, 0, 0);
    e.initial.c[size_t(l)] = ag::select(u.c_n, 0, 0);
  }
  e.memory = ag::contiguous(ag::transpose(x, 0, 1));  // [B, S, H]
  e.keys = attention->memory_layer->forward(e.memory);
  e.lengths = len.to(dev);
  const int64_t B = source.size(0), H = cfg_.units;
  e.initial.context = Variable(Tensor::zeros({B, H}, emb.dtype(), dev));
  return e;
}

// A decoding step: layer 0 and the attention, then the upper layers (teacher forcing runs the
// upper layers over the whole sequence instead).
Variable Nmt::decode_step(const NmtEncoded& enc, const Tensor& tokens, NmtDecoderState& st) {
  const Variable emb = target_embedding().forward(tokens);  // [N, H]
  Variable y = lstm_step(*decoder_rnn[0], drop(ag::concat({emb, st.context}, 1)), st.h[0], st.c[0],
                         Tensor());
  const Variable q = attention->query_layer->forward(y);
  const ag::AdditiveAttentionResult att = ag::additive_attention(
      enc.keys, q, attention->b, attention->v, attention->g, enc.memory, enc.lengths);
  st.context = att.context;
  st.align = att.align;
  for (int64_t l = 1; l < cfg_.decoder_layers; ++l) {
    const Variable out = lstm_step(*decoder_rnn[size_t(l)], drop(ag::concat({y, st.context}, 1)),
                                   st.h[size_t(l)], st.c[size_t(l)], Tensor());
    y = decoder_residual(l) ? ag::add(out, y) : out;
  }
  return output_projection->forward(y);
}

Variable Nmt::decode_train(const NmtEncoded& enc, const Tensor& target_input,
                           const Tensor& target_length) {
  AIM_CHECK(target_input.defined() && target_input.dim() == 2,
            "nmt: target_input must be [B, T], got ",
            target_input.defined() ? to_string(target_input.sizes()) : std::string("undefined"));
  const Tensor len = host_i32(target_length);
  const std::vector<int32_t> lv = len.to_vector<int32_t>();
  const int64_t T = target_input.size(1);
  const Variable emb =
      target_embedding().forward(target_input.transpose(0, 1).contiguous());  // [T, B, H]
  Variable h = enc.initial.h[0], c = enc.initial.c[0], ctx = enc.initial.context;
  std::vector<Variable> ys, ctxs;
  for (int64_t t = 0; t < T; ++t) {
    const Variable x = drop(ag::concat({ag::select(emb, 0, t), ctx}, 1));
    const Variable y = lstm_step(*decoder_rnn[0], x, h, c, step_lengths(lv, t));
    const Variable q = attention->query_layer->forward(y);
    ctx = ag::additive_attention(enc.keys, q, attention->b, attention->v, attention->g, enc.memory,
                                 enc.lengths)
              .context;
    ys.push_back(ag::unsqueeze(y, 0));
    ctxs.push_back(ag::unsqueeze(ctx, 0));
  }
  Variable x = ag::concat(ys, 0);
  const Variable context = ag::concat(ctxs, 0);  // [T, B, H]
  for (int64_t l = 1; l < cfg_.decoder_layers; ++l) {
    const layers::RnnOutput o = decoder_rnn[size_t(l)]->forward(
        drop(ag::concat({x, context}, 2)), len, ag::unsqueeze(enc.initial.h[size_t(l)], 0),
        ag::unsqueeze(enc.initial.c[size_t(l)], 0));
    x = decoder_residual(l) ? ag::add(o.output, x) : o.output;
  }
  return output_projection->forward(x);  // [T, B, V]
}

Variable Nmt::loss(const Variable& logits, const Tensor& target_output,
                   const Tensor& target_length) const {
  const int64_t T = logits.size(0), B = logits.size(1), V = logits.size(2);
  const Tensor len = host_i32(target_length);
  const std::vector<int32_t> lv = len.to_vector<int32_t>();
  const Tensor tgt = target_output.to(kCPU).to(DType::i64).contiguous();
  AIM_CHECK(tgt.dim() == 2 && tgt.size(0) == B && tgt.size(1) == T, "nmt: target_output must be [",
            B, ", ", T, "], got ", to_string(tgt.sizes()));
  // Time-major targets, -100 (ignored) past each length.
  std::vector<int64_t> m(size_t(T * B));
  const int64_t* p = tgt.data<int64_t>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b) m[size_t(t * B + b)] = t < lv[size_t(b)] ? p[b * T + t] : -100;
  const Tensor target = Tensor::from_vector(m, {T * B}).to(logits.data().device());
  const Variable ce = ag::cross_entropy(ag::reshape(logits, {T * B, V}), target,
                                        kernels::Reduction::sum, -100, cfg_.label_smoothing);
  return ag::mul(ce, 1.0 / double(B));
}

std::vector<TensorSpec> Nmt::input_specs() const {
  return {{"source", DType::i64, {"B", "S"}, "source token ids, EOS (2) past source_length"},
          {"source_length", DType::i64, {"B"}, "source tokens per sentence, 1 <= len <= S"}};
}

std::vector<TensorSpec> Nmt::label_specs() const {
  return {{"target_input", DType::i64, {"B", "T"}, "SOS (1) then the target tokens, EOS padded"},
          {"target_output", DType::i64, {"B", "T"}, "the target tokens then EOS, EOS padded"},
          {"target_length", DType::i64, {"B"}, "target tokens + 1 (EOS), <= T"}};
}

std::vector<TensorSpec> Nmt::output_specs() const {
  return {{"translation", DType::i64, {"B", "L"}, "decoded token ids, EOS padded"},
          {"translation_length", DType::i64, {"B"}, "decoded tokens (without EOS)"}};
}

std::vector<Model::Fp32Params> Nmt::amp_fp32_params() const {
  return {{"attention\\.(v|g|b)$", "the score vector's norm and gain: tiny values, f32"}};
}

TensorMap Nmt::host_metadata(const TensorMap& host_batch) const {
  TensorMap m;
  for (const char* k : {"source_length", "target_length", "target_output"}) {
    auto it = host_batch.find(k);
    if (it != host_batch.end() && it->second.defined()) m[k] = it->second;
  }
  return m;
}

Variable Nmt::training_loss(const TensorMap& batch) {
  std::vector<TensorSpec> specs = input_specs();
  for (const TensorSpec& s : label_specs()) specs.push_back(s);
  check_batch(specs, batch, "nmt batch");
  const NmtEncoded enc = encode(get(batch, "source"), get(batch, "source_length"));
  const Variable logits =
      decode_train(enc, get(batch, "target_input"), get(batch, "target_length"));
  return loss(logits, get(batch, "target_output"), get(batch, "target_length"));
}

TensorMap Nmt::infer(const TensorMap& batch) {
  check_batch(input_specs(), batch, "nmt inputs");
  const std::vector<std::vector<int64_t>> out =
      translate(get(batch, "source"), get(batch, "source_length"));
  int64_t L = 1;
  for (const auto& s : out) L = std::max<int64_t>(L, int64_t(s.size()));
  const int64_t B = int64_t(out.size());
  std::vector<int64_t> ids(size_t(B * L), kNmtEos), lens(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    std::copy(out[size_t(b)].begin(), out[size_t(b)].end(), ids.begin() + b * L);
    lens[size_t(b)] = int64_t(out[size_t(b)].size());
  }
  return {{"translation", Tensor::from_vector(ids, {B, L})},
          {"translation_length", Tensor::from_vector(lens, {B})}};
}

std::pair<std::string, int64_t> Nmt::output_units(const TensorMap& host_outputs) const {
  int64_t n = 0;
  for (int64_t v : get(host_outputs, "translation_length").to_vector<int64_t>()) n += v;
  return {"tokens", n};
}

std::vector<std::vector<int64_t>> Nmt::translate(const Tensor& source,
                                                 const Tensor& source_length) {
  return cfg_.decoder == "greedy" ? greedy(source, source_length)
                                  : beam_search(source, source_length);
}

namespace {
// An LSTM layer over n steps of b rows with input I (kernels/rnn/rnn.h's rnn_fwd_cost).
double lstm_flops(double n, double b, double I, double H) {
  return 2 * n * b * 4 * H * (I + H) + n * b * H * 30;
}
}  // namespace

double Nmt::encoder_flops(int64_t B, int64_t S) const {
  const double H = double(cfg_.units), b = double(B), s = double(S);
  double f = 2 * lstm_flops(s, b, H, H);  // the bi layer
  for (int64_t l = 1; l < cfg_.encoder_layers; ++l) {
    f += lstm_flops(s, b, l == 1 ? 2 * H : H, H);
    if (encoder_residual(l)) f += s * b * H;
  }
  return f + 2 * b * s * H * H;  // memory_layer
}

double Nmt::decoder_flops(int64_t N, int64_t S, int64_t T) const {
  const double H = double(cfg_.units), n = double(N), t = double(T);
  // Layer 0 and the attention per step, the upper layers, the output projection.
  double f = lstm_flops(t, n, 2 * H, H) + t * 2 * n * H * H +
             t * n * double(S) * (5 * H + 5 + 2 * H);  // additive_attention_fwd_cost
  for (int64_t l = 1; l < cfg_.decoder_layers; ++l) {
    f += lstm_flops(t, n, 2 * H, H);
    if (decoder_residual(l)) f += t * n * H;
  }
  return f + 2 * t * n * H * double(cfg_.tgt_vocab);
}

double Nmt::forward_flops(const TensorMap& batch) const {
  const Tensor& src = get(batch, "source");
  const int64_t B = src.size(0), S = src.size(1);
  if (is_training()) {
    const int64_t T = get(batch, "target_input").size(1);
    return encoder_flops(B, S) + decoder_flops(B, S, T) +
           5.0 * double(B * T * cfg_.tgt_vocab);  // log-softmax and the loss
  }
  // Decoding: the steps the last infer() on a batch of this shape took; before any, the limit.
  const int64_t rows = cfg_.decoder == "greedy" ? B : B * cfg_.beam_width;
  const int64_t steps =
      last_decode_.rows == rows && last_decode_.source_len == S && last_decode_.steps >= 0
          ? last_decode_.steps
          : (cfg_.max_length > 0 ? cfg_.max_length : 2 * S);
  return encoder_flops(B, S) + decoder_flops(rows, S, steps);
}

}  // namespace aim::models
