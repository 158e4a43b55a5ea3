#include "models/plain_cnn.h"

#include <cmath>

#include "autograd/functions/dropout.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/shape.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/dropout.h"
#include "layers/init.h"
#include "layers/linear.h"
#include "layers/pooling.h"

namespace aim::models {

namespace ag = autograd;
using layers::ConvOptions;
using layers::Sequential;

PlainCnn::PlainCnn(const ImageModelConfig& c, std::string type,
                   std::shared_ptr<Sequential> features, int64_t avgpool_hw,
                   std::shared_ptr<Sequential> classifier)
    : ImageClassifier(c), type_(std::move(type)), flatten_last_(avgpool_hw == 0) {
  features_ = child("features", std::move(features));
  if (avgpool_hw > 0)
    avgpool_ =
        child("avgpool", std::make_shared<layers::AdaptiveAvgPool2d>(avgpool_hw, avgpool_hw));
  classifier_ = child("classifier", std::move(classifier));
}

Variable PlainCnn::forward(const Variable& x) {
  Variable y = forward_children_in_layers("features", *features_, x);
  if (avgpool_) {
    y = forward_in_layer("avgpool", *avgpool_, y);
    y = ag::reshape(y, {y.size(0), y.numel() / y.size(0)});
  }
  y = forward_children_in_layers("classifier", *classifier_, y);
  return flatten_last_ ? ag::reshape(y, {y.size(0), y.numel() / y.size(0)}) : y;
}

Shape PlainCnn::count_flops(const Shape& in, double& flops) const {
  Shape s = features_->count_flops(in, flops);
  if (avgpool_) {
    s = avgpool_->count_flops(s, flops);
    s = {s[0], shape_numel(s) / s[0]};
  }
  s = classifier_->count_flops(s, flops);
  return flatten_last_ ? Shape{s[0], shape_numel(s) / s[0]} : s;
}

namespace {

// Re-initialise every Conv2d/Linear child of `seq` (torchvision's per-model rules).
template <class F>
void for_each_layer(Sequential& seq, const std::string& type, F f) {
  for (const auto& [name, m] : seq.children()) {
    (void)name;
    if (m->type_name() == type) f(*m);
  }
}

void set_params(layers::Module& m, const Tensor& w) {
  for (auto& [n, p] : m.named_parameters()) {
    if (n == "weight") p.data().copy_(w);
    if (n == "bias") p.data().fill_(0.0);
  }
}

Shape weight_shape(layers::Module& m) {
  for (auto& [n, p] : m.named_parameters())
    if (n == "weight") return p.sizes();
  AIM_FAIL(m.type_name(), " has no weight");
}

}  // namespace

std::unique_ptr<ImageClassifier> make_vgg16(const ImageModelConfig& c) {
  const int64_t div = c.tiny ? 8 : 1;
  const std::vector<int64_t> cfg = {64, 64,  0,   128, 128, 0,   256, 256, 256,
                                    0,  512, 512, 512, 0,   512, 512, 512, 0};  // 0: max pool
  auto features = std::make_shared<Sequential>();
  int64_t in = 3;
  uint64_t seed = c.seed * 1000;
  for (int64_t v : cfg) {
    if (v == 0) {
      features->push_back(std::make_shared<layers::MaxPool2d>(2, 2));
      continue;
    }
    features->push_back(
        std::make_shared<layers::Conv2d>(in, v / div, 3, ConvOptions().padding(1), seed++));
    features->push_back(std::make_shared<layers::ReLU>());
    in = v / div;
  }
  const int64_t hidden = 4096 / div, pool = c.tiny ? 1 : 7;
  auto classifier = std::make_shared<Sequential>(std::vector<std::shared_ptr<layers::Module>>{
      std::make_shared<layers::Linear>(in * pool * pool, hidden, seed++),
      std::make_shared<layers::ReLU>(), std::make_shared<layers::Dropout>(0.5, seed++),
      std::make_shared<layers::Linear>(hidden, hidden, seed++), std::make_shared<layers::ReLU>(),
      std::make_shared<layers::Dropout>(0.5, seed++),
      std::make_shared<layers::Linear>(hidden, c.classes, seed++)});
  // torchvision: convs kaiming_normal(fan_out, relu), Linear N(0, 0.01), biases 0.
  kernels::Generator gen(c.seed);
  for_each_layer(*features, "Conv2d", [&](layers::Module& m) {
    const Shape s = weight_shape(m);
    set_params(m, layers::normal_init(s, 0.0, std::sqrt(2.0 / double(s[0] * s[2] * s[3])), gen));
  });
  for_each_layer(*classifier, "Linear", [&](layers::Module& m) {
    set_params(m, layers::normal_init(weight_shape(m), 0.0, 0.01, gen));
  });
  return std::make_unique<PlainCnn>(c, "VGG", features, pool, classifier);
}

std::unique_ptr<ImageClassifier> make_alexnet(const ImageModelConfig& c) {
  const int64_t d = c.tiny ? 8 : 1;
  uint64_t seed = c.seed * 1000;
  auto conv = [&](int64_t in, int64_t out, int64_t k, const ConvOptions& o) {
    return std::make_shared<layers::Conv2d>(in, out, k, o, seed++);
  };
  auto relu = [] { return std::make_shared<layers::ReLU>(); };
  auto pool = [] { return std::make_shared<layers::MaxPool2d>(3, 2); };
  // Tiny: stride 1 in conv1 so 32 px inputs survive the three pools.
  auto features = std::make_shared<Sequential>(std::vector<std::shared_ptr<layers::Module>>{
      conv(3, 64 / d, 11, ConvOptions().stride(c.tiny ? 1 : 4).padding(2)), relu(), pool(),
      conv(64 / d, 192 / d, 5, ConvOptions().padding(2)), relu(), pool(),
      conv(192 / d, 384 / d, 3, ConvOptions().padding(1)), relu(),
      conv(384 / d, 256 / d, 3, ConvOptions().padding(1)), relu(),
      conv(256 / d, 256 / d, 3, ConvOptions().padding(1)), relu(), pool()});
  const int64_t hidden = 4096 / d, hw = c.tiny ? 1 : 6;
  auto classifier = std::make_shared<Sequential>(std::vector<std::shared_ptr<layers::Module>>{
      std::make_shared<layers::Dropout>(0.5, seed++),
      std::make_shared<layers::Linear>(256 / d * hw * hw, hidden, seed++), relu(),
      std::make_shared<layers::Dropout>(0.5, seed++),
      std::make_shared<layers::Linear>(hidden, hidden, seed++), relu(),
      std::make_shared<layers::Linear>(hidden, c.classes, seed++)});
  return std::make_unique<PlainCnn>(c, "AlexNet", features, hw, classifier);
}

Fire::Fire(int64_t inplanes, int64_t squeeze, int64_t expand1x1, int64_t expand3x3, uint64_t seed) {
  squeeze_ =
      child("squeeze", std::make_shared<layers::Conv2d>(inplanes, squeeze, 1, ConvOptions(), seed));
  child("squeeze_activation", std::make_shared<layers::ReLU>());
  expand1x1_ = child("expand1x1", std::make_shared<layers::Conv2d>(squeeze, expand1x1, 1,
                                                                   ConvOptions(), seed + 1));
  child("expand1x1_activation", std::make_shared<layers::ReLU>());
  expand3x3_ = child("expand3x3", std::make_shared<layers::Conv2d>(
                                      squeeze, expand3x3, 3, ConvOptions().padding(1), seed + 2));
  child("expand3x3_activation", std::make_shared<layers::ReLU>());
}

Variable Fire::forward(const Variable& x) {
  const Variable s = squeeze_->forward_relu(x);
  return ag::concat({expand1x1_->forward_relu(s), expand3x3_->forward_relu(s)}, 1);
}

Shape Fire::count_flops(const Shape& in, double& flops) const {
  Shape s = squeeze_->count_flops(in, flops);
  flops += double(shape_numel(s));
  Shape a = expand1x1_->count_flops(s, flops), b = expand3x3_->count_flops(s, flops);
  flops += double(shape_numel(a) + shape_numel(b));
  return {a[0], a[1] + b[1], a[2], a[3]};
}

std::unique_ptr<ImageClassifier> make_squeezenet(const ImageModelConfig& c) {
  const int64_t d = c.tiny ? 4 : 1;
  uint64_t seed = c.seed * 1000;
  auto pool = [] { return std::make_shared<layers::MaxPool2d>(3, 2, 0, /*ceil_mode=*/true); };
  auto fire = [&](int64_t in, int64_t s, int64_t e) {
    seed += 3;
    return std::make_shared<Fire>(in / d, s / d, e / d, e / d, seed);
  };
  auto features = std::make_shared<Sequential>(std::vector<std::shared_ptr<layers::Module>>{
      std::make_shared<layers::Conv2d>(3, 64 / d, 3, ConvOptions().stride(2), seed++),
      std::make_shared<layers::ReLU>(), pool(), fire(64, 16, 64), fire(128, 16, 64), pool(),
      fire(128, 32, 128), fire(256, 32, 128), pool(), fire(256, 48, 192), fire(384, 48, 192),
      fire(384, 64, 256), fire(512, 64, 256)});
  auto final_conv = std::make_shared<layers::Conv2d>(512 / d, c.classes, 1, ConvOptions(), seed++);
  auto classifier = std::make_shared<Sequential>(std::vector<std::shared_ptr<layers::Module>>{
      std::make_shared<layers::Dropout>(0.5, seed++), final_conv, std::make_shared<layers::ReLU>(),
      std::make_shared<layers::AdaptiveAvgPool2d>(1, 1)});
  // torchvision: final conv N(0, 0.01), the others kaiming_uniform (bound sqrt(6 / fan_in)),
  // biases 0.
  kernels::Generator gen(c.seed);
  std::function<void(layers::Module&)> init = [&](layers::Module& m) {
    for (const auto& [n, ch] : m.children()) {
      (void)n;
      if (ch->type_name() != "Conv2d") {
        init(*ch);
        continue;
      }
      const Shape s = weight_shape(*ch);
      const double bound = std::sqrt(6.0 / double(s[1] * s[2] * s[3]));
      set_params(*ch, ch.get() == final_conv.get() ? layers::normal_init(s, 0.0, 0.01, gen)
                                                   : layers::uniform_init(s, -bound, bound, gen));
    }
  };
  init(*features);
  init(*classifier);
  return std::make_unique<PlainCnn>(c, "SqueezeNet", features, 0, classifier);
}

}  // namespace aim::models
