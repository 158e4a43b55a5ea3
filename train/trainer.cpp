#include "train/trainer.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "profiler/profiler.h"
#include "tensor/check.h"
#include "tensor/device.h"
#include "train/batch_feed.h"
#include "train/checkpoint.h"
#include "train/data_parallel.h"
#include "train/dist/communicator.h"
#include "train/dist/mpi_backend.h"
#include "train/dist/nccl_backend.h"
#include "train/graph_step.h"
#include "train/rank_setup.h"
#include "train/reporter.h"
#include "train/step.h"

namespace aim::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// --inject-failure RANK:STEP[:hang] (a testing flag): that rank fails, or never answers again,
// at that step.
void inject_failure(const TestHooks& t, dist::Communicator* comm, int rank, int64_t step) {
  if (!comm || step != t.fail_step || rank != t.fail_rank) return;
  if (t.fail_hang)
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  AIM_FAIL("injected failure at step ", step, " (--inject-failure ", rank, ":", step,
           ", a testing flag)");
}

}  // namespace

namespace {
// One group of a model's own optimizer: the kind's constructor with the group's settings by name
// (PyTorch's / TF's defaults where a setting is absent); an unknown kind or setting is an error.
std::unique_ptr<Optimizer> make_group_optimizer(const std::string& recipe,
                                                const models::OptimizerGroup& g,
                                                const std::string& label, NamedParameters p) {
  std::set<std::string> used;
  auto get = [&](const char* key, double dflt) {
    used.insert(key);
    auto it = g.settings.find(key);
    return it == g.settings.end() ? dflt : it->second;
  };
  std::unique_ptr<Optimizer> r;
  if (g.kind == "ftrl")
    r = std::make_unique<Ftrl>(std::move(p), get("lr", 0.05), get("lr_power", -0.5),
                               get("initial_accumulator_value", 0.1), get("l1", 0), get("l2", 0));
  else if (g.kind == "adagrad")
    r = std::make_unique<Adagrad>(std::move(p), get("lr", 0.01), get("lr_decay", 0),
                                  get("weight_decay", 0), get("eps", 1e-10),
                                  get("initial_accumulator_value", 0));
  else if (g.kind == "adamw")
    r = std::make_unique<AdamW>(std::move(p), get("lr", 1e-3), get("beta1", 0.9),
                                get("beta2", 0.999), get("eps", 1e-8), get("weight_decay", 0.01));
  else if (g.kind == "lamb")
    r = std::make_unique<Lamb>(std::move(p), get("lr", 1e-3), get("beta1", 0.9),
                               get("beta2", 0.999), get("eps", 1e-6), get("weight_decay", 0.01));
  else
    AIM_FAIL("optimizer ", recipe, ": group ", label, " has kind '", g.kind,
             "' (allowed: ftrl, adagrad, adamw, lamb)");
  for (const auto& [k, v] : g.settings)
    AIM_CHECK(used.count(k), "optimizer ", recipe, ": group ", label, " (", g.kind,
              ") has an unknown setting '", k, "'");
  return r;
}
}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& o, NamedParameters params,
                                          const std::vector<models::ModelOptimizer>& own) {
  AIM_CHECK(std::isfinite(o.lr) && o.lr > 0, "optimizer: lr must be > 0, got ", o.lr);
  AIM_CHECK(o.momentum >= 0 && o.momentum < 1, "optimizer: momentum must be in [0, 1), got ",
            o.momentum);
  AIM_CHECK(!o.nesterov || (o.name == "sgd" && o.momentum > 0),
            "optimizer: nesterov needs sgd with momentum > 0");
  AIM_CHECK(o.momentum == 0 || o.name == "sgd", "optimizer: momentum applies to sgd only, not ",
            o.name);
  const bool wd_set = o.weight_decay >= 0;
  const double wd = wd_set ? o.weight_decay : 0;
  if (o.name == "sgd")
    return std::make_unique<SGD>(std::move(params), o.lr, o.momentum, 0.0, wd, o.nesterov);
  if (o.name == "adam")
    return std::make_unique<Adam>(std::move(params), o.lr, 0.9, 0.999, 1e-8, wd);
  if (o.name == "adamw")
    return std::make_unique<AdamW>(std::move(params), o.lr, 0.9, 0.999, 1e-8,
                                   wd_set ? o.weight_decay : 0.01);
  if (o.name == "adagrad") return std::make_unique<Adagrad>(std::move(params), o.lr, 0.0, wd);
  if (o.name == "lamb")
    return std::make_unique<Lamb>(std::move(params), o.lr, 0.9, 0.999, 1e-6,
                                  wd_set ? o.weight_decay : 0.01);
  for (const models::ModelOptimizer& m : own) {
    if (m.name != o.name) continue;
    AIM_CHECK(!wd_set || o.weight_decay == 0, "optimizer ", m.name,
              ": weight decay is not supported (each group has its own settings)");
    AIM_CHECK(m.ref_lr > 0, "optimizer ", m.name, ": the recipe's reference lr must be > 0");
    std::vector<GroupedOptimizer::Group> groups;
    for (const models::OptimizerGroup& g : m.groups) {
      GroupedOptimizer::Group group{g.prefix, nullptr, g.name_contains};
      group.make = [g, name = m.name, label = group.label()](NamedParameters p) {
        return make_group_optimizer(name, g, label, std::move(p));
      };
      groups.push_back(std::move(group));
    }
    auto r = std::make_unique<GroupedOptimizer>(std::move(params), m.ref_lr, std::move(groups));
    r->set_lr(o.lr);
    return r;
  }
  std::string allowed = "sgd, adam, adamw, adagrad, lamb";
  for (const models::ModelOptimizer& m : own) allowed += ", " + m.name;
  AIM_FAIL("unknown optimizer '", o.name, "' (allowed: ", allowed, ")");
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, NamedParameters params,
                                          double lr) {
  OptimizerOptions o;
  o.name = name;
  o.lr = lr;
  return make_optimizer(o, std::move(params));
}

LRSchedule make_schedule(const std::string& name, double lr, int64_t warmup, int64_t total,
                         double poly_power) {
  AIM_CHECK(warmup >= 0 && (warmup < total || warmup == 0), "schedule: warmup steps (", warmup,
            ") must be in [0, total steps ", total, ")");
  if (name == "constant") return LRSchedule::constant(lr);
  if (name == "step") return LRSchedule::step(lr, std::max<int64_t>(1, total / 3), 0.1);
  if (name == "poly") return LRSchedule::poly(lr, total, poly_power);
  if (name == "warmup_linear") return LRSchedule::warmup_linear(lr, warmup, total);
  if (name == "warmup_cosine") return LRSchedule::warmup_cosine(lr, warmup, total);
  AIM_FAIL("unknown schedule '", name,
           "' (allowed: constant, step, poly, warmup_linear, warmup_cosine)");
}

namespace {

// One rank's training (ctx null: a single process). See train_model.
TrainResult train_rank(const models::ModelEntry& entry, const models::ModelConfig& cfg,
                       const TrainOptions& opt, std::ostream& log, const RankCtx* ctx) {
  const auto t_call = Clock::now();
  // The writer of the checkpoints (rank 0) holds the directory before it reads or writes it.
  std::unique_ptr<CheckpointDirLock> dir_lock;
  if (!opt.checkpoint_dir.empty() && (!ctx || ctx->rank == 0))
    dir_lock = std::make_unique<CheckpointDirLock>(opt.checkpoint_dir);
  RankState s(entry, cfg, opt, log, ctx);  // model, optimizer, data, precision, resume
  TrainResult r;
  r.data_description = s.data_description;
  r.total_steps = s.total_steps;
  r.first_step = s.first_step;

  // Data parallel: the gradient reducer, the sparse tables and SyncBatchNorm (DataParallel).
  DataParallel dp;
  if (s.comm)
    dp = setup_data_parallel(*s.comm, entry, cfg, opt, *s.model, *s.optim, s.global_batch, log);
  AIM_CHECK(!opt.sync_batchnorm || s.comm,
            "--sync-bn synchronises batch statistics over data-parallel ranks: it needs --ranks, "
            "--gpus or a launcher");
  DistTimes dist_times;  // the reducer's per-step figures, summed over the steps after the first

  BatchFeed feed(*s.source, s.rank, s.ranks, opt.batch_size, s.total_steps - s.first_step,
                 opt.prefetch, s.dev.is_cuda());
  Reporter report(s, log, r, feed.start_position());
  ProfileWindow profile(s, opt);

  // What every step touches (train/step.h).
  StepContext step_ctx;
  step_ctx.model = s.model.get();
  step_ctx.optim = s.optim.get();
  step_ctx.comm = s.comm;
  step_ctx.reducer = dp.reducer.get();
  step_ctx.bn_sync = dp.bn_sync ? &*dp.bn_sync : nullptr;
  step_ctx.scaler = s.scaler ? &*s.scaler : nullptr;
  step_ctx.precision = opt.precision;
  step_ctx.amp_cache = s.amp_on ? &s.amp_cache : nullptr;
  step_ctx.clip_norm = opt.clip_norm;
  step_ctx.inject_overflow_at = opt.testing.inject_overflow_at;

  // --cuda-graph: the step after the first (eager: it creates the gradients and the optimizer
  // state) is captured and replayed from then on (train/graph_step.h).
  AIM_CHECK(!opt.cuda_graph || !profile.on(),
            "--cuda-graph: a graph replays as one unit, its ops are not timed one by one: "
            "profile without --cuda-graph");
  std::unique_ptr<GraphStep> graph;
  if (opt.cuda_graph) graph = std::make_unique<GraphStep>(step_ctx, s.dev, entry.name, log);

  int64_t step = s.first_step;  // steps completed
  while (step < s.total_steps) {
    const bool profile_step = profile.begin_step(step + 1);
    inject_failure(opt.testing, s.comm, s.rank, step + 1);
    std::optional<profiler::Scope> step_scope;
    if (profile_step || profiler::nvtx_enabled())
      step_scope.emplace("step/" + std::to_string(step + 1), profiler::ScopeKind::Step);
    const auto t_fetch = Clock::now();
    const Fetched f = feed.next(step);
    const auto t0 = Clock::now();
    report.begin_step();
    s.optim->set_lr(s.sched.lr(step));
    TensorMap batch;
    bool read_this_step = false;
    std::optional<profiler::Scope> phase;
    if (graph && step > s.first_step) {
      batch = graph->run(f.batch, step + 1);
      report.file_loss(graph->loss(), step + 1);
    } else {
      batch = models::batch_to_device(*s.model, f.batch, s.dev);
      StepHooks hooks;
      hooks.record_loss = [&](const Tensor& loss) { report.file_loss(loss, step + 1); };
      hooks.overflowed = [&](const Tensor& flag) {
        read_this_step = true;
        return report.read_overflow(flag, step);  // the fp16 step's one host read
      };
      const bool skipped = train_step(step_ctx, batch, step + 1, hooks);
      if (dp.reducer && (step > s.first_step || s.total_steps - s.first_step == 1))
        dist_times.add(dp.reducer->last_stats());  // the first step sets up
      if (skipped)
        log << "step " << step + 1 << ": gradient overflow (Inf/NaN), step skipped; loss scale -> "
            << s.scaler->scale() << "\n";
      phase.emplace("opt", profiler::ScopeKind::Phase);  // the read-back below, as before
    }
    if (!read_this_step) report.read_losses_if_due(step);  // syncs
    phase.reset();
    const double dt = seconds_since(t0);
    ++step;
    report.end_step(step, dt, seconds_since(t_fetch), s.model->train_flops(batch));
    if (!graph || step == s.first_step + 1) {  // a captured step zeroes the gradients itself
      profiler::Scope zero("opt", profiler::ScopeKind::Phase);
      s.optim->zero_grad();
    }
    step_scope.reset();
    profile.end_step(step);
    report.between_steps(step, f.position);  // evaluation, progress, checkpoint
  }
  report.end_loop(step);
  if (graph) {
    r.graph_capture_ms = graph->capture_ms();
    r.graph_captures = graph->captures();
  }
  // Every rank is done with its steps (and its collectives' scopes are closed) before rank 0
  // reads the process-wide profiler events, evaluates and writes the final checkpoint.
  if (s.comm) s.comm->barrier();
  profile.finish(log);
  const double data_wait_s = feed.wait_seconds();
  feed.stop();
  report.finish(step, data_wait_s, dp, dist_times, t_call);
  return r;
}

}  // namespace

std::string loss_divergence(const std::vector<double>& losses) {
  // Against the first step's loss (the model as initialised): a run at a huge --lr may be far
  // gone within its first tenth already.
  // At least 50 steps: a short run may sit in an early spike that a longer one recovers from
  // (wide_deep's first steps at its recipe's rate: 1.2 -> 52 at step 8, 0.45 at step 200).
  const size_t n = losses.size(), w = std::max<size_t>(5, n / 10);
  if (n < 50) return "";
  const double first = losses[0];
  double last = 0;
  for (size_t i = n - w; i < n; ++i) last += losses[i];
  last /= double(w);
  if (!(last > 10 * std::abs(first) && last > first + 10)) return "";
  return str("the loss diverged: ", first, " at the first step, a mean of ", last,
             " over the last ", w, " (a smaller --lr, --clip-norm or a warmup usually helps)");
}

TrainResult train_model(const models::ModelEntry& entry, const models::ModelConfig& cfg,
                        const TrainOptions& opt, std::ostream& log) {
  const DistOptions& d = opt.dist;
  if (d.backend.empty()) {
    AIM_CHECK(d.ranks == 1, "train: ", d.ranks, " ranks need a backend (local, nccl, launcher)");
    return train_rank(entry, cfg, opt, log, nullptr);
  }
  AIM_CHECK(std::isfinite(d.timeout_s) && d.timeout_s > 0,
            "--dist-timeout must be > 0 seconds, got ", d.timeout_s);
  AIM_CHECK(std::isfinite(d.bucket_mb) && d.bucket_mb > 0, "--bucket-mb must be > 0, got ",
            d.bucket_mb);
  AIM_CHECK(d.embedding_comm == "dense" || d.embedding_comm == "sparse", "--embedding-comm '",
            d.embedding_comm, "' is not allowed (allowed: dense, sparse)");
  dist::Options co;
  co.timeout = std::chrono::milliseconds(std::llround(d.timeout_s * 1e3));
  // A rank stuck outside any collective after its peers failed gets a short grace, not another
  // whole timeout: the job ends within --dist-timeout + min(10 s, --dist-timeout).
  const std::chrono::milliseconds abandon_after =
      d.abandon_stuck_ranks ? std::min(co.timeout, std::chrono::milliseconds(10000))
                            : std::chrono::milliseconds(0);
  std::ostream quiet(nullptr);  // ranks other than 0 log nothing (rank 0 prints per-rank lines)
  auto run = [&](int rank, dist::Communicator& c, TrainResult& out) {
    RankCtx ctx{&c, rank, c.size()};
    out = train_rank(entry, cfg, opt, rank == 0 ? log : quiet, &ctx);
  };
  if (d.backend == "local") {
    AIM_CHECK(d.ranks >= 1, "--ranks must be >= 1, got ", d.ranks);
    AIM_CHECK(parse_device(opt.device).is_cpu(), "--ranks runs CPU ranks (--device cpu), not ",
              opt.device, ": use --gpus N for GPUs");
    // The ranks share this process's OpenMP threads (--threads): each its share (OpenMP's
    // thread count is per host thread, so a rank thread would otherwise take them all).
    const int per_rank = std::max(1, omp_get_max_threads() / d.ranks);
    log << "local ranks: " << d.ranks << " threads x " << per_rank << " OpenMP threads each\n";
    std::vector<TrainResult> rs(size_t(d.ranks));
    dist::run_local_ranks(
        d.ranks,
        [&](int rank, dist::Communicator& c) {
          omp_set_num_threads(per_rank);
          run(rank, c, rs[size_t(rank)]);
        },
        co, abandon_after);
    return rs[0];
  }
  const auto dense_only = [&] {
    AIM_CHECK(d.embedding_comm == "dense",
              "--embedding-comm sparse exchanges CPU tensors only; "
              "NCCL ranks use --embedding-comm dense");
  };
  if (d.backend == "nccl") {
    dense_only();
    AIM_CHECK(d.ranks >= 1, "--gpus must be >= 1, got ", d.ranks);
    std::vector<int> devices;
    for (int k = 0; k < d.ranks; ++k) devices.push_back(k);
    std::vector<std::unique_ptr<dist::Communicator>> owned =
        dist::make_nccl_communicators(devices, co);
    std::vector<dist::Communicator*> comms;
    for (auto& c : owned) comms.push_back(c.get());
    std::vector<TrainResult> rs(size_t(d.ranks));
    bool abandoned = false;
    try {
      dist::run_ranks(
          comms, [&](int rank, dist::Communicator& c) { run(rank, c, rs[size_t(rank)]); },
          abandon_after, &abandoned);
    } catch (...) {
      if (abandoned)  // a stuck rank thread may still use its communicator: keep them
        for (auto& c : owned) c.release();
      throw;
    }
    return rs[0];
  }
  AIM_CHECK(d.backend == "launcher" || d.backend == "mpi", "train: unknown data-parallel backend '",
            d.backend, "' (allowed: local, nccl, launcher, mpi)");
  // One rank per process: NCCL ranks from the launcher's environment, or MPI ranks (mpirun).
  const dist::LaunchEnv env = dist::detect_launch_env();
  std::unique_ptr<dist::Communicator> c;
  if (d.backend == "mpi") {
    AIM_CHECK(parse_device(opt.device).is_cpu(), "the mpi backend runs CPU ranks (--device cpu), ",
              "not ", opt.device, ": GPU ranks under mpirun use NCCL");
    c = dist::make_mpi_communicator(co, &env);
  } else {
    dense_only();
    AIM_CHECK(env.launched(),
              "train: no launcher environment (RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, "
              "SLURM_*) for the launcher backend");
    c = dist::make_nccl_communicator(env, co);
  }
  const int rank = c->rank();
  TrainResult out;
  try {
    run(rank, *c, out);
  } catch (const std::exception& e) {
    // Tell the peers (their collectives fail at once instead of at the deadline where the
    // backend can; the mpi backend prints the reason and ends the job here: MPI_Abort), then
    // report.
    c->abort(e.what());
    const std::string what = e.what();
    if (what.rfind("dist: ", 0) == 0) throw;
    AIM_FAIL("dist: rank ", rank, " failed: ", what);
  }
  return out;
}

}  // namespace aim::train
