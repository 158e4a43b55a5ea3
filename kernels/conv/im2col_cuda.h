// Own CUDA helpers of the cuBLAS conv2d variant (kernels/conv/conv2d_cublas.cpp), defined in
// conv2d_cuda.cu (CUDA builds only). Host functions on the current stream of the tensors'
// device; every tensor contiguous, one float dtype (f32 f16 bf16 f64).
#pragma once
#include "kernels/conv/conv2d.h"

namespace aim::kernels::cuda {

// col [nb, C, R, S, P, Q] (= [nb][G][C/G*R*S][P*Q]: per image and group the row-major GEMM
// operand [C/G*R*S, P*Q]) from images n0 .. n0+nb-1 of x [N, C, H, W]; zero where the window
// reads padding. Every element written.
void conv2d_im2col(const Tensor& x, int64_t n0, int64_t nb, int64_t R, int64_t S,
                   const Conv2dParams& p, const Tensor& col);
// Images n0 .. n0+nb-1 of dx [N, C, H, W] = the sum of the col entries [nb, C, R, S, P, Q] that
// read each pixel (a gather: every dx element written once, no atomics).
void conv2d_col2im(const Tensor& col, int64_t n0, int64_t nb, int64_t R, int64_t S,
                   const Conv2dParams& p, const Tensor& dx);
// y [N, K, P, Q] += bias [K] (undefined: none) broadcast over N, P, Q, += residual (like y;
// undefined: none), then y = relu(y) when `relu` (NaN stays NaN).
void conv2d_add_bias(const Tensor& y, const Tensor& bias, bool relu = false,
                     const Tensor& residual = Tensor());
// dbias [K] += sum over N, P, Q of dy [N, K, P, Q] (one block per channel, fixed order).
void conv2d_bias_grad(const Tensor& dy, const Tensor& dbias);

}  // namespace aim::kernels::cuda
