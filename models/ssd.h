// SSD300 with the VGG16 backbone: torchvision 0.14's `ssd300_vgg16(weights=None,
// weights_backbone=None, num_classes=N)`, its module tree and state_dict names, its MultiBox loss
// (SSD.compute_loss) and its post-processing (SSD.postprocess_detections). docs/detection.md,
// MODELS.md §6.1.
//
// Module tree (state_dict order as torchvision's):
//   backbone.scale_weight [512]                     conv4_3's L2Norm scale (init 20)
//   backbone.features.{0..22}                       VGG16 conv1_1 .. conv4_3 (+ ReLUs, pools;
//                                                   pool3 ceil_mode)
//   backbone.extra.0 = [pool4, conv5_1..conv5_3 (1, 3, 5), 7 = [pool5 3x3/1/1, fc6 3x3 pad 6
//                      dilation 6 (7.1), fc7 1x1 (7.3)]]
//   backbone.extra.{1..4} = [conv 1x1 (0), ReLU, conv 3x3 (2), ReLU]: 19 -> 10 (s2) -> 5 (s2)
//                      -> 3 -> 1
//   head.{classification,regression}_head.module_list.{0..5}: conv 3x3 pad 1 per feature map
// Feature maps 38, 19, 10, 5, 3, 1 (channels 512, 1024, 512, 256, 256, 256), 4, 6, 6, 6, 4, 4
// default boxes per cell: 8732 priors on a 300 x 300 image.
//
// Input: images [B, 3, S, S] (S = image_size, 300) in [0, 1], already resized; the model
// normalises them itself with torchvision's SSD300 constants, (x - mean) / std with mean (0.48235,
// 0.45882, 0.40784) and std 1/255 (GeneralizedRCNNTransform's normalisation; its resize to 300 x
// 300 is the identity on such images, and it is not done here).
// Init as torchvision with weights_backbone=None: VGG convs (features, conv5_x) kaiming_normal
// (fan_out, relu), fc6/fc7, the extra blocks and the heads xavier_uniform; biases 0.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "layers/sequential.h"
#include "models/detection/box_coder.h"
#include "models/model.h"

namespace aim::models {

using autograd::Variable;

struct SsdConfig {
  int64_t num_classes = 21;  // including background (class 0): VOC
  int64_t image_size = 300;  // only 300 gives the six maps 38, 19, 10, 5, 3, 1
  // Every channel count divided by this (1: torchvision's network; the registry's size=tiny uses
  // 8: the same maps and priors, 1/64 of the conv FLOPs).
  int64_t width_divisor = 1;
  uint64_t seed = 0;
  // Post-processing and loss (torchvision's SSD defaults).
  float score_thresh = 0.01f;
  float nms_thresh = 0.45f;
  int64_t detections_per_img = 200;
  int64_t topk_candidates = 400;
  double neg_to_pos_ratio = 3.0;  // (1 - positive_fraction) / positive_fraction, 0.25
  float iou_thresh = 0.5f;        // SSDMatcher
};

// The two head outputs, priors in torchvision's order (maps in turn; per map cells row-major, per
// cell its boxes): cls_logits [B, P, num_classes], bbox_regression [B, P, 4] (P = 8732).
struct SsdHeadOutputs {
  Variable cls_logits, bbox_regression;
};

// A batch's ground truth, padded: boxes [B, G, 4] f32 (x1, y1, x2, y2 in pixels of the S x S
// image), labels [B, G] i64 (1 .. num_classes - 1), num_boxes [B] i64 (image b's objects are its
// first num_boxes[b] rows; the rest is padding and ignored). Host or device tensors.
struct SsdTargets {
  Tensor boxes, labels, num_boxes;
};

// torchvision's loss dict, each already divided by N = max(1, positives in the batch); the
// training loss is their sum (torchvision's references/detection/train.py sums the dict).
struct SsdLoss {
  Variable bbox_regression;  // smooth_l1 (beta 1, sum) of positives' encoded targets / N
  Variable classification;   // (CE of positives + CE of the 3:1 hard negatives) / N
  Variable total;            // bbox_regression + classification
  int64_t num_foreground = 0;
};

// One image's detections, best first: boxes [D, 4] f32 (clipped to the image), scores [D] f32,
// labels [D] i64; D <= detections_per_img. Host tensors.
struct SsdDetections {
  Tensor boxes, scores, labels;
};

class SsdVgg16 : public Model {
 public:
  explicit SsdVgg16(const SsdConfig& c = {});
  std::string type_name() const override { return "SSD"; }

  // Model (aim-train / aim-infer): batches of the detection sources (docs/detection.md): "images"
  // [B, 3, 300, 300] in [0, 1]; to train also "boxes" [B, G, 4], "labels" [B, G], "num_boxes" [B];
  // outputs the two head tensors (post-processing: postprocess()).
  std::vector<TensorSpec> input_specs() const override;
  std::vector<TensorSpec> label_specs() const override;
  std::vector<TensorSpec> output_specs() const override;
  TensorMap infer(const TensorMap& batch) override;
  Variable training_loss(const TensorMap& batch) override;
  double forward_flops(const TensorMap& batch) const override;
  std::vector<Fp32Params> amp_fp32_params() const override;
  // The targets stay on the CPU (the matching runs there): a GPU step reads nothing back.
  TensorMap host_metadata(const TensorMap& host_batch) const override;
  const SsdConfig& config() const { return c_; }

  // images [B, 3, S, S] in [0, 1] -> (images - mean) / std, checked for shape.
  Variable normalize(const Variable& images) const;
  // images [B, 3, S, S] in [0, 1] -> the six feature maps (conv4_3 after L2Norm, fc7, conv8_2 ..
  // conv11_2).
  std::vector<Variable> features(const Variable& images);
  SsdHeadOutputs forward_heads(const Variable& images);
  // SSDMatcher per image on the host, then torchvision's compute_loss on the head outputs' device.
  // Hard negatives are kernels/boxes' hard_negatives: k = min(3 positives, negatives) per image;
  // torchvision's `idx.sort(1)[1] < num_negative` equals it unless 3 positives > negatives (over a
  // quarter of the 8732 priors positive), where it would count positives' losses a second time.
  SsdLoss compute_loss(const SsdHeadOutputs& out, const SsdTargets& targets) const;
  SsdLoss training_loss(const Variable& images, const SsdTargets& targets) {
    return compute_loss(forward_heads(images), targets);
  }
  // torchvision's postprocess_detections (host): softmax, decode, clip, per class score >
  // score_thresh and top-k, batched NMS, keep detections_per_img. Equal scores go lower prior
  // first (top-k) and lower candidate first (NMS); torch's topk leaves the order of exact ties
  // unspecified, so only then can the order of two detections differ.
  std::vector<SsdDetections> postprocess(const SsdHeadOutputs& out) const;

  // The default boxes (x1, y1, x2, y2) in pixels, [P, 4] f32 on the host.
  const Tensor& anchors() const { return anchors_; }
  int64_t num_priors() const { return anchors_.size(0); }
  // Analytic forward FLOPs (convs, ReLUs, pools, L2Norm, normalisation) of a batch of B images.
  double forward_flops(int64_t B) const;

 private:
  SsdConfig c_;
  layers::Parameter scale_weight_;
  std::shared_ptr<layers::Sequential> features_;
  std::vector<std::shared_ptr<layers::Module>> extra_;  // backbone.extra.0 .. 4
  std::vector<std::shared_ptr<layers::Module>> cls_, reg_;
  std::vector<int64_t> anchors_per_cell_;
  Tensor anchors_;     // [P, 4]
  Tensor mean_, std_;  // [1, 3, 1, 1] f64 (cast to the input's dtype/device on use)
  detection::BoxCoderWeights coder_;
};

}  // namespace aim::models
