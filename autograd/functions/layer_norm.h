// Differentiable layer_norm (kernels/norm/layernorm.h), PyTorch semantics
// (torch.nn.functional.layer_norm). x may be a strided view (it is made contiguous); the
// weight/bias gradients are accumulated (+=) through g.accum (node.h).
#pragma once
#include "autograd/variable.h"

namespace aim::autograd {

// Over the last dim: x [..., C]; weight, bias [C] or undefined (either may be given alone).
Variable layer_norm(const Variable& x, const Variable& weight, const Variable& bias,
                    double eps = 1e-5);

}  // namespace aim::autograd
