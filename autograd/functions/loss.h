// Differentiable losses (kernels/loss), PyTorch semantics (torch.nn.functional.*). Inputs may be
// strided views (they are made contiguous); targets and pos_weight are plain tensors (no
// gradient), moved to the input's device (and, for the pointwise losses, cast to its dtype) when
// they differ. Losses are f32 for f32/f16/bf16 inputs and f64 for f64 (kernels/loss/loss.h).
#pragma once
#include "autograd/variable.h"
#include "kernels/loss/loss.h"

namespace aim::autograd {

// logits [N, V], target [N] i32/i64 class indices. Output [] (mean/sum) or [N] (none); mean
// divides by the number of non-ignored targets.
Variable cross_entropy(const Variable& logits, const Tensor& target,
                       kernels::Reduction r = kernels::Reduction::mean, int64_t ignore_index = -100,
                       double label_smoothing = 0);

// logits, target: same shape; pos_weight [C] (C = last dim) or undefined.
Variable bce_with_logits(const Variable& logits, const Tensor& target,
                         kernels::Reduction r = kernels::Reduction::mean,
                         const Tensor& pos_weight = Tensor());

// input, target: same shape.
Variable mse_loss(const Variable& input, const Tensor& target,
                  kernels::Reduction r = kernels::Reduction::mean);

// input, target: same shape; beta >= 0 (0: L1).
Variable smooth_l1_loss(const Variable& input, const Tensor& target, double beta = 1.0,
                        kernels::Reduction r = kernels::Reduction::mean);

}  // namespace aim::autograd
