// Differentiable 2-D convolution and transposed convolution (kernels/conv), PyTorch semantics
// (torch.nn.functional.conv2d / conv_transpose2d) with asymmetric padding for TF "SAME".
// x is made contiguous; weight and bias gradients accumulate (+=) through g.accum (node.h).
#pragma once
#include "autograd/variable.h"
#include "kernels/conv/conv2d.h"

namespace aim::autograd {

// A transform of the convolution's input per input channel, x' = scale[c] * x + shift[c], then
// relu when asked: an inference batch norm (and relu) folded into the pointwise convolution after
// it (layers/fold.h). scale, shift: f32 [C] on x's device.
struct ConvInputAffine {
  Tensor scale, shift;
  bool relu = false;
  bool defined() const { return scale.defined(); }
};

// x [N, C, H, W]; weight [K, C/G, R, S]; bias [K] or undefined -> [N, K, P, Q].
// relu, residual (like the output, or undefined): relu(conv2d(...) + residual); without a gradient
// to compute (inference) the kernel's epilogue (Conv2dFwdArgs::relu, residual), otherwise
// conv2d, autograd::add and autograd::relu.
// in (defined): the convolution of in's transform of x. Without a gradient, on the CPU, for a
// pointwise convolution and not in int8, the kernel's input prologue (Conv2dFwdArgs::in_scale:
// no pass writes x', and x may be a channel slice of a wider tensor, each image contiguous);
// otherwise the transform as ops of its own first (the same values).
Variable conv2d(const Variable& x, const Variable& weight, const Variable& bias,
                const kernels::Conv2dParams& p, bool relu = false,
                const Variable& residual = Variable(), const ConvInputAffine& in = {});

// x [N, Cin, H, W]; weight [Cin, Cout/G, R, S] (PyTorch's layout); bias [Cout] or undefined ->
// [N, Cout, Ho, Wo], Ho = (H-1)*stride_h - pad_top - pad_bottom + dil_h*(R-1) + out_pad_h + 1.
// It is the gradient of conv2d with respect to its input, run forward.
Variable conv_transpose2d(const Variable& x, const Variable& weight, const Variable& bias,
                          const kernels::Conv2dParams& p, int64_t out_pad_h = 0,
                          int64_t out_pad_w = 0);

}  // namespace aim::autograd
