// aim-train: trains a registered model and reports quality and speed.
//
//   aim-train din --device cpu --steps 1000 --batch-size 256
//   aim-train din --config size=tiny --batch-size 64,128,256 --steps 100 --results runs.jsonl
//   aim-train --list
//   aim-train din --device cpu --ranks 4             (data parallel: 4 CPU ranks, threads)
//   aim-train resnet50 --gpus 8                      (data parallel: 8 GPUs, NCCL)
//   torchrun --nproc-per-node 8 aim-train resnet50   (one process per GPU: RANK/WORLD_SIZE/...)
//   mpirun -np 4 aim-train din --device cpu          (one CPU process per rank: the mpi backend)
//
// Exit status: 0 success, 1 runtime error (aim::Error: NaN loss, corrupt checkpoint, bad data
// file), 2 bad usage (the message names the flag and what is allowed), 3 the loss diverged
// (train/trainer.h loss_divergence; checkpoint, weights and results are written all the same).
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/amp.h"
#include "cli/common.h"
#include "cli/model_command.h"
#include "kernels/cudnn_util.h"
#include "kernels/math_mode.h"
#include "models/registry.h"
#include "profiler/profiler.h"
#include "profiler/run_info.h"
#include "tensor/check.h"
#include "tensor/device.h"
#include "train/data_parallel.h"
#include "train/dist/communicator.h"
#include "train/dist/launch.h"
#include "train/dist/mpi_backend.h"
#include "train/trainer.h"

namespace po = boost::program_options;
using aim::cli::UsageError;

namespace {

template <class T>
void require(bool ok, const std::string& flag, const std::string& what, const T& got) {
  if (!ok) {
    std::ostringstream os;
    os << flag << " must be " << what << ", got " << got;
    throw UsageError(os.str());
  }
}

// --warmup N (steps) or P% (of the run's steps, resolved when the run's length is known).
void parse_warmup(const std::string& w, aim::train::TrainOptions& to) {
  const bool percent = !w.empty() && w.back() == '%';
  const std::string num = percent ? w.substr(0, w.size() - 1) : w;
  size_t used = 0;
  double v = -1;
  try {
    v = std::stod(num, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const bool ok = used == num.size() && !num.empty() &&
                  (percent ? v >= 0 && v < 100 : v >= 0 && v == std::floor(v));
  if (!ok)
    throw UsageError("--warmup '" + w +
                     "': expected a step count (>= 0) or a percentage in [0, 100)");
  if (percent)
    to.warmup_fraction = v / 100, to.warmup_steps = 0;
  else
    to.warmup_steps = int64_t(v), to.warmup_fraction = 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device, checkpoint_dir, results, batch_list, data, weights, save_weights, progress,
      profile_steps, precision, inject_overflow, inject_failure, dist_backend, tf32, winograd,
      warmup, denormals, seed = "1";
  std::vector<std::string> config;
  aim::train::TrainOptions to;
  int threads = 0, ranks = 0, gpus = 0;

  po::options_description opts(
      "aim-train MODEL [options]   (models: aim-train --list)\n\nexamples:\n"
      "  aim-train din                                  (synthetic data, the model's recipe)\n"
      "  aim-train resnet50 --config size=tiny --steps 20 --profile\n"
      "  aim-train din --ranks 4 --results runs.jsonl   (4 CPU ranks, one JSON line)\n"
      "  aim-train bert --gpus 8 --precision bf16 --checkpoint-dir ck\n"
      "A model's training recipe (aim-train --list: \"aim-train recipe\") replaces the defaults "
      "printed below\nfor every flag the command line does not give.\n\nOptions");
  // clang-format off
  po::options_description g_general("General");
  g_general.add_options()
    ("help,h", "show this help")
    ("list", "list the models with their --config keys, data and metrics")
    ("list-amp", "print the mixed-precision op policy and each model's f32 parameters");
  po::options_description g_model("Model and data");
  g_model.add_options()
    ("config", po::value<std::vector<std::string>>(&config)->composing(),
     "key=value, repeatable (keys per model: see --list)")
    ("data", po::value<std::string>(&data)->default_value("synthetic"),
     "synthetic | PATH (see --list for what each model reads)")
    ("batch-size", po::value<std::string>(&batch_list)->default_value("128"),
     "samples per step; a comma-separated list runs once per size (a sweep)")
    ("seed", po::value<std::string>(&seed)->default_value("1"),
     "model initialisation, synthetic data and shuffling")
    ("weights", po::value<std::string>(&weights), "start from these weights (.safetensors)")
    ("eval-every", po::value<int64_t>(&to.eval_every)->default_value(100),
     "evaluate every N steps (0: only at the end)")
    ("eval-samples", po::value<int64_t>(&to.eval_samples)->default_value(10000),
     "evaluation samples (> 0; capped at the evaluation set)")
    ("prefetch", po::value<int64_t>(&to.prefetch)->default_value(2),
     "batches the loader thread prepares ahead (0: load inline)");
  po::options_description g_opt("Optimisation");
  g_opt.add_options()
    ("steps", po::value<int64_t>(&to.steps)->default_value(1000), "training steps (> 0)")
    ("epochs", po::value<double>(&to.epochs)->default_value(0),
     "train this many epochs of the data instead of --steps (> 0)")
    ("optimizer", po::value<std::string>(&to.optim.name)->default_value("adam"),
     "sgd | adam | adamw | adagrad | lamb, or one of the model's own (aim-train --help MODEL)")
    ("lr", po::value<double>(&to.optim.lr)->default_value(0.01), "learning rate (> 0)")
    ("lr-batch", po::value<double>(&to.optim.lr_batch)->default_value(0),
     "> 0: --lr is per this many samples (lr used = lr * batch / lr-batch)")
    ("momentum", po::value<double>(&to.optim.momentum)->default_value(0), "sgd momentum [0, 1)")
    ("nesterov", po::value<bool>(&to.optim.nesterov)->default_value(false)->implicit_value(true),
     "sgd: Nesterov momentum (--nesterov=false turns a recipe's off)")
    ("weight-decay", po::value<double>(&to.optim.weight_decay)->default_value(-1),
     "L2 (sgd, adam, adagrad) or decoupled (adamw, lamb) decay; -1: the optimizer's default "
     "(0; adamw and lamb 0.01)")
    ("schedule", po::value<std::string>(&to.schedule)->default_value("constant"),
     "constant | step | poly | warmup_linear | warmup_cosine")
    ("warmup", po::value<std::string>(&warmup)->default_value("0"),
     "warmup of the warmup_* schedules: N steps, or P% of the run's steps (BERT: 10%)")
    ("poly-power", po::value<double>(&to.poly_power)->default_value(1),
     "--schedule poly: lr * (1 - step / steps)^power")
    ("clip-norm", po::value<double>(&to.clip_norm)->default_value(0),
     "clip the global gradient L2 norm (0: off)")
    ("freeze-bn", "batch-normalisation layers with running statistics normalise with them in "
     "training too (frozen BN: batch-split invariant under data parallelism)");
  po::options_description g_prec("Precision");
  g_prec.add_options()
    ("precision", po::value<std::string>(&precision)->default_value("fp32"),
     "fp32 | fp16 | bf16: 16-bit GEMM/conv/rnn with f32 master weights (mixed precision); "
     "fp16 adds dynamic loss scaling (--list-amp prints the op policy)")
    ("loss-scale", po::value<double>(&to.loss_scaler.init_scale)->default_value(65536),
     "fp16: initial loss scale")
    ("loss-scale-growth-interval",
     po::value<int64_t>(&to.loss_scaler.growth_interval)->default_value(2000),
     "fp16: double the scale after this many steps without overflow")
    ("tf32", po::value<std::string>(&tf32)->default_value("conv"), aim::cli::kTf32Help)
    ("winograd", po::value<std::string>(&winograd)->default_value("4"), aim::cli::kWinogradHelp)
    ("denormals", po::value<std::string>(&denormals)->default_value("flush"),
     aim::cli::kDenormalsHelp);
  po::options_description g_dev("Device and kernels");
  g_dev.add_options()
    ("device", po::value<std::string>(&device),
     "cpu | cuda | cuda:N (default: cuda when a GPU is present, else cpu)")
    ("threads", po::value<int>(&threads)->default_value(0), "OpenMP threads (0: default)")
    ("deterministic", aim::cli::kDeterministicHelp)
    ("cuda-graph", "CUDA: capture the training step (zero_grad, forward, backward, clip, "
     "optimizer) in a CUDA graph at the second step and replay it at every later one (one "
     "device, fp32 or bf16; the optimizer keeps lr and its step count on the device)");
  po::options_description g_dist("Distributed (data parallel)");
  g_dist.add_options()
    ("ranks", po::value<int>(&ranks)->default_value(0),
     "data parallel on the CPU: N ranks as threads of this process (local backend; "
     "--device cpu); --batch-size is per rank")
    ("gpus", po::value<int>(&gpus)->default_value(0),
     "data parallel on N GPUs of this process (NCCL, one thread per GPU); --batch-size is per "
     "GPU. Under a launcher (RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, SLURM_* with MASTER_ADDR/"
     "MASTER_PORT) each process is one rank on its LOCAL_RANK GPU without this flag")
    ("dist-backend", po::value<std::string>(&dist_backend)->default_value("auto"),
     "data parallel: auto | local | mpi | nccl. auto: --ranks -> local, --gpus -> nccl; under a "
     "launcher --device cpu (or no GPU) -> mpi (mpirun, when built with MPI), a GPU -> nccl")
    ("dist-timeout", po::value<double>(&to.dist.timeout_s)->default_value(300),
     "data parallel: seconds any collective may wait for the other ranks before every rank stops")
    ("bucket-mb", po::value<double>(&to.dist.bucket_mb)->default_value(25),
     "data parallel: gradient bucket size in MB (the first bucket 1 MB)")
    ("embedding-comm", po::value<std::string>(&to.dist.embedding_comm)->default_value("dense"),
     "data parallel: dense (all-reduce embedding tables) | sparse (all-gather of the touched "
     "rows; CPU ranks)")
    ("sync-bn", "data parallel: layers that normalise with batch statistics do so over all "
     "ranks' samples in training (SyncBatchNorm: N ranks at batch B normalise as one at N B)")
    ("dist-plan", "print the data-parallel plan (parameters, gradient bytes, bucket plan at "
     "--bucket-mb, embedding rows one step at --batch-size touches, training FLOPs) as JSON and "
     "exit (tools/scaling_table.py)");
  po::options_description g_out("Output");
  g_out.add_options()
    ("log-every", po::value<int64_t>(&to.log_every)->default_value(0),
     "log line every N steps (0: --eval-every)")
    ("progress", po::value<std::string>(&progress)->default_value("auto"),
     "auto (a bar on a terminal, lines otherwise) | bar | lines")
    ("checkpoint-dir", po::value<std::string>(&checkpoint_dir),
     "write <dir>/checkpoint.safetensors at the end (and every --checkpoint-every steps)")
    ("checkpoint-every", po::value<int64_t>(&to.checkpoint_every)->default_value(0),
     "also checkpoint every N steps (0: only at the end)")
    ("resume", "continue from <checkpoint-dir>/checkpoint.safetensors")
    ("save-weights", po::value<std::string>(&save_weights),
     "write the trained weights (.safetensors state dict)")
    ("results", po::value<std::string>(&results), "append one JSON line per run to FILE");
  po::options_description g_prof("Profiling");
  g_prof.add_options()
    ("profile", "print per-op, per-layer and model summary tables of the profiled steps")
    ("profile-steps", po::value<std::string>(&profile_steps),
     "A:B, the steps to profile (1-based, inclusive; default 2:last)")
    ("trace", po::value<std::string>(&to.trace),
     "write a Chrome/Perfetto trace (JSON) of the profiled steps to FILE")
    ("roofline", po::value<std::string>(&to.roofline),
     "write a roofline plot (SVG) of the profiled ops to FILE")
    ("ceilings", po::value<std::string>(&to.ceilings),
     "roofline ceilings from aim-bench peak --ceilings FILE (default: this CPU's, documented)")
    ("profile-ops", "CUDA: time every kernel with its own CUDA events (default: per layer)")
    ("nvtx", "NVTX ranges (domain aim: step/N, fwd, bwd, opt, fwd/<layer>, bwd/<layer>) for "
     "Nsight Systems");
  po::options_description g_test("Testing (fault injection)");
  g_test.add_options()
    ("inject-overflow", po::value<std::string>(&inject_overflow),
     "testing the scaler: STEP[,STEP...] get an Inf gradient (1-based)")
    ("inject-failure", po::value<std::string>(&inject_failure),
     "testing data parallel: RANK:STEP, that rank fails at the start of that step (1-based); "
     "RANK:STEP:hang, it stops answering there (its peers time out)");
  aim::cli::add_kernel_options(g_dev);
  opts.add(g_general).add(g_model).add(g_opt).add(g_prec).add(g_dev).add(g_dist).add(g_out).add(g_prof).add(g_test);
  // clang-format on
  return aim::cli::run_cli("aim-train", [&]() -> int {
    try {
      aim::cli::ModelCommand mc = aim::cli::parse_model_command(argc, argv, opts, config, true);
      if (!mc.entry) return 0;  // --help or --list
      if (mc.vm.count("list-amp")) {
        std::cout << "mixed precision (--precision fp16|bf16), the op policy (autograd/amp.h):\n";
        for (const auto& e : aim::autograd::amp::policy())
          std::cout << "  " << e.cls << std::string(8 - std::string(e.cls).size(), ' ') << e.op
                    << "  -- " << e.why << "\n";
        std::cout << mc.entry->name << ": parameters kept in f32 (Model::amp_fp32_params):\n";
        const auto model = mc.entry->build(mc.cfg, 1);
        const auto fp32 = model->amp_fp32_params();
        if (fp32.empty()) std::cout << "  none beyond the op policy\n";
        for (const auto& f : fp32) std::cout << "  " << f.pattern << "  -- " << f.why << "\n";
        return 0;
      }
      const po::variables_map& vm = mc.vm;
      const aim::models::ModelEntry* entry = mc.entry;
      const aim::models::ModelConfig cfg = mc.cfg;
      const std::vector<int64_t> batches =
          aim::cli::parse_positive_list("--batch-size", batch_list);
      to.seed = aim::cli::parse_u64("--seed", seed);
      if (vm.count("dist-plan")) {
        if (!(to.dist.bucket_mb > 0)) throw UsageError("--bucket-mb must be > 0");
        aim::cli::set_threads(threads);
        for (const int64_t b : batches)
          std::cout << aim::train::data_parallel_plan(*entry, cfg, b, to.dist.bucket_mb, to.seed)
                    << "\n";
        return 0;
      }
      require(to.steps > 0, "--steps", "> 0", to.steps);
      require(to.epochs >= 0, "--epochs", ">= 0", to.epochs);
      require(to.optim.lr > 0, "--lr", "> 0", to.optim.lr);
      require(to.optim.momentum >= 0 && to.optim.momentum < 1, "--momentum", "in [0, 1)",
              to.optim.momentum);
      require(to.optim.weight_decay >= 0 || to.optim.weight_decay == -1, "--weight-decay",
              ">= 0 (or -1)", to.optim.weight_decay);
      require(to.optim.lr_batch >= 0, "--lr-batch", ">= 0", to.optim.lr_batch);
      require(to.poly_power > 0, "--poly-power", "> 0", to.poly_power);
      parse_warmup(warmup, to);
      require(to.eval_every >= 0, "--eval-every", ">= 0", to.eval_every);
      require(to.eval_samples > 0, "--eval-samples", "> 0", to.eval_samples);
      require(to.log_every >= 0, "--log-every", ">= 0", to.log_every);
      require(to.prefetch >= 0, "--prefetch", ">= 0", to.prefetch);
      require(to.checkpoint_every >= 0, "--checkpoint-every", ">= 0", to.checkpoint_every);
      require(to.clip_norm >= 0, "--clip-norm", ">= 0", to.clip_norm);
      {
        std::vector<std::string> optimizers = {"sgd", "adam", "adamw", "adagrad", "lamb"};
        for (const aim::models::ModelOptimizer& m : mc.entry->optimizers)
          optimizers.push_back(m.name);
        if (std::find(optimizers.begin(), optimizers.end(), to.optim.name) == optimizers.end()) {
          std::string allowed;
          for (const std::string& n : optimizers) allowed += (allowed.empty() ? "" : ", ") + n;
          throw UsageError("--optimizer '" + to.optim.name + "' is not allowed for " +
                           mc.entry->name + " (allowed: " + allowed + ")");
        }
      }
      const std::vector<std::string> schedules = {"constant", "step", "poly", "warmup_linear",
                                                  "warmup_cosine"};
      if (std::find(schedules.begin(), schedules.end(), to.schedule) == schedules.end())
        throw UsageError("--schedule '" + to.schedule +
                         "' is not allowed (allowed: constant, step, poly, warmup_linear, "
                         "warmup_cosine)");
      if (progress != "auto" && progress != "bar" && progress != "lines")
        throw UsageError("--progress '" + progress +
                         "' is not allowed (allowed: auto, bar, lines)");
      if (to.optim.nesterov && (to.optim.name != "sgd" || to.optim.momentum <= 0))
        throw UsageError("--nesterov needs --optimizer sgd and --momentum > 0");
      if (to.optim.momentum > 0 && to.optim.name != "sgd")
        throw UsageError("--momentum applies to --optimizer sgd only");
      try {
        to.precision = aim::autograd::amp::parse_precision(precision, "--precision");
      } catch (const aim::Error& e) {
        throw UsageError(e.what());
      }
      if (!(to.loss_scaler.init_scale > 0))
        throw UsageError("--loss-scale must be > 0, got " +
                         std::to_string(to.loss_scaler.init_scale));
      if (to.loss_scaler.growth_interval <= 0)
        throw UsageError("--loss-scale-growth-interval must be > 0");
      if (!inject_overflow.empty())
        to.testing.inject_overflow_at =
            aim::cli::parse_positive_list("--inject-overflow", inject_overflow);
      to.resume = vm.count("resume") > 0;
      to.profile = vm.count("profile") > 0;
      aim::profiler::set_nvtx(vm.count("nvtx") > 0);
      aim::profiler::set_cuda_op_events(vm.count("profile-ops") > 0);
      if (!profile_steps.empty()) {
        const size_t colon = profile_steps.find(':');
        const auto parts = colon == std::string::npos
                               ? std::vector<int64_t>{}
                               : aim::cli::parse_positive_list(
                                     "--profile-steps", profile_steps.substr(0, colon) + "," +
                                                            profile_steps.substr(colon + 1));
        if (parts.size() != 2 || parts[0] > parts[1])
          throw UsageError("--profile-steps '" + profile_steps +
                           "': expected A:B with 1 <= A <= B (steps, 1-based)");
        to.profile_from = parts[0];
        to.profile_to = parts[1];
        if (!to.profile && to.trace.empty() && to.roofline.empty())
          throw UsageError("--profile-steps needs --profile, --trace or --roofline");
      }
      if (to.resume && checkpoint_dir.empty()) throw UsageError("--resume needs --checkpoint-dir");
      if (batches.size() > 1 && (!checkpoint_dir.empty() || !save_weights.empty()))
        throw UsageError(
            "--batch-size lists (sweeps) cannot be combined with --checkpoint-dir or "
            "--save-weights");
      require(ranks >= 0, "--ranks", ">= 0", ranks);
      require(gpus >= 0, "--gpus", ">= 0", gpus);
      if (ranks > 0 && gpus > 0)
        throw UsageError("--ranks (CPU ranks) and --gpus exclude each other");
      require(to.dist.timeout_s > 0, "--dist-timeout", "> 0 seconds", to.dist.timeout_s);
      require(to.dist.bucket_mb > 0, "--bucket-mb", "> 0", to.dist.bucket_mb);
      if (to.dist.embedding_comm != "dense" && to.dist.embedding_comm != "sparse")
        throw UsageError("--embedding-comm '" + to.dist.embedding_comm +
                         "' is not allowed (allowed: dense, sparse)");
      to.freeze_batchnorm = vm.count("freeze-bn") > 0;
      to.cuda_graph = vm.count("cuda-graph") > 0;
      to.sync_batchnorm = vm.count("sync-bn") > 0;
      if (dist_backend != "auto" && dist_backend != "local" && dist_backend != "mpi" &&
          dist_backend != "nccl")
        throw UsageError("--dist-backend '" + dist_backend +
                         "' is not allowed (allowed: auto, local, mpi, nccl)");
      const aim::dist::LaunchEnv launch = aim::dist::detect_launch_env();
      // An explicit --dist-backend mpi also runs a world of one (mpirun -np 1).
      const bool launched = launch.launched() && (launch.world_size > 1 || dist_backend == "mpi");
      if (launched && (ranks > 0 || gpus > 0))
        throw UsageError("--ranks/--gpus start ranks in this process; under a launcher (" +
                         launch.source + ", world size " + std::to_string(launch.world_size) +
                         ") every process is one rank: drop the flag");
      if ((ranks > 0 && dist_backend != "auto" && dist_backend != "local") ||
          (gpus > 0 && dist_backend != "auto" && dist_backend != "nccl"))
        throw UsageError("--dist-backend " + dist_backend + " does not run " +
                         (ranks > 0 ? "--ranks (threads: local)" : "--gpus (one process: nccl)"));
      if (!launched && !ranks && !gpus && dist_backend != "auto")
        throw UsageError("--dist-backend " + dist_backend +
                         (dist_backend == "mpi"
                              ? " runs one rank per process under mpirun (mpirun -np N aim-train "
                                "... --device cpu); no launcher environment (OMPI_COMM_WORLD_*) "
                                "found"
                          : dist_backend == "local"
                              ? " runs ranks as threads: give --ranks N"
                              : " needs --gpus N or a launcher (torchrun, mpirun, srun)"));
      if (launched && dist_backend == "local")
        throw UsageError(
            "--dist-backend local runs ranks as threads of one process (--ranks N), "
            "not under a launcher (" +
            launch.source + ")");
      if (ranks > 0) {
        if (!device.empty() && device != "cpu")
          throw UsageError("--ranks runs CPU ranks (--device cpu), got --device " + device +
                           "; use --gpus N for GPUs");
        device = "cpu";
        to.dist.backend = "local";
        to.dist.ranks = ranks;
      } else if (gpus > 0) {
        if (!device.empty() && device != "cuda" && device != "cuda:0")
          throw UsageError("--gpus N trains on cuda:0 .. cuda:N-1, got --device " + device);
        device = "cuda";
        to.dist.backend = "nccl";
        to.dist.ranks = gpus;
      } else if (launched) {
        // CPU ranks are MPI processes, GPU ranks NCCL ones (auto: --device, else a GPU if any).
        const bool cpu =
            dist_backend == "mpi" || device == "cpu" ||
            (device.empty() && dist_backend == "auto" && aim::cuda_device_count() == 0);
        if (cpu) {
          if (!device.empty() && device != "cpu")
            throw UsageError("--dist-backend mpi runs CPU ranks (--device cpu), got --device " +
                             device + "; GPU ranks under a launcher use NCCL");
          if (dist_backend == "nccl")
            throw UsageError("--dist-backend nccl runs GPU ranks, got --device cpu");
          if (!aim::dist::mpi_built())
            throw UsageError("CPU ranks under a launcher (" + launch.source +
                             ") run the mpi backend, and aim was built without MPI: install "
                             "libopenmpi-dev (tools/deps.sh) and rebuild; or run the ranks as "
                             "threads of one process with --ranks N");
          device = "cpu";
          to.dist.backend = "mpi";
        } else {
          if (!device.empty() && device.rfind("cuda", 0) != 0)
            throw UsageError("under a launcher (" + launch.source +
                             ") --dist-backend nccl runs GPU ranks, one each, got --device " +
                             device);
          device = "cuda:" + std::to_string(launch.local_rank);
          to.dist.backend = "launcher";
        }
        to.dist.ranks = launch.world_size;
      }
      if (!inject_failure.empty()) {
        std::string spec = inject_failure;
        const bool hang = spec.size() > 5 && spec.compare(spec.size() - 5, 5, ":hang") == 0;
        if (hang) spec.resize(spec.size() - 5);
        const size_t colon = spec.find(':');
        std::vector<int64_t> parts;
        if (colon != std::string::npos && colon > 0) {
          try {
            size_t u1 = 0, u2 = 0;
            const std::string a = spec.substr(0, colon), b = spec.substr(colon + 1);
            parts = {std::stoll(a, &u1), std::stoll(b, &u2)};
            if (u1 != a.size() || u2 != b.size()) parts.clear();
          } catch (const std::exception&) {
            parts.clear();
          }
        }
        if (parts.size() != 2 || parts[0] < 0 || parts[1] < 1)
          throw UsageError("--inject-failure '" + inject_failure +
                           "': expected RANK:STEP or RANK:STEP:hang (rank >= 0, step >= 1, "
                           "1-based)");
        if (to.dist.backend.empty())
          throw UsageError(
              "--inject-failure needs a data-parallel run (--ranks, --gpus or a "
              "launcher)");
        if (parts[0] >= to.dist.ranks)
          throw UsageError("--inject-failure rank " + std::to_string(parts[0]) +
                           " is not a rank of " + std::to_string(to.dist.ranks));
        to.testing.fail_rank = int(parts[0]);
        to.testing.fail_step = parts[1];
        to.testing.fail_hang = hang;
      }
      if (to.sync_batchnorm && to.dist.backend.empty())
        throw UsageError(
            "--sync-bn synchronises batch statistics over data-parallel ranks: it "
            "needs --ranks, --gpus or a launcher");
      // aim-train exits right after a failed run, so a rank stuck outside any collective is left
      // behind one --dist-timeout after the failure instead of hanging the process.
      to.dist.abandon_stuck_ranks = !to.dist.backend.empty();
      aim::cli::set_threads(threads);
      aim::cli::set_tf32(tf32);
      aim::cli::set_winograd(winograd);
      aim::cli::set_denormals(denormals);
      aim::cli::set_deterministic(vm.count("deterministic") > 0);
      const aim::Device dev = aim::cli::resolve_device(device);
      to.device = dev.str();
      to.data = data;
      to.checkpoint_dir = checkpoint_dir;
      to.weights = weights;
      to.save_weights = save_weights;
      to.progress_bar = progress == "bar" || (progress == "auto" && isatty(STDOUT_FILENO));
      // Where the run writes is checked now, not after hours of training.
      aim::cli::check_output_file("--results", results);
      aim::cli::check_output_file("--save-weights", save_weights);
      aim::cli::check_output_file("--trace", to.trace);
      aim::cli::check_output_file("--roofline", to.roofline);
      if (!to.resume) aim::cli::prepare_output_dir("--checkpoint-dir", checkpoint_dir);

      int status = 0;
      for (const int64_t batch : batches) {
        to.batch_size = batch;
        const int nranks = to.dist.backend.empty() ? 1 : to.dist.ranks;
        const bool lead =
            (to.dist.backend != "launcher" && to.dist.backend != "mpi") || launch.rank == 0;
        if (lead)
          std::cout << "aim-train " << entry->name << " ("
                    << aim::models::ModelEntry::config_string(cfg) << ") on "
                    << (to.dist.backend == "nccl" ? "cuda:0.." + std::to_string(nranks - 1)
                                                  : dev.str())
                    << (nranks > 1 ? " x " + std::to_string(nranks) + " ranks" : std::string())
                    << ": batch " << batch << (nranks > 1 ? " per rank" : "") << ", "
                    << (to.epochs > 0 ? (std::ostringstream() << to.epochs << " epochs").str()
                                      : std::to_string(to.steps) + " steps")
                    << ", " << to.optim.name << " lr "
                    << (to.optim.lr_batch > 0 ? to.optim.lr * double(batch) / to.optim.lr_batch
                                              : to.optim.lr)
                    << " (" << to.schedule << "), seed " << to.seed << ", data " << data << "\n";
        const auto before = aim::cli::variant_counts();
        // Launcher runs: only rank 0 prints the run's log (the others' failures still reach
        // stderr).
        std::ostream quiet(nullptr);
        const aim::train::TrainResult r =
            aim::train::train_model(*entry, cfg, to, lead ? std::cout : quiet);
        if (const std::string why = aim::train::loss_divergence(r.losses); !why.empty() && lead) {
          std::cerr << "aim-train: " << why << "; exit status 3\n";
          status = 3;  // the run's outputs are written; its status says it failed to learn
        }
        if (results.empty() || !lead) continue;
        nlohmann::json j;
        j["model"] = entry->name;
        j["mode"] = "train";
        j["device"] = dev.str();
        j["devices"] = nranks;
        j["precision"] = aim::autograd::amp::precision_name(to.precision);
        if (to.precision == aim::DType::f16) {
          j["loss_scale"] = r.loss_scale;
          j["skipped_steps"] = r.skipped_steps;
        }
        j["batch"] = batch;
        if (nranks > 1) {
          const aim::train::DistStats& d = r.dist;
          j["global_batch"] = batch * nranks;
          j["dist"] = {{"backend", d.backend},
                       {"ranks", d.ranks},
                       {"rank_throughput", d.rank_samples_per_s},
                       {"total_throughput", d.total_samples_per_s},
                       {"allreduce_ms_per_step", d.allreduce_ms},
                       {"backward_ms_per_step", d.backward_ms},
                       {"hidden_fraction", d.hidden_fraction},
                       {"exposed_comm_ms_per_step", d.exposed_ms},
                       {"sparse_exchange_ms_per_step", d.sparse_ms},
                       {"grad_bytes_per_step", d.grad_bytes},
                       {"bucket_mb", to.dist.bucket_mb},
                       {"buckets", d.bucket_bytes.size()},
                       {"bucket_bytes", d.bucket_bytes},
                       {"embedding_comm", to.dist.embedding_comm},
                       {"sparse_tables", d.sparse_tables},
                       {"timeout_s", to.dist.timeout_s}};
        }
        j["config"] = cfg;
        j["data"] = r.data_description;
        j["optimizer"] = {{"name", to.optim.name},         {"lr", to.optim.lr},
                          {"schedule", to.schedule},       {"warmup", to.warmup_steps},
                          {"momentum", to.optim.momentum}, {"clip_norm", to.clip_norm}};
        j["steps"] = r.total_steps;
        j["steps_run"] = r.steps_run;
        j["seed"] = to.seed;
        j["throughput"] = r.samples_per_s;
        j["throughput_device"] = r.device_samples_per_s;
        j["throughput_unit"] = "samples/s";
        j["step_time_ms"] = {
            {"p50", r.step_p50_ms}, {"p90", r.step_p90_ms}, {"p99", r.step_p99_ms}};
        j["data_wait_s"] = r.data_wait_s;
        j["memory"] = {{"peak_step_bytes", r.peak_step_bytes}, {"max_rss_bytes", r.max_rss_bytes}};
        if (aim::parse_device(to.device).is_cuda())  // per training step (steps after the first)
          j["host_syncs_per_step"] = r.host_syncs_per_step,
          j["d2h_bytes_per_step"] = r.d2h_bytes_per_step;
        if (to.cuda_graph)
          j["cuda_graph"] = {{"capture_ms", r.graph_capture_ms}, {"captures", r.graph_captures}};
        j["gflop_per_step"] = r.train_flops_per_step / 1e9;
        j["achieved_gflops"] =
            r.step_p50_ms > 0 ? r.train_flops_per_step / (r.step_p50_ms * 1e6) : 0;
        j["metrics"] = r.final_metrics;
        j["first_loss"] = r.losses.empty() ? 0.0 : r.losses.front();
        j["final_loss"] = r.losses.empty() ? 0.0 : r.losses.back();
        nlohmann::json evals = nlohmann::json::array();
        for (const auto& [step, m] : r.evals) evals.push_back({{"step", step}, {"metrics", m}});
        j["evaluations"] = evals;
        j["wall_s"] = r.wall_s;
        aim::cli::add_run_fields(j, before, argc, argv);
        aim::cli::append_results(results, j);
      }
      return status;
    } catch (const aim::dist::AbandonedRanksError& e) {
      // A rank thread stuck outside any collective was left running (--dist-timeout): end the
      // process without running destructors under it.
      std::cerr << "aim-train: error: " << e.what() << "\n";
      std::cout.flush();
      std::cerr.flush();
      std::_Exit(1);
    }
  });
}
