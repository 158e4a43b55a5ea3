// Differentiable RoI feature extraction (kernels/roi), torchvision.ops semantics: roi_align
// (sampling_ratio, aligned) and roi_pool (Caffe / Faster R-CNN max pooling of rounded RoIs).
// Gradients flow to x only; the RoIs are data, as in torchvision.
#pragma once
#include "autograd/variable.h"

namespace aim::autograd {

// x [N, C, H, W]; rois [K, 5] rows (batch index, x1, y1, x2, y2) in image coordinates, x's dtype
// and device -> [K, C, out_h, out_w]. spatial_scale maps image to feature coordinates (1/16 for a
// stride-16 map); sampling_ratio <= 0 picks ceil(RoI extent / bins) samples per bin and axis.
Variable roi_align(const Variable& x, const Tensor& rois, int64_t out_h, int64_t out_w,
                   double spatial_scale = 1.0, int64_t sampling_ratio = -1, bool aligned = false);
Variable roi_pool(const Variable& x, const Tensor& rois, int64_t out_h, int64_t out_w,
                  double spatial_scale = 1.0);

}  // namespace aim::autograd
