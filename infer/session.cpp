#include "infer/session.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "autograd/amp.h"
#include "autograd/int8.h"
#include "autograd/variable.h"
#include "data/batch_fits.h"
#include "kernels/error_flag.h"
#include "layers/fold.h"
#include "profiler/profiler.h"
#include "profiler/report.h"
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

std::string join(const std::set<std::string>& names) {
  std::string r;
  for (const std::string& n : names) r += (r.empty() ? "" : ", ") + n;
  return r;
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

// --cuda-graph: one inference step on the first batch captured on a private stream and replayed.
// The graph's buffers are the blocks the capture allocated on that stream; nothing else
// allocates on it afterwards, so they stay the graph's. Each replay copies the batch into the
// captured input tensors first (the copy is timed too, as in the eager loop's device time).
template <class InPrecision>
void run_cuda_graph(models::Model& model, const TensorMap& host, Device dev,
                    const InferOptions& opt, InPrecision& in_precision, InferResult& r,
                    std::ostream& log) {
  AIM_CHECK(dev.is_cuda(), "--cuda-graph needs a CUDA device, got ", dev.str());
  const int d = dev.index;
  const StreamHandle prev = current_stream(d);
  const StreamHandle gs = create_stream(d);
  set_current_stream(d, gs);
  GraphHandle graph = nullptr;
  TensorMap in, out;
  std::vector<double> eager;
  try {
    in = models::batch_to_device(model, host, dev);
    for (int i = 0; i < 3 + int(opt.iters); ++i) {  // warm the stream's block cache, then time
      const auto t0 = Clock::now();
      for (auto& [k, t] : in)  // the host metadata (batch_to_device) stays as it is
        if (auto h = host.find(k); h != host.end()) t.copy_(h->second);
      out = in_precision([&] { return model.infer(in); });
      synchronize_stream(d, gs);
      if (i >= 3) eager.push_back(ms_since(t0));
    }
    const TensorMap eager_out = to_device(out, kCPU);
    out.clear();
    begin_capture(d, gs);
    try {
      out = in_precision([&] { return model.infer(in); });
    } catch (...) {
      try {
        end_capture(d, gs);
      } catch (...) {
      }
      throw;
    }
    graph = end_capture(d, gs);
    set_current_stream(d, prev);  // nothing else allocates on the graph's stream from here on
    std::vector<double> replay;
    for (int64_t i = 0; i < opt.iters; ++i) {
      const auto t0 = Clock::now();
      for (auto& [k, t] : in)  // the host metadata (batch_to_device) stays as it is
        if (auto h = host.find(k); h != host.end()) t.copy_(h->second);
      launch_graph(graph, gs);
      synchronize_stream(d, gs);
      replay.push_back(ms_since(t0));
    }
    double worst = 0;
    for (const auto& [k, t] : to_device(out, kCPU))
      if (is_floating(t.dtype()))
        worst = std::max(worst, compare_outputs(k, t, eager_out.at(k)).max_abs);
    r.eager_ms = profiler::percentile(eager, 50);
    r.graph_ms = profiler::percentile(replay, 50);
    char buf[240];
    std::snprintf(buf, sizeof buf,
                  "cuda graph: eager %.3f ms/batch, graph replay %.3f ms/batch (p50 of %lld): "
                  "%.3f ms launch overhead saved (%.1f%%); outputs vs eager max |diff| %.3g\n",
                  r.eager_ms, r.graph_ms, static_cast<long long>(opt.iters),
                  r.eager_ms - r.graph_ms, 100.0 * (r.eager_ms - r.graph_ms) / r.eager_ms, worst);
    log << buf;
  } catch (...) {
    set_current_stream(d, prev);
    if (graph) destroy_graph(graph);
    throw;
  }
  destroy_graph(graph);
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

namespace {
InferResult run_inference_impl(const models::ModelEntry& entry, const models::ModelConfig& cfg,
                               const InferOptions& opt, std::ostream& log) {
  AIM_CHECK(opt.iters > 0 && opt.warmup >= 0 && opt.batch_size > 0,
            "infer: iters and batch size must be > 0 and warmup >= 0");
  const Device dev = parse_device(opt.device);
  std::unique_ptr<models::Model> model;
  {
    profiler::ContextScope ctx(models::building_context(entry, cfg));
    model = entry.build(cfg, opt.seed);
  }
  if (!opt.weights.empty()) models::load_weights_file(*model, entry.name, opt.weights);
  model->to(dev);
  model->eval();
  autograd::NoGradGuard no_grad;
  AIM_CHECK(!(opt.int8 && opt.precision != DType::f32),
            "infer: --int8 and a 16-bit --precision are exclusive");
  AIM_CHECK(opt.calib_batches > 0 && opt.compare_samples >= 0,
            "infer: --calib-batches must be > 0 and --compare-samples >= 0");

  // The batches to run, prepared before timing: the given inputs, or a few distinct batches of
  // the model's data (its evaluation set when large enough, else its stream), cycled.
  InferResult r;
  std::vector<TensorMap> batches;
  if (!opt.inputs.empty()) {
    // Names as --list-inputs prints them; "input.<name>" (what --dump-outputs writes) also works,
    // so a dump can be fed back.
    TensorMap in;
    SafetensorsFile file;
    try {
      file = load_safetensors(opt.inputs);
    } catch (const Error& e) {
      AIM_FAIL("--inputs ", e.what());
    }
    bool is_dump = false;  // --dump-outputs' file: input.<name> beside the outputs
    for (const auto& [k, t] : file.tensors) is_dump = is_dump || k.rfind("input.", 0) == 0;
    std::set<std::string> inputs, outputs;
    for (const models::TensorSpec& sp : model->input_specs()) inputs.insert(sp.name);
    for (const models::TensorSpec& sp : model->output_specs()) outputs.insert(sp.name);
    for (const auto& [k, t] : file.tensors) {
      const std::string name = k.rfind("input.", 0) == 0 ? k.substr(6) : k;
      if (inputs.count(name)) {
        in[name] = t;
        continue;
      }
      // A tensor nothing reads is a mistake (a typo, another model's file), except a dump's
      // outputs.
      AIM_CHECK(is_dump && outputs.count(k), "--inputs ", opt.inputs, ": tensor '", k,
                "' is not an input of ", entry.name, " (inputs: ", join(inputs), "; aim-infer ",
                entry.name, " --list-inputs)");
    }
    models::Model::check_batch(model->input_specs(), in, "--inputs " + opt.inputs);
    batches.push_back(inputs_only(*model, in));
    r.data_description = "inputs from " + opt.inputs;
  }
  std::unique_ptr<data::BatchSource> src;
  if (opt.inputs.empty() || (opt.int8 && opt.load_quantized.empty())) {
    src = entry.source(cfg, opt.data, opt.seed);
  }
  if (opt.inputs.empty()) {
    r.data_description = src->describe();
    const int64_t n = std::min<int64_t>(opt.iters + opt.warmup, 8);
    data::check_batch_fits(*src, opt.batch_size, n, "--batch-size");  // the cycled batches
    for (int64_t i = 0; i < n; ++i) {
      const bool from_eval = (i + 1) * opt.batch_size <= src->eval_size();
      batches.push_back(
          inputs_only(*model, from_eval ? src->eval_batch(i * opt.batch_size, opt.batch_size)
                                        : src->next(opt.batch_size)));
    }
  }
  // Samples per batch: the size asked of the source (a GCN batch is one whole graph, whose tensors'
  // first dimensions are nodes and nonzeros), else the --inputs file's leading dimension.
  r.batch = opt.inputs.empty() ? opt.batch_size : batches.front().begin()->second.size(0);

  // Batch norm folded into the convolutions before anything copies or quantizes the weights;
  // the outputs of the first batch must not move beyond float rounding.
  if (opt.fold_batchnorm) {
    const TensorMap in = models::batch_to_device(*model, batches.front(), dev);
    std::map<std::string, Tensor> before;
    bool traced = false;
    std::vector<std::string> into_next;
    r.folded = layers::fold_batchnorm(
        *model,
        [&] {
          for (const auto& [k, t] : model->infer(in))
            if (is_floating(t.dtype())) before[k] = t.to(kCPU);
          traced = true;
        },
        opt.int8 ? nullptr : &into_next);
    AIM_CHECK(traced, "infer: the folding trace did not run");
    if (!r.folded.empty()) {
      for (const auto& [k, t] : model->infer(in)) {
        auto it = before.find(k);
        if (it == before.end()) continue;
        const OutputDiff d = compare_outputs(k, t.to(kCPU).view({-1}), it->second.view({-1}));
        AIM_CHECK(d.rel_l2 <= 1e-4 || d.max_abs <= 1e-5, "infer: folding ", r.folded.size(),
                  " batch norms into their convolutions "
                  "changed output '",
                  k, "' by relative L2 ", d.rel_l2, " (max |diff| ", d.max_abs,
                  "); run with --no-fold and report the model");
      }
      if (into_next.empty())
        log << "folded " << r.folded.size()
            << " batch norms into the convolutions before them (--no-fold keeps them)\n";
      else
        log << "folded " << r.folded.size()
            << " batch norms into convolutions: " << r.folded.size() - into_next.size()
            << " into the one before them, " << into_next.size()
            << " into the pointwise one after them as its input transform (--no-fold keeps "
               "them)\n";
    }
  }

  // Large weights packed once for the f32 CPU kernels that read them, at the first batch that
  // does (Module::allow_prepack; Linear: the same bits, the weight's copy no longer inside every
  // batch). Not for 16-bit (autocast's copies) or int8.
  std::vector<std::pair<std::string, layers::Module*>> prepackers;
  if (opt.prepack && dev.is_cpu() && !opt.int8 && opt.precision == DType::f32) {
    std::function<void(layers::Module&, const std::string&)> walk = [&](layers::Module& m,
                                                                        const std::string& n) {
      if (m.allow_prepack(true)) prepackers.emplace_back(n, &m);
      for (const auto& [cn, c] : m.children()) walk(*c, n.empty() ? cn : n + "." + cn);
    };
    walk(*model, "");
  }

  // Low precision: the f32 model plus the state its runs need (autocast's weight copies, or the
  // quantized layers), entered around every low-precision run.
  const bool lowp = opt.int8 || opt.precision != DType::f32;
  r.precision = opt.int8 ? "int8" : autograd::amp::precision_name(opt.precision);
  std::vector<std::string> fp32_patterns;
  for (const models::Model::Fp32Params& f : model->amp_fp32_params())
    fp32_patterns.push_back(f.pattern);
  autograd::amp::ParamCache cache;
  QuantizedModel qm;
  if (opt.precision != DType::f32) {
    cache = autograd::amp::ParamCache(model->named_parameters(), fp32_patterns);
    log << "precision " << r.precision
        << ": 16-bit GEMM/conv/rnn (weights cast once), f32 softmax, reductions and "
           "normalisation (aim-train --list-amp)";
    for (const std::string& n : cache.fp32_names()) log << "; f32 " << n;
    log << "\n";
    // What a CPU user should expect: the CPU's 16-bit kernels (cpu.widen and the 16-bit paths of
    // cpu.fast / cpu.omp) compute in f32 on widened copies, with the rounding points of a
    // tensor-core run, so they measure 16-bit numerics, not a speed-up.
    if (dev.is_cpu())
      log << "note: on the CPU, " << r.precision
          << " computes in f32 on widened 16-bit tensors (the numerics of a tensor-core run; "
             "no 16-bit FMA kernels): expect fp32's speed or slower, by the conversions; for "
             "speed on the CPU run fp32 (the default)\n";
  }
  if (opt.int8) {
    if (!opt.load_quantized.empty()) {
      qm = load_quantized(opt.load_quantized, *model);
      // Its int8 weights were taken with or without the batch norms folded in: so must this run.
      const auto f = qm.metadata.find("batchnorm_folded");
      const std::string saved = f == qm.metadata.end() ? "0" : f->second;
      AIM_CHECK(saved == std::to_string(r.folded.size()), "--load-quantized ", opt.load_quantized,
                ": written with ", saved,
                " batch norms folded into their convolutions, this run "
                "folds ",
                r.folded.size(), " (", r.folded.empty() ? "drop --no-fold" : "add --no-fold",
                " or quantize again)");
    } else {
      std::vector<TensorMap> calib;
      for (int64_t i = 0; i < opt.calib_batches; ++i)
        calib.push_back(
            models::batch_to_device(*model, inputs_only(*model, src->next(r.batch)), dev));
      qm = calibrate(*model, calib, opt.calib);
    }
    r.int8_layers = int64_t(qm.layers.size());
    r.int8_kept = int64_t(qm.kept.size());
    log << "int8: " << qm.layers.size()
        << " linear/conv layers quantized (weights per output channel, inputs per tensor, "
        << qm.calibration << ", int32 accumulation, f32 outputs)";
    for (const auto& [n, why] : qm.kept) log << "; f32 " << n << " (" << why << ")";
    log << "\n";
    if (!opt.save_quantized.empty()) {
      save_quantized(opt.save_quantized, *model, qm,
                     {{"model", entry.name},
                      {"config", models::ModelEntry::config_string(cfg)},
                      {"batchnorm_folded", std::to_string(r.folded.size())}});
      log << "wrote int8 weights and scales to " << opt.save_quantized << "\n";
    }
  }
  auto in_precision = [&](auto&& fn) {
    std::optional<autograd::amp::Autocast> ac;
    std::optional<autograd::int8::Mode> q8;
    if (opt.precision != DType::f32) ac.emplace(opt.precision, &cache);
    if (opt.int8) q8.emplace(&qm.layers);
    return fn();
  };

  if (lowp) {  // the same inputs in f32 and in low precision
    const size_t n = std::min<size_t>(batches.size(), 4);
    log << "comparing " << r.precision << " outputs with fp32 on " << n << " batches...\n"
        << std::flush;
    std::map<std::string, std::pair<std::vector<Tensor>, std::vector<Tensor>>> outs, ints;
    for (size_t i = 0; i < n; ++i) {
      const TensorMap in = models::batch_to_device(*model, batches[i], dev);
      for (const auto& [k, t] : model->infer(in))
        (is_floating(t.dtype()) ? outs : ints)[k].first.push_back(t.to(kCPU));
      for (const auto& [k, t] : in_precision([&] { return model->infer(in); }))
        (is_floating(t.dtype()) ? outs : ints)[k].second.push_back(t.to(kCPU));
    }
    for (const auto& [k, v] : ints) {  // decoded labels, class ids: share of identical samples
      OutputDiff all;
      all.output = k;
      int64_t same = 0;
      for (size_t i = 0; i < v.first.size(); ++i) {
        const OutputDiff d = compare_integer_outputs(k, v.second[i], v.first[i]);
        all.samples += d.samples;
        same += std::llround(d.agreement * double(d.samples));
      }
      all.agreement = all.samples > 0 ? double(same) / double(all.samples) : 1.0;
      r.diffs.push_back(all);
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "%s vs fp32, output %s: %lld of %lld samples identical (%.2f%%)\n",
                    r.precision.c_str(), k.c_str(), static_cast<long long>(same),
                    static_cast<long long>(all.samples), 100.0 * all.agreement);
      log << buf;
    }
    for (const auto& [k, v] : outs) {
      OutputDiff worst;
      worst.output = k;
      for (size_t i = 0; i < v.first.size(); ++i) {
        const OutputDiff d = compare_outputs(k, v.second[i].view({-1}), v.first[i].view({-1}));
        worst.cosine = std::min(worst.cosine, d.cosine);
        worst.max_abs = std::max(worst.max_abs, d.max_abs);
        worst.rel_l2 = std::max(worst.rel_l2, d.rel_l2);
      }
      r.diffs.push_back(worst);
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "%s vs fp32, output %s over %zu batches: cosine %.6f, max |diff| %.3g, "
                    "relative L2 %.3g\n",
                    r.precision.c_str(), k.c_str(), n, worst.cosine, worst.max_abs, worst.rel_l2);
      log << buf;
    }
    if (src && opt.compare_samples > 0 && src->eval_size() > 0) {
      const int64_t ne = std::min(opt.compare_samples, src->eval_size());
      log << "comparing the metrics of fp32 and " << r.precision << " on " << ne
          << " evaluation samples (--compare-samples; 0 skips it)...\n"
          << std::flush;
      r.metrics_f32 = entry.evaluate(*model, *src, ne, dev);
      r.metrics_lowp = in_precision([&] { return entry.evaluate(*model, *src, ne, dev); });
      log << "metrics on " << ne << " evaluation samples:";
      for (const auto& [k, v] : r.metrics_f32) {
        char buf[120];
        std::snprintf(buf, sizeof buf, "  %s fp32 %.4f %s %.4f (delta %+.4f)", k.c_str(), v,
                      r.precision.c_str(), r.metrics_lowp.at(k), r.metrics_lowp.at(k) - v);
        log << buf;
      }
      log << "\n";
    }
  }

  if (!opt.dump_outputs.empty()) {  // one untimed run on the first batch
    const TensorMap out = in_precision(
        [&] { return model->infer(models::batch_to_device(*model, batches.front(), dev)); });
    std::vector<std::pair<std::string, Tensor>> dump;
    for (const auto& [k, t] : out) dump.emplace_back(k, t.to(kCPU));
    if (opt.inputs.empty())  // so a peer can rerun exactly this batch
      for (const auto& [k, t] : batches.front()) dump.emplace_back("input." + k, t);
    save_safetensors(opt.dump_outputs, dump,
                     {{"model", entry.name}, {"config", models::ModelEntry::config_string(cfg)}});
    log << "wrote outputs to " << opt.dump_outputs << "\n";
  }

  AIM_CHECK(!opt.postprocess || model->has_postprocess(), "--postprocess: ", entry.name,
            " has no post-processing (its outputs are its results)");
  std::vector<double> latency, device_ms, postprocess_ms;
  double flops = 0, units = 0;
  const auto t_all = Clock::now();
  auto t_timed = t_all, last_line = t_all;
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
    const TensorMap in = models::batch_to_device(*model, host, dev);
    synchronize(dev);
    const auto t1 = Clock::now();
    std::optional<profiler::Scope> phase(std::in_place, "fwd", profiler::ScopeKind::Phase);
    const TensorMap out = in_precision([&] { return model->infer(in); });
    phase.reset();
    if (i == 0 && !prepackers.empty()) {  // what the first batch packed
      int64_t bytes = 0;
      for (const auto& [name, m] : prepackers)
        if (const int64_t b = m->prepacked_bytes()) {
          r.prepacked.push_back(name);
          bytes += b;
        }
      if (bytes > 0) {
        char pb[200];
        std::snprintf(pb, sizeof pb,
                      "packed the weights of %zu layers for the GEMM at the first batch (%.1f MiB "
                      "more memory; --no-prepack copies them inside every batch)\n",
                      r.prepacked.size(), double(bytes) / (1 << 20));
        log << pb;
      }
    }
    synchronize(dev);
    const double dev_ms = ms_since(t1);
    const TensorMap out_host = to_device(out, kCPU);
    double post_ms = 0;
    if (opt.postprocess) {
      const auto t2 = Clock::now();
      std::optional<profiler::Scope> post(std::in_place, "postprocess", profiler::ScopeKind::Phase);
      model->postprocess_outputs(out_host);
      post.reset();
      post_ms = ms_since(t2);
    }
    const double lat = ms_since(t0);
    // A run longer than a few seconds says where it is (every 5 s), so a slow model at its
    // reference batch is never a silent wait.
    if (ms_since(last_line) > 5000 && i + 1 < opt.warmup + opt.iters) {
      char pb[160];
      std::snprintf(pb, sizeof pb, "%s %lld/%lld: last batch %.1f ms, %.0f s so far\n",
                    i < opt.warmup ? "warmup" : "timed",
                    static_cast<long long>(i < opt.warmup ? i + 1 : i + 1 - opt.warmup),
                    static_cast<long long>(i < opt.warmup ? opt.warmup : opt.iters), lat,
                    ms_since(t_all) / 1e3);
      log << pb << std::flush;
      last_line = Clock::now();
    }
    if (i < opt.warmup) continue;
    if (opt.postprocess) postprocess_ms.push_back(post_ms);
    latency.push_back(lat);
    device_ms.push_back(dev_ms);
    const auto [unit, count] = model->output_units(out_host);
    r.unit = unit;
    units += double(count);
    flops += model->forward_flops(in);
  }
  const double timed_s = std::chrono::duration<double>(Clock::now() - t_timed).count();
  if (opt.cuda_graph) run_cuda_graph(*model, batches.front(), dev, opt, in_precision, r, log);
  if (profiling) {
    profiler::stop();
    profiler::write_report(
        log, {opt.profile, opt.roofline, opt.trace, opt.ceilings}, dev, int(opt.iters),
        str(entry.name, " inference, batch ", opt.batch_size, ", ", dev.str()), "");
  }
  r.iters = opt.iters;
  r.latency_p50_ms = profiler::percentile(latency, 50);
  r.latency_p90_ms = profiler::percentile(latency, 90);
  r.latency_p99_ms = profiler::percentile(latency, 99);
  double sum = 0, dsum = 0;
  for (double v : latency) sum += v;
  for (double v : device_ms) dsum += v;
  // A bad index or target a kernel flagged on the GPU (the ops do not read back): one small read
  // per run, naming the op (kernels/error_flag.h).
  if (dev.is_cuda()) kernels::check_device_errors(dev);
  r.latency_mean_ms = sum / double(latency.size());
  r.samples_per_s = double(r.batch * opt.iters) / timed_s;
  r.device_samples_per_s = double(r.batch) / (dsum / double(device_ms.size()) / 1e3);
  r.forward_flops = flops / double(opt.iters);
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "%s %s batch %lld on %s: latency p50 %.3f ms p90 %.3f ms p99 %.3f ms (mean %.3f), "
                "%.1f samples/s (device %.1f), %.2f GFLOP/batch, %.1f GFLOP/s\n",
                entry.name.c_str(), r.precision.c_str(), static_cast<long long>(r.batch),
                dev.str().c_str(), r.latency_p50_ms, r.latency_p90_ms, r.latency_p99_ms,
                r.latency_mean_ms, r.samples_per_s, r.device_samples_per_s, r.forward_flops / 1e9,
                r.forward_flops / (r.latency_p50_ms * 1e6));
  log << buf << std::flush;
  if (!r.unit.empty()) {
    r.units_per_s = units / timed_s;
    std::snprintf(buf, sizeof buf, "%.1f %s/s (%.1f %s per batch)\n", r.units_per_s, r.unit.c_str(),
                  units / double(opt.iters), r.unit.c_str());
    log << buf << std::flush;
  }
  if (opt.eval_samples > 0) {
    AIM_CHECK(src && src->eval_size() > 0, "--eval-samples: ", entry.name,
              " has no evaluation set with this data (--inputs batches carry no references)");
    const int64_t ne = std::min(opt.eval_samples, src->eval_size());
    const auto te = Clock::now();
    r.metrics = in_precision([&] { return entry.evaluate(*model, *src, ne, dev); });
    char mb[160];
    std::snprintf(mb, sizeof mb,
                  "metrics on %lld evaluation samples (%s, %.1f s):", static_cast<long long>(ne),
                  r.precision.c_str(), ms_since(te) / 1e3);
    log << mb;
    for (const auto& [k, v] : r.metrics) {
      std::snprintf(mb, sizeof mb, " %s %.4f", k.c_str(), v);
      log << mb;
    }
    log << "\n";
  }
  if (opt.postprocess) {
    r.postprocess_p50_ms = profiler::percentile(postprocess_ms, 50);
    std::snprintf(buf, sizeof buf,
                  "post-processing (host, inside the latency): p50 %.3f ms per batch\n",
                  r.postprocess_p50_ms);
    log << buf << std::flush;
  }
  return r;
}

}  // namespace

InferResult run_inference(const models::ModelEntry& entry, const models::ModelConfig& cfg,
                          const InferOptions& opt, std::ostream& log) {
  if (opt.inputs.empty()) return run_inference_impl(entry, cfg, opt, log);
  try {
    return run_inference_impl(entry, cfg, opt, log);
  } catch (const Error& e) {
    // A kernel that rejects an index (an embedding's id, a class) knows neither the file nor the
    // tensor: name both here, with where the value sits.
    const std::string what = e.what();
    if (what.rfind("--inputs", 0) == 0) throw;
    static const std::regex index_re(R"(index (-?[0-9]+))");
    std::smatch m;
    std::string where;
    if (std::regex_search(what, m, index_re)) {
      const int64_t v = std::stoll(m[1]);
      for (const auto& [k, t] : load_safetensors(opt.inputs).tensors) {
        if (!is_integral(t.dtype())) continue;
        const std::vector<int64_t> x = t.to(DType::i64).contiguous().to_vector<int64_t>();
        const auto it = std::find(x.begin(), x.end(), v);
        if (it != x.end()) {
          where = str("; the value is in tensor '", k, "' at element ", it - x.begin());
          break;
        }
      }
    }
    AIM_FAIL("--inputs ", opt.inputs, ": ", what, where);
  }
}

}  // namespace aim::infer
