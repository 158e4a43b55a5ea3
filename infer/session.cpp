#include "infer/session.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <vector>

#include "autograd/variable.h"
#include "profiler/profiler.h"
#include "profiler/roofline.h"
#include "profiler/run_info.h"
#include "tensor/check.h"
#include "tensor/safetensors.h"

namespace aim::infer {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Keeps only the model's inputs (a source's batch also has labels and user ids).
TensorMap inputs_only(const models::Model& m, const TensorMap& batch) {
  TensorMap r;
  for (const models::TensorSpec& s : m.input_specs()) {
    auto it = batch.find(s.name);
    if (it != batch.end()) r.emplace(s.name, it->second);
  }
  return r;
}

void load_weights(models::Model& m, const std::string& path) {
  const SafetensorsFile f = load_safetensors(path);
  try {
    m.load_state_dict(f.tensors, true);
  } catch (const Error& e) {
    AIM_FAIL("--weights ", path, ": ", e.what());
  }
}

}  // namespace

void print_io(const models::ModelEntry& entry, const models::ModelConfig& cfg, std::ostream& os) {
  const std::unique_ptr<models::Model> m = entry.build(cfg, 0);
  auto section = [&os](const char* title, const std::vector<models::TensorSpec>& specs) {
    os << title << ":\n";
    for (const models::TensorSpec& s : specs) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "  %-12s %-5s %-14s ", s.name.c_str(), dtype_name(s.dtype),
                    s.shape_str().c_str());
      os << buf << s.doc << "\n";
    }
  };
  os << entry.name << " (" << models::ModelEntry::config_string(cfg) << ")\n";
  section("inputs (--inputs FILE.safetensors)", m->input_specs());
  section("outputs (--dump-outputs FILE.safetensors)", m->output_specs());
  section("labels (training only)", m->label_specs());
}

InferResult run_inference(const models::ModelEntry& entry, const models::ModelConfig& cfg,
                          const InferOptions& opt, std::ostream& log) {
  AIM_CHECK(opt.iters > 0 && opt.warmup >= 0 && opt.batch_size > 0,
            "infer: iters and batch size must be > 0 and warmup >= 0");
  const Device dev = parse_device(opt.device);
  std::unique_ptr<models::Model> model = entry.build(cfg, opt.seed);
  if (!opt.weights.empty()) load_weights(*model, opt.weights);
  model->to(dev);
  model->eval();
  autograd::NoGradGuard no_grad;

  // The batches to run, prepared before timing: the given inputs, or a few distinct batches of
  // the model's data (its evaluation set when large enough, else its stream), cycled.
  InferResult r;
  std::vector<TensorMap> batches;
  if (!opt.inputs.empty()) {
    // Names as --list-inputs prints them; "input.<name>" (what --dump-outputs writes) also works,
    // so a dump can be fed back.
    TensorMap in;
    for (const auto& [k, t] : load_safetensors(opt.inputs).tensors)
      in[k.rfind("input.", 0) == 0 ? k.substr(6) : k] = t;
    models::Model::check_batch(model->input_specs(), in, "--inputs " + opt.inputs);
    batches.push_back(inputs_only(*model, in));
    r.data_description = "inputs from " + opt.inputs;
  } else {
    std::unique_ptr<data::BatchSource> src = entry.source(cfg, opt.data, opt.seed);
    r.data_description = src->describe();
    const int64_t n = std::min<int64_t>(opt.iters + opt.warmup, 8);
    for (int64_t i = 0; i < n; ++i) {
      const bool from_eval = (i + 1) * opt.batch_size <= src->eval_size();
      batches.push_back(
          inputs_only(*model, from_eval ? src->eval_batch(i * opt.batch_size, opt.batch_size)
                                        : src->next(opt.batch_size)));
    }
  }
  r.batch = batches.front().begin()->second.size(0);

  if (!opt.dump_outputs.empty()) {  // one untimed run on the first batch
    const TensorMap out = model->infer(to_device(batches.front(), dev));
    std::vector<std::pair<std::string, Tensor>> dump;
    for (const auto& [k, t] : out) dump.emplace_back(k, t.to(kCPU));
    if (opt.inputs.empty())  // so a peer can rerun exactly this batch
      for (const auto& [k, t] : batches.front()) dump.emplace_back("input." + k, t);
    save_safetensors(opt.dump_outputs, dump,
                     {{"model", entry.name}, {"config", models::ModelEntry::config_string(cfg)}});
    log << "wrote outputs to " << opt.dump_outputs << "\n";
  }

  std::vector<double> latency, device_ms;
  double flops = 0;
  const auto t_all = Clock::now();
  auto t_timed = t_all;
  const bool profiling = opt.profile || !opt.trace.empty() || !opt.roofline.empty();
  for (int64_t i = 0; i < opt.warmup + opt.iters; ++i) {
    if (i == opt.warmup) t_timed = Clock::now();
    if (i == opt.warmup && profiling) {
      profiler::set_record_args(!opt.trace.empty());
      profiler::start();
    }
    std::optional<profiler::Scope> step_scope;
    if (i >= opt.warmup && (profiling || profiler::nvtx_enabled()))
      step_scope.emplace("step/" + std::to_string(i - opt.warmup + 1), profiler::ScopeKind::Step);
    const TensorMap& host = batches[size_t(i) % batches.size()];
    const auto t0 = Clock::now();
    const TensorMap in = to_device(host, dev);
    synchronize(dev);
    const auto t1 = Clock::now();
    std::optional<profiler::Scope> phase(std::in_place, "fwd", profiler::ScopeKind::Phase);
    const TensorMap out = model->infer(in);
    phase.reset();
    synchronize(dev);
    const double dev_ms = ms_since(t1);
    const TensorMap out_host = to_device(out, kCPU);
    const double lat = ms_since(t0);
    if (i < opt.warmup) continue;
    latency.push_back(lat);
    device_ms.push_back(dev_ms);
    flops += model->forward_flops(in);
  }
  const double timed_s = std::chrono::duration<double>(Clock::now() - t_timed).count();
  if (profiling) {
    profiler::stop();
    const profiler::Ceilings ceil = !opt.ceilings.empty() ? profiler::load_ceilings(opt.ceilings)
                                    : dev.is_cpu()        ? profiler::default_cpu_ceilings()
                                                          : profiler::Ceilings{};
    if (opt.profile) profiler::print_tables(log, profiler::events(), int(opt.iters), ceil);
    if (!opt.roofline.empty()) {
      profiler::write_roofline_svg(
          opt.roofline, profiler::events(),
          !opt.ceilings.empty() ? profiler::ceiling_roofs(ceil)
                                : profiler::default_roofs(dev.str()),
          entry.name + " inference, batch " + std::to_string(opt.batch_size) + ", " + dev.str());
      log << "wrote roofline to " << opt.roofline << "\n";
    }
    if (!opt.trace.empty()) {
      profiler::write_trace(opt.trace, profiler::events());
      log << "wrote trace to " << opt.trace << "\n";
    }
  }
  r.iters = opt.iters;
  r.latency_p50_ms = profiler::percentile(latency, 50);
  r.latency_p90_ms = profiler::percentile(latency, 90);
  r.latency_p99_ms = profiler::percentile(latency, 99);
  double sum = 0, dsum = 0;
  for (double v : latency) sum += v;
  for (double v : device_ms) dsum += v;
  r.latency_mean_ms = sum / double(latency.size());
  r.samples_per_s = double(r.batch * opt.iters) / timed_s;
  r.device_samples_per_s = double(r.batch) / (dsum / double(device_ms.size()) / 1e3);
  r.forward_flops = flops / double(opt.iters);
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "%s batch %lld on %s: latency p50 %.3f ms p90 %.3f ms p99 %.3f ms (mean %.3f), "
                "%.1f samples/s (device %.1f), %.2f GFLOP/batch, %.1f GFLOP/s\n",
                entry.name.c_str(), static_cast<long long>(r.batch), dev.str().c_str(),
                r.latency_p50_ms, r.latency_p90_ms, r.latency_p99_ms, r.latency_mean_ms,
                r.samples_per_s, r.device_samples_per_s, r.forward_flops / 1e9,
                r.forward_flops / (r.latency_p50_ms * 1e6));
  log << buf << std::flush;
  return r;
}

}  // namespace aim::infer
