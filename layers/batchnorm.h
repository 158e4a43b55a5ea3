// BatchNorm1d (torch.nn.BatchNorm1d) over x [N, C] or [N, C, L], built from differentiable
// autograd functions. Training: normalise with the batch mean and biased variance over every dim
// but C, and (under no_grad) update running_mean / running_var with the unbiased variance:
//   running = (1 - momentum) * running + momentum * batch_stat
// (momentum unset: cumulative average, factor 1 / num_batches_tracked). Eval: running stats.
// State names as PyTorch: weight, bias, running_mean, running_var, num_batches_tracked.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "autograd/functions/sync_batch_norm.h"
#include "kernels/norm/lrn.h"
#include "layers/module.h"

namespace aim::layers {

// SyncBatchNorm (aim-train --sync-bn): while a SyncBatchNormScope is alive on a thread, every
// batch-statistics normalisation that thread runs in training mode -- BatchNorm1d, BatchNorm2d
// (unless frozen) and Dice, all through batch_normalize or BatchNorm2d::forward -- combines its
// statistics over the ranks of `sync` (autograd/functions/sync_batch_norm.h), and so does its
// backward. Eval mode (running statistics) is unaffected. The data-parallel trainer opens one
// around each rank's forward and backward; scopes nest (the innermost wins), null turns syncing
// off, and `sync` must outlive the scope and the backward of what ran under it.
class SyncBatchNormScope {
 public:
  explicit SyncBatchNormScope(const autograd::BatchStatsSync* sync);
  ~SyncBatchNormScope();
  SyncBatchNormScope(const SyncBatchNormScope&) = delete;
  SyncBatchNormScope& operator=(const SyncBatchNormScope&) = delete;

 private:
  const autograd::BatchStatsSync* prev_;
};
// This thread's group, or null.
const autograd::BatchStatsSync* sync_batch_stats();

// Normalises x over every dim except `channel_dim` (no affine): with batch statistics when
// `use_batch_stats`, else with running_mean / running_var. When use_batch_stats and running_mean
// is defined, also updates the running stats in place (unbiased variance) with `factor` as the
// momentum. Shared by BatchNorm1d and Dice. Under a SyncBatchNormScope the batch statistics are
// those of all ranks (sync_batch_norm).
Variable batch_normalize(const Variable& x, int64_t channel_dim, bool use_batch_stats,
                         const Tensor& running_mean, const Tensor& running_var, double factor,
                         double eps);

class BatchNorm1d : public Module {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5,
                       std::optional<double> momentum = 0.1, bool affine = true,
                       bool track_running_stats = true);
  Variable forward(const Variable& x) override;
  std::string type_name() const override { return "BatchNorm1d"; }
  int64_t num_features() const { return num_features_; }
  bool uses_batch_statistics() const override { return !unit_statistics_; }
  // The frozen-BN quirk of DIN's reference (models/din.h, bn=affine): normalise with mean 0 and
  // variance 1 in training and eval alike, y = weight * x / sqrt(1 + eps) + bias; the running
  // statistics are neither read nor updated.
  void set_unit_statistics(bool on) { unit_statistics_ = on; }

  Parameter weight, bias;  // [C], undefined when affine = false

 private:
  bool unit_statistics_ = false;
  int64_t num_features_;
  double eps_;
  std::optional<double> momentum_;
  Tensor* running_mean_ = nullptr;  // buffer slots (null when not tracking)
  Tensor* running_var_ = nullptr;
  Tensor* num_batches_tracked_ = nullptr;
};

// BatchNorm2d (torch.nn.BatchNorm2d) over x [N, C, H, W] on the fused batch-norm kernels
// (kernels/norm/batchnorm.h): same state names, running-statistics rule and momentum semantics
// as BatchNorm1d above. `frozen` keeps the running statistics in training too (the statistics
// are constants, as TF models with is_training=False BN layers).
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5,
                       std::optional<double> momentum = 0.1, bool affine = true,
                       bool track_running_stats = true);
  Variable forward(const Variable& x) override;
  // relu(forward(x)) in one kernel pass (BatchNormFwdArgs::relu; its backward one pass too), and
  // a folded batch norm's relu moves into its conv at inference (layers/fold.h).
  Variable forward_relu(const Variable& x);
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "BatchNorm2d"; }
  int64_t num_features() const { return num_features_; }
  void set_frozen(bool f) { frozen_ = f; }
  bool uses_batch_statistics() const override { return !frozen_; }
  bool freeze_batch_statistics() override {
    frozen_ = true;
    return true;
  }

  // Eval-mode affine form y = scale * x + shift per channel (false: not foldable: batch statistics
  // or no running statistics). set_folded(): a conv before it (or a pointwise one after it) took
  // the transform (layers/fold.h); forward then returns its input (eval mode only); relu_in_conv:
  // that conv also applies the relu of forward_relu (which then returns its input too; forward is
  // then an error).
  bool eval_scale_shift(std::vector<double>& scale, std::vector<double>& shift) const;
  void set_folded(bool relu_in_conv = false) {
    folded_ = true;
    relu_in_conv_ = relu_in_conv;
  }
  bool folded() const { return folded_; }

  Parameter weight, bias;  // [C], undefined when affine = false

 private:
  bool uses_batch_stats() const;
  Variable forward_impl(const Variable& x, bool relu);
  bool folded_ = false;
  bool relu_in_conv_ = false;
  int64_t num_features_;
  double eps_;
  std::optional<double> momentum_;
  bool frozen_ = false;
  Tensor* running_mean_ = nullptr;
  Tensor* running_var_ = nullptr;
  Tensor* num_batches_tracked_ = nullptr;
};

// LocalResponseNorm (torch.nn.LocalResponseNorm) across channels.
class LocalResponseNorm : public Module {
 public:
  explicit LocalResponseNorm(int64_t size, double alpha = 1e-4, double beta = 0.75, double k = 1)
      : p_{size, alpha, beta, k} {
    AIM_CHECK(size >= 1, "LocalResponseNorm: size must be >= 1, got ", size);
  }
  Variable forward(const Variable& x) override;
  Shape count_flops(const Shape& in, double& flops) const override;
  std::string type_name() const override { return "LocalResponseNorm"; }

 private:
  kernels::LrnParams p_;
};

}  // namespace aim::layers
