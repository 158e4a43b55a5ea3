// The parts of torchvision 0.14's two-stage detectors (models/detection/{anchor_utils, rpn,
// _utils, roi_heads}.py, ops/poolers.py) that mask_rcnn (MODELS.md 6.9, maskrcnn_resnet50_fpn)
// builds on, host-side per image in f32 and in torchvision's operation order:
//   anchors: AnchorGenerator's rounded zero-centred cell anchors, shifted per level in (h, w, a);
//   RPN: filter_proposals (per-level top-k of the logits, sigmoid, clip, remove small, score
//     threshold, NMS per level, post-NMS top-k), anchor targets (Matcher with low-quality
//     matches) and the balanced sampler;
//   RoI heads: training samples (gt appended, Matcher 0.5 / 0.5, balanced sampler in ascending
//     index order, (10, 10, 5, 5) targets), box post-processing;
//   MultiScaleRoIAlign: LevelMapper (k0 4, canonical 224, eps 1e-6) and roi_align per level;
//   losses: the RPN's, fastrcnn_loss and maskrcnn_loss on autograd Variables.
// torchvision's random choices (torch.randperm) are sample_subset on a Philox stream here; the
// parity test hands aim's choices to torchvision (tests/models/test_torchvision_rcnn.cpp).
#pragma once
#include <cstdint>
#include <vector>

#include "autograd/variable.h"
#include "data/philox_draw.h"

namespace aim::models::detection {

// ---- anchors ---------------------------------------------------------------------------------

// AnchorGenerator.generate_anchors(scales, ratios): per ratio (outer) and scale (inner) h_ratio =
// sqrt(r), w_ratio = 1 / h_ratio, ws = w_ratio s, hs = h_ratio s, anchor round((-ws, -hs, ws, hs)
// / 2) (half to even), all f32. [A * 4].
std::vector<float> tv_cell_anchors(const std::vector<float>& sizes,
                                   const std::vector<float>& ratios);

// grid_anchors: the cell anchors shifted by (x stride_w, y stride_h) (integer shifts), (h, w, a)
// order. [H * W * A * 4].
std::vector<float> tv_grid_anchors(const std::vector<float>& cell, int64_t H, int64_t W,
                                   int64_t stride_h, int64_t stride_w);

// maskrcnn_resnet50_fpn's generator: sizes (32,), (64,), (128,), (256,), (512,) for the five FPN
// maps, ratios (0.5, 1, 2) each.
struct FpnAnchors {
  std::vector<std::vector<float>> sizes = {{32}, {64}, {128}, {256}, {512}};
  std::vector<float> ratios = {0.5f, 1.0f, 2.0f};
  int64_t per_cell(size_t level) const { return int64_t(sizes[level].size() * ratios.size()); }
  // The anchors of one image (all images share them) over levels of grid sizes grids[l] = (H, W)
  // on a padded batch of pad_h x pad_w: stride = pad // grid per axis, levels concatenated.
  // counts (optional) gets each level's number of anchors.
  std::vector<float> anchors(const std::vector<std::pair<int64_t, int64_t>>& grids, int64_t pad_h,
                             int64_t pad_w, std::vector<int64_t>* counts = nullptr) const;
};

// ---- matching and sampling -------------------------------------------------------------------

// torchvision.ops.box_iou of a [G * 4] and b [N * 4] (f32, kernels/boxes' expression): [G * N].
std::vector<float> tv_box_iou(const float* a, int64_t G, const float* b, int64_t N);

// det_utils.Matcher: per column (anchor / proposal) its best row (first maximum); -1 below low,
// -2 in [low, high); with allow_low_quality, every column holding some row's maximum IoU (ties
// included) gets back its best row.
struct Matcher {
  float high = 0.7f, low = 0.3f;
  bool allow_low_quality = true;
  static constexpr int64_t kBelow = -1, kBetween = -2;
  // iou [G * N] (rows the ground truth), G >= 1 -> [N].
  std::vector<int64_t> match(const std::vector<float>& iou, int64_t G, int64_t N) const;
};

// BalancedPositiveNegativeSampler on one image's labels (>= 1 positive, 0 negative, < 0 ignored):
// min(#positives, int(batch fraction)) positives and min(#negatives, batch - those) negatives,
// each set chosen on d (positives first), returned in ascending index order.
struct SampledSets {
  std::vector<int64_t> pos, neg;
};
SampledSets balanced_sample(const std::vector<int64_t>& labels, int64_t batch, double fraction,
                            data::PhiloxDraw& d);

// ---- RPN -------------------------------------------------------------------------------------

struct RpnConfig {
  int64_t pre_nms_top_n = 1000;   // per level (training: 2000)
  int64_t post_nms_top_n = 1000;  // per image (training: 2000)
  float nms_thresh = 0.7f, score_thresh = 0.0f, min_size = 1e-3f;
  float fg_iou = 0.7f, bg_iou = 0.3f;  // Matcher, allow_low_quality_matches
  int64_t batch_per_image = 256;
  double positive_fraction = 0.5;
  static RpnConfig training() {
    RpnConfig c;
    c.pre_nms_top_n = c.post_nms_top_n = 2000;
    return c;
  }
};

struct Proposals {
  std::vector<float> boxes;   // [R * 4], by decreasing score
  std::vector<float> scores;  // [R] sigmoid(objectness)
};

// filter_proposals for one image: logits [N] (objectness), deltas [N * 4] in anchor order (levels
// concatenated, counts[l] each), decoded with weights 1 and the log(1000 / 16) clamp; the image's
// unpadded size im_h x im_w clips them.
Proposals rpn_proposals(const float* logits, const float* deltas, const std::vector<float>& anchors,
                        const std::vector<int64_t>& counts, int64_t im_h, int64_t im_w,
                        const RpnConfig& c);

// assign_targets_to_anchors + encode for one image: labels 1 / 0 / -1 per anchor (float in
// torchvision; i64 here) and the regression targets of every anchor to its matched (clamped)
// ground truth (weights 1). No ground truth: labels 0, targets of zero boxes.
struct RpnTargets {
  std::vector<int64_t> labels;  // [N]
  std::vector<float> targets;   // [N * 4]
};
RpnTargets rpn_targets(const std::vector<float>& anchors, const float* gt, int64_t G,
                       const RpnConfig& c);

// compute_loss over the batch: objectness [B * N] logits and deltas [B * N, 4] (image-major),
// the sampled sets of each image. BCE with logits averaged over the sampled anchors; smooth L1
// (beta 1/9) summed over the positives / the sampled count.
struct RpnLosses {
  autograd::Variable objectness, box_reg;
};
RpnLosses rpn_loss(const autograd::Variable& objectness, const autograd::Variable& deltas,
                   const std::vector<RpnTargets>& targets, const std::vector<SampledSets>& sampled);

// ---- RoI heads -------------------------------------------------------------------------------

struct RoiHeadsConfig {
  float fg_iou = 0.5f, bg_iou = 0.5f;
  int64_t batch_per_image = 512;
  double positive_fraction = 0.25;
  float score_thresh = 0.05f, nms_thresh = 0.5f, min_size = 1e-2f;
  int64_t detections_per_img = 100;
};

// select_training_samples for one image: candidates = proposals then the gt boxes; labels (gt
// class, 0 below 0.5); the sampled candidates in ascending index order with their matched gt,
// labels and (10, 10, 5, 5) regression targets. No ground truth: torchvision's zero box, label 0.
struct RoiSamples {
  std::vector<int64_t> sampled;     // [S] indices into proposals ++ gt
  std::vector<float> boxes;         // [S * 4]
  std::vector<int64_t> matched;     // [S] gt index (clamped to >= 0)
  std::vector<int64_t> labels;      // [S]
  std::vector<float> targets;       // [S * 4]
  std::vector<int64_t> all_labels;  // [P + G] before sampling (what the parity test compares)
};
RoiSamples roi_training_samples(const std::vector<float>& proposals, const float* gt,
                                const int64_t* gt_labels, int64_t G, const RoiHeadsConfig& c,
                                data::PhiloxDraw& d);

// postprocess_detections for one image: class_logits [R, C], box_regression [R, C * 4], proposals
// [R * 4]: softmax, decode per class (10, 10, 5, 5), clip to im_h x im_w, drop background, score >
// score_thresh, remove small, NMS per class, the best detections_per_img.
struct Detections {
  std::vector<float> boxes, scores;  // [D * 4], [D]
  std::vector<int64_t> labels;       // [D]
};
Detections roi_postprocess(const float* class_logits, const float* box_regression,
                           const std::vector<float>& proposals, int64_t C, int64_t im_h,
                           int64_t im_w, const RoiHeadsConfig& c);

// fastrcnn_loss: cross entropy over all rows; smooth L1 (beta 1/9) of the positives' own-class
// deltas, summed / the number of rows. class_logits [S, C], box_regression [S, C * 4], labels and
// targets of the sampled rows (all images, in order).
struct BoxLosses {
  autograd::Variable classifier, box_reg;
};
BoxLosses fastrcnn_loss(const autograd::Variable& class_logits,
                        const autograd::Variable& box_regression,
                        const std::vector<int64_t>& labels, const std::vector<float>& targets);

// maskrcnn_loss: mask_logits [P, C, M, M] of the positive rows, their labels and mask targets
// [P, M, M] (project_masks_on_boxes): BCE with logits of each row's own-class map, mean. No
// positives: mask_logits.sum() * 0.
autograd::Variable maskrcnn_loss(const autograd::Variable& mask_logits,
                                 const std::vector<int64_t>& labels, const Tensor& mask_targets);

// ---- MultiScaleRoIAlign ----------------------------------------------------------------------

// The levels' scales 2^round(log2(feature / image)) from the first axis of each map and the
// largest unpadded image height (torchvision's _setup_scales / infer_scale).
std::vector<double> roi_level_scales(const std::vector<int64_t>& feature_heights,
                                     int64_t max_image_h);

// LevelMapper: floor(k0 + log2(sqrt(area) / 224) + 1e-6) clamped to [k_min, k_max], minus k_min;
// boxes [K * 4] f32.
std::vector<int64_t> map_roi_levels(const std::vector<float>& boxes, int64_t k_min, int64_t k_max);

// MultiScaleRoIAlign(["0", "1", "2", "3"], out, sampling_ratio) on features [B, C, H_l, W_l]:
// boxes[b] of image b ([K_b * 4]) -> [sum K_b, C, out, out] (images in order), aligned=False.
autograd::Variable multiscale_roi_align(const std::vector<autograd::Variable>& features,
                                        const std::vector<std::vector<float>>& boxes,
                                        int64_t max_image_h, int64_t out, int64_t sampling_ratio);

}  // namespace aim::models::detection
