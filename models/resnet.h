// ResNet-50 / ResNet-152 (MODELS.md §2.1) with torchvision's names (conv1, bn1, layer1.0.conv1,
// layer1.0.downsample.0, fc, ...), so torchvision's state dicts load unchanged.
//   variant v1.5 (default, torchvision): the bottleneck's stride sits on its 3x3 conv;
//   variant v1 (AI Matrix's nvcnn.py, the paper's): on its first 1x1 conv.
// Stem conv7x7/2 pad 3 (nvcnn's SAME_RESNET is the same explicit pad), maxpool 3/2 pad 1,
// stages of bottlenecks (planes 64, 128, 256, 512, expansion 4), global average pool, FC.
// Init as torchvision: convs kaiming_normal(fan_out), BN weight 1 bias 0, FC PyTorch default.
// Tiny (size=tiny): one bottleneck per stage, planes 8, 16, 32, 64 — for tests and CI.
#pragma once
#include <memory>
#include <vector>

#include "layers/batchnorm.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/pooling.h"
#include "layers/sequential.h"
#include "models/image_classifier.h"

namespace aim::models {

class Bottleneck : public layers::Module {
 public:
  static constexpr int64_t kExpansion = 4;
  Bottleneck(int64_t inplanes, int64_t planes, int64_t stride, bool v1, uint64_t seed);
  Variable forward(const Variable& x) override;
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "Bottleneck"; }

 private:
  std::shared_ptr<layers::Conv2d> conv1_, conv2_, conv3_;
  std::shared_ptr<layers::BatchNorm2d> bn1_, bn2_, bn3_;
  std::shared_ptr<layers::Sequential> downsample_;  // null when the shortcut is the identity
};

class ResNet : public ImageClassifier {
 public:
  // blocks: bottlenecks per stage ({3,4,6,3} for 50, {3,8,36,3} for 152).
  ResNet(const ImageModelConfig& c, const std::vector<int64_t>& blocks);
  Variable forward(const Variable& x) override;
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "ResNet"; }

 private:
  std::shared_ptr<layers::Conv2d> conv1_;
  std::shared_ptr<layers::BatchNorm2d> bn1_;
  std::shared_ptr<layers::MaxPool2d> maxpool_;
  std::vector<std::shared_ptr<layers::Sequential>> stages_;
  std::shared_ptr<layers::AdaptiveAvgPool2d> avgpool_;
  std::shared_ptr<layers::Linear> fc_;
};

}  // namespace aim::models
