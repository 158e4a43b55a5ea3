#include "models/synnet.h"

#include "autograd/functions/elementwise.h"
#include "autograd/functions/shape.h"
#include "layers/pooling.h"
#include "profiler/profiler.h"

namespace aim::models {

namespace ag = autograd;
using layers::ConvOptions;

TfConvBnRelu::TfConvBnRelu(int64_t in, int64_t out, int64_t kernel, const ConvOptions& o,
                           double bn_eps, uint64_t seed) {
  ConvOptions co = o;
  co.bias = false;  // the BN's shift replaces it
  conv_ = child("conv", std::make_shared<layers::Conv2d>(in, out, kernel, co, seed));
  bn_ = child("bn", std::make_shared<layers::BatchNorm2d>(out, bn_eps, 0.1));
}

Variable TfConvBnRelu::forward(const Variable& x) { return bn_->forward_relu(conv_->forward(x)); }

Shape TfConvBnRelu::count_flops(const Shape& in, double& flops) const {
  const Shape s = bn_->count_flops(conv_->count_flops(in, flops), flops);
  flops += double(shape_numel(s));  // relu
  return s;
}

const std::vector<std::vector<std::pair<int64_t, int64_t>>>& SynNet::groups() {
  static const std::vector<std::vector<std::pair<int64_t, int64_t>>> g = {
      {{42, 5}, {40, 3}, {48, 3}},
      {{4, 5},
       {93, 5},
       {2, 5},
       {52, 5},
       {46, 5},
       {54, 5},
       {2, 5},
       {22, 5},
       {2, 3},
       {46, 3},
       {206, 3}},
      {{23, 5},
       {273, 3},
       {25, 3},
       {299, 3},
       {449, 3},
       {49, 3},
       {406, 3},
       {12, 3},
       {48, 3},
       {209, 3},
       {39, 3},
       {309, 3}},
      {{192, 5},
       {90, 5},
       {88, 5},
       {663, 5},
       {23, 3},
       {139, 3},
       {91, 3},
       {580, 3},
       {310, 3},
       {188, 3},
       {55, 3},
       {252, 3},
       {25, 3},
       {49, 3},
       {862, 3}},
      {{147, 5},
       {177, 5},
       {82, 5},
       {517, 4},
       {307, 3},
       {182, 3},
       {367, 3},
       {131, 3},
       {291, 3},
       {456, 2},
       {345, 1}},
      {{150, 5}, {298, 5}, {48, 4}, {48, 4}, {48, 3}, {48, 3}, {48, 2}, {48, 2}, {40, 1}, {43, 1}},
  };
  return g;
}

SynNet::SynNet(const ImageModelConfig& c) : ImageClassifier(c) {
  AIM_CHECK(c.variant.empty(), "synnet: has no variants, got variant '", c.variant, "'");
  const int64_t pools = c.tiny ? 5 : 6;  // tiny: no pool after group1
  AIM_CHECK(c.classes > 0 && c.height >> pools >= 1 && c.width >> pools >= 1, "synnet",
            c.tiny ? " (tiny)" : "", ": needs classes > 0 and an image of at least ", 1 << pools,
            "x", 1 << pools, " (", pools, " 2x2 max pools), got classes=", c.classes, " image ",
            c.height, "x", c.width);
  const int64_t div = c.tiny ? 16 : 1;
  uint64_t seed = c.seed * 1000;
  int64_t in = 3;
  for (size_t g = 0; g < groups().size(); ++g) {
    auto group = std::make_shared<layers::Sequential>();
    for (const auto& [out, k] : groups()[g]) {
      const int64_t o = (out + div - 1) / div;
      group->push_back(
          std::make_shared<TfConvBnRelu>(in, o, k, ConvOptions().same(), /*bn_eps=*/1e-4, seed++));
      in = o;
    }
    if (!(c.tiny && g == 0)) group->push_back(std::make_shared<layers::MaxPool2d>(2, 2));
    groups_.push_back(child("group" + std::to_string(g + 1), group));
  }
  const int64_t features = in * (c.height >> pools) * (c.width >> pools);
  fc_ = child("fc", std::make_shared<layers::Linear>(features, c.classes, seed));
  init_glorot_uniform(*this, c.seed);
}

Variable SynNet::forward(const Variable& x) {
  Variable y = x;
  for (size_t i = 0; i < groups_.size(); ++i)
    y = forward_in_layer("group" + std::to_string(i + 1), *groups_[i], y);
  profiler::Scope head("fc", profiler::ScopeKind::Layer);
  return fc_->forward(ag::reshape(y, {y.size(0), y.numel() / y.size(0)}));
}

Shape SynNet::count_flops(const Shape& in, double& flops) const {
  Shape s = in;
  for (const auto& g : groups_) s = g->count_flops(s, flops);
  return fc_->count_flops({s[0], shape_numel(s) / s[0]}, flops);
}

}  // namespace aim::models
