// torchvision's BasicBlock and its _make_layer (ResNet-18 / ResNet-34), under torchvision's names
// (conv1, bn1, conv2, bn2, downsample.{0,1}), for the detectors whose trunk is a ResNet-18/34
// (ssd_resnet34, ssd_resnet18: models/ssd_resnet.h). models/resnet.h holds the bottleneck nets.
//   y = relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), conv1 3x3 with the block's stride,
//   conv2 3x3, shortcut = downsample (1x1 conv with the stride, no bias, + BN) when the stride or
//   the width changes (or always: Caffe's ResNet-18 projects in res2a too), else x.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "autograd/variable.h"
#include "layers/batchnorm.h"
#include "layers/conv.h"
#include "layers/sequential.h"

namespace aim::models {

using autograd::Variable;

// The BNs' settings and when the shortcut projects (torchvision's defaults).
struct BasicBlockOptions {
  double bn_eps = 1e-5;
  double bn_momentum = 0.1;
  bool always_project = false;  // a downsample even when stride 1 and inplanes == planes
  // When set, builds the BNs (of that many channels) instead of layers::BatchNorm2d with bn_eps
  // and bn_momentum (ssd_resnet18: Caffe's moving averages).
  std::function<std::shared_ptr<layers::BatchNorm2d>(int64_t)> make_bn;
};

class BasicBlock : public layers::Module {
 public:
  BasicBlock(int64_t inplanes, int64_t planes, int64_t stride, uint64_t seed,
             const BasicBlockOptions& o = {});
  Variable forward(const Variable& x) override;
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "BasicBlock"; }

 private:
  std::shared_ptr<layers::Conv2d> conv1_, conv2_;
  std::shared_ptr<layers::BatchNorm2d> bn1_, bn2_;
  std::shared_ptr<layers::Sequential> downsample_;  // null when the shortcut is the identity
};

// torchvision's ResNet._make_layer for BasicBlock: `blocks` blocks of width `planes`, the first
// with `stride` (and the downsample when stride != 1 or inplanes != planes, or o.always_project;
// the others never). Convs are seeded from `seed` onwards (seed advances); torchvision's init
// (ssd_parts::kaiming_fan_out on the convs; BN weight 1, bias 0 as built) is the caller's.
std::shared_ptr<layers::Sequential> make_basic_layer(int64_t inplanes, int64_t planes,
                                                     int64_t blocks, int64_t stride, uint64_t& seed,
                                                     const BasicBlockOptions& o = {});

}  // namespace aim::models
