// DenseNet-121 in two variants (MODELS.md §2.1, §11.2):
//
// variant "" or "standard": torchvision's densenet121 exactly (growth 32, bn_size 4, blocks
//   6, 12, 24, 16, 64 initial features). features = conv0 7x7/2 pad 3 -> norm0 -> relu0 -> pool0
//   maxpool 3/2 pad 1 -> denseblock1 -> transition1 -> ... -> denseblock4 -> norm5; then ReLU,
//   global average, classifier. Dense layer: norm1 -> relu -> conv1 1x1 (bn_size*growth) ->
//   norm2 -> relu -> conv2 3x3 pad 1 (growth), concatenated after its input. Transition: norm ->
//   relu -> conv 1x1 (channels / 2) -> avgpool 2/2. BN eps 1e-5, momentum 0.1. Init as
//   torchvision: conv weights kaiming_normal (fan_in, gain sqrt 2), BN 1 / 0, classifier weight
//   PyTorch's default, classifier bias 0.
//
// variant "aimatrix_tf": nvcnn.py's inference_densenet (AI Matrix's TF "densenet121"):
//   conv0 7x7/2 VALID -> norm0 -> relu0 -> pool0 avgpool 2/2 -> 3 dense blocks (6, 12, 24 layers;
//   the 4th is unused), each followed by a transition -> norm4 -> ReLU -> global mean ->
//   classifier. Every conv carries its own BN + ReLU after it (nvcnn's conv()), the bottleneck is
//   growth wide (not 4x), and the transition width is the cumulative growth (192, 576, 1344):
//     dense layer: norm1 -> relu -> conv1 1x1 (growth) -> conv1_norm -> relu -> norm2 -> relu ->
//                  conv2 3x3 SAME (growth) -> conv2_norm -> relu, concatenated after its input
//     transition:  norm -> relu -> conv 1x1 (size) -> conv_norm -> relu -> avgpool 2/2 VALID
//   Spatial 224 -> 109 -> 54 -> 27 -> 13 -> 6; 1344 final features. BN eps 1e-4, momentum 0.1
//   (nvcnn decay 0.9). Init as nvcnn: conv and FC weights Glorot-uniform, biases 0, BN 1 / 0.
//
// Names (torchvision's): features.conv0.weight, features.norm0.*, features.denseblock1.
// denselayer1.{norm1,conv1,norm2,conv2}.*, features.transition1.{norm,conv}.*, features.norm5.*,
// classifier.{weight,bias}; aimatrix_tf adds denselayerN.conv1_norm / conv2_norm and
// transitionN.conv_norm, and its final BN is features.norm4 (three blocks).
//
// Tiny (size=tiny): growth 8, 16 initial features, 2 layers per block (4 blocks standard, 3
// aimatrix_tf), for 32 px inputs; aimatrix_tf's conv0 has stride 1 there, so that its four 2x2
// pools leave 1x1 (32 -> 26 -> 13 -> 6 -> 3 -> 1).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layers/batchnorm.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "models/image_classifier.h"

namespace aim::models {

// A module whose named children run one after the other (torchvision's features Sequential
// with named entries: conv0, norm0, relu0, pool0, denseblock1, ...).
class NamedChain : public layers::Module {
 public:
  template <class M>
  std::shared_ptr<M> add(const std::string& name, std::shared_ptr<M> m) {
    return child(name, std::move(m));
  }
  Variable forward(const Variable& x) override;
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "NamedChain"; }
};

// A dense block: its dense layers one after the other. Without a gradient to compute
// (inference, evaluation) it writes them into one buffer [N, C + layers * growth, H, W]: the
// input copied in once, layer l reading the buffer's first C_l channels (a view whose images
// are each contiguous) and writing its growth channels after them. The concatenations copied
// every earlier channel again at every layer (O(layers^2) copies, ~7% of DenseNet-121's
// inference on the CPU); the values are the same. With a gradient: the layers' concatenations.
class DenseBlock : public NamedChain {
 public:
  Variable forward(const Variable& x) override;
  std::string type_name() const override { return "DenseBlock"; }
};

class DenseLayer : public layers::Module {
 public:
  // bottleneck: conv1's width; post_norm: the aimatrix_tf BN + ReLU after each conv.
  DenseLayer(int64_t in, int64_t growth, int64_t bottleneck, bool post_norm, double bn_eps,
             uint64_t seed);
  // -> concat(x, new features) along the channels
  Variable forward(const Variable& x) override;
  // -> the growth new channels only
  Variable new_features(const Variable& x);
  int64_t growth() const { return conv2_->out_channels(); }
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "DenseLayer"; }

 private:
  std::shared_ptr<layers::BatchNorm2d> norm1_, norm2_, conv1_norm_, conv2_norm_;
  std::shared_ptr<layers::Conv2d> conv1_, conv2_;
};

class Transition : public layers::Module {
 public:
  Transition(int64_t in, int64_t out, bool post_norm, double bn_eps, uint64_t seed);
  Variable forward(const Variable& x) override;
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "Transition"; }

 private:
  std::shared_ptr<layers::BatchNorm2d> norm_, conv_norm_;
  std::shared_ptr<layers::Conv2d> conv_;
  std::shared_ptr<layers::Module> pool_;
};

class DenseNet : public ImageClassifier {
 public:
  explicit DenseNet(const ImageModelConfig& c);
  Variable forward(const Variable& x) override;
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "DenseNet"; }
  bool aimatrix_tf() const { return aimatrix_; }

 private:
  bool aimatrix_;
  std::shared_ptr<NamedChain> features_;
  std::shared_ptr<layers::Module> pool_;  // global average
  std::shared_ptr<layers::Linear> classifier_;
};

}  // namespace aim::models
