// py-faster-rcnn's three Python layers of the end-to-end training (lib/rpn/anchor_target_layer.py,
// proposal_layer.py, proposal_target_layer.py), host-side, one image each, with the settings of
// its experiments/cfgs/faster_rcnn_end2end.yml over lib/fast_rcnn/config.py (docs/detection.md).
// Geometry is models/detection/anchors.h's (f64, legacy +1). Random subsampling (numpy's
// npr.choice without replacement) is sample_subset() on a Philox stream (data/philox_draw.h), so a
// run is deterministic and a peer can be handed the chosen indices.
#pragma once
#include <cstdint>
#include <vector>

#include "data/philox_draw.h"
#include "models/detection/anchors.h"

namespace aim::models::detection {

// k of the values, without replacement, in ascending order: a partial Fisher-Yates shuffle
// (position i swapped with i + below(n - i) for i < k) of `values` on d. k >= values.size():
// all of them.
std::vector<int64_t> sample_subset(std::vector<int64_t> values, int64_t k, data::PhiloxDraw& d);

struct AnchorTargetConfig {
  double positive_overlap = 0.7;  // RPN_POSITIVE_OVERLAP
  double negative_overlap = 0.3;  // RPN_NEGATIVE_OVERLAP
  int64_t batch_size = 256;       // RPN_BATCHSIZE
  double fg_fraction = 0.5;       // RPN_FG_FRACTION
  double allowed_border = 0;      // _allowed_border
};

// Per anchor (all H W A of the map, (h, w, a) order): label 1 / 0 / -1 (positive, negative,
// ignored: outside the image or not sampled) and the positives' regression targets.
struct AnchorTargets {
  std::vector<int64_t> labels;  // [N]
  std::vector<float> targets;   // [N * 4]: bbox_transform(anchor, its best gt), 0 unless label 1
  int64_t num_fg = 0, num_bg = 0;
};

// The anchor target layer: anchors inside the image (x1, y1 >= -border, x2 < width + border,
// y2 < height + border); per anchor its best gt (first maximum); labels 0 where the best IoU <
// negative_overlap, 1 for every anchor holding some gt's maximum IoU (ties included, as
// `np.where(overlaps == gt_max_overlaps)`), 1 where the best IoU >= positive_overlap; then at
// most fg_fraction * batch_size positives and batch_size - positives negatives kept
// (sample_subset: positives first, then negatives, on d); the rest -1. No gt: every inside anchor
// is negative (py-faster-rcnn's roidb never holds such an image).
// anchors [N * 4] f64, gt [G * 4] f64 (x1, y1, x2, y2 in input pixels).
AnchorTargets anchor_targets(const std::vector<double>& anchors, const double* gt, int64_t G,
                             double height, double width, const AnchorTargetConfig& c,
                             data::PhiloxDraw& d);

struct ProposalConfig {
  int64_t pre_nms_top_n = 12000;  // RPN_PRE_NMS_TOP_N (test: 6000)
  int64_t post_nms_top_n = 2000;  // RPN_POST_NMS_TOP_N (test: 300)
  double nms_thresh = 0.7;        // RPN_NMS_THRESH
  double min_size = 16;           // RPN_MIN_SIZE, in original-image pixels (times im_scale)
};

// The proposal layer: decode every anchor's deltas (bbox_transform_inv, legacy), clip to the
// image, drop boxes with width or height (+1) < min_size * im_scale, order by fg score
// (descending; ties: lower anchor first), keep pre_nms_top_n, NMS (IoU with the +1 widths, in f32
// as py-faster-rcnn's nms: evaluated as kernels/boxes' nms on boxes with x2 + 1, y2 + 1), keep
// post_nms_top_n. scores [N] f32 (the fg probabilities), deltas [N * 4] f32, anchors [N * 4]
// (h, w, a order). Returns the proposals [R * 4] f32, best first.
std::vector<float> propose(const float* scores, const float* deltas,
                           const std::vector<double>& anchors, double height, double width,
                           double im_scale, const ProposalConfig& c);

struct ProposalTargetConfig {
  int64_t batch_size = 128;   // TRAIN.BATCH_SIZE (RoIs per image)
  double fg_fraction = 0.25;  // TRAIN.FG_FRACTION
  double fg_thresh = 0.5;     // TRAIN.FG_THRESH
  double bg_thresh_hi = 0.5;  // TRAIN.BG_THRESH_HI
  double bg_thresh_lo = 0.0;  // faster_rcnn_end2end.yml (config.py's default is 0.1)
  double means[4] = {0, 0, 0, 0};
  double stds[4] = {0.1, 0.1, 0.2, 0.2};  // BBOX_NORMALIZE_{MEANS,STDS}
};

struct RoiTargets {
  std::vector<float> rois;       // [R * 4] the sampled RoIs (x1, y1, x2, y2)
  std::vector<int64_t> labels;   // [R] classes (0: background)
  std::vector<float> targets;    // [R * 4] (bbox_transform - means) / stds of the RoI's own
                                 // class (the 4 of the class-specific 4 C); 0 for background
  std::vector<int64_t> sampled;  // [R] indices into proposals then gt (what npr.choice chose)
  int64_t num_fg = 0;
};

// The proposal target layer: the gt boxes appended to the proposals; per RoI its best gt (first
// maximum, legacy IoU); foreground IoU >= fg_thresh, at most round(fg_fraction * batch_size) of
// them; background IoU in [bg_lo, bg_hi), batch_size - foreground of them (sample_subset on d,
// foreground first). Fewer candidates: fewer RoIs (R < batch_size), as py-faster-rcnn.
// proposals [P * 4] f32, gt [G * 4] f64, gt_labels [G] (1 .. C - 1), G >= 1.
RoiTargets proposal_targets(const std::vector<float>& proposals, const double* gt,
                            const int64_t* gt_labels, int64_t G, const ProposalTargetConfig& c,
                            data::PhiloxDraw& d);

}  // namespace aim::models::detection
