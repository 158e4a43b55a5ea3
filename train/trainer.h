// The training loop of aim-train, for any model of the registry (models/registry.h): batches from
// the model's source through a prefetching thread (data/prefetch.h), forward + loss + backward +
// clipping + optimizer step, periodic evaluation of the model's metrics, NaN/Inf detection,
// step-time percentiles, and resumable safetensors checkpoints.
//
// The pieces, each in its own file, in the order a rank uses them (train_rank in trainer.cpp is
// the loop over them, about a hundred lines):
// - train/rank_setup.h: RankState, what a rank holds for its run (model, optimizer, data, schedule,
//   mixed precision, checkpoint metadata, --resume);
// - train/data_parallel.h: the rank's share of the data (RankShard), the gradient reducer,
//   sparse tables and SyncBatchNorm, and the data-parallel summary;
// - train/batch_feed.h: the loader thread's batches (pinned on a GPU, positions for checkpoints);
// - train/step.h: train_step, one screen: forward, loss, backward, all-reduce, unscale, clip,
//   optimizer; train/graph_step.h: its captured form (--cuda-graph);
// - train/reporter.h: between the steps: the one host read of losses, flags and device errors
//   (train/readback.h), progress lines, evaluation, checkpoints (train/checkpoint.h), the
//   profiled window and its report (profiler/report.h, shared with aim-infer), the closing figures;
// - TestHooks below: fault injection for tests, off by default. What a model or a layer must decide
// is asked of it (ModelEntry::optimizers, Module::uses_batch_statistics and friends): no file in
// train/ names a model or a layer type (tests/house/check_model_knowledge.py).
//
// Checkpoint file: <checkpoint_dir>/checkpoint.safetensors, tensors "model.<state_dict key>" and
// "optim.<optimizer state key>", metadata {format, step, data_position, model, config, optimizer,
// data, batch_size}. It is written to a temporary file and renamed, so a killed save leaves the
// previous checkpoint intact. Resuming restores the model (parameters and buffers), the optimizer
// state and the data stream position, so on CPU the losses after resuming equal those of an
// uninterrupted run bit for bit.
//
// Data-parallel training (DESIGN §6, docs/scaling.md): DistOptions::ranks > 1 trains on that many
// ranks, each a thread of this process: the `local` backend (CPU, --device cpu --ranks N) or NCCL
// with one GPU per rank (--gpus N); under an external launcher (train/dist/launch.h) this process
// is one rank of an NCCL group (DistOptions::backend = "launcher"), or, under mpirun on the CPU,
// one rank of an MPI group (backend "mpi", train/dist/mpi_backend.h). Every rank builds the model
// from the same seed, then takes rank 0's parameters and buffers (broadcast); a train/dist Reducer
// averages the gradients in buckets overlapped with backward. Data: every rank opens the same
// source and reads the training stream in interleaved blocks of batch_size: at step s (0-based)
// rank r takes samples [(s N + r) B, (s N + r + 1) B) of the stream a single process at batch N B
// would read as [s N B, (s + 1) N B), so the union of the ranks' batches is exactly the
// single-process batch (RankShard, train/data_parallel.h). Evaluation, logs, checkpoints and
// weights are rank 0's; the logged loss is the mean over ranks (the loss of the N B batch).
// Checkpoints record the global stream position and the rank count (resuming needs the same count).
//
// Batch statistics (BatchNorm in training mode, Dice) are computed per rank over its B samples,
// as PyTorch DDP without SyncBatchNorm: such models are not batch-split invariant, and the run
// logs a note saying so. sync_batchnorm (aim-train --sync-bn) combines them over the ranks
// instead (SyncBatchNorm: autograd/functions/sync_batch_norm.h), which makes BatchNorm models
// batch-split invariant and logs that it does. freeze_batchnorm (aim-train --freeze-bn) uses the
// running statistics of every layer that can freeze them in training too (frozen BN).
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
#include "train/checkpoint.h"
#include "train/optim.h"

namespace aim::dist {
class Communicator;
}

namespace aim::train {

struct DistOptions {
  // "" (one process, one device), "local" (ranks threads on the CPU), "nccl" (ranks threads, one
  // GPU each: cuda:0 .. cuda:ranks-1), "launcher" (this process is one rank of an NCCL group set
  // up from the launcher's environment; ranks is then the launcher's world size), "mpi" (this
  // process is one CPU rank of MPI_COMM_WORLD under mpirun; ranks is the world size). Under mpi
  // a failing rank ends the whole job through MPI_Abort after printing its error (mpi_backend.h):
  // train_model does not return or throw there.
  std::string backend;
  int ranks = 1;
  double timeout_s = 300;                // --dist-timeout: every collective's deadline
  double bucket_mb = 25;                 // --bucket-mb
  std::string embedding_comm = "dense";  // dense | sparse (CPU: all-gather of touched rows)
  // A rank thread still running timeout_s after the first failure (stuck outside any collective)
  // is abandoned instead of waited for (dist::run_ranks): the error is thrown, the thread left
  // behind. Only for callers that end the process right after: aim-train sets it.
  bool abandon_stuck_ranks = false;
};

struct OptimizerOptions {
  std::string name = "adam";  // sgd | adam | adamw | adagrad | lamb | one of the model's own
  double lr = 1e-2;
  // > 0: lr is per lr_batch samples, the optimizer uses lr * batch_size / lr_batch (linear
  // scaling, as the AI Matrix CNN recipe's "1.0 * B / 1024").
  double lr_batch = 0;
  double momentum = 0;       // sgd
  bool nesterov = false;     // sgd (needs momentum > 0)
  double weight_decay = -1;  // < 0: the optimizer's default (0; AdamW and Lamb 0.01)
};

// Fault injection for tests, all off by default (the trainer's only test-only code paths).
struct TestHooks {
  // --inject-overflow: steps (1-based) whose gradients get an Inf (the fp16 loss scaler's skip).
  std::vector<int64_t> inject_overflow_at;
  // --inject-failure RANK:STEP[:hang]: rank `fail_rank` throws at the start of step `fail_step`
  // (1-based), so every rank must stop with its message; with fail_hang it blocks there forever
  // instead, outside any collective (a rank that stopped answering): its peers time out and the
  // run ends with their message, the stuck rank abandoned (run_ranks).
  int fail_rank = -1;
  int64_t fail_step = 0;
  bool fail_hang = false;
};

struct TrainOptions {
  int64_t steps = 1000;  // total steps (> 0) unless epochs > 0
  double epochs = 0;     // > 0: steps = round(epochs * epoch_size / batch_size)
  int64_t batch_size = 128;
  OptimizerOptions optim;
  std::string schedule = "constant";  // constant | step | poly | warmup_linear | warmup_cosine
  int64_t warmup_steps = 0;           // warmup_* schedules
  double warmup_fraction = 0;         // > 0: warmup = round(fraction * total steps) instead
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
  TestHooks testing;  // fault injection (tests and the --inject-* flags); off by default
  // Profiling (profiler/profiler.h): tables after the run for steps [profile_from, profile_to]
  // (1-based, inclusive; 0 = from step 2 / to the last step), and a Chrome trace of them.
  bool profile = false;
  int64_t profile_from = 0, profile_to = 0;
  std::string trace;     // "" = no trace file
  std::string roofline;  // "" = no roofline SVG
  std::string ceilings;  // aim-bench peak --ceilings file; "" = this CPU's documented ceilings
  bool freeze_batchnorm = false;  // BatchNorm2d layers use their running statistics in training
  // Data parallel (--sync-bn): BatchNorm1d/2d and Dice in training normalise with the statistics
  // of all ranks' samples (layers::SyncBatchNormScope around each rank's forward and backward).
  bool sync_batchnorm = false;
  DistOptions dist;  // data-parallel training (ranks > 1)
  // CUDA graphs (aim-train --cuda-graph): the training step (zero_grad, forward, loss, backward,
  // clip, optimizer) is captured at the second step and replayed at every later one; the
  // optimizer runs in capturable mode (train/optim.h). One device, fp32 or bf16; a model whose
  // step makes host plans from each batch (host metadata, uploads during the capture) is refused.
  bool cuda_graph = false;
};

// Data-parallel figures of a run (TrainResult::dist), per step means over the steps run after
// the first (the first step's buckets are set up then), averaged over the ranks.
struct DistStats {
  std::string backend;  // local | nccl
  int ranks = 1;
  int rank = 0;                            // this process's rank (launcher runs)
  std::vector<double> rank_samples_per_s;  // each rank's whole-loop throughput
  double total_samples_per_s = 0;          // their sum
  double allreduce_ms = 0;                 // the buckets' all-reduce time per step
  double backward_ms = 0;                  // backward (Reducer::begin -> finish) per step
  double hidden_fraction = 0;              // share of the all-reduce time inside backward
  double exposed_ms = 0;                   // time finish() waited for communication per step
  double sparse_ms = 0;                    // sparse embedding exchange per step
  int64_t grad_bytes = 0;                  // dense bytes all-reduced per step
  std::vector<int64_t> bucket_bytes;       // the bucket plan
  std::vector<std::string> sparse_tables;
  std::string plan;  // Reducer::plan()
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
  DistStats dist;  // ranks > 1
  // CUDA: host synchronisations and device-to-host bytes per training step (the steps after the
  // first; evaluations and checkpoints excluded only when they fall outside those steps).
  double host_syncs_per_step = 0, d2h_bytes_per_step = 0;
  double graph_capture_ms = 0;  // --cuda-graph: host time of the captures (0: not captured)
  int64_t graph_captures = 0;   // --cuda-graph: 1, more when a batch outgrew the captured shapes
  // Memory: the training device's caching allocator's high-water mark of live bytes inside a
  // step (the maximum over the steps: weights, optimizer state, activations, gradients and the
  // batches in flight; data-parallel CPU ranks share one allocator), and the process's peak
  // resident set (getrusage), the figure comparable with another framework's.
  int64_t peak_step_bytes = 0, max_rss_bytes = 0;
};

// Builds an optimizer from the options over `params`; unknown names are an aim::Error listing
// the choices.
// `own`: the model's own optimizers (ModelEntry::optimizers), chosen by name like the others.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& o, NamedParameters params,
                                          const std::vector<models::ModelOptimizer>& own = {});
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, NamedParameters params,
                                          double lr);
// The schedule named `name` for a run of `total` steps; unknown names list the choices.
LRSchedule make_schedule(const std::string& name, double lr, int64_t warmup, int64_t total,
                         double poly_power = 1);

// A run whose loss ran away: in a run of at least 50 steps, the mean of its last tenth (at least
// 5 steps) is above 10 times and 10 more than its first step's loss (e.g. 0.69 -> 660768 at
// --lr 1e6). Returns what
// happened in one line, or "" for a run that did not diverge (or too short a run to say).
std::string loss_divergence(const std::vector<double>& losses);

// Trains `entry`'s model in configuration `cfg`; log lines (or the progress bar) go to `log`.
// A NaN/Inf loss throws aim::Error naming the step; with opt.resume, continues from the
// checkpoint up to the run's total steps. With opt.dist.ranks > 1 (or backend "launcher"), runs
// the ranks (above) and returns rank 0's result (in a launcher run: this process's; only rank 0
// has metrics); a failing rank stops every rank, and the error ("dist: rank k failed: ...") is
// thrown within opt.dist.timeout_s.
TrainResult train_model(const models::ModelEntry& entry, const models::ModelConfig& cfg,
                        const TrainOptions& opt, std::ostream& log);

}  // namespace aim::train
