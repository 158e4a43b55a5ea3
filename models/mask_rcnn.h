// Mask R-CNN as torchvision 0.14 builds maskrcnn_resnet50_fpn (MODELS.md §6.9; docs/detection.md),
// its module tree and parameter / buffer names unchanged, so torchvision's state dicts load:
//   backbone.body     ResNet-50 (backbone=resnet101: ResNet-101) up to layer4, every BN a
//                     FrozenBatchNorm2d (buffers weight, bias, running_mean, running_var; eps
//                     1e-5); trainable_layers 3 freezes conv1 and layer1 (torchvision's default
//                     with ImageNet weights)
//   backbone.fpn      inner_blocks.{0..3}.0 (1x1), layer_blocks.{0..3}.0 (3x3), top-down nearest
//                     upsampling, LastLevelMaxPool (max_pool2d 1/2 on the last map: "pool")
//   rpn.head          conv.0.0 (3x3 + ReLU), cls_logits (A), bbox_pred (4 A); A = 3 per level
//   roi_heads         box_head.fc6/fc7 on MultiScaleRoIAlign 7x7 (sampling 2); box_predictor.
//                     cls_score/bbox_pred; mask_head.{0..3}.0 (3x3 + ReLU) on MultiScaleRoIAlign
//                     14x14; mask_predictor.conv5_mask (2x2/2 transposed + ReLU), mask_fcn_logits
// (torchvision before 0.13 named the mask head mask_fcn1..4 and the RPN conv rpn.head.conv; its
// _load_from_state_dict renames those, and so would a converter here.)
//
// GeneralizedRCNNTransform: (x - mean) / std, resize by scale = min(min_size / min(H, W),
// max_size / max(H, W)) to floor(H scale) x floor(W scale) (bilinear, align_corners=False, the
// scale recomputed from the sizes: recompute_scale_factor=True), zero pad to multiples of 32.
// Training targets: boxes times (new / old size) per axis, masks resized nearest.
// The RPN, sampling, losses and post-processing are models/detection/torchvision_rcnn.h, on the
// host after one read-back per stage (RPN outputs; box head outputs; in eval the mask logits).
//
// Eval outputs: detections in the input images' pixels (boxes scaled back by original / resized,
// torchvision's transform.postprocess), their M x M mask probabilities (the label's channel,
// sigmoid); postprocess_outputs pastes them into the image (paste_masks_in_image) and keeps
// pixels > 0.5, as torchvision's COCO evaluation does.
//
// size=tiny: base width 8 (stages 8..64 planes, outputs 32..256), one bottleneck per stage, FPN
// 32, box head 64, mask head 32, images resized to 128 (min_size = max_size = 128); RPN top-n
// 1000 / 500 in training and 500 / 300 in eval, 128 sampled RoIs per image.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/pooling.h"
#include "layers/sequential.h"
#include "models/detection/torchvision_rcnn.h"
#include "models/model.h"

namespace aim::models {

struct MaskRcnnConfig {
  int64_t num_classes = 91;                    // with background (COCO's 91 category slots)
  std::vector<int64_t> blocks = {3, 4, 6, 3};  // ResNet-50; resnet101: {3, 4, 23, 3}
  int64_t base = 64;                           // stem width (stages base .. 8 base planes)
  int64_t fpn_channels = 256, representation = 1024, mask_channels = 256;
  int64_t trainable_layers = 3;  // 0..5 of layer4, layer3, layer2, layer1, conv1
  int64_t min_size = 800, max_size = 1333;
  std::vector<float> image_mean = {0.485f, 0.456f, 0.406f};
  std::vector<float> image_std = {0.229f, 0.224f, 0.225f};
  detection::FpnAnchors anchors;
  detection::RpnConfig rpn_train = detection::RpnConfig::training(), rpn_test;
  detection::RoiHeadsConfig roi;
  int64_t mask_size = 28;  // mask_predictor's output (14 x 14 RoIs, upsampled 2x)
  uint64_t seed = 0;
  static MaskRcnnConfig tiny(int64_t num_classes);
};

// torchvision.ops.FrozenBatchNorm2d: y = x * (w / sqrt(rv + eps)) + (b - rm * w / sqrt(rv + eps))
// with all four as buffers (no gradient, no num_batches_tracked).
class FrozenBatchNorm2d : public layers::Module {
 public:
  explicit FrozenBatchNorm2d(int64_t channels, double eps = 1e-5);
  Variable forward(const Variable& x) override;
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "FrozenBatchNorm2d"; }

 private:
  int64_t channels_;
  double eps_;
  Tensor *weight_, *bias_, *running_mean_, *running_var_;
};

// torchvision's Bottleneck (stride on the 3x3) with FrozenBatchNorm2d.
class FrozenBottleneck : public layers::Module {
 public:
  static constexpr int64_t kExpansion = 4;
  FrozenBottleneck(int64_t inplanes, int64_t planes, int64_t stride, uint64_t seed);
  Variable forward(const Variable& x) override;
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "Bottleneck"; }

 private:
  std::shared_ptr<layers::Conv2d> conv1_, conv2_, conv3_;
  std::shared_ptr<FrozenBatchNorm2d> bn1_, bn2_, bn3_;
  std::shared_ptr<layers::Sequential> downsample_;
};

// The transformed batch: normalised, resized, padded images and each image's resized size.
struct RcnnImages {
  Variable images;                // [B, 3, Hp, Wp]
  int64_t height = 0, width = 0;  // the resized (unpadded) size, the same for every image
  int64_t orig_height = 0, orig_width = 0;
};

// What one eval forward computed, per image (for the parity test and infer()).
struct MaskRcnnEval {
  RcnnImages input;
  std::vector<detection::Proposals> proposals;    // per image, resized-image pixels
  Tensor class_logits, box_regression;            // [R, C], [R, 4 C] (R: all images' proposals)
  std::vector<detection::Detections> detections;  // per image, resized-image pixels
  Tensor mask_logits;                             // [D, C, M, M] (all images' detections)
  std::vector<detection::Detections> final;       // per image, boxes in the original pixels
  std::vector<Tensor> mask_probs;                 // per image [D_b, M, M] f32 host
};

struct MaskRcnnLosses {
  Variable classifier, box_reg, mask, objectness, rpn_box_reg, total;
  // The samplers' choices per image (the parity test hands them to torchvision): anchors, and
  // candidates (proposals then ground truth) of the RoI heads.
  std::vector<detection::SampledSets> rpn_sampled, roi_sampled;
};

// Ground truth in the input images' pixels: boxes [B, G, 4] f32, labels [B, G] i64 (0: padding),
// num_boxes [B] i64, masks [B, G, H, W] (u8 or f32, 0 / 1).
struct MaskRcnnTargets {
  Tensor boxes, labels, num_boxes, masks;
};

class MaskRcnn : public Model {
 public:
  explicit MaskRcnn(const MaskRcnnConfig& c = {});
  std::string type_name() const override { return "MaskRCNN"; }
  const MaskRcnnConfig& config() const { return c_; }

  std::vector<TensorSpec> input_specs() const override;
  std::vector<TensorSpec> label_specs() const override;
  std::vector<TensorSpec> output_specs() const override;
  // Detections zero-padded to roi.detections_per_img rows: boxes [B, D, 4] (input pixels), scores
  // [B, D], labels [B, D] i64, num_detections [B] i64, mask_probs [B, D, M, M]; image_size [2]
  // i64 (H, W) for the pasting.
  TensorMap infer(const TensorMap& batch) override;
  Variable training_loss(const TensorMap& batch) override;
  double forward_flops(const TensorMap& batch) const override;
  double train_flops(const TensorMap& batch) const override;
  bool has_postprocess() const override { return true; }
  // + masks u8 [B, D', H, W] (D' the batch's most detections, >= 1): pasted, > 0.5.
  TensorMap postprocess_outputs(const TensorMap& host_outputs) const override;
  TensorMap host_metadata(const TensorMap& host_batch) const override;
  std::vector<Fp32Params> amp_fp32_params() const override { return {}; }

  RcnnImages transform(const Variable& images) const;
  // backbone.body then backbone.fpn: the maps "0".."3" and "pool".
  std::vector<Variable> features(const Variable& images);
  // rpn.head on every level: objectness [B, A, H, W] and deltas [B, 4 A, H, W] per level.
  void rpn_head(const std::vector<Variable>& feats, std::vector<Variable>& objectness,
                std::vector<Variable>& deltas);
  // box_head + box_predictor on the boxes of each image.
  std::pair<Variable, Variable> box_branch(const std::vector<Variable>& feats,
                                           const std::vector<std::vector<float>>& boxes,
                                           int64_t image_h);
  // mask_head + mask_predictor: [K, C, M, M] logits.
  Variable mask_branch(const std::vector<Variable>& feats,
                       const std::vector<std::vector<float>>& boxes, int64_t image_h);
  MaskRcnnEval evaluate(const Variable& images);
  // One training forward; the samplers draw from the Philox block of the step counter.
  MaskRcnnLosses losses(const Variable& images, const MaskRcnnTargets& t);
  double forward_flops(int64_t B, int64_t H, int64_t W) const;
  uint64_t sample_step() const { return step_; }
  void set_sample_step(uint64_t s) { step_ = s; }

 private:
  std::pair<int64_t, int64_t> resized_size(int64_t H, int64_t W) const;
  MaskRcnnConfig c_;
  std::shared_ptr<layers::Conv2d> conv1_;
  std::shared_ptr<FrozenBatchNorm2d> bn1_;
  std::shared_ptr<layers::MaxPool2d> maxpool_;
  std::vector<std::shared_ptr<layers::Sequential>> stages_;
  std::vector<std::shared_ptr<layers::Conv2d>> inner_, layer_;
  std::shared_ptr<layers::Conv2d> rpn_conv_, rpn_cls_, rpn_bbox_;
  std::shared_ptr<layers::Linear> fc6_, fc7_, cls_score_, bbox_pred_;
  std::vector<std::shared_ptr<layers::Conv2d>> mask_convs_;
  std::shared_ptr<layers::ConvTranspose2d> conv5_mask_;
  std::shared_ptr<layers::Conv2d> mask_logits_;
  Tensor mean_, std_;  // [1, 3, 1, 1]
  uint64_t sample_key_ = 0, step_ = 0;
};

}  // namespace aim::models
