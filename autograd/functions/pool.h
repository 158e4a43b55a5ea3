// Differentiable pooling (kernels/pool), PyTorch semantics (torch.nn.functional.max_pool2d,
// avg_pool2d, adaptive_avg_pool2d), with asymmetric padding for TF "SAME".
#pragma once
#include "autograd/variable.h"
#include "kernels/pool/pool2d.h"

namespace aim::autograd {

// Output extent from pool2d_out_size (ceil_mode as PyTorch). x [N, C, H, W] -> [N, C, P, Q].
Variable max_pool2d(const Variable& x, const kernels::Pool2dParams& p, bool ceil_mode = false);
Variable avg_pool2d(const Variable& x, const kernels::Pool2dParams& p, bool ceil_mode = false);
// x [N, C, H, W] -> [N, C, out_h, out_w]; (1, 1) is global average pooling.
Variable adaptive_avg_pool2d(const Variable& x, int64_t out_h, int64_t out_w);

// Output extent of a pooling layer on one axis, with the checks a user needs ("window larger
// than the padded input").
int64_t pooled_size(int64_t in, int64_t k, int64_t stride, int64_t pad_before, int64_t pad_after,
                    bool ceil_mode, const char* what);

}  // namespace aim::autograd
