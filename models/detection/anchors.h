// Region-proposal geometry of py-faster-rcnn (lib/rpn/generate_anchors.py,
// lib/fast_rcnn/bbox_transform.py, lib/utils/cython_bbox.pyx), host-side in f64 as its numpy code
// computes it (anchors and overlaps are float64 there; the network's f32 deltas are widened).
// The legacy "+1" of its inclusive-pixel widths is a parameter (offset), so a torchvision-style
// RPN (offset 0, weights (1, 1, 1, 1) for the RPN and (10, 10, 5, 5) for the box head, dw / dh
// clamped at log(1000 / 16)) reuses the same functions.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace aim::models::detection {

// generate_anchors(base_size, ratios, scales): the base box [0, 0, base - 1, base - 1]; per ratio
// (outer loop) w = round(sqrt(w h / ratio)), h = round(w ratio) around its centre, then per scale
// (inner loop) w s, h s; corners ctr -+ 0.5 (size - 1). np.round rounds halves to even, as
// std::nearbyint does. [A * 4] (x1, y1, x2, y2); the defaults give py-faster-rcnn's nine anchors
// (-84, -40, 99, 55), ..., (-168, -344, 183, 359).
std::vector<double> generate_anchors(double base_size = 16,
                                     const std::vector<double>& ratios = {0.5, 1, 2},
                                     const std::vector<double>& scales = {8, 16, 32});

// The anchors of every cell of an H x W map of stride `stride`: anchor a shifted by (w stride,
// h stride), ordered (h, w, a) (py-faster-rcnn's meshgrid, ravel and K x A broadcast: the order
// of rpn_bbox_pred.transpose(0, 2, 3, 1).reshape(-1, 4)). [H * W * A * 4].
std::vector<double> shift_anchors(const std::vector<double>& base, int64_t H, int64_t W,
                                  double stride);

struct BoxTransform {
  double offset = 1;  // width = x2 - x1 + offset (py-faster-rcnn: 1; torchvision: 0)
  double wx = 1, wy = 1, ww = 1, wh = 1;
  double clamp = std::numeric_limits<double>::infinity();  // dw, dh clamp before exp in decode
  static BoxTransform legacy() { return {}; }
  static BoxTransform torchvision_rpn() { return {0, 1, 1, 1, 1, std::log(1000.0 / 16)}; }
  static BoxTransform torchvision_head() { return {0, 10, 10, 5, 5, std::log(1000.0 / 16)}; }
};

// bbox_transform(ex_rois, gt_rois): per row (wx (gcx - ecx) / ew, wy (gcy - ecy) / eh,
// ww log(gw / ew), wh log(gh / eh)), centres x1 + 0.5 w. n rows of 4.
void bbox_transform(const double* ex, const double* gt, int64_t n, const BoxTransform& t,
                    double* out);
// bbox_transform_inv(boxes, deltas): centre dx w + cx, size exp(dw) w; corners centre -+ 0.5
// size (py-faster-rcnn: no -1 on x2 even with offset 1). n rows of 4.
void bbox_transform_inv(const double* boxes, const double* deltas, int64_t n, const BoxTransform& t,
                        double* out);
// clip_boxes: x to [0, width - offset], y to [0, height - offset] (py-faster-rcnn: im_shape - 1).
void clip_boxes(double* boxes, int64_t n, double height, double width, double offset);
// bbox_overlaps(a, b): IoU [n, m] with areas (x2 - x1 + offset) (y2 - y1 + offset) and the
// intersection's sides + offset (0 when <= 0), in f64 (cython_bbox's DTYPE).
std::vector<double> box_overlaps(const double* a, int64_t n, const double* b, int64_t m,
                                 double offset);

}  // namespace aim::models::detection
