// What a training rank holds for its whole run, built in order by RankState's constructor: the
// device, the model (--weights, --freeze-bn, rank 0's parameters broadcast to every rank), the
// optimizer (the model's own recipe where it has one), the data source and the step count, the
// learning-rate schedule, mixed precision (the 16-bit parameter cache, fp16's loss scaler), the
// checkpoint metadata and, with --resume, the state and stream position read back. train_rank
// (train/trainer.cpp) builds one, then runs the loop over it.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "autograd/amp.h"
#include "data/source.h"
#include "models/registry.h"
#include "train/amp.h"
#include "train/data_parallel.h"
#include "train/optim.h"
#include "train/trainer.h"

namespace aim::train {

struct RankState {
  RankState(const models::ModelEntry& entry, const models::ModelConfig& cfg,
            const TrainOptions& opt, std::ostream& log, const RankCtx* ctx);
  RankState(const RankState&) = delete;
  RankState& operator=(const RankState&) = delete;

  // Evaluates the model on n_eval samples of the source's evaluation set (under autocast when
  // mixed precision is on).
  models::Metrics evaluate();

  const models::ModelEntry& entry;
  const TrainOptions& opt;
  dist::Communicator* comm = nullptr;  // null: a single process
  int rank = 0, ranks = 1;
  bool lead = true;  // rank 0: evaluates, logs, writes checkpoints and weights
  Device dev;
  std::unique_ptr<models::Model> model;
  std::unique_ptr<Optimizer> optim;
  std::unique_ptr<data::BatchSource> source;
  int64_t global_batch = 0;  // batch_size * ranks
  int64_t n_eval = 0;        // evaluation samples
  int64_t total_steps = 0;   // of the whole run
  int64_t first_step = 0;    // steps completed before this call (> 0 after --resume)
  LRSchedule sched;
  bool amp_on = false;  // --precision f16|bf16
  autograd::amp::ParamCache amp_cache;
  std::optional<LossScaler> scaler;         // f16
  std::map<std::string, std::string> meta;  // the checkpoint's metadata
  std::string data_description;
};

}  // namespace aim::train
