#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include "autograd/amp.h"
#include "autograd/functions/elementwise.h"
#include "autograd/variable.h"
#include "data/prefetch.h"
#include "profiler/profiler.h"
#include "profiler/roofline.h"
#include "profiler/run_info.h"
#include "tensor/check.h"
#include "tensor/device.h"
#include "tensor/safetensors.h"

namespace aim::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int64_t parse_i64(const std::map<std::string, std::string>& md, const std::string& key,
                  const std::string& path) {
  auto it = md.find(key);
  AIM_CHECK(it != md.end(), "checkpoint ", path, " has no metadata '", key, "'");
  try {
    size_t used = 0;
    const int64_t v = std::stoll(it->second, &used);
    if (used == it->second.size()) return v;
  } catch (const std::exception&) {
  }
  AIM_FAIL("checkpoint ", path, ": metadata '", key, "' = '", it->second, "' is not an integer");
}

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& o, NamedParameters params) {
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
  if (o.name == "wide_deep") {
    // The census Wide&Deep recipe (MODELS.md §4.4, models/wide_deep.h): parameters under "wide."
    // FTRL (TF defaults, lr min(0.2, 1/sqrt(8 wide columns)) = 0.2), the others TF's Adagrad
    // (lr 0.05, initial accumulator 0.1). --lr is the reference for both: each group's rate is
    // its own * lr / 0.05.
    AIM_CHECK(!wd_set || o.weight_decay == 0, "optimizer wide_deep: weight decay is not supported");
    constexpr double kRef = 0.05;
    std::vector<GroupedOptimizer::Group> groups;
    groups.push_back({"wide.", [](NamedParameters p) {
                        return std::make_unique<Ftrl>(std::move(p), 0.2, -0.5, 0.1, 0.0, 0.0);
                      }});
    groups.push_back({"", [](NamedParameters p) {
                        return std::make_unique<Adagrad>(std::move(p), 0.05, 0.0, 0.0, 1e-10, 0.1);
                      }});
    auto g = std::make_unique<GroupedOptimizer>(std::move(params), kRef, std::move(groups));
    g->set_lr(o.lr);
    return g;
  }
  AIM_FAIL("unknown optimizer '", o.name, "' (allowed: sgd, adam, adamw, adagrad, wide_deep)");
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

std::string checkpoint_path(const std::string& dir) {
  return (std::filesystem::path(dir) / "checkpoint.safetensors").string();
}

void save_checkpoint(const std::string& dir, int64_t step, const layers::Module& model,
                     const Optimizer& opt, int64_t data_position,
                     const std::map<std::string, std::string>& extra_metadata) {
  AIM_CHECK(!dir.empty(), "save_checkpoint: empty checkpoint directory");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  AIM_CHECK(!ec, "save_checkpoint: cannot create directory ", dir, ": ", ec.message());
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [k, t] : model.state_dict()) tensors.emplace_back("model." + k, t);
  for (const auto& [k, t] : opt.state_dict()) tensors.emplace_back("optim." + k, t);
  std::map<std::string, std::string> md = extra_metadata;
  md["format"] = "aim-train-checkpoint-1";
  md["step"] = std::to_string(step);
  md["data_position"] = std::to_string(data_position);
  save_safetensors(checkpoint_path(dir), tensors, md);
}

CheckpointInfo load_checkpoint(const std::string& dir, layers::Module& model, Optimizer& opt) {
  const std::string path = checkpoint_path(dir);
  AIM_CHECK(std::filesystem::exists(path), "no checkpoint to resume from: ", path,
            " does not exist");
  const SafetensorsFile f = load_safetensors(path);
  layers::StateDict msd;
  OptimizerState osd;
  for (const auto& [k, t] : f.tensors) {
    if (k.rfind("model.", 0) == 0)
      msd.emplace_back(k.substr(6), t);
    else if (k.rfind("optim.", 0) == 0)
      osd.emplace_back(k.substr(6), t);
    else
      AIM_FAIL("checkpoint ", path, ": tensor '", k, "' has neither a model. nor an optim. prefix");
  }
  try {
    model.load_state_dict(msd, true);
    opt.load_state_dict(osd);
  } catch (const Error& e) {
    AIM_FAIL("checkpoint ", path, ": ", e.what());
  }
  CheckpointInfo info;
  info.metadata = f.metadata;
  info.step = parse_i64(f.metadata, "step", path);
  info.data_position = parse_i64(f.metadata, "data_position", path);
  return info;
}

namespace {

// Testing the loss scaler: an Inf in the first gradient, as an fp16 overflow would leave it.
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

// The first parameter (data, then gradient) holding a NaN or Inf, for the NaN/Inf stop message.
std::string first_non_finite(const layers::Module& m) {
  auto bad = [](const Tensor& t) {
    if (!t.defined() || !is_floating(t.dtype())) return false;
    for (float v : t.to(kCPU).to(DType::f32).contiguous().template to_vector<float>())
      if (!std::isfinite(v)) return true;
    return false;
  };
  for (const auto& [name, p] : m.named_parameters()) {
    if (bad(p.data())) return "parameter " + name;
    if (bad(p.grad())) return "gradient of " + name;
  }
  return "";
}

std::string metrics_str(const models::Metrics& m) {
  std::string s;
  char buf[64];
  for (const auto& [k, v] : m) {
    std::snprintf(buf, sizeof buf, "  %s %.4f", k.c_str(), v);
    s += buf;
  }
  return s;
}

// One terminal line redrawn in place (progress bar) or plain lines every log_every steps.
class ProgressLog {
 public:
  ProgressLog(std::ostream& os, bool bar, int64_t total) : os_(os), bar_(bar), total_(total) {}
  void update(int64_t step, double loss, double samples_per_s, const std::string& extra,
              double eta_s) {
    char buf[160];
    if (bar_) {
      constexpr int kWidth = 30;
      const int done = int(double(kWidth) * double(step) / double(std::max<int64_t>(1, total_)));
      std::string b(size_t(done), '#');
      b.resize(kWidth, '.');
      std::snprintf(buf, sizeof buf, "\r[%s] %lld/%lld  loss %.4f  %.0f samples/s  eta %.0fs",
                    b.c_str(), static_cast<long long>(step), static_cast<long long>(total_), loss,
                    samples_per_s, eta_s);
      os_ << buf << extra << "\x1b[K" << std::flush;
      return;
    }
    std::snprintf(buf, sizeof buf, "step %lld/%lld  loss %.5f  samples/s %.1f",
                  static_cast<long long>(step), static_cast<long long>(total_), loss,
                  samples_per_s);
    os_ << buf << extra << "\n" << std::flush;
  }
  void finish() {
    if (bar_) os_ << "\n";
  }

 private:
  std::ostream& os_;
  bool bar_;
  int64_t total_;
};

struct Fetched {
  TensorMap batch;
  int64_t position = 0;  // stream position after this batch
};

}  // namespace

TrainResult train_model(const models::ModelEntry& entry, const models::ModelConfig& cfg,
                        const TrainOptions& opt, std::ostream& log) {
  const auto t_call = Clock::now();
  AIM_CHECK(opt.batch_size > 0, "train: batch size must be > 0, got ", opt.batch_size);
  AIM_CHECK(opt.epochs > 0 || opt.steps > 0, "train: steps must be > 0, got ", opt.steps);
  AIM_CHECK(!opt.resume || !opt.checkpoint_dir.empty(), "train: resume needs a checkpoint dir");
  AIM_CHECK(opt.eval_every >= 0 && opt.eval_samples > 0 && opt.checkpoint_every >= 0 &&
                opt.prefetch >= 0 && opt.clip_norm >= 0,
            "train: eval_every, checkpoint_every, prefetch, clip_norm must be >= 0 and "
            "eval_samples > 0");
  const Device dev = parse_device(opt.device);

  std::unique_ptr<models::Model> model = entry.build(cfg, opt.seed);
  if (!opt.weights.empty()) {
    const SafetensorsFile f = load_safetensors(opt.weights);
    try {
      model->load_state_dict(f.tensors, true);
    } catch (const Error& e) {
      AIM_FAIL("--weights ", opt.weights, ": ", e.what());
    }
  }
  model->to(dev);
  model->train();
  OptimizerOptions oo = opt.optim;
  if (oo.lr_batch > 0) oo.lr *= double(opt.batch_size) / oo.lr_batch;
  auto optim = make_optimizer(oo, model->named_parameters());
  std::unique_ptr<data::BatchSource> source = entry.source(cfg, opt.data, opt.seed);
  const int64_t n_eval = std::min(opt.eval_samples, source->eval_size());
  AIM_CHECK(n_eval > 0, "train: the data has no evaluation samples");

  TrainResult r;
  r.data_description = source->describe();
  r.total_steps = opt.steps;
  if (opt.epochs > 0) {
    const int64_t per_epoch = source->epoch_size() / opt.batch_size;
    AIM_CHECK(per_epoch > 0, "train: an epoch of ", source->epoch_size(),
              " samples holds no batch of ", opt.batch_size);
    r.total_steps = std::max<int64_t>(1, std::llround(opt.epochs * double(per_epoch)));
  }
  log << "data: " << r.data_description << "; " << r.total_steps << " steps of " << opt.batch_size
      << " (epoch = " << source->epoch_size() << " samples)\n";
  const LRSchedule sched =
      make_schedule(opt.schedule, oo.lr, opt.warmup_steps, r.total_steps, opt.poly_power);

  // Mixed precision: the model's f32 parameters and their low-precision copies (one cast per step).
  const bool amp_on = opt.precision != DType::f32;
  std::vector<std::string> fp32_patterns;
  for (const models::Model::Fp32Params& f : model->amp_fp32_params())
    fp32_patterns.push_back(f.pattern);
  autograd::amp::ParamCache amp_cache;
  if (amp_on) amp_cache = autograd::amp::ParamCache(model->named_parameters(), fp32_patterns);
  std::optional<LossScaler> scaler;
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
  auto evaluate = [&]() {
    std::optional<autograd::amp::Autocast> ac;
    if (amp_on) ac.emplace(opt.precision, &amp_cache);
    amp_cache.clear();
    models::Metrics m = entry.evaluate(*model, *source, n_eval, dev);
    amp_cache.clear();
    return m;
  };

  std::map<std::string, std::string> meta = {
      {"precision", autograd::amp::precision_name(opt.precision)},
      {"model", entry.name},
      {"config", models::ModelEntry::config_string(cfg)},
      {"optimizer", opt.optim.name},
      {"data", source->fingerprint()},
      {"batch_size", std::to_string(opt.batch_size)}};

  int64_t step = 0;  // steps completed
  if (opt.resume) {
    const CheckpointInfo ci = load_checkpoint(opt.checkpoint_dir, *model, *optim);
    const std::string path = checkpoint_path(opt.checkpoint_dir);
    if (scaler) scaler->load_state(ci.metadata, path);
    for (const auto& [k, v] : meta) {
      if (k.compare(0, 4, "amp_") == 0) continue;
      auto it = ci.metadata.find(k);
      AIM_CHECK(it != ci.metadata.end() && it->second == v, "checkpoint ", path, ": ", k, " '",
                it == ci.metadata.end() ? std::string("(missing)") : it->second,
                "' differs from this run's '", v, "'");
    }
    step = ci.step;
    source->seek(ci.data_position);
    log << "resumed from " << path << " at step " << step << " (data position " << ci.data_position
        << ")\n";
  }
  r.first_step = step;

  // The loader thread produces batches in stream order; each carries the position after it so a
  // checkpoint records where the *consumed* stream stands, not the prefetched one.
  data::BatchSource* src = source.get();
  const int64_t to_produce = std::max<int64_t>(0, r.total_steps - step);
  int64_t produced = 0;
  auto produce = [src, &produced, to_produce, b = opt.batch_size]() -> std::optional<Fetched> {
    if (produced == to_produce) return std::nullopt;
    ++produced;
    Fetched f;
    f.batch = src->next(b);
    f.position = src->position();
    return f;
  };
  std::unique_ptr<data::Prefetcher<Fetched>> prefetcher;
  if (opt.prefetch > 0)
    prefetcher = std::make_unique<data::Prefetcher<Fetched>>(produce, opt.prefetch);
  auto fetch = [&]() { return prefetcher ? prefetcher->next() : produce(); };

  const int64_t log_every =
      opt.log_every > 0
          ? opt.log_every
          : (opt.eval_every > 0 ? opt.eval_every : std::max<int64_t>(1, r.total_steps / 10));
  ProgressLog progress(log, opt.progress_bar, r.total_steps);
  std::vector<double> step_ms;
  double device_s = 0, loop_s = 0, flops = 0, interval_loss = 0, interval_s = 0;
  int64_t interval_n = 0, data_position = source->position();
  std::string last_metrics;

  // Profiled steps: [prof_a, prof_b] (1-based); the first step is skipped by default (warm-up:
  // allocations, first touches).
  const bool profiling = opt.profile || !opt.trace.empty() || !opt.roofline.empty();
  const int64_t prof_a =
      opt.profile_from > 0 ? opt.profile_from : std::min<int64_t>(2, r.total_steps);
  const int64_t prof_b =
      opt.profile_to > 0 ? std::min(opt.profile_to, r.total_steps) : r.total_steps;
  AIM_CHECK(!profiling || (prof_a >= 1 && prof_a <= prof_b), "profile steps ", prof_a, ":", prof_b,
            " are not within 1..", r.total_steps);
  int64_t profiled_steps = 0;

  while (step < r.total_steps) {
    const bool profile_step = profiling && step + 1 >= prof_a && step + 1 <= prof_b;
    if (profile_step && !profiler::enabled()) {
      profiler::set_record_args(!opt.trace.empty());
      profiler::start();
    }
    std::optional<profiler::Scope> step_scope;
    if (profile_step || profiler::nvtx_enabled())
      step_scope.emplace("step/" + std::to_string(step + 1), profiler::ScopeKind::Step);
    if (profile_step) ++profiled_steps;
    const auto t_fetch = Clock::now();
    std::optional<Fetched> f = fetch();
    AIM_CHECK(f.has_value(), "train: the loader ended early at step ", step);
    const auto t0 = Clock::now();
    const TensorMap batch = to_device(f->batch, dev);
    optim->set_lr(sched.lr(step));
    std::optional<profiler::Scope> phase(std::in_place, "fwd", profiler::ScopeKind::Phase);
    autograd::Variable loss;
    {
      std::optional<autograd::amp::Autocast> ac;
      if (amp_on) ac.emplace(opt.precision, &amp_cache);
      loss = model->training_loss(batch);
    }
    phase.emplace("bwd", profiler::ScopeKind::Phase);
    if (scaler)
      autograd::mul(loss, scaler->scale()).backward();
    else
      loss.backward();
    amp_cache.clear();
    bool overflow = false;
    if (std::find(opt.inject_overflow_at.begin(), opt.inject_overflow_at.end(), step + 1) !=
        opt.inject_overflow_at.end())
      inject_inf(optim->parameters());
    if (scaler) {
      phase.emplace("opt", profiler::ScopeKind::Phase);
      overflow = scaler->unscale(optim->parameters());
    }
    if (opt.clip_norm > 0 && !overflow) clip_grad_norm(optim->parameters(), opt.clip_norm);
    phase.emplace("opt", profiler::ScopeKind::Phase);
    if (!overflow) optim->step();
    if (scaler) {
      scaler->update(overflow);
      if (overflow)
        log << "step " << step + 1 << ": gradient overflow (Inf/NaN), step skipped; loss scale -> "
            << scaler->scale() << "\n";
    }
    const double l = double(loss.data().to(DType::f32).to_vector<float>()[0]);  // syncs the device
    phase.reset();
    const double dt = seconds_since(t0);
    loop_s += seconds_since(t_fetch);
    ++step;
    if (!std::isfinite(l) && !overflow) {  // fp16: an overflowed loss is a skipped step
      const std::string where = first_non_finite(*model);
      AIM_FAIL("train: loss is ", l, " at step ", step, " (", entry.name, ", lr ", optim->lr(),
               ", optimizer ", opt.optim.name, ")",
               where.empty() ? std::string("; every parameter and gradient is finite")
                             : "; first non-finite tensor: " + where,
               "; stopping");
    }
    {
      profiler::Scope zero("opt", profiler::ScopeKind::Phase);
      optim->zero_grad();
    }
    step_scope.reset();
    if (profile_step && step == prof_b) profiler::stop();
    data_position = f->position;
    flops += model->train_flops(batch);
    r.losses.push_back(l);
    step_ms.push_back(dt * 1e3);
    device_s += dt;
    interval_s += dt;
    interval_loss += l;
    ++interval_n;

    if ((opt.eval_every > 0 && step % opt.eval_every == 0) || step == r.total_steps) {
      profiler::Scope eval_scope("eval", profiler::ScopeKind::Phase);
      const models::Metrics m = evaluate();
      r.evals.emplace_back(step, m);
      last_metrics = metrics_str(m);
    }
    if (step % log_every == 0 || step == r.total_steps || opt.progress_bar) {
      const double eta = device_s / double(step - r.first_step) * double(r.total_steps - step);
      std::string extra = last_metrics;
      if (scaler) {
        char sb[96];
        std::snprintf(sb, sizeof sb, "  loss_scale %g  skipped %lld", scaler->scale(),
                      static_cast<long long>(scaler->skipped_steps()));
        extra += sb;
      }
      progress.update(step, interval_loss / double(interval_n),
                      double(interval_n * opt.batch_size) / std::max(interval_s, 1e-12), extra,
                      eta);
      if (step % log_every == 0 || step == r.total_steps) {
        interval_loss = interval_s = 0;
        interval_n = 0;
      }
    }
    if (!opt.checkpoint_dir.empty() && opt.checkpoint_every > 0 &&
        step % opt.checkpoint_every == 0 && step < r.total_steps) {
      if (scaler)
        for (const auto& [k, v] : scaler->state()) meta[k] = v;
      save_checkpoint(opt.checkpoint_dir, step, *model, *optim, data_position, meta);
    }
  }
  progress.finish();
  if (profiler::enabled()) profiler::stop();
  if (profiling && profiled_steps > 0) {
    const profiler::Ceilings ceil = !opt.ceilings.empty() ? profiler::load_ceilings(opt.ceilings)
                                    : dev.is_cpu()        ? profiler::default_cpu_ceilings()
                                                          : profiler::Ceilings{};
    if (opt.profile) profiler::print_tables(log, profiler::events(), int(profiled_steps), ceil);
    if (!opt.roofline.empty()) {
      profiler::write_roofline_svg(opt.roofline, profiler::events(),
                                   !opt.ceilings.empty() ? profiler::ceiling_roofs(ceil)
                                                         : profiler::default_roofs(dev.str()),
                                   entry.name + " training step, batch " +
                                       std::to_string(opt.batch_size) + ", " + dev.str() +
                                       " (steps " + std::to_string(prof_a) + ".." +
                                       std::to_string(prof_b) + ")");
      log << "wrote roofline to " << opt.roofline << "\n";
    }
    if (!opt.trace.empty()) {
      profiler::write_trace(opt.trace, profiler::events());
      log << "wrote trace of steps " << prof_a << ".." << prof_b << " to " << opt.trace << "\n";
    }
  }
  if (prefetcher) r.data_wait_s = prefetcher->wait_seconds();
  prefetcher.reset();

  if (r.evals.empty()) r.evals.emplace_back(step, evaluate());
  if (scaler) {
    r.loss_scale = scaler->scale();
    r.skipped_steps = scaler->skipped_steps();
    for (const auto& [k, v] : scaler->state()) meta[k] = v;
  }
  r.final_metrics = r.evals.back().second;
  if (r.final_metrics.count("auc")) r.final_auc = r.final_metrics.at("auc");
  if (!opt.checkpoint_dir.empty() && step > r.first_step)
    save_checkpoint(opt.checkpoint_dir, step, *model, *optim, data_position, meta);
  if (!opt.save_weights.empty()) {
    model->to(kCPU);
    save_safetensors(opt.save_weights, model->state_dict(),
                     {{"model", entry.name}, {"config", meta.at("config")}});
  }

  r.steps_run = int64_t(r.losses.size());
  const double samples = double(r.steps_run * opt.batch_size);
  r.samples_per_s = loop_s > 0 ? samples / loop_s : 0;
  r.device_samples_per_s = device_s > 0 ? samples / device_s : 0;
  r.train_flops_per_step = r.steps_run > 0 ? flops / double(r.steps_run) : 0;
  r.step_p50_ms = profiler::percentile(step_ms, 50);
  r.step_p90_ms = profiler::percentile(step_ms, 90);
  r.step_p99_ms = profiler::percentile(step_ms, 99);
  r.wall_s = seconds_since(t_call);
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "done: %lld steps, %.1f samples/s (device %.1f), step p50 %.2f ms p90 %.2f ms "
                "p99 %.2f ms, %.1f GFLOP/s, data wait %.2f s, %.1f s\n",
                static_cast<long long>(step), r.samples_per_s, r.device_samples_per_s,
                r.step_p50_ms, r.step_p90_ms, r.step_p99_ms,
                r.step_p50_ms > 0 ? r.train_flops_per_step / (r.step_p50_ms * 1e6) : 0.0,
                r.data_wait_s, r.wall_s);
  log << "final" << metrics_str(r.final_metrics) << " (" << n_eval << " evaluation samples)\n";
  if (scaler)
    log << "loss scale " << r.loss_scale << " at the end, " << r.skipped_steps
        << " steps skipped on overflow\n";
  log << buf << std::flush;
  return r;
}

}  // namespace aim::train
