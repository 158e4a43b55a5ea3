// Differentiable channel L2 normalisation with a learned scale on the fused kernels
// (kernels/norm/l2norm.h): scale.view(1, -1, 1, 1) * F.normalize(x, p=2, dim=1, eps), SSD's L2Norm
// (torchvision's ssd300_vgg16 scale_weight).
#pragma once
#include "autograd/variable.h"

namespace aim::autograd {

// x [N, C, ...]; scale [C] or undefined (F.normalize alone).
Variable l2_normalize(const Variable& x, const Variable& scale, double eps = 1e-12);

}  // namespace aim::autograd
