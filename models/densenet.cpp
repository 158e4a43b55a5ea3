#include "models/densenet.h"

#include <cmath>

#include "autograd/functions/dropout.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/shape.h"
#include "kernels/random/random.h"
#include "layers/activation.h"
#include "layers/init.h"
#include "layers/pooling.h"
#include "profiler/profiler.h"

namespace aim::models {

namespace ag = autograd;
using layers::BatchNorm2d;
using layers::Conv2d;
using layers::ConvOptions;

Variable NamedChain::forward(const Variable& x) {
  Variable y = x;
  for (const auto& [name, m] : children()) {
    (void)name;
    y = m->forward(y);
  }
  return y;
}

Shape NamedChain::count_flops(const Shape& in, double& flops) const {
  Shape s = in;
  for (const auto& [name, m] : children()) {
    (void)name;
    s = m->count_flops(s, flops);
  }
  return s;
}

namespace {

// One kernel pass at inference (BatchNorm2d::forward_relu): DenseNet's batch norms follow a
// concatenation, not a convolution, so they cannot fold; their ReLU fuses instead.
Variable bn_relu(BatchNorm2d& bn, const Variable& x) { return bn.forward_relu(x); }

Shape bn_relu_flops(const BatchNorm2d& bn, const Shape& in, double& flops) {
  const Shape s = bn.count_flops(in, flops);
  flops += double(shape_numel(s));  // relu
  return s;
}

// torchvision's DenseNet init: every conv weight kaiming_normal_ (fan_in, gain sqrt 2); BN keeps
// 1 / 0; the classifier keeps PyTorch's default weight and gets a zero bias (done by the caller).
void init_conv_kaiming_normal_fan_in(layers::Module& m, kernels::Generator& gen) {
  for (const auto& [name, ch] : m.children()) {
    (void)name;
    if (auto* conv = dynamic_cast<Conv2d*>(ch.get())) {
      const Shape& s = conv->weight.sizes();  // [out, in/groups, kh, kw]
      const double fan_in = double(s[1] * s[2] * s[3]);
      conv->weight.data().copy_(layers::normal_init(s, 0.0, std::sqrt(2.0 / fan_in), gen));
    } else {
      init_conv_kaiming_normal_fan_in(*ch, gen);
    }
  }
}

}  // namespace

DenseLayer::DenseLayer(int64_t in, int64_t growth, int64_t bottleneck, bool post_norm,
                       double bn_eps, uint64_t seed) {
  norm1_ = child("norm1", std::make_shared<BatchNorm2d>(in, bn_eps, 0.1));
  conv1_ =
      child("conv1", std::make_shared<Conv2d>(in, bottleneck, 1, ConvOptions().no_bias(), seed));
  if (post_norm)
    conv1_norm_ = child("conv1_norm", std::make_shared<BatchNorm2d>(bottleneck, bn_eps, 0.1));
  norm2_ = child("norm2", std::make_shared<BatchNorm2d>(bottleneck, bn_eps, 0.1));
  // 3x3 stride 1: TF SAME padding is the symmetric pad 1.
  conv2_ = child("conv2", std::make_shared<Conv2d>(bottleneck, growth, 3,
                                                   ConvOptions().padding(1).no_bias(), seed + 1));
  if (post_norm)
    conv2_norm_ = child("conv2_norm", std::make_shared<BatchNorm2d>(growth, bn_eps, 0.1));
}

Variable DenseLayer::new_features(const Variable& x) {
  // At inference norm1 may be folded into conv1 (layers/fold.h): it returns x, and conv1 applies
  // it while copying x (a channel slice of DenseBlock's buffer) into its column matrix.
  Variable y = conv1_->forward(bn_relu(*norm1_, x));
  if (conv1_norm_) y = bn_relu(*conv1_norm_, y);
  y = conv2_->forward(bn_relu(*norm2_, y));
  if (conv2_norm_) y = bn_relu(*conv2_norm_, y);
  return y;
}

Variable DenseLayer::forward(const Variable& x) { return ag::concat({x, new_features(x)}, 1); }

Variable DenseBlock::forward(const Variable& x) {
  if (ag::grad_enabled()) return NamedChain::forward(x);
  AIM_CHECK(x.dim() == 4, "DenseBlock: expected input [N, C, H, W], got ", to_string(x.sizes()));
  std::vector<DenseLayer*> layers;
  int64_t channels = x.size(1);
  for (const auto& [name, m] : children()) {
    auto* l = dynamic_cast<DenseLayer*>(m.get());
    AIM_CHECK(l, "DenseBlock: child '", name, "' is not a DenseLayer");
    layers.push_back(l);
    channels += l->growth();
  }
  const Tensor buf =
      Tensor::empty({x.size(0), channels, x.size(2), x.size(3)}, x.dtype(), x.device());
  int64_t c = x.size(1);
  buf.narrow(1, 0, c).copy_(x.data());
  for (DenseLayer* l : layers) {
    const Tensor y = l->new_features(Variable(buf.narrow(1, 0, c))).data();
    AIM_CHECK(y.dim() == 4 && y.size(1) == l->growth(), "DenseBlock: a layer returned ",
              to_string(y.sizes()), ", expected ", l->growth(), " channels");
    buf.narrow(1, c, l->growth()).copy_(y);
    c += l->growth();
  }
  return Variable(buf);
}

Shape DenseLayer::count_flops(const Shape& in, double& flops) const {
  Shape s = conv1_->count_flops(bn_relu_flops(*norm1_, in, flops), flops);
  if (conv1_norm_) s = bn_relu_flops(*conv1_norm_, s, flops);
  s = conv2_->count_flops(bn_relu_flops(*norm2_, s, flops), flops);
  if (conv2_norm_) s = bn_relu_flops(*conv2_norm_, s, flops);
  return {in[0], in[1] + s[1], in[2], in[3]};  // concat: no FLOPs
}

Transition::Transition(int64_t in, int64_t out, bool post_norm, double bn_eps, uint64_t seed) {
  norm_ = child("norm", std::make_shared<BatchNorm2d>(in, bn_eps, 0.1));
  conv_ = child("conv", std::make_shared<Conv2d>(in, out, 1, ConvOptions().no_bias(), seed));
  if (post_norm) conv_norm_ = child("conv_norm", std::make_shared<BatchNorm2d>(out, bn_eps, 0.1));
  pool_ = child("pool", std::make_shared<layers::AvgPool2d>(2, 2));
}

Variable Transition::forward(const Variable& x) {
  Variable y = conv_->forward(bn_relu(*norm_, x));
  if (conv_norm_) y = bn_relu(*conv_norm_, y);
  return pool_->forward(y);
}

Shape Transition::count_flops(const Shape& in, double& flops) const {
  Shape s = conv_->count_flops(bn_relu_flops(*norm_, in, flops), flops);
  if (conv_norm_) s = bn_relu_flops(*conv_norm_, s, flops);
  return pool_->count_flops(s, flops);
}

DenseNet::DenseNet(const ImageModelConfig& c) : ImageClassifier(c) {
  AIM_CHECK(c.variant.empty() || c.variant == "standard" || c.variant == "aimatrix_tf",
            "densenet121: variant must be standard or aimatrix_tf, got '", c.variant, "'");
  AIM_CHECK(c.classes > 0, "densenet121: classes must be positive, got ", c.classes);
  aimatrix_ = c.variant == "aimatrix_tf";
  const int64_t growth = c.tiny ? 8 : 32;
  const int64_t init_features = c.tiny ? 16 : 64;
  const std::vector<int64_t> blocks =
      c.tiny ? std::vector<int64_t>(aimatrix_ ? 3 : 4, 2)
             : (aimatrix_ ? std::vector<int64_t>{6, 12, 24} : std::vector<int64_t>{6, 12, 24, 16});
  const double eps = aimatrix_ ? 1e-4 : 1e-5;
  // Four 2x2 reductions after the stem: the input must leave at least 1x1.
  const int64_t stem_stride = (aimatrix_ && c.tiny) ? 1 : 2;
  auto stem_out = [&](int64_t n) {
    return aimatrix_ ? (n - 7) / stem_stride + 1 : (n + 2 * 3 - 7) / 2 + 1;
  };
  const int64_t reductions = int64_t(blocks.size());  // pool0 + transitions (aimatrix: 1 + 3)
  AIM_CHECK(c.height >= 7 && c.width >= 7 && (stem_out(c.height) >> reductions) >= 1 &&
                (stem_out(c.width) >> reductions) >= 1,
            "densenet121", aimatrix_ ? " (aimatrix_tf)" : "", c.tiny ? " (tiny)" : "",
            ": the image is too small for conv0 and ", reductions, " 2x2 reductions, got ",
            c.height, "x", c.width);

  uint64_t seed = c.seed * 1000;
  features_ = child("features", std::make_shared<NamedChain>());
  features_->add("conv0",
                 std::make_shared<Conv2d>(3, init_features, 7,
                                          aimatrix_ ? ConvOptions().stride(stem_stride).no_bias()
                                                    : ConvOptions().stride(2).padding(3).no_bias(),
                                          seed++));
  features_->add("norm0", std::make_shared<BatchNorm2d>(init_features, eps, 0.1));
  features_->add("relu0", std::make_shared<layers::ReLU>());
  if (aimatrix_)
    features_->add("pool0", std::make_shared<layers::AvgPool2d>(2, 2));
  else
    features_->add("pool0", std::make_shared<layers::MaxPool2d>(3, 2, 1));
  int64_t channels = init_features, size = 0;  // size: nvcnn's cumulative growth
  for (size_t b = 0; b < blocks.size(); ++b) {
    auto block = std::make_shared<DenseBlock>();
    for (int64_t l = 0; l < blocks[b]; ++l) {
      block->add("denselayer" + std::to_string(l + 1),
                 std::make_shared<DenseLayer>(channels, growth, aimatrix_ ? growth : 4 * growth,
                                              aimatrix_, eps, seed += 2));
      channels += growth;
      size += growth;
    }
    features_->add("denseblock" + std::to_string(b + 1), block);
    if (aimatrix_ || b + 1 < blocks.size()) {
      const int64_t out = aimatrix_ ? size : channels / 2;
      features_->add("transition" + std::to_string(b + 1),
                     std::make_shared<Transition>(channels, out, aimatrix_, eps, seed++));
      channels = size = out;
    }
  }
  features_->add("norm" + std::to_string(blocks.size() + 1),
                 std::make_shared<BatchNorm2d>(channels, eps, 0.1));
  pool_ = std::make_shared<layers::AdaptiveAvgPool2d>(1, 1);
  classifier_ = child("classifier", std::make_shared<layers::Linear>(channels, c.classes, seed));
  if (aimatrix_) {
    init_glorot_uniform(*this, c.seed);
  } else {
    kernels::Generator gen(c.seed);
    init_conv_kaiming_normal_fan_in(*this, gen);
    classifier_->bias.data().fill_(0.0);
  }
}

Variable DenseNet::forward(const Variable& x) {
  Variable y = forward_children_in_layers("features", *features_, x);
  profiler::Scope head("head", profiler::ScopeKind::Layer);
  y = pool_->forward(ag::relu(y));
  return classifier_->forward(ag::reshape(y, {y.size(0), y.size(1)}));
}

Shape DenseNet::count_flops(const Shape& in, double& flops) const {
  Shape s = features_->count_flops(in, flops);
  flops += double(shape_numel(s));  // relu
  s = pool_->count_flops(s, flops);
  return classifier_->count_flops({s[0], s[1]}, flops);
}

}  // namespace aim::models
