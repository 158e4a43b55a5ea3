// SegLink's segments and links (Shi, Bai, Belongie, CVPR 2017; bgshih/seglink's encode_groundtruth,
// decode_segments_links and combine_segments ops). Host-side, double arithmetic, f32 outputs.
// docs/seglink.md; MODELS.md §5.2.
//
// Default boxes: on detection layer l (map H_l x W_l of an H x W image) one square box of side
// a_l per cell, centred at ((x + 0.5) W / W_l, (y + 0.5) H / H_l).
//
// Targets of a default box (encode_groundtruth): the words it may match are those whose height h
// has scale difference max(a_l / h, h / a_l) < neg_scale_diff (2.0) and which contain the box's
// centre strictly; it takes the one of smallest scale difference (the first on ties) and is
//   positive (1) when that difference is < pos_scale_diff (1.7), ignored (0) otherwise,
//   negative (-1) when no word qualifies.
// A positive box's segment is the part of its word between the two lines through the box's left
// and right sides, in the word's own frame (the word rotated about the box centre to horizontal,
// its width clipped to [cx - a/2, cx + a/2], rotated back); its offsets are
//   ((sx - cx) / a, (sy - cy) / a, log(1e-6 + sw / a), log(1e-6 + sh / a), cos theta, sin theta)
// each divided by its variance (0.1: what the head regresses; the reference divides in its loss).
// Links of a node p to its 8 neighbours on its layer (order: dy = -1, 0, 1 outer, dx = -1, 0, 1
// inner, the centre skipped), in this order of rules:
//   -1 when the neighbour is outside the map; -1 when both have a matched word and the words
//   differ; -1 when either is negative; 1 when both are positive (on the same word); else 0.
// Cross-layer links (layers l >= 1) of a node (y, x) to its 4 children on layer l - 1, rows
// min(2y, H_{l-1} - 2) .. +1 and columns min(2x, W_{l-1} - 2) .. +1 (row-major):
//   -1 when either is negative; 1 when both are positive on the same word; else 0 (the
//   reference leaves two positives on different words at 0, a rule its own comment calls
//   unsettled; kept).
//
// Dense layout (the order the head's outputs are flattened in, layer by layer, cells row-major):
//   node labels / offsets: [P] / [P, 6], P = sum H_l W_l, node (l, y, x) at node_begin[l] +
//   y W_l + x; links: [L], layer l's [H_l, W_l, n_l] block at link_begin[l], n_0 = 8 (within
//   only), n_l = 12 (8 within, then 4 cross) for l >= 1.
//
// Decoding (decode_segments_links): a node is kept when its positive-class probability is
// >= node threshold; its segment is (a ox v0 + cx, a oy v1 + cy, exp(ow v2) a - 1e-6,
// exp(oh v3) a - 1e-6, cos = oc v4, sin = os v5) (v = variances, as the reference's evaluation
// multiplies them in); kept nodes joined by a link whose probability is >= link threshold
// (either end's link suffices) form groups (union-find; groups numbered in node order).
// Combining (combine_segments, the paper's Algorithm 1 as the reference codes it): theta =
// atan(mean sin / mean cos) in [-pi/2, pi/2]; the line of that direction through the mean
// segment centre; the centres projected on it; the two extreme projections p, q (first on ties)
// give the centre (p + q) / 2 and the width |pq| + (w_p + w_q) / 2; the height is the mean
// segment height. The reference has no score: ours is the mean node probability of the group.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "models/detection/rbox.h"
#include "tensor/tensor.h"

namespace aim::models::detection {

// The reference's anchor sizes of its six layers (conv4_3, fc7, conv8_2, conv9_2, conv10_2,
// conv11), fixed whatever the image size.
inline constexpr std::array<double, 6> kSeglinkAnchors = {11.84210526, 23.68421053, 45.,
                                                          90.,         150.,        285.};

struct SeglinkLayer {
  int64_t map_h = 0, map_w = 0;
  double anchor = 0;  // a_l, pixels
};

struct SeglinkConfig {
  int64_t image_h = 384, image_w = 384;
  std::vector<SeglinkLayer> layers;
  double pos_scale_diff = 1.7, neg_scale_diff = 2.0;  // the reference's training flags
  std::array<double, 6> variances = {0.1, 0.1, 0.1, 0.1, 0.1, 0.1};
  // Words are clipped to the image (clip_rbox) before encoding, as the reference's training
  // preprocessing does.
  bool clip_to_image = true;
  // Off (the reference: its ICDAR 2015 set keeps "###" words as text): don't-care words are
  // words. On: a box whose word is don't-care is ignored (0), so are the links that need it.
  bool ignore_dont_care = false;
};

// The reference network's layers for an image_h x image_w input: conv4_3 at 1/8 (three 2x2/2
// SAME pools: ceil thrice), then each next layer ceil(previous / 2) (pool4, and the stride-2
// SAME convs conv8_2 .. conv11): 48, 24, 12, 6, 3, 2 at 384 x 384; kSeglinkAnchors. Sides under
// 129 px leave conv10_2 a single row or column, too few for conv11's cross-layer links:
// seglink_layout refuses such a configuration.
SeglinkConfig seglink_config(int64_t image_h = 384, int64_t image_w = 384);

struct SeglinkLayout {
  std::vector<int64_t> node_begin, link_begin, links_per_node;  // per layer
  int64_t nodes = 0, links = 0;                                 // P, L
};
// Validates the configuration (errors name the field) and lays out the dense targets.
SeglinkLayout seglink_layout(const SeglinkConfig& cfg);

// [P, 4] f32 (cx, cy, a_l, a_l) in pixels, in node order.
Tensor seglink_default_boxes(const SeglinkConfig& cfg);

struct SeglinkTargets {
  std::vector<int8_t> node_labels;  // [P]: 1 positive, 0 ignored, -1 negative
  std::vector<int32_t> node_match;  // [P]: the matched word (positive or ignored), else -1
  std::vector<float> offsets;       // [P, 6]: encoded / variances, 0 unless positive
  std::vector<int8_t> link_labels;  // [L]
  std::vector<RBox> words;          // the G words as encoded (quad_to_rbox, clipped)
};

// quads: [G, 8] pixels, corners clockwise from each word's top left; dont_care: [G] or nullptr.
// Errors (naming quads[g]) for degenerate quadrilaterals.
SeglinkTargets encode_seglink_targets(const SeglinkConfig& cfg, const double* quads, int64_t G,
                                      const uint8_t* dont_care = nullptr);

// A batch: quads f32 [B, G, 8], num_boxes i64 [B] (words 0 .. n_b - 1 of image b are real),
// dont_care u8 [B, G] (or an undefined tensor). Returns "seg_labels" i8 [B, P], "seg_offsets"
// f32 [B, P, 6], "link_labels" i8 [B, L]. Errors name the argument and its shape.
TensorMap encode_seglink_batch(const SeglinkConfig& cfg, const Tensor& quads,
                               const Tensor& num_boxes, const Tensor& dont_care);

struct SeglinkThresholds {
  double node = 0.9, link = 0.7;  // test_ic15.json (the reference's flag defaults are 0.5, 0.5)
};

struct SeglinkSegment {
  double cx = 0, cy = 0, w = 0, h = 0, cos = 0, sin = 0;  // as the reference's 6 numbers
  double score = 0;                                       // the node's probability
  int64_t node = 0;                                       // dense node index
  int64_t group = 0;                                      // 0, 1, ... in node order
};

// node_scores: [P] positive-class probabilities; link_scores: [L] positive-class probabilities;
// offsets: [P, 6] as the head outputs them (divided by the variances). The kept segments in node
// order, each with its group.
std::vector<SeglinkSegment> decode_segments_links(const SeglinkConfig& cfg,
                                                  const float* node_scores,
                                                  const float* link_scores, const float* offsets,
                                                  const SeglinkThresholds& t = {});

struct SeglinkDetection {
  RBox box;
  std::array<double, 8> quad{};  // rbox_to_quad(box)
  double score = 0;              // mean segment score
  int64_t segments = 0;
};

// One detection per group, in group order.
std::vector<SeglinkDetection> combine_segments(const std::vector<SeglinkSegment>& segments);

}  // namespace aim::models::detection
