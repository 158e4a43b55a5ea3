#include "train/reporter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernels/error_flag.h"
#include "profiler/profiler.h"
#include "profiler/report.h"
#include "profiler/run_info.h"
#include "tensor/allocator.h"
#include "tensor/check.h"
#include "tensor/safetensors.h"
#include "train/checkpoint.h"

namespace aim::train {
namespace {

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

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::string metrics_str(const models::Metrics& m) {
  std::string s;
  char buf[64];
  for (const auto& [k, v] : m) {
    std::snprintf(buf, sizeof buf, "  %s %.4f", k.c_str(), v);
    s += buf;
  }
  return s;
}

Reporter::Reporter(RankState& s, std::ostream& log, TrainResult& r, int64_t start_position)
    : s_(s),
      log_(log),
      r_(r),
      log_every_(s.opt.log_every > 0    ? s.opt.log_every
                 : s.opt.eval_every > 0 ? s.opt.eval_every
                                        : std::max<int64_t>(1, s.total_steps / 10)),
      // The losses, the fp16 overflow flag and the device error record, read in one copy: once
      // per log interval on a GPU, every step with fp16 or on the CPU.
      defer_loss_(s.dev.is_cuda() && !s.opt.progress_bar && !s.scaler),
      readback_(s.dev, defer_loss_ ? log_every_ : 1),
      progress_(log, s.opt.progress_bar, s.total_steps),
      data_position_(start_position) {}

double Reporter::read_back(int64_t step) {
  if (readback_.empty()) return 0.0;
  const StepReadBack::Values v = readback_.read();  // syncs
  const bool overflowed = v.flag > 0;
  for (const auto& [at, l] : v.losses) {
    if (!std::isfinite(l) && !overflowed) {  // fp16: an overflowed loss is a skipped step
      const std::string where = first_non_finite(*s_.model);
      AIM_FAIL("train: loss is ", l, " at step ", at, " (", s_.entry.name, ", lr ", s_.optim->lr(),
               ", optimizer ", s_.opt.optim.name, ")",
               at == step + 1 ? std::string()
                              : str(" (read at step ", step + 1,
                                    ": losses are read once per log interval on a GPU)"),
               where.empty() ? std::string("; every parameter and gradient is finite")
                             : "; first non-finite tensor: " + where,
               "; stopping");
    }
    r_.losses.push_back(l);
    interval_loss_ += l;
  }
  return v.flag;
}

bool Reporter::read_overflow(const Tensor& flag, int64_t step) {
  readback_.file_flag(flag);
  return read_back(step) > 0;
}

void Reporter::read_losses_if_due(int64_t step) {
  const bool log_point = (step + 1) % log_every_ == 0 || step + 1 == s_.total_steps;
  if (!defer_loss_ || log_point) read_back(step);  // syncs
}

namespace {
Allocator& step_allocator(Device d) {
  return d.is_cuda() ? cuda_allocator(d.index) : cpu_allocator();
}
}  // namespace

void Reporter::begin_step() {
  step_allocator(s_.dev).reset_peak();
  const DeviceSyncCounters c = device_sync_counters(s_.dev);
  syncs0_ = c.host_syncs;
  d2h0_ = c.d2h_bytes;
}

void Reporter::end_step(int64_t step, double step_s, double loop_s, double flops) {
  loop_s_ += loop_s;
  peak_step_bytes_ = std::max(peak_step_bytes_, step_allocator(s_.dev).stats().peak_bytes);
  if (step > s_.first_step + 1 || s_.total_steps - s_.first_step == 1) {
    const DeviceSyncCounters c = device_sync_counters(s_.dev);
    syncs_in_steps_ += c.host_syncs - syncs0_;
    d2h_in_steps_ += c.d2h_bytes - d2h0_;
    ++counted_steps_;
  }
  flops_ += flops;
  step_ms_.push_back(step_s * 1e3);
  device_s_ += step_s;
  interval_s_ += step_s;
  ++interval_n_;
}

void Reporter::between_steps(int64_t step, int64_t data_position) {
  const TrainOptions& opt = s_.opt;
  data_position_ = data_position;
  if (step == s_.total_steps) save_trained_state(step);
  if (s_.lead && ((opt.eval_every > 0 && step % opt.eval_every == 0) || step == s_.total_steps)) {
    profiler::Scope eval_scope("eval", profiler::ScopeKind::Phase);
    const models::Metrics m = s_.evaluate();
    r_.evals.emplace_back(step, m);
    last_metrics_ = metrics_str(m);
  }
  if (step % log_every_ == 0 || step == s_.total_steps || opt.progress_bar) {
    const double eta = device_s_ / double(step - s_.first_step) * double(s_.total_steps - step);
    std::string extra = last_metrics_;
    if (s_.scaler) {
      char sb[96];
      std::snprintf(sb, sizeof sb, "  loss_scale %g  skipped %lld", s_.scaler->scale(),
                    static_cast<long long>(s_.scaler->skipped_steps()));
      extra += sb;
    }
    progress_.update(step, interval_loss_ / double(interval_n_),
                     double(interval_n_ * s_.global_batch) / std::max(interval_s_, 1e-12), extra,
                     eta);
    if (step % log_every_ == 0 || step == s_.total_steps) {
      interval_loss_ = interval_s_ = 0;
      interval_n_ = 0;
    }
  }
  if (!opt.checkpoint_dir.empty() && opt.checkpoint_every > 0 && step % opt.checkpoint_every == 0 &&
      step < s_.total_steps) {
    if (s_.scaler)
      for (const auto& [k, v] : s_.scaler->state()) s_.meta[k] = v;
    if (s_.lead)
      save_checkpoint(opt.checkpoint_dir, step, *s_.model, *s_.optim, data_position_, s_.meta);
    if (s_.comm) s_.comm->barrier();  // the checkpoint is complete when any rank goes on
  }
}

void Reporter::save_trained_state(int64_t step) {
  if (saved_at_ == step) return;
  saved_at_ = step;
  const TrainOptions& opt = s_.opt;
  if (s_.scaler)
    for (const auto& [k, v] : s_.scaler->state()) s_.meta[k] = v;
  if (s_.lead && !opt.checkpoint_dir.empty() && step > r_.first_step)
    save_checkpoint(opt.checkpoint_dir, step, *s_.model, *s_.optim, data_position_, s_.meta);
  if (s_.lead && !opt.save_weights.empty())  // device tensors are copied to the host
    save_safetensors(opt.save_weights, s_.model->state_dict(),
                     {{"model", s_.entry.name}, {"config", s_.meta.at("config")}});
}

void Reporter::finish(int64_t step, double data_wait_s, const DataParallel& dp,
                      const DistTimes& dist, std::chrono::steady_clock::time_point t_call) {
  const TrainOptions& opt = s_.opt;
  TrainResult& r = r_;
  if (counted_steps_ > 0) {
    r.host_syncs_per_step = double(syncs_in_steps_) / double(counted_steps_);
    r.d2h_bytes_per_step = double(d2h_in_steps_) / double(counted_steps_);
  }
  r.data_wait_s = data_wait_s;
  save_trained_state(step);
  if (s_.lead && r.evals.empty()) r.evals.emplace_back(step, s_.evaluate());
  // A bad index or target flagged by a kernel after the last read (the final evaluation's).
  if (s_.dev.is_cuda()) kernels::check_device_errors(s_.dev);
  if (s_.scaler) {
    r.loss_scale = s_.scaler->scale();
    r.skipped_steps = s_.scaler->skipped_steps();
  }
  if (!r.evals.empty()) r.final_metrics = r.evals.back().second;
  if (r.final_metrics.count("auc")) r.final_auc = r.final_metrics.at("auc");

  r.steps_run = int64_t(r.losses.size());
  const double samples = double(r.steps_run * opt.batch_size);
  r.samples_per_s = loop_s_ > 0 ? samples / loop_s_ : 0;
  r.device_samples_per_s = device_s_ > 0 ? samples / device_s_ : 0;
  r.train_flops_per_step = r.steps_run > 0 ? flops_ / double(r.steps_run) : 0;
  r.step_p50_ms = profiler::percentile(step_ms_, 50);
  r.step_p90_ms = profiler::percentile(step_ms_, 90);
  r.step_p99_ms = profiler::percentile(step_ms_, 99);
  r.peak_step_bytes = peak_step_bytes_;
  r.max_rss_bytes = profiler::max_rss_bytes();
  std::string dist_line;
  if (s_.comm) {
    dist_line = summarise_data_parallel(*s_.comm, *dp.reducer, dp.sparse_tables, dist,
                                        r.samples_per_s, r.dist);
    // Rank 0's checkpoint and weights are written when any rank returns.
    s_.comm->barrier();
  }
  r.wall_s = seconds_since(t_call);
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "done: %lld steps, %.1f samples/s (device %.1f), step p50 %.2f ms p90 %.2f ms "
                "p99 %.2f ms, %.1f GFLOP/s, data wait %.2f s, %.1f s\n",
                static_cast<long long>(step), r.samples_per_s, r.device_samples_per_s,
                r.step_p50_ms, r.step_p90_ms, r.step_p99_ms,
                r.step_p50_ms > 0 ? r.train_flops_per_step / (r.step_p50_ms * 1e6) : 0.0,
                r.data_wait_s, r.wall_s);
  log_ << "final" << metrics_str(r.final_metrics) << " (" << s_.n_eval << " evaluation samples"
       << (s_.comm ? ", rank 0" : "") << ")\n";
  if (s_.scaler)
    log_ << "loss scale " << r.loss_scale << " at the end, " << r.skipped_steps
         << " steps skipped on overflow\n";
  log_ << dist_line << (s_.comm ? "rank 0 " : "") << buf << std::flush;
}

ProfileWindow::ProfileWindow(const RankState& s, const TrainOptions& opt)
    : s_(s),
      opt_(opt),
      on_(opt.profile || !opt.trace.empty() || !opt.roofline.empty()),
      from_(opt.profile_from > 0 ? opt.profile_from : std::min<int64_t>(2, s.total_steps)),
      to_(opt.profile_to > 0 ? std::min(opt.profile_to, s.total_steps) : s.total_steps) {
  AIM_CHECK(!on_ || (from_ >= 1 && from_ <= to_), "profile steps ", from_, ":", to_,
            " are not within 1..", s.total_steps);
}

bool ProfileWindow::begin_step(int64_t step) {
  this_step_ = on_ && step >= from_ && step <= to_;
  if (s_.comm && on_ && step == from_) {
    // The profiler is process-wide: rank 0 starts it, and no rank enters the first profiled
    // step before it is on.
    if (s_.lead) {
      profiler::set_record_args(!opt_.trace.empty());
      profiler::start();
    }
    s_.comm->barrier();
  } else if (!s_.comm && this_step_ && !profiler::enabled()) {
    profiler::set_record_args(!opt_.trace.empty());
    profiler::start();
  }
  if (this_step_) ++profiled_;
  return this_step_;
}

void ProfileWindow::end_step(int64_t step) {
  if (!this_step_ || step != to_) return;
  if (s_.comm) s_.comm->barrier();  // every rank's step closed before the profiler stops
  if (s_.lead) profiler::stop();
  if (s_.comm) s_.comm->barrier();  // and no rank opens a scope of the next step before
}

void ProfileWindow::finish(std::ostream& log) {
  if (s_.lead && profiler::enabled()) profiler::stop();
  if (!s_.lead || !on_ || profiled_ == 0) return;
  // Under ranks the events hold every rank's steps: the tables are per rank-step.
  profiler::write_report(log, {opt_.profile, opt_.roofline, opt_.trace, opt_.ceilings}, s_.dev,
                         int(profiled_) * s_.ranks,
                         str(s_.entry.name, " training step, batch ", opt_.batch_size, ", ",
                             s_.dev.str(), " (steps ", from_, "..", to_, ")"),
                         str(" of steps ", from_, "..", to_));
}

}  // namespace aim::train
