// Differentiable local response normalisation on the fused kernels (kernels/norm/lrn.h),
// PyTorch semantics (F.local_response_norm).
#pragma once
#include "autograd/variable.h"
#include "kernels/norm/lrn.h"

namespace aim::autograd {

// x [N, C, ...].
Variable local_response_norm(const Variable& x, const kernels::LrnParams& p);

}  // namespace aim::autograd
