// Differentiable fused bias functions for transformer blocks (BERT): each is one kernel forward
// and one backward in place of a chain of elementwise ops, with the same values and gradients as
// that chain and without its intermediate tensors.
//   bias_gelu      = gelu(add(x, bias))                      (kernels/elementwise/bias_gelu.h)
//   add_layer_norm = layer_norm(add(add(x, bias), residual)) (kernels/norm/add_layernorm.h)
// x may be a strided view (it is made contiguous); parameter gradients accumulate (+=) through
// g.accum (node.h).
#pragma once
#include "autograd/variable.h"

namespace aim::autograd {

// gelu(x + bias) over the last dim: x [..., C], bias [C] (undefined: gelu(x)). The exact erf form
// (F.gelu), or the tanh approximation (F.gelu(approximate='tanh')). Saves x and bias only: the
// backward recomputes x + bias.
Variable bias_gelu(const Variable& x, const Variable& bias, bool tanh_approximation = false);

// layer_norm(x + bias + residual) over the last dim (F.layer_norm, biased variance): x, residual
// [..., C] of one shape; bias (x's bias, e.g. a Linear's), weight and ln_bias (the LayerNorm's
// affine parameters) [C], each may be undefined. x and residual get the same gradient. Saves
// h = x + bias + residual and the row statistics, as layer_norm saves its input.
Variable add_layer_norm(const Variable& x, const Variable& bias, const Variable& residual,
                        const Variable& weight, const Variable& ln_bias, double eps = 1e-5);

}  // namespace aim::autograd
