// Differentiable CTC loss (kernels/loss/ctc.h, math in kernels/loss/CTC.md), PyTorch's
// F.ctc_loss semantics. log_probs [T, B, C] must already be log-softmaxed over C. Its gradient is
// PyTorch's: exp(log_probs) - occupancy, the gradient with respect to the logits of a
// log_softmax in front of the loss. Differentiate through log_softmax (as every CTC user does):
// log_softmax's backward cancels the exp(log_probs) term, so the chain is exact (CTC.md).
#pragma once
#include "autograd/variable.h"
#include "kernels/loss/loss.h"

namespace aim::autograd {

// targets: [B, S] padded or 1-D concatenated, i32/i64 (moved to log_probs' device when elsewhere);
// input_lengths, target_lengths: [B] i32/i64 (moved to the CPU when elsewhere: the kernels plan
// from them). Output [] (mean, sum) or [B] (none); f32 for f32/f16/bf16 inputs, f64 for f64.
// mean divides each loss by its target length (at least 1), then averages over the batch.
Variable ctc_loss(const Variable& log_probs, const Tensor& targets, const Tensor& input_lengths,
                  const Tensor& target_lengths, int64_t blank = 0,
                  kernels::Reduction r = kernels::Reduction::mean, bool zero_infinity = false);

}  // namespace aim::autograd
