// aim-infer: runs a registered model forward (eval mode, no autograd) and reports latency
// percentiles and throughput; or runs it on given tensors and writes the outputs.
//
//   aim-infer din --device cpu --batch-size 1024 --iters 50 --warmup 5
//   aim-infer din --config size=tiny --list-inputs
//   aim-infer din --weights w.safetensors --inputs in.safetensors --dump-outputs out.safetensors
//
// Exit status: 0 success, 1 runtime error (aim::Error), 2 bad usage (the message names the flag).
#include <boost/program_options.hpp>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/amp.h"
#include "cli/common.h"
#include "cli/model_command.h"
#include "infer/session.h"
#include "kernels/cudnn_util.h"
#include "kernels/math_mode.h"
#include "models/registry.h"
#include "profiler/profiler.h"
#include "profiler/run_info.h"
#include "tensor/check.h"

namespace po = boost::program_options;
using aim::cli::UsageError;

int main(int argc, char** argv) {
  std::string device, results, batch_list, precision, tf32, winograd, denormals, seed = "1";
  std::vector<std::string> config;
  aim::infer::InferOptions io;
  int threads = 0;

  po::options_description opts(
      "aim-infer MODEL [options]   (models: aim-infer --list)\n\nexamples:\n"
      "  aim-infer resnet50 --batch-size 1              (latency) \n"
      "  aim-infer crnn --fp16                          (16-bit, checked against fp32)\n"
      "  aim-infer din --int8 --results runs.jsonl\n"
      "  aim-infer din --weights w.safetensors --inputs in.safetensors --dump-outputs "
      "out.safetensors\n\nOptions");
  // clang-format off
  po::options_description g_general("General");
  g_general.add_options()
    ("help,h", "show this help")
    ("list", "list the models with their --config keys, data and metrics")
    ("list-inputs", "print the tensors MODEL reads (--inputs) and writes (--dump-outputs)");
  po::options_description g_model("Model and data");
  g_model.add_options()
    ("config", po::value<std::vector<std::string>>(&config)->composing(),
     "key=value, repeatable (keys per model: see --list)")
    ("data", po::value<std::string>(&io.data)->default_value("synthetic"),
     "synthetic | PATH (see --list)")
    ("batch-size", po::value<std::string>(&batch_list)->default_value("256"),
     "samples per batch; a comma-separated list runs once per size (a sweep)")
    ("iters", po::value<int64_t>(&io.iters)->default_value(50), "timed batches (> 0)")
    ("warmup", po::value<int64_t>(&io.warmup)->default_value(5), "untimed batches first (>= 0)")
    ("seed", po::value<std::string>(&seed)->default_value("1"),
     "initialisation (without --weights) and synthetic data")
    ("weights", po::value<std::string>(&io.weights), "weights to load (.safetensors state dict)")
    ("inputs", po::value<std::string>(&io.inputs),
     "run on these input tensors (.safetensors; names and shapes: --list-inputs)")
    ("eval-samples", po::value<int64_t>(&io.eval_samples)->default_value(0),
     "after timing, the model's metrics on this many evaluation samples of --data (0: none)")
    ("postprocess", "time the model's post-processing (a detector's decoding and NMS) inside "
     "each batch, as end-to-end inference");
  po::options_description g_prec("Precision");
  g_prec.add_options()
    ("precision", po::value<std::string>(&precision)->default_value("fp32"),
     "fp32 | fp16 | bf16 | int8 (the long form of --fp16, --bf16, --int8)")
    ("fp16", "16-bit GEMM/conv/rnn (autocast, weights cast once; aim-train --list-amp)")
    ("bf16", "as --fp16 with bfloat16")
    ("int8", "post-training int8: per-channel weights, per-tensor inputs calibrated on "
     "--calib-batches, int32 accumulation")
    ("calib-batches", po::value<int64_t>(&io.calib_batches)->default_value(8),
     "int8: calibration batches from the model's training stream")
    ("calib", po::value<std::string>(&io.calib.method)->default_value("max"),
     "int8 input ranges: max | percentile")
    ("calib-percentile", po::value<double>(&io.calib.percentile)->default_value(99.99),
     "int8 --calib percentile: this percentile of |x| per layer")
    ("save-quantized", po::value<std::string>(&io.save_quantized),
     "int8: write the quantized weights and scales (.safetensors)")
    ("load-quantized", po::value<std::string>(&io.load_quantized),
     "int8: use these quantized weights and scales instead of calibrating")
    ("no-fold", "keep every batch norm as its own pass (by default each one that follows a "
     "convolution is folded into its weights and bias, checked on the first batch)")
    ("no-prepack", "f32 on the CPU: copy large fully connected weights inside every batch (by "
     "default they are packed once for the GEMM: same results, about their size more memory)")
    ("compare-samples", po::value<int64_t>(&io.compare_samples)->default_value(1000),
     "low precision: evaluation samples for the metric comparison with fp32 (0: none)")
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
    ("cuda-graph", "CUDA: capture one inference step in a CUDA graph and replay it");
  po::options_description g_out("Output");
  g_out.add_options()
    ("dump-outputs", po::value<std::string>(&io.dump_outputs),
     "write the outputs of the first batch (.safetensors; with its inputs as input.<name> "
     "when they came from the model's data)")
    ("results", po::value<std::string>(&results), "append one JSON line per run to FILE");
  po::options_description g_prof("Profiling");
  g_prof.add_options()
    ("profile", "print per-op, per-layer and model summary tables of the timed batches "
     "(latencies then include the profiler's cost)")
    ("trace", po::value<std::string>(&io.trace), "write a Chrome/Perfetto trace (JSON) to FILE")
    ("roofline", po::value<std::string>(&io.roofline), "write a roofline plot (SVG) to FILE")
    ("ceilings", po::value<std::string>(&io.ceilings),
     "roofline ceilings from aim-bench peak --ceilings FILE")
    ("profile-ops", "CUDA: time every kernel with its own CUDA events (default: per layer)")
    ("nvtx", "NVTX ranges (domain aim) for Nsight Systems");
  aim::cli::add_kernel_options(g_dev);
  opts.add(g_general).add(g_model).add(g_prec).add(g_dev).add(g_out).add(g_prof);
  // clang-format on
  return aim::cli::run_cli("aim-infer", [&]() -> int {
    aim::cli::ModelCommand mc = aim::cli::parse_model_command(argc, argv, opts, config);
    if (!mc.entry) return 0;  // --help or --list
    const po::variables_map& vm = mc.vm;
    const aim::models::ModelEntry* entry = mc.entry;
    const aim::models::ModelConfig cfg = mc.cfg;
    if (vm.count("list-inputs")) {
      aim::infer::print_io(*entry, cfg, std::cout);
      return 0;
    }
    const std::vector<int64_t> batches = aim::cli::parse_positive_list("--batch-size", batch_list);
    io.seed = aim::cli::parse_u64("--seed", seed);
    if (io.iters <= 0) throw UsageError("--iters must be > 0, got " + std::to_string(io.iters));
    if (io.warmup < 0) throw UsageError("--warmup must be >= 0, got " + std::to_string(io.warmup));
    if (!io.inputs.empty() && (mc.given("batch-size") || io.data != "synthetic"))
      throw UsageError(
          "--inputs fixes the batch: it cannot be combined with --batch-size or "
          "--data");
    if (!io.dump_outputs.empty() && batches.size() > 1)
      throw UsageError("--dump-outputs writes one batch: give one --batch-size");
    {
      int given = int(vm.count("fp16") + vm.count("bf16") + vm.count("int8"));
      if (!vm["precision"].defaulted()) ++given;
      if (given > 1) throw UsageError("give one of --precision, --fp16, --bf16, --int8");
      if (vm.count("fp16")) precision = "fp16";
      if (vm.count("bf16")) precision = "bf16";
      if (vm.count("int8")) precision = "int8";
      if (precision == "int8") {
        io.int8 = true;
      } else {
        try {
          io.precision = aim::autograd::amp::parse_precision(precision, "--precision");
        } catch (const aim::Error& e) {
          throw UsageError(std::string(e.what()) + ", int8");
        }
      }
      const bool int8_flags = !vm["calib-batches"].defaulted() || !vm["calib"].defaulted() ||
                              !vm["calib-percentile"].defaulted() || !io.save_quantized.empty() ||
                              !io.load_quantized.empty();
      if (int8_flags && !io.int8)
        throw UsageError("--calib*, --save-quantized and --load-quantized need --int8");
      if (io.calib.method != "max" && io.calib.method != "percentile")
        throw UsageError("--calib '" + io.calib.method +
                         "' is not allowed (allowed: max, percentile)");
      if (io.calib_batches <= 0) throw UsageError("--calib-batches must be > 0");
      if (!(io.calib.percentile > 50 && io.calib.percentile <= 100))
        throw UsageError("--calib-percentile must be in (50, 100]");
      if (io.compare_samples < 0) throw UsageError("--compare-samples must be >= 0");
      if (io.eval_samples < 0) throw UsageError("--eval-samples must be >= 0");
      io.cuda_graph = vm.count("cuda-graph") > 0;
      io.postprocess = vm.count("postprocess") > 0;
      io.fold_batchnorm = vm.count("no-fold") == 0;
      io.prepack = vm.count("no-prepack") == 0;
    }
    io.profile = vm.count("profile") > 0;
    aim::profiler::set_nvtx(vm.count("nvtx") > 0);
    aim::profiler::set_cuda_op_events(vm.count("profile-ops") > 0);
    aim::cli::set_threads(threads);
    aim::cli::set_tf32(tf32);
    aim::cli::set_winograd(winograd);
    aim::cli::set_denormals(denormals);
    aim::cli::set_deterministic(vm.count("deterministic") > 0);
    const aim::Device dev = aim::cli::resolve_device(device);
    io.device = dev.str();
    // Where the run writes is checked before it starts.
    aim::cli::check_output_file("--results", results);
    aim::cli::check_output_file("--dump-outputs", io.dump_outputs);
    aim::cli::check_output_file("--trace", io.trace);
    aim::cli::check_output_file("--roofline", io.roofline);
    aim::cli::check_output_file("--save-quantized", io.save_quantized);
    if (io.cuda_graph && !dev.is_cuda())
      throw UsageError("--cuda-graph needs a CUDA device (--device cuda), got " + dev.str());

    for (const int64_t batch : batches) {
      io.batch_size = batch;
      const auto before = aim::cli::variant_counts();
      const aim::infer::InferResult r = aim::infer::run_inference(*entry, cfg, io, std::cout);
      if (results.empty()) continue;
      nlohmann::json j;
      j["model"] = entry->name;
      j["mode"] = "infer";
      j["device"] = dev.str();
      j["devices"] = 1;
      j["precision"] = r.precision;
      if (!r.metrics.empty()) j["metrics"] = r.metrics;
      if (!r.unit.empty()) j[r.unit + "_per_s"] = r.units_per_s;
      if (!r.diffs.empty()) {
        nlohmann::json d = nlohmann::json::object();
        for (const auto& o : r.diffs)
          d[o.output] =
              o.agreement >= 0
                  ? nlohmann::json{{"agreement", o.agreement}, {"samples", o.samples}}
                  : nlohmann::json{
                        {"cosine", o.cosine}, {"max_abs", o.max_abs}, {"rel_l2", o.rel_l2}};
        j["vs_fp32"] = {{"outputs", d}};
        if (!r.metrics_f32.empty()) {
          j["vs_fp32"]["metrics_fp32"] = r.metrics_f32;
          j["vs_fp32"]["metrics"] = r.metrics_lowp;
        }
      }
      if (io.int8)
        j["int8"] = {{"layers", r.int8_layers},
                     {"kept_f32", r.int8_kept},
                     {"calibration", io.load_quantized.empty() ? io.calib.method : "loaded"}};
      j["batchnorm_folded"] = r.folded.size();
      j["prepacked_layers"] = r.prepacked.size();
      if (io.cuda_graph) j["cuda_graph"] = {{"eager_ms", r.eager_ms}, {"graph_ms", r.graph_ms}};
      if (io.postprocess) j["postprocess_ms_p50"] = r.postprocess_p50_ms;
      j["batch"] = r.batch;
      j["config"] = cfg;
      j["data"] = r.data_description;
      j["weights"] = io.weights.empty() ? "seeded initialisation" : io.weights;
      j["iters"] = r.iters;
      j["warmup"] = io.warmup;
      j["latency_ms"] = {{"p50", r.latency_p50_ms},
                         {"p90", r.latency_p90_ms},
                         {"p99", r.latency_p99_ms},
                         {"mean", r.latency_mean_ms}};
      j["throughput"] = r.samples_per_s;
      j["throughput_device"] = r.device_samples_per_s;
      j["throughput_unit"] = "samples/s";
      j["memory"] = {{"max_rss_bytes", aim::profiler::max_rss_bytes()}};
      j["gflop_per_batch"] = r.forward_flops / 1e9;
      j["achieved_gflops"] =
          r.latency_p50_ms > 0 ? r.forward_flops / (r.latency_p50_ms * 1e6) : 0.0;
      aim::cli::add_run_fields(j, before, argc, argv);
      aim::cli::append_results(results, j);
    }
    return 0;
  });
}
