#include "models/crnn.h"

#include <algorithm>
#include <cmath>

#include "autograd/functions/ctc.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/pool.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "autograd/functions/softmax.h"
#include "data/text_font.h"
#include "kernels/loss/ctc.h"
#include "kernels/pool/pool2d.h"
#include "kernels/random/random.h"
#include "layers/init.h"
#include "profiler/profiler.h"
#include "tensor/check.h"

namespace aim::models {

namespace ag = aim::autograd;

namespace {

constexpr double kBnEps = 1e-3;       // tf.layers.batch_normalization defaults
constexpr double kBnMomentum = 0.01;  // TF momentum 0.99 in PyTorch's convention
constexpr double kFcStd = 0.02;       // tf.truncated_normal_initializer(stddev=0.02)

// Pools after conv1, conv2 (2x2) and conv4, conv6 ((2, 1): height only); none after conv3,
// conv5, conv7.
bool pool_after(int i) { return i == 0 || i == 1 || i == 3 || i == 5; }
kernels::Pool2dParams pool_params(int i) {
  kernels::Pool2dParams p;
  p.kernel_h = p.stride_h = 2;
  p.kernel_w = p.stride_w = i < 2 ? 2 : 1;
  return p;
}

const Tensor& get(const TensorMap& b, const char* name) {
  auto it = b.find(name);
  AIM_CHECK(it != b.end() && it->second.defined(), "crnn batch: missing tensor '", name, "'");
  return it->second;
}

// N(0, std^2) truncated at 2 std (TF's truncated_normal: out-of-range draws are redrawn).
Tensor truncated_normal(const Shape& sizes, double std, kernels::Generator& gen) {
  const int64_t n = shape_numel(sizes);
  std::vector<float> out;
  out.reserve(size_t(n));
  while (int64_t(out.size()) < n) {
    const std::vector<float> d = layers::normal_init({n}, 0.0, std, gen).to_vector<float>();
    for (float v : d)
      if (std::abs(v) <= 2 * std && int64_t(out.size()) < n) out.push_back(v);
  }
  return Tensor::from_vector(out, sizes);
}

}  // namespace

Crnn::Crnn(const CrnnConfig& cfg) : cfg_(cfg) {
  AIM_CHECK(cfg.hidden > 0 && cfg.layers >= 1 && cfg.classes >= 2, "Crnn: sizes must be positive");
  for (int64_t c : cfg.channels) AIM_CHECK(c > 0, "Crnn: channels must be positive");
  AIM_CHECK(cfg.height == 32 && cfg.width % 4 == 0 && cfg.width >= 4, "Crnn: the conv stack maps ",
            "32 rows to 1 and needs width % 4 == 0; got ", cfg.height, "x", cfg.width);
  AIM_CHECK(cfg.decoder == "greedy" || cfg.decoder == "beam",
            "Crnn: decoder must be greedy or beam, got '", cfg.decoder, "'");
  AIM_CHECK(cfg.beam_width >= 1, "Crnn: beam_width must be >= 1, got ", cfg.beam_width);
  kernels::Generator gen(cfg.seed);
  int64_t in = 3;
  for (int i = 0; i < 7; ++i) {
    layers::ConvOptions o;
    o.same();
    if (i >= 2) o.no_bias();  // conv3..conv7: use_bias=False in the reference
    const int64_t k = i == 6 ? 2 : 3;
    if (i == 6) o.stride_h = 2;
    const std::string n = std::to_string(i + 1);
    conv[size_t(i)] = child("conv" + n, std::make_shared<layers::Conv2d>(
                                            in, cfg.channels[size_t(i)], k, o, cfg.seed + 1 + i));
    bn[size_t(i)] = child("bn" + n, std::make_shared<layers::BatchNorm2d>(cfg.channels[size_t(i)],
                                                                          kBnEps, kBnMomentum));
    // variance_scaling_initializer(): truncated normal, variance 2 / fan_in; bias 0.
    const double fan_in = double(in * k * k);
    conv[size_t(i)]->weight.data().copy_(
        layers::normal_init(conv[size_t(i)]->weight.sizes(), 0.0, std::sqrt(2.0 / fan_in), gen));
    if (conv[size_t(i)]->bias.defined()) conv[size_t(i)]->bias.data().fill_(0.0);
    in = cfg.channels[size_t(i)];
  }
  layers::RnnOptions ro;
  ro.num_layers = cfg.layers;
  ro.bidirectional = true;
  rnn = child("rnn", std::make_shared<layers::LSTM>(in, cfg.hidden, ro, cfg.seed + 20));
  {
    // TF LSTMCell: kernel [I + H, 4H] Glorot-uniform, bias 0, forget_bias 1 added to the forget
    // gate's pre-activation. PyTorch layout: the same bound on weight_ih and weight_hh, the 1 in
    // bias_ih's forget rows [H, 2H) (gate order i, f, g, o), bias_hh 0 (docs/crnn.md).
    const int64_t H = cfg.hidden;
    layers::StateDict sd;
    for (int64_t k = 0; k < cfg.layers; ++k)
      for (int d = 0; d < 2; ++d) {
        const int64_t I = k == 0 ? in : 2 * H;
        const double bound = std::sqrt(6.0 / double(I + H + 4 * H));
        const std::string sfx = "_l" + std::to_string(k) + (d ? "_reverse" : "");
        sd.emplace_back("weight_ih" + sfx, layers::uniform_init({4 * H, I}, -bound, bound, gen));
        sd.emplace_back("weight_hh" + sfx, layers::uniform_init({4 * H, H}, -bound, bound, gen));
        std::vector<float> b(size_t(4 * H), 0.0f);
        std::fill(b.begin() + H, b.begin() + 2 * H, 1.0f);
        sd.emplace_back("bias_ih" + sfx, Tensor::from_vector(b, {4 * H}));
        sd.emplace_back("bias_hh" + sfx, Tensor::zeros({4 * H}));
      }
    rnn->load_state_dict(sd, /*strict=*/true);
  }
  drop = child("drop", std::make_shared<layers::Dropout>(cfg.dropout, cfg.seed + 30));
  fc = child("fc", std::make_shared<layers::Linear>(2 * cfg.hidden, cfg.classes, cfg.seed + 40,
                                                    /*bias=*/false));
  fc->weight.data().copy_(truncated_normal(fc->weight.sizes(), kFcStd, gen));
}

Variable Crnn::forward(const Variable& x) {
  AIM_CHECK(x.defined() && x.dim() == 4 && x.size(1) == 3 && x.size(2) == cfg_.height &&
                x.size(3) == cfg_.width,
            "Crnn: expected input [B, 3, ", cfg_.height, ", ", cfg_.width, "], got ",
            to_string(x.sizes()));
  using profiler::Scope;
  using profiler::ScopeKind;
  Variable y;
  {
    Scope s("scale", ScopeKind::Layer);
    y = ag::mul(x, 1.0 / 255.0);  // the reference's input / 255
  }
  for (int i = 0; i < 7; ++i) {
    Scope s("conv" + std::to_string(i + 1), ScopeKind::Layer);
    y = bn[size_t(i)]->forward_relu(conv[size_t(i)]->forward(y));
    if (pool_after(i)) y = ag::max_pool2d(y, pool_params(i));
  }
  AIM_CHECK(y.size(2) == 1, "Crnn: the conv stack left height ", y.size(2), ", expected 1");
  const Variable seq = ag::permute(ag::squeeze(y, 2), {2, 0, 1});  // [T, B, C]
  Variable h;
  {
    Scope s("rnn", ScopeKind::Layer);
    h = rnn->forward(seq, Tensor()).output;  // [T, B, 2H]
  }
  Scope s("fc", ScopeKind::Layer);
  return fc->forward(drop->forward(h));  // [T, B, classes]
}

Variable Crnn::ctc_loss(const Variable& logits, const Tensor& label,
                        const Tensor& label_length) const {
  AIM_CHECK(logits.dim() == 3 && logits.size(2) == cfg_.classes,
            "Crnn::ctc_loss: logits must be [T, B, ", cfg_.classes, "], got ",
            to_string(logits.sizes()));
  const int64_t T = logits.size(0), B = logits.size(1);
  AIM_CHECK(label.dim() == 2 && label.size(0) == B && label_length.dim() == 1 &&
                label_length.size(0) == B,
            "Crnn::ctc_loss: label must be [B, S] and label_length [B] with B = ", B, ", got ",
            to_string(label.sizes()), " and ", to_string(label_length.sizes()));
  profiler::Scope s("ctc", profiler::ScopeKind::Layer);
  const Variable lp = ag::log_softmax(logits, 2);
  const Tensor input_lengths = Tensor::full({B}, double(T), DType::i64);
  const Variable l = ag::ctc_loss(lp, label, input_lengths, label_length, cfg_.blank(),
                                  kernels::Reduction::none, /*zero_infinity=*/true);
  return ag::mean(l);
}

std::pair<Tensor, Tensor> Crnn::decode(const Tensor& logits) const {
  const int64_t T = logits.size(0), B = logits.size(1);
  Tensor labels = Tensor::empty({B, T}, DType::i64, logits.device());
  Tensor lengths = Tensor::empty({B}, DType::i64, logits.device());
  profiler::Scope s("decode", profiler::ScopeKind::Layer);
  if (cfg_.decoder == "greedy") {
    kernels::CtcGreedyDecodeArgs a;
    a.log_probs = logits;  // argmax of the logits = argmax of their log_softmax
    a.labels = labels;
    a.lengths = lengths;
    a.blank = cfg_.blank();
    a.merge_repeated = true;  // the CTC collapse (beam search applies it regardless)
    kernels::ctc_greedy_decode(a);
  } else {
    kernels::CtcBeamDecodeArgs a;
    a.log_probs = ag::log_softmax(Variable(logits), 2).data();
    a.labels = labels;
    a.lengths = lengths;
    a.log_prob = Tensor::empty({B}, kernels::loss_dtype(logits.dtype()), logits.device());
    a.blank = cfg_.blank();
    a.beam_width = cfg_.beam_width;
    a.merge_repeated = false;  // the reference's evaluation decoder
    kernels::ctc_beam_decode(a);
  }
  return {labels, lengths};
}

std::vector<TensorSpec> Crnn::input_specs() const {
  return {{"input",
           DType::f32,
           {"B", "3", std::to_string(cfg_.height), std::to_string(cfg_.width)},
           "BGR pixel values in [0, 255], NCHW (the model divides by 255)"}};
}

std::vector<TensorSpec> Crnn::label_specs() const {
  return {{"label", DType::i64, {"B", "S"}, "class indices 0-9 digits, 10-35 a-z, -1 padded"},
          {"label_length", DType::i64, {"B"}, "characters in each label (<= S)"}};
}

std::vector<TensorSpec> Crnn::output_specs() const {
  const std::string T = std::to_string(cfg_.steps()), C = std::to_string(cfg_.classes);
  return {{"logits", DType::f32, {T, "B", C}, "time-major class scores, blank = last class"},
          {"output", DType::f32, {T, "B", C}, "the same logits"},
          {"decoded", DType::i64, {"B", T}, "decoded class indices, -1 past decoded_length"},
          {"decoded_length", DType::i64, {"B"}, "characters decoded"}};
}

TensorMap Crnn::host_metadata(const TensorMap& host_batch) const {
  auto it = host_batch.find("label_length");
  if (it == host_batch.end() || !it->second.defined()) return {};
  return {{"label_length", it->second}};
}

TensorMap Crnn::infer(const TensorMap& batch) {
  check_batch(input_specs(), batch, "crnn inputs");
  const Tensor logits = forward(Variable(batch.at("input"))).data();
  auto [labels, lengths] = decode(logits);
  return {{"logits", logits}, {"output", logits}, {"decoded", labels}, {"decoded_length", lengths}};
}

Variable Crnn::training_loss(const TensorMap& batch) {
  std::vector<TensorSpec> specs = input_specs();
  for (const TensorSpec& s : label_specs()) specs.push_back(s);
  check_batch(specs, batch, "crnn batch");
  const Variable logits = forward(Variable(batch.at("input")));
  return ctc_loss(logits, get(batch, "label"), get(batch, "label_length"));
}

double Crnn::network_flops(int64_t B) const {
  double f = double(B * 3 * cfg_.height * cfg_.width);  // / 255
  Shape s = {B, 3, cfg_.height, cfg_.width};
  for (int i = 0; i < 7; ++i) {
    s = conv[size_t(i)]->count_flops(s, f);
    s = bn[size_t(i)]->count_flops(s, f);
    f += double(shape_numel(s));  // ReLU
    if (pool_after(i)) {
      const kernels::Pool2dParams p = pool_params(i);
      s = {s[0], s[1], s[2] / p.stride_h, s[3] / p.stride_w};
      f += double(shape_numel(s)) * double(p.kernel_h * p.kernel_w);
    }
  }
  s = {s[3], s[0], s[1]};  // [T, B, C]
  s = rnn->count_flops(s, f);
  s = drop->count_flops(s, f);
  fc->count_flops(s, f);
  return f;
}

double Crnn::forward_flops(const TensorMap& batch) const {
  const int64_t B = get(batch, "input").size(0);
  const double T = double(cfg_.steps()), C = double(cfg_.classes), n = T * double(B) * C;
  double f = network_flops(B);
  if (!is_training()) {
    // Decoder: greedy n (ctc_greedy_decode_cost); beam: log_softmax 5n, then 6 n W.
    if (cfg_.decoder == "greedy") return f + n;
    return f + 5 * n + 6 * n * double(cfg_.beam_width);
  }
  // log_softmax (5n), CTC alpha recursion (8 T B (2S + 1), ctc_fwd_cost), batch mean (B).
  const double S = double(get(batch, "label").size(1));
  return f + 5 * n + 8 * T * double(B) * (2 * S + 1) + double(B);
}

std::vector<Model::Fp32Params> Crnn::amp_fp32_params() const {
  // Convolutions, the LSTM and the projection run in 16 bits; batch-norm statistics, softmax and
  // the CTC loss are f32 by the op policy. Nothing else needs declaring.
  return {};
}

TextAccuracy text_accuracy(const std::vector<std::vector<int64_t>>& labels,
                           const std::vector<std::vector<int64_t>>& predictions) {
  AIM_CHECK(labels.size() == predictions.size() && !labels.empty(),
            "text_accuracy: ", labels.size(), " labels and ", predictions.size(),
            " predictions (need equal, > 0)");
  double chars = 0;
  int64_t exact = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const auto& l = labels[i];
    const auto& p = predictions[i];
    exact += l == p;
    if (l.empty()) {
      chars += p.empty() ? 1.0 : 0.0;
      continue;
    }
    int64_t ok = 0;
    for (size_t k = 0; k < std::min(l.size(), p.size()); ++k) ok += l[k] == p[k];
    chars += double(ok) / double(l.size());
  }
  const double n = double(labels.size());
  return {chars / n, double(exact) / n};
}

std::string classes_to_text(const std::vector<int64_t>& classes) {
  std::string s;
  for (int64_t c : classes) {
    AIM_CHECK(c >= 0 && c < data::kTextClasses, "classes_to_text: class ", c, " outside [0, ",
              data::kTextClasses, ")");
    s += data::kTextAlphabet[c];
  }
  return s;
}

}  // namespace aim::models
