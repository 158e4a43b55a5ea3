// Differentiable elementwise functions (kernels/elementwise): unary activations and math,
// broadcasting binary arithmetic (NumPy rules, like torch), prelu, where, and comparisons.
// Inputs may be any strided views (transposed, broadcast); outputs are contiguous. Binary
// inputs share one dtype and device. Gradients of broadcast inputs are summed back to their
// shape. Where a function is not differentiable at a point the gradient follows PyTorch
// (relu'(0) = abs'(0) = 0, clamp passes at its bounds, maximum/minimum ties split dy in half).
#pragma once
#include "autograd/variable.h"

namespace aim::autograd {

// ---- binary, broadcasting -------------------------------------------------------------------
Variable add(const Variable& a, const Variable& b);
Variable sub(const Variable& a, const Variable& b);
Variable mul(const Variable& a, const Variable& b);
Variable div(const Variable& a, const Variable& b);
// Gradients as torch.pow: d/da is 0 where b == 0, d/db is 0 where a == 0 and b >= 0.
Variable pow(const Variable& a, const Variable& b);
// Gradient to the larger (smaller) input; ties give each input dy / 2 (torch.maximum/minimum).
Variable maximum(const Variable& a, const Variable& b);
Variable minimum(const Variable& a, const Variable& b);

// ---- with a scalar (kept in at least f32 precision for f16/bf16 tensors) ---------------------
Variable add(const Variable& a, double s);
Variable mul(const Variable& a, double s);
Variable pow(const Variable& a, double e);  // e = 0: zero gradient, as torch

// ---- unary ----------------------------------------------------------------------------------
Variable neg(const Variable& x);
Variable exp(const Variable& x);
Variable log(const Variable& x);
Variable sqrt(const Variable& x);
Variable rsqrt(const Variable& x);
Variable abs(const Variable& x);
Variable relu(const Variable& x);
// The record of relu(x) whose output y the producer of x already computed (a convolution with the
// relu in its epilogue): relu's node over x, reading y in its backward as relu's does; no kernel
// runs and x's data is never read.
Variable relu_recorded(const Variable& x, const Tensor& y);
Variable gelu(const Variable& x, bool tanh_approximation = false);
Variable sigmoid(const Variable& x);
Variable tanh(const Variable& x);
Variable square(const Variable& x);
Variable leaky_relu(const Variable& x, double slope = 0.01);
Variable clamp(const Variable& x, double lo, double hi);

// x [N, C, ...] (or [C] when 1-D), weight [C] applied along dim 1 (dim 0 when x is 1-D), or a
// one-element weight shared by all channels: torch.nn.functional.prelu. weight's gradient is
// accumulated (a parameter).
Variable prelu(const Variable& x, const Variable& weight);

// cond (bool), a and b broadcast together; no gradient to cond.
Variable where(const Tensor& cond, const Variable& a, const Variable& b);

// ---- comparisons: bool tensors of the broadcast shape, no gradient --------------------------
Tensor eq(const Variable& a, const Variable& b);
Tensor ne(const Variable& a, const Variable& b);
Tensor lt(const Variable& a, const Variable& b);
Tensor le(const Variable& a, const Variable& b);
Tensor gt(const Variable& a, const Variable& b);
Tensor ge(const Variable& a, const Variable& b);

}  // namespace aim::autograd
