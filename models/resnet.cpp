#include "models/resnet.h"

#include "autograd/functions/elementwise.h"
#include "autograd/functions/shape.h"
#include "layers/activation.h"
#include "profiler/profiler.h"

namespace aim::models {

namespace ag = autograd;
using layers::ConvOptions;

Bottleneck::Bottleneck(int64_t inplanes, int64_t planes, int64_t stride, bool v1, uint64_t seed) {
  const int64_t out = planes * kExpansion;
  conv1_ = child("conv1",
                 std::make_shared<layers::Conv2d>(
                     inplanes, planes, 1, ConvOptions().stride(v1 ? stride : 1).no_bias(), seed));
  bn1_ = child("bn1", std::make_shared<layers::BatchNorm2d>(planes));
  conv2_ = child(
      "conv2",
      std::make_shared<layers::Conv2d>(
          planes, planes, 3, ConvOptions().stride(v1 ? 1 : stride).padding(1).no_bias(), seed + 1));
  bn2_ = child("bn2", std::make_shared<layers::BatchNorm2d>(planes));
  conv3_ = child(
      "conv3", std::make_shared<layers::Conv2d>(planes, out, 1, ConvOptions().no_bias(), seed + 2));
  bn3_ = child("bn3", std::make_shared<layers::BatchNorm2d>(out));
  if (stride != 1 || inplanes != out) {
    downsample_ = child("downsample", std::make_shared<layers::Sequential>());
    downsample_->push_back(std::make_shared<layers::Conv2d>(
        inplanes, out, 1, ConvOptions().stride(stride).no_bias(), seed + 3));
    downsample_->push_back(std::make_shared<layers::BatchNorm2d>(out));
  }
}

Variable Bottleneck::forward(const Variable& x) {
  Variable y = bn1_->forward_relu(conv1_->forward(x));
  y = bn2_->forward_relu(conv2_->forward(y));
  const Variable shortcut = downsample_ ? downsample_->forward(x) : x;
  // bn3 folded into conv3 (aim-infer): the shortcut and the relu go into conv3's epilogue.
  if (bn3_->folded()) return bn3_->forward(conv3_->forward_residual_relu(y, shortcut));
  y = bn3_->forward(conv3_->forward(y));
  return ag::relu(ag::add(y, shortcut));
}

Shape Bottleneck::count_flops(const Shape& in, double& flops) const {
  Shape s = bn1_->count_flops(conv1_->count_flops(in, flops), flops);
  flops += double(shape_numel(s));  // relu
  s = bn2_->count_flops(conv2_->count_flops(s, flops), flops);
  flops += double(shape_numel(s));
  s = bn3_->count_flops(conv3_->count_flops(s, flops), flops);
  if (downsample_) downsample_->count_flops(in, flops);
  flops += 2 * double(shape_numel(s));  // add, relu
  return s;
}

ResNet::ResNet(const ImageModelConfig& c, const std::vector<int64_t>& blocks) : ImageClassifier(c) {
  AIM_CHECK(c.variant == "v1.5" || c.variant == "v1", "resnet: variant must be v1.5 or v1, got '",
            c.variant, "'");
  const bool v1 = c.variant == "v1";
  const int64_t base = c.tiny ? 8 : 64;
  uint64_t seed = c.seed * 1000;
  conv1_ = child("conv1", std::make_shared<layers::Conv2d>(
                              3, base, 7, ConvOptions().stride(2).padding(3).no_bias(), seed++));
  bn1_ = child("bn1", std::make_shared<layers::BatchNorm2d>(base));
  maxpool_ = child("maxpool", std::make_shared<layers::MaxPool2d>(3, 2, 1));
  int64_t inplanes = base;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const int64_t planes = base << i;
    auto stage = std::make_shared<layers::Sequential>();
    for (int64_t b = 0; b < blocks[i]; ++b) {
      const int64_t stride = (i > 0 && b == 0) ? 2 : 1;
      stage->push_back(std::make_shared<Bottleneck>(inplanes, planes, stride, v1, seed += 10));
      inplanes = planes * Bottleneck::kExpansion;
    }
    stages_.push_back(child("layer" + std::to_string(i + 1), stage));
  }
  avgpool_ = child("avgpool", std::make_shared<layers::AdaptiveAvgPool2d>(1, 1));
  fc_ = child("fc", std::make_shared<layers::Linear>(inplanes, c.classes, seed + 1));
  init_kaiming_normal_fan_out(*this, c.seed);
}

Variable ResNet::forward(const Variable& x) {
  Variable y;
  {
    profiler::Scope stem("stem", profiler::ScopeKind::Layer);
    y = maxpool_->forward(bn1_->forward_relu(conv1_->forward(x)));
  }
  for (size_t i = 0; i < stages_.size(); ++i)
    y = forward_in_layer("layer" + std::to_string(i + 1), *stages_[i], y);
  profiler::Scope head("head", profiler::ScopeKind::Layer);
  y = avgpool_->forward(y);
  return fc_->forward(ag::reshape(y, {y.size(0), y.size(1)}));
}

Shape ResNet::count_flops(const Shape& in, double& flops) const {
  Shape s = bn1_->count_flops(conv1_->count_flops(in, flops), flops);
  flops += double(shape_numel(s));  // relu
  s = maxpool_->count_flops(s, flops);
  for (const auto& st : stages_) s = st->count_flops(s, flops);
  s = avgpool_->count_flops(s, flops);
  return fc_->count_flops({s[0], s[1]}, flops);
}

}  // namespace aim::models
