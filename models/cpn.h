// CPN, the Cascaded Pyramid Network (MODELS.md §5.3; megvii tf-cpn, COCO.res101.384x288.CPN;
// docs/cpn.md): ResNet-101 + GlobalNet + RefineNet predicting 17 COCO keypoint heatmaps at a
// quarter of the input size.
//
// Network (maps at 384 x 288):
//   backbone  torchvision's resnet101 up to layer4 (C2..C5: 96x72x256, 48x36x512, 24x18x1024,
//             12x9x2048). tf-cpn's slim resnet_v1 bottleneck strides its 3x3 conv and projects
//             with a strided 1x1, as torchvision's Bottleneck ("v1.5" in models/resnet.h); its
//             SAME-padded stem equals conv 7x7/2 pad 3 and (after the ReLU) max pool 3/2 pad 1.
//   GlobalNet from C5 down: lateral{L} = 1x1 256 + BN + ReLU; below C5 the previous map is
//             resized bilinearly to the level, merge{L} (1x1 256 with bias, no BN) and added to
//             the lateral; each level's map -> tmp{L} (1x1 256 + BN + ReLU) -> pyramid{L} (3x3 17
//             + BN) -> bilinear resize to the heatmap size: the four global outputs (C2..C5).
//   RefineNet level L = 2..5 (the GlobalNet maps): L - 2 bottlenecks res{L}.{j} (256 out, 128
//             mid, identity shortcut), resize to the heatmap size; concat (1024) ->
//             final_bottleneck (256 / 128, projection shortcut) -> refine_out (3x3 17 + BN).
//   Every convolution tf-cpn builds in resnet_arg_scope has BN and no bias (pyramid and
//   refine_out too: its normalizer_fn applies to the linear outputs); merge{L} is built outside
//   and has a bias.
// Differences from tf-cpn, on purpose: bilinear resizes are torch's align_corners=False
// (half-pixel centres); TF1's resize_bilinear samples at dst * in / out without the half-pixel
// shift. BN eps 1e-5 and momentum 0.1 (torchvision's, so its ImageNet resnet101 loads) instead of
// slim's 1e-9 and decay 0.99. Init: convs kaiming_normal(fan_out) (torchvision), the GlobalNet's
// convs and refine_out glorot uniform (tf-cpn's xavier), biases 0, BN 1 / 0.
//
// Input "images" [B, 3, H, W] RGB in [0, 1]; the network sees 255 x - (122.77, 115.95, 102.98)
// reversed to BGR (tf-cpn's pixel means), so conv1.weight is in BGR order as tf-cpn's.
//
// Losses (tf-cpn network.py, docs/cpn.md): labels "heatmaps" [B, 4, 17, h, w] (Gaussian kernels
// 23, 17, 13, 9: data/keypoint_heatmap.h) and "valid" [B, 17] (COCO visibility 0 / 1 / 2):
//   global = sum over the levels C2..C5 paired with kernels 23, 17, 13, 9 of
//            mean((out - label * [valid > 1])^2) / 4, then / 2;
//   refine = per image and keypoint mean_hw((refine - label9x9)^2) * [valid > 0]; the top 8 of 17
//            per image (OHKM) summed / 8, mean over the batch;
//   loss   = global + refine.
// The masks come from valid by clamp(valid - 1, 0, 1) and clamp(valid, 0, 1), equal to the
// reference's > 1.1 and > 0.1 for visibilities in {0, 1, 2}. The top 8 are chosen on the host
// (the per-keypoint losses, B x 17 values, are read back); ties go to the lower keypoint.
//
// Inference: "heatmaps" [B, 17, h, w], the refine output, averaged with the horizontally flipped
// image's (flipped back, left / right keypoints swapped) unless flip_test is off; post-processing
// decodes them as mptest.py (data/keypoint_heatmap.h): "keypoints" [B, 17, 3] (x, y in input
// pixels, score), "scores" [B] (the mean keypoint score; the reference multiplies it by the person
// detector's score, 1 here).
//
// Parameter names: conv1, bn1, layer1..layer4 (torchvision); global_net.lateral{L}.{conv,bn},
// global_net.merge{L}.{weight,bias} (L = 2..4), global_net.tmp{L}.{conv,bn},
// global_net.pyramid{L}.{conv,bn}; refine_net.res{L}.{j}.{conv1,bn1,conv2,bn2,conv3,bn3}
// (L = 3..5, j < L - 2), refine_net.final_bottleneck.{conv1..bn3, downsample.0, downsample.1},
// refine_net.refine_out.{conv,bn}. tf-cpn's scopes: lateral/res{L}, merge/res{L}, tmp/res{L},
// pyramid/res{L}, res{L}/refine_conv{j}, final_bottleneck, refine_out.
//
// size=tiny: input 96 x 72, heatmaps 24 x 18, backbone base 8 with one block per stage, GlobalNet
// / RefineNet width 32 (bottleneck mid 16).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "layers/batchnorm.h"
#include "layers/conv.h"
#include "layers/pooling.h"
#include "layers/sequential.h"
#include "models/model.h"

namespace aim::models {

struct CpnConfig {
  int64_t height = 384, width = 288, out_h = 96, out_w = 72, keypoints = 17;
  std::vector<int64_t> blocks = {3, 4, 23, 3};  // ResNet-101
  int64_t base = 64;                            // the stem's width (stages base .. 8 base)
  int64_t channels = 256, refine_mid = 128;
  int64_t top_k = 8;  // OHKM
  bool flip_test = true;
  uint64_t seed = 0;
  static CpnConfig tiny();
};

// A convolution without bias and its BN (slim.conv2d in resnet_arg_scope).
class CpnConvBn : public layers::Module {
 public:
  CpnConvBn(int64_t in, int64_t out, int64_t k, uint64_t seed);
  Variable forward(const Variable& x) override { return forward(x, false); }
  Variable forward(const Variable& x, bool relu);
  Shape count(const Shape& in, bool relu, double& flops) const;
  std::string type_name() const override { return "CpnConvBn"; }

 private:
  std::shared_ptr<layers::Conv2d> conv_;
  std::shared_ptr<layers::BatchNorm2d> bn_;
};

// slim resnet_v1.bottleneck(depth, depth_bottleneck, stride 1): projection when in != out.
class CpnBottleneck : public layers::Module {
 public:
  CpnBottleneck(int64_t in, int64_t out, int64_t mid, uint64_t seed);
  Variable forward(const Variable& x) override;
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "CpnBottleneck"; }

 private:
  std::shared_ptr<layers::Conv2d> conv1_, conv2_, conv3_;
  std::shared_ptr<layers::BatchNorm2d> bn1_, bn2_, bn3_;
  std::shared_ptr<layers::Sequential> downsample_;
};

struct CpnOutputs {
  std::array<Variable, 4> global;  // C2..C5 levels, each [B, 17, h, w]
  Variable refine;                 // [B, 17, h, w]
};

struct CpnLoss {
  Variable global, refine, total;
};

class Cpn : public Model {
 public:
  explicit Cpn(const CpnConfig& c = {});
  std::string type_name() const override { return "CPN"; }
  std::vector<TensorSpec> input_specs() const override;
  std::vector<TensorSpec> label_specs() const override;
  std::vector<TensorSpec> output_specs() const override;
  TensorMap infer(const TensorMap& batch) override;
  Variable training_loss(const TensorMap& batch) override;
  double forward_flops(const TensorMap& batch) const override;
  bool has_postprocess() const override { return true; }
  TensorMap postprocess_outputs(const TensorMap& host_outputs) const override;
  std::vector<Fp32Params> amp_fp32_params() const override { return {}; }

  const CpnConfig& config() const { return c_; }
  CpnOutputs forward_all(const Variable& images);
  // The heatmaps of infer(): the refine output, flip-averaged when flip_test.
  Variable heatmaps(const Variable& images);
  CpnLoss compute_loss(const CpnOutputs& out, const Tensor& heatmaps, const Tensor& valid) const;
  double forward_flops(int64_t B) const;

 private:
  CpnConfig c_;
  Tensor mean_;
  std::shared_ptr<layers::Conv2d> conv1_;
  std::shared_ptr<layers::BatchNorm2d> bn1_;
  std::shared_ptr<layers::MaxPool2d> maxpool_;
  std::vector<std::shared_ptr<layers::Sequential>> stages_;
  std::shared_ptr<layers::Module> global_net_, refine_net_;
  std::array<std::shared_ptr<CpnConvBn>, 4> lateral_, tmp_, pyramid_;
  std::array<std::shared_ptr<layers::Conv2d>, 3> merge_;              // levels 2..4
  std::array<std::shared_ptr<layers::Sequential>, 4> refine_blocks_;  // levels 2..5 (2: empty)
  std::shared_ptr<CpnBottleneck> final_;
  std::shared_ptr<CpnConvBn> refine_out_;
  // OHKM's constants on the loss's device, made once (not per step): [1, K, K] "keypoint i comes
  // before j" and top_k.
  mutable Tensor ohkm_before_, ohkm_top_k_;
};

}  // namespace aim::models
