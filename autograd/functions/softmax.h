// Differentiable softmax and log-softmax along one dim, with an optional keep-mask
// (kernels/softmax/softmax.h), PyTorch semantics (torch.softmax, torch.log_softmax).
#pragma once
#include "autograd/variable.h"

namespace aim::autograd {

// mask: optional bool, broadcastable to x, true = keep. Masked positions give 0 (log: -inf) and
// get no gradient; a fully masked row gives 0 everywhere (log: -inf) and a zero gradient.
Variable softmax(const Variable& x, int64_t dim, const Tensor& mask = Tensor());
Variable log_softmax(const Variable& x, int64_t dim, const Tensor& mask = Tensor());

}  // namespace aim::autograd
