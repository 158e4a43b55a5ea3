// Differentiable dropout (kernels/random), PyTorch semantics (torch.nn.functional.dropout).
#pragma once
#include "autograd/variable.h"
#include "kernels/random/random.h"

namespace aim::autograd {

// F.dropout(x, p, training) (inverted: kept elements scaled by 1 / (1 - p)). training = false or
// p = 0 returns x itself. Otherwise draws x.numel() numbers from `gen` (advancing it) and saves
// the u8 mask: dx = mask ? dy / (1 - p) : 0. p must lie in [0, 1].
Variable dropout(const Variable& x, double p, bool training, kernels::Generator& gen);

}  // namespace aim::autograd
