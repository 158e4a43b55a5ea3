#include "train/rank_setup.h"

#include <algorithm>
#include <cmath>

#include "data/batch_fits.h"
#include "profiler/profiler.h"
#include "tensor/check.h"
#include "tensor/device.h"
#include "tensor/safetensors.h"
#include "train/checkpoint.h"

namespace aim::train {
namespace {

// --freeze-bn: every layer that can normalises with its running statistics in training too;
// returns the frozen layers' types (one entry per layer).
void freeze_batch_statistics(layers::Module& m, std::map<std::string, int>& frozen) {
  if (m.freeze_batch_statistics()) ++frozen[m.type_name()];
  for (const auto& [name, c] : m.children()) freeze_batch_statistics(*c, frozen);
}

}  // namespace

RankState::RankState(const models::ModelEntry& entry_, const models::ModelConfig& cfg,
                     const TrainOptions& opt_, std::ostream& log, const RankCtx* ctx)
    : entry(entry_), opt(opt_) {
  comm = ctx ? ctx->comm : nullptr;
  rank = ctx ? ctx->rank : 0;
  ranks = ctx ? ctx->size : 1;
  lead = rank == 0;
  AIM_CHECK(opt.batch_size > 0, "train: batch size must be > 0, got ", opt.batch_size);
  AIM_CHECK(opt.epochs > 0 || opt.steps > 0, "train: steps must be > 0, got ", opt.steps);
  AIM_CHECK(!opt.resume || !opt.checkpoint_dir.empty(), "train: resume needs a checkpoint dir");
  AIM_CHECK(opt.eval_every >= 0 && opt.eval_samples > 0 && opt.checkpoint_every >= 0 &&
                opt.prefetch >= 0 && opt.clip_norm >= 0,
            "train: eval_every, checkpoint_every, prefetch, clip_norm must be >= 0 and "
            "eval_samples > 0");
  dev = comm ? comm->device() : parse_device(opt.device);
  // This thread launches on the rank's GPU (a rank thread of --gpus N, a launcher rank with
  // LOCAL_RANK > 0): every kernel, allocation and stream of the rank is on `dev`.
  set_current_device(dev);

  {
    profiler::ContextScope ctx(models::building_context(entry, cfg));
    model = entry.build(cfg, opt.seed);
  }
  if (!opt.weights.empty()) models::load_weights_file(*model, entry.name, opt.weights);
  model->to(dev);
  if (opt.freeze_batchnorm) {
    std::map<std::string, int> frozen;
    freeze_batch_statistics(*model, frozen);
    AIM_CHECK(!frozen.empty(), "--freeze-bn: ", entry.name,
              " has no batch-normalisation layer with running statistics to freeze");
    for (const auto& [type, n] : frozen)
      log << "frozen " << type << ": " << n << " layers normalise with their running statistics\n";
  }
  model->train();
  // Data parallel: rank 0's initial parameters and buffers on every rank (they were built from
  // the same seed; this also covers --weights read differently or nondeterministic inits).
  if (comm) dist::broadcast_parameters(*comm, *model, 0);
  global_batch = opt.batch_size * ranks;
  OptimizerOptions oo = opt.optim;
  if (oo.lr_batch > 0) oo.lr *= double(global_batch) / oo.lr_batch;
  optim = make_optimizer(oo, model->named_parameters(), entry.optimizers);
  source = entry.source(cfg, opt.data, opt.seed);
  n_eval = std::min(opt.eval_samples, source->eval_size());
  AIM_CHECK(n_eval > 0, "train: the data has no evaluation samples");
  // The batch in use and the loader's prefetched ones, refused before they are built.
  data::check_batch_fits(*source, opt.batch_size, 1 + opt.prefetch, "--batch-size");

  data_description = source->describe();
  total_steps = opt.steps;
  if (opt.epochs > 0) {
    const int64_t per_epoch = source->epoch_size() / global_batch;
    AIM_CHECK(per_epoch > 0, "train: an epoch of ", source->epoch_size(),
              " samples holds no batch of ", global_batch);
    total_steps = std::max<int64_t>(1, std::llround(opt.epochs * double(per_epoch)));
  }
  log << "data: " << data_description << "; " << total_steps << " steps of " << opt.batch_size
      << (ranks > 1 ? str(" per rank x ", ranks, " ranks = ", global_batch) : std::string())
      << " (epoch = " << source->epoch_size() << " samples)\n";
  const int64_t warmup = opt.warmup_fraction > 0
                             ? std::llround(opt.warmup_fraction * double(total_steps))
                             : opt.warmup_steps;
  sched = make_schedule(opt.schedule, oo.lr, warmup, total_steps, opt.poly_power);

  // Mixed precision: the model's f32 parameters and their low-precision copies (one cast per step).
  amp_on = opt.precision != DType::f32;
  std::vector<std::string> fp32_patterns;
  for (const models::Model::Fp32Params& f : model->amp_fp32_params())
    fp32_patterns.push_back(f.pattern);
  if (amp_on) amp_cache = autograd::amp::ParamCache(model->named_parameters(), fp32_patterns);
  if (opt.precision == DType::f16) scaler.emplace(opt.loss_scaler);
  if (amp_on) {
    log << "precision " << autograd::amp::precision_name(opt.precision)
        << " (mixed): 16-bit GEMM/conv/rnn, f32 master weights, optimizer state, softmax, losses, "
           "reductions and normalisation statistics";
    for (const models::Model::Fp32Params& f : model->amp_fp32_params())
      log << "; f32 parameters " << f.pattern << " (" << f.why << ")";
    if (scaler) log << "; dynamic loss scale " << scaler->scale();
    log << "\n";
  }

  meta = {{"precision", autograd::amp::precision_name(opt.precision)},
          {"model", entry.name},
          {"config", models::ModelEntry::config_string(cfg)},
          {"optimizer", opt.optim.name},
          {"data", source->fingerprint()},
          {"batch_size", std::to_string(opt.batch_size)}};
  if (ranks > 1) meta["ranks"] = std::to_string(ranks);

  if (opt.resume) {
    const std::string path = checkpoint_path(opt.checkpoint_dir);
    const CheckpointInfo ci = load_checkpoint(
        opt.checkpoint_dir, *model, *optim,
        [&](const CheckpointInfo& c) { check_resume_matches(c, meta, ranks, path); });
    if (scaler) scaler->load_state(ci.metadata, path);
    first_step = ci.step;
    AIM_CHECK(first_step < total_steps, "--resume: ", path, " is at step ", first_step,
              " and this run ends at step ", total_steps,
              ": nothing left to train (give --steps above ", first_step, ")");
    source->seek(ci.data_position);  // the global position (RankShard places the rank)
    log << "resumed from " << path << " at step " << first_step << " (data position "
        << ci.data_position << ")\n";
  }
}

models::Metrics RankState::evaluate() {
  std::optional<autograd::amp::Autocast> ac;
  if (amp_on) ac.emplace(opt.precision, &amp_cache);
  amp_cache.clear();
  models::Metrics m = entry.evaluate(*model, *source, n_eval, dev);
  amp_cache.clear();
  return m;
}

}  // namespace aim::train
