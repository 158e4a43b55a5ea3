// Differentiable batch normalisation on the fused kernels (kernels/norm/batchnorm.h), PyTorch
// semantics (F.batch_norm).
#pragma once
#include "autograd/variable.h"

namespace aim::autograd {

// x [N, C, ...]; weight, bias [C] (both or neither); running_mean / running_var [C] (updated in
// place when training and defined; required when !training). Parameters and statistics are f32
// (f64 for an f64 x). Training normalises with batch statistics; eval with the running ones,
// and then the backward treats the statistics as constants (frozen BN).
// relu: y = relu(batch_norm(...)) in one kernel pass (BatchNormFwdArgs::relu), and with a
// gradient one backward pass (BatchNormBwdArgs::y_relu): the same bits as batch_norm then relu.
Variable batch_norm(const Variable& x, const Variable& weight, const Variable& bias,
                    const Tensor& running_mean, const Tensor& running_var, bool training,
                    double momentum, double eps, bool relu = false);

}  // namespace aim::autograd
