// GoogLeNet (Inception-v1) as AI Matrix's nvcnn.py codes it (MODELS.md §2.1): no BN, no LRN, no
// auxiliary heads, no dropout; every conv has a bias and a ReLU and TF "SAME" padding.
//   conv1 7x7/2 64 -> maxpool1 3/2 SAME -> conv2 1x1 64 -> conv3 3x3 192 -> maxpool2 3/2 SAME
//   -> inception3a, 3b -> maxpool3 3/2 SAME -> inception4a..4e -> maxpool4 3/2 SAME
//   -> inception5a, 5b -> global average -> fc (classes)
// Inception(k, l, m, n, p, q) = concat over channels of
//   branch1 1x1 k | branch2 1x1 l -> 3x3 m | branch3 1x1 n -> 5x5 p | branch4 maxpool 3/1 SAME ->
//   1x1 q
// (nvcnn's 5x5 in branch3; torchvision's GoogLeNet has a 3x3 there and BN everywhere).
// Parameter names follow torchvision's GoogLeNet where the structure matches, with the conv
// itself in place of torchvision's BasicConv2d: conv1.weight, conv1.bias, conv2.*, conv3.*,
// inception3a.branch1.weight, inception3a.branch2.0.weight (1x1), inception3a.branch2.1.weight
// (3x3), inception3a.branch3.{0,1}.*, inception3a.branch4.1.* (branch4.0 is the max pool),
// ..., fc.weight, fc.bias.
// Init as nvcnn.py: conv and FC weights Glorot-uniform, biases 0.
// Tiny (size=tiny): the same layers with every channel count divided by 8 (rounded up), for 32 px
// inputs (32 -> 16 -> 8 -> 4 -> 2 -> 1).
#pragma once
#include <cstdint>
#include <memory>

#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/pooling.h"
#include "layers/sequential.h"
#include "models/image_classifier.h"

namespace aim::models {

// The widths of one Inception-v1 module: 1x1 k | 1x1 l -> 3x3 m | 1x1 n -> 5x5 p | pool -> 1x1 q.
struct InceptionV1Widths {
  int64_t k, l, m, n, p, q;
  int64_t out() const { return k + m + p + q; }
};

class InceptionV1 : public layers::Module {
 public:
  InceptionV1(int64_t in_channels, const InceptionV1Widths& w, uint64_t seed);
  Variable forward(const Variable& x) override;
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "InceptionV1"; }

 private:
  std::shared_ptr<layers::Conv2d> branch1_;
  std::shared_ptr<layers::Sequential> branch2_, branch3_, branch4_;
};

class GoogLeNet : public ImageClassifier {
 public:
  explicit GoogLeNet(const ImageModelConfig& c);
  Variable forward(const Variable& x) override;
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "GoogLeNet"; }

 private:
  std::shared_ptr<layers::Conv2d> conv1_, conv2_, conv3_;
  std::shared_ptr<layers::MaxPool2d> maxpool1_, maxpool2_, maxpool3_, maxpool4_;
  std::shared_ptr<InceptionV1> inception3a_, inception3b_, inception4a_, inception4b_, inception4c_,
      inception4d_, inception4e_, inception5a_, inception5b_;
  std::shared_ptr<layers::AdaptiveAvgPool2d> avgpool_;
  std::shared_ptr<layers::Linear> fc_;
};

}  // namespace aim::models
