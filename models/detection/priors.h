// SSD's default boxes ("priors", "anchors"), per feature map, in the order the references lay them
// out (detection head channels depend on it). docs/detection.md.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace aim::models::detection {

// torchvision's DefaultBoxGenerator (ssd300_vgg16; MLPerf's SSD-ResNet34 DefaultBoxes tile the
// same way): at feature map k, for every cell (row-major), the boxes
//   [s_k, s_k], [s'_k, s'_k] (s'_k = sqrt(s_k s_k+1)), then [s_k sqrt(ar), s_k / sqrt(ar)] and its
//   transpose for each aspect ratio ar,
// wh clipped to [0, 1] when clip; centres ((j + 0.5) / (W / step_k), (i + 0.5) / (H / step_k)).
struct DefaultBoxSpec {
  std::vector<std::vector<double>> aspect_ratios;  // per feature map
  std::vector<double> scales;                      // feature maps + 1
  std::vector<double> steps;                       // per feature map, in pixels
  bool clip = true;
  int64_t boxes_per_cell(size_t k) const { return 2 + 2 * int64_t(aspect_ratios[k].size()); }
};

// torchvision ssd300_vgg16's: ARs [[2], [2, 3], [2, 3], [2, 3], [2], [2]], scales 0.07 .. 1.05,
// steps 8, 16, 32, 64, 100, 300 (8732 boxes on the 38, 19, 10, 5, 3, 1 maps of a 300 x 300 image).
DefaultBoxSpec ssd300_default_boxes();

// The default boxes of an image of image_h x image_w with feature maps of the given (h, w):
// [P, 4] f32 (cx, cy, w, h) relative to the image, as torchvision computes them (f32 arithmetic).
Tensor default_boxes_cxcywh(const DefaultBoxSpec& spec,
                            const std::vector<std::pair<int64_t, int64_t>>& feature_maps,
                            int64_t image_h, int64_t image_w);
// The same as (x1, y1, x2, y2) in pixels (torchvision's DefaultBoxGenerator.forward output).
Tensor default_boxes_xyxy(const DefaultBoxSpec& spec,
                          const std::vector<std::pair<int64_t, int64_t>>& feature_maps,
                          int64_t image_h, int64_t image_w);

// MLPerf SSD-ResNet34's (single_stage_detector/ssd, dboxes300_coco): ssd300's aspect ratios and
// steps with the scales 21, 45, 99, 153, 207, 261, 315 over 300.
DefaultBoxSpec mlperf_ssd300_default_boxes();

// MLPerf's DefaultBoxes on square maps (sizes `map_sizes`) of an image_size x image_size image:
// the same boxes as above, but size-major (per map, for each box size every cell, row-major: the
// order of its heads' [N, 4, nd H W] view), and computed as the reference computes them: (cx, cy,
// w, h) in double (centres (j + 0.5) / (image_size / step)), rounded to f32 once, then all four
// clamped to [0, 1] (spec.clip is not read: the reference always clamps). [P, 4] f32.
Tensor size_major_default_boxes_cxcywh(const DefaultBoxSpec& spec,
                                       const std::vector<int64_t>& map_sizes, int64_t image_size);
// The same as (x1, y1, x2, y2) in pixels: the reference's ltrb (cx -+ 0.5 w in f32) times the
// image size.
Tensor size_major_default_boxes_xyxy(const DefaultBoxSpec& spec,
                                     const std::vector<int64_t>& map_sizes, int64_t image_size);

}  // namespace aim::models::detection
