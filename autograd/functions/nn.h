// Differentiable layer_norm, embedding and losses (kernels/norm, kernels/embedding,
// kernels/loss), PyTorch semantics (torch.nn.functional.*). Inputs may be strided views (they are
// made contiguous); targets, indices and pos_weight are plain tensors (no gradient), moved to the
// input's device (and, for the pointwise losses, cast to its dtype) when they differ. Losses are
// f32 for f32/f16/bf16 inputs and f64 for f64 (kernels/loss/loss.h); parameter gradients
// (layer_norm weight/bias, embedding table) are accumulated (+=) through g.accum (node.h).
#pragma once
#include "autograd/variable.h"
#include "kernels/loss/loss.h"

namespace aim::autograd {

// Over the last dim: x [..., C]; weight, bias [C] or undefined (either may be given alone).
Variable layer_norm(const Variable& x, const Variable& weight, const Variable& bias,
                    double eps = 1e-5);

// weight [V, C]; indices (i32/i64, any shape) -> [..., C]. padding_idx in [0, V): that row gets
// no gradient; < 0: none (the layer converts PyTorch's negative padding_idx before calling).
Variable embedding(const Variable& weight, const Tensor& indices, int64_t padding_idx = -1);

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
