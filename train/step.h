// One training step, as a reader of llm.c expects to find it: forward and loss, backward (the
// data-parallel gradient all-reduce overlapped with it through the reducer's hooks), the loss
// averaged over the ranks, then unscale (fp16), clip and the optimizer update. Everything a step
// touches is set up once by the trainer (train/trainer.cpp) and handed over in StepContext; what
// the trainer reads of a step (the loss, the fp16 overflow flag) goes through StepHooks, so the
// step itself never synchronises with the host. aim-train --cuda-graph captures this function.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "autograd/amp.h"
#include "autograd/functions/sync_batch_norm.h"
#include "models/model.h"
#include "train/amp.h"
#include "train/dist/communicator.h"
#include "train/dist/reducer.h"
#include "train/optim.h"

namespace aim::train {

struct StepContext {
  models::Model* model = nullptr;
  Optimizer* optim = nullptr;
  dist::Communicator* comm = nullptr;                 // data parallel, else null
  dist::Reducer* reducer = nullptr;                   // data parallel, else null
  const autograd::BatchStatsSync* bn_sync = nullptr;  // --sync-bn, else null
  LossScaler* scaler = nullptr;                       // fp16, else null
  DType precision = DType::f32;                       // f32, or f16/bf16 under autocast
  autograd::amp::ParamCache* amp_cache = nullptr;     // the 16-bit parameter copies (amp)
  double clip_norm = 0;                               // > 0: clip the global gradient norm
  std::vector<int64_t> inject_overflow_at;            // testing: steps whose gradients get an Inf
};

struct StepHooks {
  // The step's loss: a [1] f32 device tensor, the mean over the ranks (the loss of the global
  // batch); the trainer files it for its next read-back.
  std::function<void(const Tensor& loss)> record_loss;
  // fp16: reads the step's overflow flag ([1] on the device, the ranks' mean; > 0 when a
  // gradient was Inf/NaN on some rank) and returns whether the update must be skipped. This is
  // the one host read of an fp16 step.
  std::function<bool(const Tensor& flag)> overflowed;
};

// Runs step `step_number` (1-based) on `batch` (on the model's device). Returns whether the
// optimizer update was skipped (an fp16 overflow). Gradients must be zero on entry.
bool train_step(StepContext& c, const TensorMap& batch, int64_t step_number,
                const StepHooks& hooks);

}  // namespace aim::train
