// The plain CNN classifiers, features -> [adaptive average pool] -> flatten -> classifier, with
// torchvision's names and init (MODELS.md §2.1):
//   vgg16       config D, no BN: features (13 convs 3x3 pad 1 + 5 max pools), avgpool 7x7,
//               classifier Linear 25088-4096-4096-classes with ReLU and Dropout(0.5)
//   alexnet     torchvision's ("one weird trick": 64-192-384-256-256); nvcnn.py's differs only
//               in conv1 (VALID on 227 px vs pad 2 on 224 px: both give 55x55)
//   squeezenet  1.1: Fire modules, classifier Dropout, conv1x1 -> classes, ReLU, global average
// Tiny (size=tiny): the same stages with channels divided by 8 (by 4 for squeezenet's Fire
// widths) and 32 px inputs.
#pragma once
#include <memory>

#include "layers/conv.h"
#include "layers/sequential.h"
#include "models/image_classifier.h"

namespace aim::models {

class PlainCnn : public ImageClassifier {
 public:
  // avgpool_hw: the adaptive average pool between features and classifier (0: none).
  PlainCnn(const ImageModelConfig& c, std::string type,
           std::shared_ptr<layers::Sequential> features, int64_t avgpool_hw,
           std::shared_ptr<layers::Sequential> classifier);
  Variable forward(const Variable& x) override;
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return type_; }

 private:
  std::string type_;
  std::shared_ptr<layers::Sequential> features_, classifier_;
  std::shared_ptr<layers::Module> avgpool_;  // null when avgpool_hw == 0
  bool flatten_last_;                        // squeezenet: flatten after the classifier
};

std::unique_ptr<ImageClassifier> make_vgg16(const ImageModelConfig& c);
std::unique_ptr<ImageClassifier> make_alexnet(const ImageModelConfig& c);
std::unique_ptr<ImageClassifier> make_squeezenet(const ImageModelConfig& c);

// SqueezeNet's Fire module: squeeze 1x1 -> ReLU -> concat(expand 1x1 -> ReLU, expand 3x3 -> ReLU).
class Fire : public layers::Module {
 public:
  Fire(int64_t inplanes, int64_t squeeze, int64_t expand1x1, int64_t expand3x3, uint64_t seed);
  Variable forward(const Variable& x) override;
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "Fire"; }

 private:
  std::shared_ptr<layers::Conv2d> squeeze_, expand1x1_, expand3x3_;
};

}  // namespace aim::models
