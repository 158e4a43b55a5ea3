// synNet: AI Matrix's synthetic CNN (nvcnn.py inference_synthetic_net, MODELS.md §2.1). 62 convs
// in 6 groups; every conv is stride 1 with TF "SAME" padding (even kernels pad one more pixel
// after than before), no bias, then BatchNorm and ReLU; each group ends with a 2x2/2 VALID max
// pool (224 -> 112 -> 56 -> 28 -> 14 -> 7 -> 3); flatten (3*3*43 = 387 at 224 px) -> fc.
// Groups, as (out_channels, kernel):
//   group1: (42,5)(40,3)(48,3)
//   group2: (4,5)(93,5)(2,5)(52,5)(46,5)(54,5)(2,5)(22,5)(2,3)(46,3)(206,3)
//   group3: (23,5)(273,3)(25,3)(299,3)(449,3)(49,3)(406,3)(12,3)(48,3)(209,3)(39,3)(309,3)
//   group4: (192,5)(90,5)(88,5)(663,5)(23,3)(139,3)(91,3)(580,3)(310,3)(188,3)(55,3)(252,3)
//           (25,3)(49,3)(862,3)
//   group5: (147,5)(177,5)(82,5)(517,4)(307,3)(182,3)(367,3)(131,3)(291,3)(456,2)(345,1)
//   group6: (150,5)(298,5)(48,4)(48,4)(48,3)(48,3)(48,2)(48,2)(40,1)(43,1)
// Names: each group is a Sequential "group1".."group6" of TfConvBnRelu blocks followed by its max
// pool, so keys read group2.0.conv.weight, group2.0.bn.{weight,bias,running_mean,running_var,
// num_batches_tracked}, ..., fc.weight, fc.bias.
// BN as nvcnn's: decay 0.9 (PyTorch momentum 0.1), eps 1e-4, scale and centre. Init as nvcnn:
// conv and FC weights Glorot-uniform, FC bias 0, BN weight 1 bias 0.
// Flatten: PyTorch's [N, C*H*W] order (nvcnn flattens NHWC; the two differ only by a fixed
// permutation of the fc weight's columns).
// Tiny (size=tiny): the same 62 convs and kernels with channels divided by 16 (rounded up), and
// no pool after group1, so 32 px inputs reach 1x1 after five pools (32 -> 16 -> ... -> 1).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "layers/batchnorm.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/sequential.h"
#include "models/image_classifier.h"

namespace aim::models {

// nvcnn.py's conv() with batch norm: conv (no bias) -> BatchNorm2d -> ReLU, children "conv" and
// "bn". ConvOptions decide stride and padding; BN eps / momentum as given.
class TfConvBnRelu : public layers::Module {
 public:
  TfConvBnRelu(int64_t in, int64_t out, int64_t kernel, const layers::ConvOptions& o, double bn_eps,
               uint64_t seed);
  Variable forward(const Variable& x) override;
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "TfConvBnRelu"; }

 private:
  std::shared_ptr<layers::Conv2d> conv_;
  std::shared_ptr<layers::BatchNorm2d> bn_;
};

class SynNet : public ImageClassifier {
 public:
  explicit SynNet(const ImageModelConfig& c);
  Variable forward(const Variable& x) override;
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "SynNet"; }

  // The (out_channels, kernel) of every conv, per group (the table above).
  static const std::vector<std::vector<std::pair<int64_t, int64_t>>>& groups();

 private:
  std::vector<std::shared_ptr<layers::Sequential>> groups_;
  std::shared_ptr<layers::Linear> fc_;
};

}  // namespace aim::models
