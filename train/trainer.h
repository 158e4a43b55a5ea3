// The training loop of aim-train, for any model of the registry (models/registry.h): batches from
// the model's source through a prefetching thread (data/prefetch.h), forward + loss + backward +
// clipping + optimizer step, periodic evaluation of the model's metrics, NaN/Inf detection,
// step-time percentiles, and resumable safetensors checkpoints.
//
// Checkpoint file: <checkpoint_dir>/checkpoint.safetensors, tensors "model.<state_dict key>" and
// "optim.<optimizer state key>", metadata {format, step, data_position, model, config, optimizer,
// data, batch_size}. It is written to a temporary file and renamed, so a killed save leaves the
// previous checkpoint intact. Resuming restores the model (parameters and buffers), the optimizer
// state and the data stream position, so on CPU the losses after resuming equal those of an
// uninterrupted run bit for bit.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "layers/module.h"
#include "models/registry.h"
#include "train/amp.h"
#include "train/optim.h"

namespace aim::train {

struct OptimizerOptions {
  std::string name = "adam";  // sgd | adam | adamw | adagrad | wide_deep (FTRL + Adagrad)
  double lr = 1e-2;
  // > 0: lr is per lr_batch samples, the optimizer uses lr * batch_size / lr_batch (linear
  // scaling, as the AI Matrix CNN recipe's "1.0 * B / 1024").
  double lr_batch = 0;
  double momentum = 0;       // sgd
  bool nesterov = false;     // sgd (needs momentum > 0)
  double weight_decay = -1;  // < 0: the optimizer's PyTorch default (0; AdamW 0.01)
};

struct TrainOptions {
  int64_t steps = 1000;  // total steps (> 0) unless epochs > 0
  double epochs = 0;     // > 0: steps = round(epochs * epoch_size / batch_size)
  int64_t batch_size = 128;
  OptimizerOptions optim;
  std::string schedule = "constant";  // constant | step | poly | warmup_linear | warmup_cosine
  int64_t warmup_steps = 0;           // warmup_* schedules
  double poly_power = 1;              // poly schedule: (1 - step / total)^power
  double clip_norm = 0;               // > 0: clip_grad_norm before each step
  uint64_t seed = 1;                  // model initialisation, data and shuffling
  std::string data = "synthetic";     // the model's source: "synthetic" or a path
  int64_t eval_every = 100;           // evaluate every N steps (0: only at the end)
  int64_t eval_samples = 10000;       // evaluation samples (capped at the source's eval set)
  int64_t log_every = 0;              // log line every N steps (0: eval_every, or steps / 10)
  bool progress_bar = false;          // redraw one terminal line instead of periodic lines
  int64_t prefetch = 2;               // batches prepared ahead by the loader thread (0: inline)
  std::string checkpoint_dir;         // "" = no checkpoints
  int64_t checkpoint_every = 0;       // also save every N steps (0: only at the end)
  bool resume = false;                // continue from <checkpoint_dir>/checkpoint.safetensors
  std::string weights;                // load these weights (safetensors state dict) first
  std::string save_weights;           // write the final weights (safetensors state dict)
  std::string device = "cpu";         // cpu | cuda | cuda:N
  // Mixed precision (train/amp.h): f32, or f16 / bf16 for low-precision compute with f32 master
  // weights and optimizer state; f16 adds the dynamic loss scaler. Evaluation runs in the same
  // precision.
  DType precision = DType::f32;
  LossScalerOptions loss_scaler;
  std::vector<int64_t> inject_overflow_at;  // testing: steps (1-based) whose gradients get an Inf
  // Profiling (profiler/profiler.h): tables after the run for steps [profile_from, profile_to]
  // (1-based, inclusive; 0 = from step 2 / to the last step), and a Chrome trace of them.
  bool profile = false;
  int64_t profile_from = 0, profile_to = 0;
  std::string trace;     // "" = no trace file
  std::string roofline;  // "" = no roofline SVG
  std::string ceilings;  // aim-bench peak --ceilings file; "" = this CPU's documented ceilings
};

struct TrainResult {
  int64_t total_steps = 0;                                 // steps of the whole run
  int64_t first_step = 0;                                  // step of losses[0] (> 0 after resume)
  int64_t steps_run = 0;                                   // steps run by this call
  std::vector<double> losses;                              // one per step run in this call
  models::Metrics final_metrics;                           // after the last step
  std::vector<std::pair<int64_t, models::Metrics>> evals;  // (step, metrics) of each evaluation
  double final_auc = 0;                                    // final_metrics["auc"] when present
  // Throughput: whole-process = samples / wall time of the training steps (data waits included,
  // evaluations and checkpoints not); device = samples / time from batch in hand to the loss on
  // the host (forward, backward, optimizer).
  double samples_per_s = 0, device_samples_per_s = 0;
  double step_p50_ms = 0, step_p90_ms = 0, step_p99_ms = 0;  // device step time percentiles
  double data_wait_s = 0;                                    // time the loop waited for the loader
  double loss_scale = 0;            // fp16: the loss scale after the last step (0 otherwise)
  int64_t skipped_steps = 0;        // fp16: steps skipped on a gradient overflow
  double train_flops_per_step = 0;  // analytic, mean over the steps run
  double wall_s = 0;                // whole call, evaluations included
  std::string data_description;
};

// Builds an optimizer from the options over `params`; unknown names are an aim::Error listing
// the choices.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& o, NamedParameters params);
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, NamedParameters params,
                                          double lr);
// The schedule named `name` for a run of `total` steps; unknown names list the choices.
LRSchedule make_schedule(const std::string& name, double lr, int64_t warmup, int64_t total,
                         double poly_power = 1);

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

// Trains `entry`'s model in configuration `cfg`; log lines (or the progress bar) go to `log`.
// A NaN/Inf loss throws aim::Error naming the step; with opt.resume, continues from the
// checkpoint up to the run's total steps.
TrainResult train_model(const models::ModelEntry& entry, const models::ModelConfig& cfg,
                        const TrainOptions& opt, std::ostream& log);

}  // namespace aim::train
