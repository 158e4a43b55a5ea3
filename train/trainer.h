// DIN training loop (aim-train): model + optimizer + DinSynthetic stream, periodic held-out AUC,
// NaN/Inf loss detection, step-time percentiles and resumable safetensors checkpoints.
//
// Checkpoint file: <checkpoint_dir>/checkpoint.safetensors, tensors "model.<state_dict key>" and
// "optim.<optimizer state key>", metadata {step, data_position, config, optimizer, format}.
// Resuming restores the model (parameters and buffers), the optimizer state and the data stream
// position, so on CPU the losses after resuming equal those of an uninterrupted run bit for bit.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "data/din_synthetic.h"
#include "models/din.h"
#include "train/optim.h"

namespace aim::train {

struct TrainOptions {
  int64_t steps = 1000;
  int64_t batch_size = 128;
  double lr = 1e-3;
  std::string optimizer = "adam";  // sgd | adam | adamw | adagrad
  uint64_t seed = 1;               // model initialisation and synthetic data
  int64_t eval_every = 100;        // held-out AUC every N steps (0: only at the end)
  int64_t eval_samples = 10000;    // held-out samples per evaluation (capped at heldout_size)
  int64_t log_every = 0;           // plain log line every N steps (0: eval_every, or steps / 10)
  std::string checkpoint_dir;      // "" = no checkpoints
  int64_t checkpoint_every = 0;    // also save every N steps (0: only at the end)
  bool resume = false;             // continue from <checkpoint_dir>/checkpoint.safetensors
  std::string device = "cpu";      // cpu | cuda | cuda:N
  double clip_norm = 0;            // > 0: clip_grad_norm before each step
  // Data generator; unset = derived from the model config (DinSyntheticConfig::tiny(seed) for
  // DinConfig::tiny() vocabularies, else the full generator with the model's vocabularies).
  std::optional<data::DinSyntheticConfig> data;
};

struct TrainResult {
  double final_auc = 0;                          // held-out AUC after the last step
  std::vector<std::pair<int64_t, double>> aucs;  // (step, AUC) of every evaluation
  int64_t first_step = 0;                        // step index of losses[0] (> 0 after resume)
  std::vector<double> losses;                    // one per step run in this call
  double samples_per_s = 0;                      // training throughput (forward..step)
  double step_p50_ms = 0, step_p90_ms = 0, step_p99_ms = 0;
  int64_t steps_run = 0;
  double wall_s = 0;  // whole call, evaluations included
};

// The data generator train_din uses for this model config and options.
data::DinSyntheticConfig din_data_config(const models::DinConfig& cfg, const TrainOptions& opt);
// Builds an optimizer by name over `params`; unknown names are an aim::Error listing the choices.
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, NamedParameters params,
                                          double lr);
// "key=value,..." description of a model config (checkpoint metadata; must match on resume).
std::string din_config_string(const models::DinConfig& cfg);

std::string checkpoint_path(const std::string& dir);
// Writes <dir>/checkpoint.safetensors (creating dir) atomically through save_safetensors.
void save_checkpoint(const std::string& dir, int64_t step, const layers::Module& model,
                     const Optimizer& opt, int64_t data_position,
                     const std::map<std::string, std::string>& extra_metadata = {});
struct CheckpointInfo {
  int64_t step = 0, data_position = 0;
  std::map<std::string, std::string> metadata;
};
// Loads <dir>/checkpoint.safetensors into model and optimizer (strict); errors name the file.
CheckpointInfo load_checkpoint(const std::string& dir, layers::Module& model, Optimizer& opt);

// Trains a DIN model; periodic plain lines go to `log`. A NaN/Inf loss throws aim::Error naming
// the step. With opt.resume, continues from the checkpoint up to opt.steps total steps.
TrainResult train_din(const models::DinConfig& cfg, const TrainOptions& opt, std::ostream& log);

}  // namespace aim::train
