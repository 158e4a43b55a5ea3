// Faster R-CNN as py-faster-rcnn trains it end to end (MODELS.md §6.7: models/VGG16/
// faster_rcnn_end2end/train.prototxt and experiments/cfgs/faster_rcnn_end2end.yml;
// docs/detection.md). Caffe's layer names are the parameter names:
//   conv1_1 .. conv5_3.{weight,bias}   VGG16 (3x3 pad 1 + ReLU; 2x2/2 max pools, Caffe's ceil
//                                      rounding, after conv1_2, conv2_2, conv3_3, conv4_3)
//   rpn_conv/3x3                       3x3 512 + ReLU on conv5_3 (stride 16)
//   rpn_cls_score [2 A, ., 1, 1]       channel a: background of anchor a, A + a: foreground
//                                      (Caffe reshapes to [N, 2, A H, W] and softmaxes over 2)
//   rpn_bbox_pred [4 A, ., 1, 1]       channel 4 a + j: delta j of anchor a
//   fc6, fc7 [4096]                    on RoIPool 7x7, spatial scale 1/16 (+ ReLU, dropout 0.5)
//   cls_score [C], bbox_pred [4 C]     (C = num_classes with background)
// conv1_* and conv2_* are frozen (lr_mult 0 in the prototxt: requires_grad false here).
// Input: images [B, 3, S, S] RGB in [0, 1], as the detection sources give them; the model takes
// them to Caffe's BGR 0..255 minus PIXEL_MEANS (102.9801, 115.9465, 122.7717).
// Training runs the three Python layers on the host (models/detection/rpn.h) after ONE read-back
// per step (the RPN's foreground probabilities and deltas); evaluation reads back the same once.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layers/conv.h"
#include "layers/dropout.h"
#include "layers/linear.h"
#include "models/detection/rpn.h"
#include "models/model.h"

namespace aim::models {

struct FasterRcnnConfig {
  int64_t num_classes = 21;   // with background: VOC
  int64_t image_size = 600;   // the square input side (the sources resize to it)
  int64_t width_divisor = 1;  // conv channels / this (size=tiny: 8)
  int64_t fc_width = 4096;    // fc6 / fc7 (size=tiny: 256)
  std::vector<double> anchor_scales = {8, 16, 32};  // size=tiny: {2, 4, 6} on 128 x 128 inputs
  double dropout = 0.5;
  bool freeze_conv12 = true;
  uint64_t seed = 0;
  double im_scale = 1;  // original -> input scale for RPN_MIN_SIZE (the sources' images: 1)
  detection::AnchorTargetConfig anchor_target;
  detection::ProposalConfig train_proposals;                     // 12000 -> 2000
  detection::ProposalConfig test_proposals{6000, 300, 0.7, 16};  // TEST.RPN_*
  detection::ProposalTargetConfig proposal_target;
  // Test (lib/fast_rcnn/test.py test_net): per class score > thresh, NMS 0.3, at most 100 per
  // image over the classes.
  double score_thresh = 0.05, nms_thresh = 0.3;
  int64_t max_per_image = 100;
};

// A batch's ground truth as the detection sources pack it: boxes [B, G, 4] f32 (input pixels),
// labels [B, G] i64, num_boxes [B] i64; host tensors.
struct FasterRcnnTargets {
  Tensor boxes, labels, num_boxes;
};

// What one training forward computed, for the tests and the parity peer.
struct FasterRcnnStep {
  Variable rpn_cls_score, rpn_bbox_pred;                 // [B, 2A, H, W], [B, 4A, H, W]
  std::vector<detection::AnchorTargets> anchor_targets;  // per image
  std::vector<std::vector<float>> proposals;             // per image [P * 4]
  std::vector<detection::RoiTargets> roi_targets;        // per image
  Tensor rois;                                           // [R, 5] (image, x1, y1, x2, y2)
  Variable cls_score, bbox_pred;                         // [R, C], [R, 4C]
  Variable rpn_loss_cls, rpn_loss_bbox, loss_cls, loss_bbox, total;
};

struct FasterRcnnDetections {  // one image, best first per class: host tensors
  Tensor boxes, scores, labels;
};

class FasterRcnn : public Model {
 public:
  explicit FasterRcnn(const FasterRcnnConfig& c = {});
  std::string type_name() const override { return "FasterRCNN"; }
  const FasterRcnnConfig& config() const { return c_; }

  std::vector<TensorSpec> input_specs() const override;
  std::vector<TensorSpec> label_specs() const override;
  std::vector<TensorSpec> output_specs() const override;
  // The test proposals of each image, zero-padded to P = test_proposals.post_nms_top_n rows:
  // rois [B, P, 4], num_rois [B] i64, cls_prob [B, P, C], bbox_pred [B, P, 4C] (normalised
  // deltas). Fixed shapes, so aim-infer can compare precisions batch by batch.
  TensorMap infer(const TensorMap& batch) override;
  Variable training_loss(const TensorMap& batch) override;
  double forward_flops(const TensorMap& batch) const override;
  double train_flops(const TensorMap& batch) const override;
  bool has_postprocess() const override { return true; }
  TensorMap postprocess_outputs(const TensorMap& host_outputs) const override;
  TensorMap host_metadata(const TensorMap& host_batch) const override;
  std::vector<Fp32Params> amp_fp32_params() const override { return {}; }

  // RGB [0, 1] -> BGR 0..255 minus the pixel means.
  Variable preprocess(const Variable& images) const;
  Variable conv5_3(const Variable& images);
  // rpn_cls_score and rpn_bbox_pred on conv5_3.
  std::pair<Variable, Variable> rpn(const Variable& features);
  // cls_score, bbox_pred of RoIs [R, 5] (x's dtype and device) on conv5_3.
  std::pair<Variable, Variable> head(const Variable& features, const Tensor& rois);
  // The fg probabilities [B, H W A] and deltas [B, H W A * 4] in anchor order, one host tensor
  // [B, H W A * 5] (the step's one read-back).
  Tensor rpn_readback(const Variable& rpn_cls_score, const Variable& rpn_bbox_pred) const;
  // The anchors of an H x W conv5_3 map, (h, w, a) order.
  std::vector<double> anchors(int64_t H, int64_t W) const;
  int64_t num_anchors() const { return int64_t(base_anchors_.size() / 4); }

  FasterRcnnStep train_step(const Variable& images, const FasterRcnnTargets& t);
  // The losses of the step's outputs (its labels, targets and RoIs), as Caffe's four loss layers.
  void compute_losses(FasterRcnnStep& s) const;
  // test.py's im_detect + test_net's per-class NMS on infer()'s outputs (any device).
  std::vector<FasterRcnnDetections> detect(const TensorMap& infer_outputs) const;
  double forward_flops(int64_t B, int64_t rois_per_image) const;
  // The Philox stream of the samplers: step k of a run draws from block k << 20.
  uint64_t sample_step() const { return step_; }
  void set_sample_step(uint64_t s) { step_ = s; }

 private:
  void check_images(const Variable& images) const;
  FasterRcnnConfig c_;
  std::vector<std::shared_ptr<layers::Conv2d>> convs_;  // conv1_1 .. conv5_3
  std::shared_ptr<layers::Conv2d> rpn_conv_, rpn_cls_, rpn_bbox_;
  std::shared_ptr<layers::Linear> fc6_, fc7_, cls_score_, bbox_pred_;
  std::shared_ptr<layers::Dropout> drop6_, drop7_;
  std::vector<double> base_anchors_;
  Tensor mean_;  // [1, 3, 1, 1] f32 BGR
  uint64_t sample_key_ = 0, step_ = 0;
};

}  // namespace aim::models
