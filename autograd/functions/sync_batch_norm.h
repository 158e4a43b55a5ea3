// Synchronised batch normalisation (torch.nn.SyncBatchNorm semantics) for data-parallel training:
// the batch statistics of every rank's samples together, so N ranks at batch B normalise exactly
// as one process at batch N B.
//
// Precision: f64 throughout (x is widened; the result rounded once to x's dtype), as the fused
// kernels' cpu.ref: a channel whose values barely vary (few values per channel, e.g. 1x1 spatial
// at a small batch) normalises rounding noise otherwise, and each implementation's noise differs.
// Forward (training): each rank computes, per channel, its sample count n_r, mean m_r and sum of
// squared deviations M2_r (two passes over its own x); the ranks all-gather (n_r, m_r, M2_r) in
// f64 and combine them with Chan's parallel formula,
//   N = sum n_r,  mean = sum n_r m_r / N,  M2 = sum (M2_r + n_r (m_r - mean)^2),  var = M2 / N,
// which has no cancellation (unlike sum(x^2) - N mean^2). y = (x - mean) / sqrt(var + eps); the
// running statistics (when given) move towards mean and the unbiased var M2 / (N - 1) with
// `momentum`, identically on every rank.
// Backward: with xhat = (x - mean) * rstd, the ranks all-reduce (sum, f64) per channel sum(dy)
// and sum(dy * xhat), and
//   dx = rstd * (dy - sum(dy) / N - xhat * sum(dy * xhat) / N)      (sums over all ranks)
// which is each rank's share of the gradient of the ranks' summed losses; the data-parallel
// reducer's average of the parameter gradients then matches the single process's mean loss.
//
// Layering: autograd knows no communicators; the caller passes the two collectives as functions
// (train/trainer.cpp wraps the rank's dist::Communicator). Every rank must run the same
// sequence of sync_batch_norm calls (one all_gather per forward, one all_reduce per backward):
// the layers do, since every rank runs the same model.
#pragma once
#include <functional>

#include "autograd/variable.h"

namespace aim::autograd {

struct BatchStatsSync {
  int ranks = 1;
  // in [k] -> out [ranks * k] (rank j's `in` at [j k, (j + 1) k)). f64 tensors, contiguous, on
  // x's device (the callee moves them to its communicator's device when that differs).
  std::function<void(const Tensor& in, const Tensor& out)> all_gather;
  // t [k] summed over the ranks, in place. f64 tensor, contiguous, on x's device.
  std::function<void(const Tensor& t)> all_reduce_sum;
};

// x [..., C, ...] with channels at `channel_dim` (any float dtype; the mean and rstd the backward
// reads are kept in f32, f64 for f64 x, as the fused kernels keep them): normalised with the
// statistics of all ranks' x (no affine). running_mean / running_var [C] (any float dtype, any
// device) are updated in place when defined.
Variable sync_batch_norm(const Variable& x, int64_t channel_dim, const Tensor& running_mean,
                         const Tensor& running_var, double momentum, double eps,
                         const BatchStatsSync& sync);

}  // namespace aim::autograd
