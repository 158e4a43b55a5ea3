// DSSD321 (Deconvolutional SSD, ResNet-101, 321 x 321; MODELS.md §6.3, docs/detection.md): the
// network of the reference's last stage, chengyangfu/caffe `dssd`
// examples/ssd/ssd_pascal_resnet_deconv_ft_321.py with python/caffe/model_libs.py, on the shared
// detector (models/ssd.h: Caffe's MatchBBox, MultiBox loss with VALID normalisation, 3:1 hard
// negatives, post-processing).
//
// Network (maps at 321 x 321):
//   trunk  ResNet101Body(use_dilation_conv5): conv1 7x7/2 pad 3 (no bias) + BN + ReLU (161),
//          pool1 max 3x3/2 ceil mode (80), res2 a..c (80), res3a, res3b1..b3 (40), res4a,
//          res4b1..b22 (20), res5a..c (20: stride 1, 3x3 convs dilation 2 pad 2). ResNet v1:
//          a stage's stride sits on its first block's branch2a 1x1 and branch1 1x1.
//   extra  res6, res7 (branch1 and branch2a kernel 2 stride 2: 10, 5), res8, res9 (kernel 3
//          stride 1 pad 0: 3, 1); bottlenecks 256 / 256 / 1024, branch2b 3x3 pad 1.
//   block  ResBody: branch1 = conv + BN (projection), branch2 = conv BN ReLU, 3x3 conv BN ReLU,
//          1x1 conv BN; y = ReLU(branch1 + branch2).
//   deconv top-down from res9 in five levels L = 8, 7, 6, 5, 3 (forward maps res8, res7, res6,
//          res5c, res3b3): deconv_L (512, bias; k3 s1 for 1 -> 3 and 3 -> 5, k2 s2 for 5 -> 10,
//          10 -> 20, 20 -> 40) of the level above, then CombineFeature (EltwisePROD):
//            forward: {src}_relu_pre1 (3x3 512 BN ReLU) -> {src}_relu_pre2 (3x3 512 BN)
//            deconv:  deconv_L_pre (3x3 512 BN)
//            ReLU(deconv branch * forward branch)
//   pred   per map (combined 3, 5, 6, 7, 8 and res9: 40, 20, 10, 5, 3, 1) a projecting ResBody
//          256 / 256 / 1024 (CreateMultiBoxHead with inter_layer_depth 256), then loc and conf
//          convs with bias, kernels 5, 5, 3, 3, 3, 3 (pads 2, 2, 1, 1, 1, 1), laid out as Caffe's
//          permute + flatten (cell-major), 8 boxes per cell: 17080 priors (caffe_priors.h).
// Every convolution followed by BN has no bias; every BN is Caffe's BatchNorm with
// use_global_stats (running statistics in training too, eps 1e-3) followed by Scale.
//
// Parameter names (the state dict; Caffe's layer names, BatchNorm + Scale as one BatchNorm2d):
//   conv1.weight, bn_conv1.{weight, bias, running_mean, running_var, num_batches_tracked}
//   res{B}_branch{1,2a,2b,2c}.weight, bn{B}_branch{...}.*   B = 2a, 2b, 2c, 3a, 3b1..3b3, 4a,
//                                                            4b1..4b22, 5a, 5b, 5c, 6, 7, 8, 9
//   deconv_{L}.{weight, bias} [in, 512, k, k], deconv_{L}_pre.weight, deconv_{L}_pre_bn.*,
//   {src}_relu_pre1.weight, {src}_relu_pre1_bn.*, {src}_relu_pre2.weight, {src}_relu_pre2_bn.*
//   pred{L}_branch{1,2a,2b,2c}.weight, pred{L}_branch{...}_bn.*, pred{L}_mbox_loc.*,
//   pred{L}_mbox_conf.*                                      L = 3, 5, 6, 7, 8, 9
// A BatchNorm2d's weight / bias are Caffe's Scale blobs (gamma, beta); its running_mean /
// running_var are the BatchNorm blobs 0 and 1 divided by blob 2 (the scale factor). The
// prediction module is named pred{L}; Caffe's names are res{X}_inter256_branch* /
// bn{X}_inter256_branch* and res{X}_inter256_mbox_{loc,conf}new with X = the source blob
// (combined_L_EltwisePROD_relu, res9_relu).
//
// Input: images [B, 3, 321, 321] RGB in [0, 1]. The reference feeds BGR 0..255 pixels minus the
// mean (104, 117, 123): the model computes 255 x - (123, 117, 104) per RGB channel (the shared
// normalisation with std 1/255) and then reverses the channels, so conv1.weight is in Caffe's
// BGR input order.
//
// Training as the fine-tune stage: every BN normalises with its running statistics and, by
// default, its affine (Scale) is frozen too (the script's bn_lr_mult = 0 under use_global_stats):
// those parameters do not require grad and no optimizer moves them; DssdOptions::train_bn_affine
// trains them. The reference starts from ImageNet / earlier-stage weights (load them with
// --weights). From scratch no batch statistics keep the scale of the activations, so the init is
// variance-preserving instead of Caffe's gaussian(0.01) for convs before BN: kaiming_normal
// (fan_in, gain sqrt 2), every branch2c zero (each residual block starts as its shortcut, as Fixup
// / zero-gamma init; the frozen Scale cannot play that role); deconvolutions and loc / conf convs
// Caffe's xavier filler (U(+-sqrt(3 / fan_in)), bias 0); BN weight 1, bias 0, mean 0, variance 1,
// but bn_conv1's variance 58^2 (conv1 sees 0..255 pixels, whose standard deviation is ~58).
//
// size=tiny: every width / 8 (trunk 8 .. 256, deconv 64, prediction 32 / 128) and one block per
// ResNet stage (res2a, res3a, res4a, res5a; the extra blocks and everything after them as the
// full network): the same maps and priors.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "layers/batchnorm.h"
#include "layers/conv.h"
#include "layers/pooling.h"
#include "models/ssd.h"

namespace aim::models {

struct DssdOptions {
  // Bottleneck blocks of the ResNet stages res2 .. res5: ResNet-101's {3, 4, 23, 3}.
  std::vector<int64_t> stage_blocks = {3, 4, 23, 3};
  // Train the BNs' affine (Caffe's Scale) instead of freezing it as the reference's fine-tune.
  bool train_bn_affine = false;
};

// The reference's SsdConfig: 321 x 321, 21 classes, Caffe's MatchBBox (bipartite then per
// prediction at IoU 0.5), loss / number of matches of the batch (normalization VALID); its
// det_out_param is the shared post-processing's default (0.01, NMS 0.45, top 400, keep 200).
SsdConfig dssd_config();

class Dssd : public Ssd {
 public:
  explicit Dssd(const SsdConfig& c = dssd_config(), const DssdOptions& o = {});
  std::string type_name() const override { return "DSSD"; }
  std::vector<Fp32Params> amp_fp32_params() const override { return {}; }

  // The six prediction-module outputs (40, 20, 10, 5, 3, 1), the heads' inputs.
  std::vector<Variable> features(const Variable& images) override;

 protected:
  double feature_flops(int64_t B, std::vector<Shape>& maps) const override;

 private:
  // A convolution and the BatchNorm(+Scale) after it.
  struct ConvBn {
    std::shared_ptr<layers::Conv2d> conv;
    std::shared_ptr<layers::BatchNorm2d> bn;
  };
  // Caffe's ResBody; branch1 (the projection) absent: identity shortcut.
  struct ResBlock {
    std::string name;
    ConvBn branch1, branch2a, branch2b, branch2c;
  };
  // One level of the deconvolution module.
  struct Level {
    std::string name;  // deconv_L
    std::shared_ptr<layers::ConvTranspose2d> deconv;
    ConvBn deconv_pre, forward_pre1, forward_pre2;
  };

  ConvBn conv_bn(const std::string& conv_name, const std::string& bn_name, int64_t in, int64_t out,
                 int64_t k, const layers::ConvOptions& o);
  // ResBody(kernel, stride, pad on branch2a and branch1; dilation on branch2b), names
  // {conv_prefix}branch* and BN names from bn_name(branch).
  ResBlock res_block(const std::string& name, const std::string& conv_prefix,
                     const std::function<std::string(const std::string&)>& bn_name, int64_t in,
                     int64_t mid, int64_t out, int64_t kernel, int64_t stride, int64_t pad,
                     int64_t dilation, bool projection);
  Variable forward(const ConvBn& c, const Variable& x, bool relu) const;
  Variable forward(const ResBlock& b, const Variable& x) const;
  Variable combine(const Level& l, const Variable& top, const Variable& fwd) const;
  Shape count(const ConvBn& c, const Shape& in, bool relu, double& flops) const;
  Shape count(const ResBlock& b, const Shape& in, double& flops) const;

  DssdOptions o_;
  ConvBn conv1_;
  std::shared_ptr<layers::MaxPool2d> pool1_;
  std::vector<ResBlock> trunk_;  // res2a .. res5c
  size_t src3_ = 0, src5_ = 0;   // indices in trunk_ of res3's and res5's last blocks
  std::vector<ResBlock> extra_;  // res6 .. res9
  std::vector<Level> levels_;    // deconv_8, 7, 6, 5, 3 (top-down)
  std::vector<ResBlock> pred_;   // pred3, 5, 6, 7, 8, 9 (largest map first)
};

}  // namespace aim::models
