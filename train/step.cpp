#include "train/step.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "autograd/functions/elementwise.h"
#include "layers/batchnorm.h"
#include "profiler/profiler.h"

namespace aim::train {
namespace {

// Testing (--inject-overflow): an Inf in the first gradient, as an fp16 overflow would leave.
void inject_inf(const NamedParameters& params) {
  for (const auto& [name, p] : params)
    if (p.grad().defined() && p.grad().numel() > 0) {
      p.grad().view({-1}).slice(0, 0, 1).copy_(
          Tensor::from_vector(std::vector<float>{INFINITY}, {1})
              .to(p.grad().dtype())
              .to(p.grad().device()));
      return;
    }
}

}  // namespace

bool train_step(StepContext& c, const TensorMap& batch, int64_t step_number,
                const StepHooks& hooks) {
  using profiler::Scope;
  using profiler::ScopeKind;
  const bool amp_on = c.precision != DType::f32;
  std::optional<Scope> phase(std::in_place, "fwd", ScopeKind::Phase);
  // Batch statistics of every rank (--sync-bn) in forward and backward only.
  std::optional<layers::SyncBatchNormScope> sync_bn;
  if (c.bn_sync) sync_bn.emplace(c.bn_sync);
  autograd::Variable loss;
  {
    std::optional<autograd::amp::Autocast> ac;
    if (amp_on) ac.emplace(c.precision, c.amp_cache);
    loss = c.model->training_loss(batch);
  }

  phase.emplace("bwd", ScopeKind::Phase);
  if (c.reducer) c.reducer->begin();
  if (c.scaler)
    autograd::mul(loss, c.scaler->scale()).backward();
  else
    loss.backward();
  sync_bn.reset();
  if (c.reducer) c.reducer->finish();  // every gradient averaged over the ranks
  if (c.amp_cache) c.amp_cache->clear();
  if (std::find(c.inject_overflow_at.begin(), c.inject_overflow_at.end(), step_number) !=
      c.inject_overflow_at.end())
    inject_inf(c.optim->parameters());

  // The loss of the step: under ranks their mean, the loss of the whole N B batch (this also
  // makes a NaN on one rank stop every rank with the same message).
  Tensor mean = loss.data().to(DType::f32).contiguous().view({1}).clone();
  if (c.comm) c.comm->all_reduce(mean, dist::ReduceOp::Avg);
  if (hooks.record_loss) hooks.record_loss(mean);

  bool overflow = false;
  if (c.scaler) {
    phase.emplace("opt", ScopeKind::Phase);
    // Unscaled after the reducer's finish(); the skip decision is the same on every rank: the
    // flags' mean over the ranks, read with the loss in the step's one host read.
    Tensor flag = c.scaler->unscale_flag(c.optim->parameters());
    if (c.comm) c.comm->all_reduce(flag, dist::ReduceOp::Avg);
    overflow = hooks.overflowed(flag);
  }
  if (c.clip_norm > 0 && !overflow)
    clip_grad_norm_device(c.optim->parameters(), c.clip_norm);  // no host read
  phase.emplace("opt", ScopeKind::Phase);
  if (!overflow) c.optim->step();
  if (c.scaler) c.scaler->update(overflow);
  return overflow;
}

}  // namespace aim::train
