// Differentiable 2-D resampling (kernels/interpolate), torch.nn.functional.interpolate's
// 'nearest' (legacy index rule) and 'bilinear' (align_corners) on [N, C, H, W].
#pragma once
#include "autograd/variable.h"
#include "kernels/interpolate/interpolate.h"

namespace aim::autograd {

// F.interpolate(x, size=(out_h, out_w), mode, align_corners): the scale from the sizes.
Variable interpolate(const Variable& x, int64_t out_h, int64_t out_w, kernels::InterpMode mode,
                     bool align_corners = false);
// F.interpolate(x, scale_factor=(scale_h, scale_w), mode, align_corners,
// recompute_scale_factor=False): output floor(H * scale_h) x floor(W * scale_w), the given
// factors used as the scale.
Variable interpolate_scale(const Variable& x, double scale_h, double scale_w,
                           kernels::InterpMode mode, bool align_corners = false);

}  // namespace aim::autograd
