#include "models/resnet_basic.h"

#include "autograd/functions/elementwise.h"

namespace aim::models {

namespace ag = autograd;
using layers::ConvOptions;

BasicBlock::BasicBlock(int64_t inplanes, int64_t planes, int64_t stride, uint64_t seed,
                       const BasicBlockOptions& o) {
  auto bn = [&] {
    return o.make_bn ? o.make_bn(planes)
                     : std::make_shared<layers::BatchNorm2d>(planes, o.bn_eps, o.bn_momentum);
  };
  conv1_ = child("conv1",
                 std::make_shared<layers::Conv2d>(
                     inplanes, planes, 3, ConvOptions().stride(stride).padding(1).no_bias(), seed));
  bn1_ = child("bn1", bn());
  conv2_ = child("conv2", std::make_shared<layers::Conv2d>(
                              planes, planes, 3, ConvOptions().padding(1).no_bias(), seed + 1));
  bn2_ = child("bn2", bn());
  if (stride != 1 || inplanes != planes || o.always_project) {
    downsample_ = child("downsample", std::make_shared<layers::Sequential>());
    downsample_->push_back(std::make_shared<layers::Conv2d>(
        inplanes, planes, 1, ConvOptions().stride(stride).no_bias(), seed + 2));
    downsample_->push_back(bn());
  }
}

Variable BasicBlock::forward(const Variable& x) {
  Variable y = bn1_->forward_relu(conv1_->forward(x));
  const Variable shortcut = downsample_ ? downsample_->forward(x) : x;
  // bn2 folded into conv2 (aim-infer): the shortcut and the relu go into conv2's epilogue.
  if (bn2_->folded()) return bn2_->forward(conv2_->forward_residual_relu(y, shortcut));
  y = bn2_->forward(conv2_->forward(y));
  return ag::relu(ag::add(y, shortcut));
}

Shape BasicBlock::count_flops(const Shape& in, double& flops) const {
  Shape s = bn1_->count_flops(conv1_->count_flops(in, flops), flops);
  flops += double(shape_numel(s));  // relu
  s = bn2_->count_flops(conv2_->count_flops(s, flops), flops);
  if (downsample_) downsample_->count_flops(in, flops);
  flops += 2 * double(shape_numel(s));  // add, relu
  return s;
}

std::shared_ptr<layers::Sequential> make_basic_layer(int64_t inplanes, int64_t planes,
                                                     int64_t blocks, int64_t stride, uint64_t& seed,
                                                     const BasicBlockOptions& o) {
  auto layer = std::make_shared<layers::Sequential>();
  for (int64_t b = 0; b < blocks; ++b) {
    BasicBlockOptions ob = o;
    ob.always_project = o.always_project && b == 0;
    layer->push_back(
        std::make_shared<BasicBlock>(b ? planes : inplanes, planes, b ? 1 : stride, seed, ob));
    seed += 3;
  }
  return layer;
}

}  // namespace aim::models
