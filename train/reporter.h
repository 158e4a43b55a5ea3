// Everything a training rank does between its steps, so that the loop (train/trainer.cpp) reads
// as data -> train_step -> report:
// - Reporter: the losses read back from the device (train/readback.h: once per log interval on a
//   GPU, every step with fp16 or on the CPU; a non-finite loss stops the run naming its step and
//   the first non-finite tensor), the step times and host synchronisations, the progress lines,
//   the evaluations (rank 0), the checkpoints, and the closing figures and lines of the run.
// - ProfileWindow: which steps --profile/--trace/--roofline record, the process-wide profiler
//   started and stopped in step with the other ranks, and the report written at the end
//   (profiler/report.h, shared with aim-infer).
#pragma once
#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "train/rank_setup.h"
#include "train/readback.h"
#include "train/trainer.h"

namespace aim::train {

// "  auc 0.7123  loss 0.5012" (the metrics in name order).
std::string metrics_str(const models::Metrics& m);

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

class Reporter {
 public:
  // `r` receives the run's figures; `start_position`: the stream position before the first step.
  Reporter(RankState& s, std::ostream& log, TrainResult& r, int64_t start_position);

  // Losses and the fp16 flag filed by the step, read in one host copy (train/readback.h).
  void file_loss(const Tensor& loss, int64_t step) { readback_.file_loss(loss, step); }
  // fp16: files the step's overflow flag and reads everything filed (the step's one host read);
  // true when a gradient overflowed on some rank. `step`: 0-based, the step running.
  bool read_overflow(const Tensor& flag, int64_t step);
  // After a step that did not read: reads the losses now unless they are deferred to the next
  // log point (on a GPU). `step`: 0-based, the step that ran.
  void read_losses_if_due(int64_t step);
  // After the loop: reads whatever is filed, ends the progress line.
  void end_loop(int64_t step) {
    read_back(step);
    progress_.finish();
  }

  void begin_step();  // the host synchronisation counters before the step
  // `step` steps are done (1-based); `step_s`: the step's time (data excluded), `loop_s` with
  // the data wait; `flops`: the model's analytic training FLOPs of the batch.
  void end_step(int64_t step, double step_s, double loop_s, double flops);
  // Between steps: evaluation (rank 0, every --eval-every and at the end), the progress line, the
  // checkpoint of --checkpoint-every. `data_position`: the stream position after step `step`.
  void between_steps(int64_t step, int64_t data_position);

  // The run's closing figures into `r`, the final evaluation, checkpoint and weights, and the
  // closing lines (rank 0). `data_wait_s`: the time the loop waited for the loader.
  void finish(int64_t step, double data_wait_s, const DataParallel& dp, const DistTimes& dist,
              std::chrono::steady_clock::time_point t_call);

 private:
  double read_back(int64_t step);  // returns the flag (0 without one)
  // The final checkpoint and --save-weights, once, before the final evaluation: an evaluation
  // that fails never costs the trained state.
  void save_trained_state(int64_t step);
  int64_t saved_at_ = -1;

  RankState& s_;
  std::ostream& log_;
  TrainResult& r_;
  int64_t log_every_;
  bool defer_loss_;
  StepReadBack readback_;
  ProgressLog progress_;
  std::vector<double> step_ms_;
  double device_s_ = 0, loop_s_ = 0, flops_ = 0, interval_loss_ = 0, interval_s_ = 0;
  int64_t interval_n_ = 0, data_position_;
  std::string last_metrics_;
  // Host synchronisations and device-to-host bytes inside the steps (evaluations and
  // checkpoints between steps excluded), over the steps after the first (it sets up).
  int64_t syncs_in_steps_ = 0, d2h_in_steps_ = 0, counted_steps_ = 0;
  int64_t syncs0_ = 0, d2h0_ = 0;
  int64_t peak_step_bytes_ = 0;  // the device allocator's high-water mark inside any step
};

// Profiled steps: [from, to] (1-based); the first step is skipped by default (warm-up:
// allocations, first touches).
class ProfileWindow {
 public:
  ProfileWindow(const RankState& s, const TrainOptions& opt);
  bool on() const { return on_; }
  // Before step `step` (1-based): starts the profiler at the window's first step (under ranks,
  // rank 0 starts it and no rank enters the step before); true when this step is profiled.
  bool begin_step(int64_t step);
  // After step `step`: stops the profiler after the window's last step, every rank's step closed.
  void end_step(int64_t step);
  // After the loop (every rank past its steps): the tables, trace and roofline (rank 0).
  void finish(std::ostream& log);

 private:
  const RankState& s_;
  const TrainOptions& opt_;
  bool on_;
  int64_t from_, to_, profiled_ = 0;
  bool this_step_ = false;
};

}  // namespace aim::train
