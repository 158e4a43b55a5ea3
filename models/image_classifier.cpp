#include "models/image_classifier.h"

#include <cmath>

#include "autograd/functions/loss.h"
#include "kernels/random/random.h"
#include "layers/conv.h"
#include "layers/init.h"
#include "layers/sequential.h"
#include "profiler/profiler.h"

namespace aim::models {

DType ImageClassifier::compute_dtype() const {
  for (const auto& [name, p] : named_parameters()) return p.data().dtype();
  return DType::f32;
}

std::vector<TensorSpec> ImageClassifier::input_specs() const {
  return {{"input",
           compute_dtype(),
           {"B", "3", std::to_string(cfg_.height), std::to_string(cfg_.width)},
           "normalised RGB image, NCHW"}};
}

std::vector<TensorSpec> ImageClassifier::label_specs() const {
  return {{"label", DType::i64, {"B"}, "class index in [0, " + std::to_string(cfg_.classes) + ")"}};
}

std::vector<TensorSpec> ImageClassifier::output_specs() const {
  const std::vector<std::string> dims = {"B", std::to_string(cfg_.classes)};
  return {{"logits", DType::f32, dims, "class scores before softmax"},
          {"output", DType::f32, dims, "the same logits (the model's user-facing result)"}};
}

TensorMap ImageClassifier::infer(const TensorMap& batch) {
  check_batch(input_specs(), batch, type_name() + " inputs");
  const Tensor logits = forward(Variable(batch.at("input"))).data();
  return {{"logits", logits}, {"output", logits}};
}

Variable ImageClassifier::training_loss(const TensorMap& batch) {
  std::vector<TensorSpec> specs = input_specs();
  for (const TensorSpec& s : label_specs()) specs.push_back(s);
  check_batch(specs, batch, type_name() + " batch");
  const Variable logits = forward(Variable(batch.at("input")));
  return autograd::cross_entropy(logits, batch.at("label"), kernels::Reduction::mean, -100,
                                 cfg_.label_smoothing);
}

double ImageClassifier::forward_flops(const TensorMap& batch) const {
  const Tensor& x = batch.at("input");
  double f = 0;
  count_flops(x.sizes(), f);
  return f;
}

namespace {

// Every Conv2d / Linear weight of `m` (recursively), in registration order, with fans.
struct WeightSlot {
  layers::Parameter w, b;
  double fan_in, fan_out;
  bool conv;
};

void collect(const layers::Module& m, std::vector<WeightSlot>& out) {
  // Walk the children explicitly: the module type decides the rule.
  for (const auto& [name, child] : m.children()) {
    (void)name;
    const std::string t = child->type_name();
    if (t == "Conv2d" || t == "Linear") {
      layers::Parameter w, b;
      for (const auto& [pn, p] : child->named_parameters()) {
        if (pn == "weight") w = p;
        if (pn == "bias") b = p;
      }
      const Shape& s = w.sizes();
      const double rf = s.size() == 4 ? double(s[2] * s[3]) : 1.0;
      out.push_back({w, b, double(s[1]) * rf, double(s[0]) * rf, t == "Conv2d"});
    } else {
      collect(*child, out);
    }
  }
}

void fill(layers::Parameter& p, const Tensor& t) { p.data().copy_(t); }

}  // namespace

void init_kaiming_normal_fan_out(layers::Module& m, uint64_t seed) {
  kernels::Generator gen(seed);
  std::vector<WeightSlot> slots;
  collect(m, slots);
  for (WeightSlot& s : slots) {
    if (!s.conv) continue;  // Linear keeps PyTorch's default init (torchvision does)
    fill(s.w, layers::normal_init(s.w.sizes(), 0.0, std::sqrt(2.0 / s.fan_out), gen));
    if (s.b.defined()) s.b.data().fill_(0.0);
  }
}

void init_glorot_uniform(layers::Module& m, uint64_t seed) {
  kernels::Generator gen(seed);
  std::vector<WeightSlot> slots;
  collect(m, slots);
  for (WeightSlot& s : slots) {
    const double bound = std::sqrt(6.0 / (s.fan_in + s.fan_out));
    fill(s.w, layers::uniform_init(s.w.sizes(), -bound, bound, gen));
    if (s.b.defined()) s.b.data().fill_(0.0);
  }
}

Variable forward_in_layer(const std::string& name, layers::Module& m, const Variable& x) {
  profiler::Scope scope(name, profiler::ScopeKind::Layer);
  return m.forward(x);
}

Variable forward_children_in_layers(const std::string& prefix, const layers::Module& chain,
                                    const Variable& x) {
  // A Conv2d then a ReLU: one Conv2d::forward_relu in the conv's layer (layers/sequential.h).
  const auto& ch = chain.children();
  Variable y = x;
  for (size_t i = 0; i < ch.size(); ++i) {
    const auto& [name, child] = ch[i];
    if (i + 1 < ch.size() && layers::conv_relu_pair(*child, *ch[i + 1].second)) {
      profiler::Scope scope(prefix + "." + name, profiler::ScopeKind::Layer);
      y = static_cast<layers::Conv2d&>(*child).forward_relu(y);
      ++i;
      continue;
    }
    y = forward_in_layer(prefix + "." + name, *child, y);
  }
  return y;
}

std::vector<Model::Fp32Params> ImageClassifier::amp_fp32_params() const {
  // Every convolution and linear layer runs in 16 bits; batch-norm statistics and affine
  // parameters are f32 by the op policy (batch_norm is native: 16-bit activations, f32
  // statistics), softmax and the loss too. Nothing else needs declaring.
  return {};
}

}  // namespace aim::models
