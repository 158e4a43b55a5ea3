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

#include "cli/common.h"
#include "cli/model_command.h"
#include "infer/session.h"
#include "kernels/cudnn_util.h"
#include "models/registry.h"
#include "profiler/profiler.h"
#include "profiler/run_info.h"
#include "tensor/check.h"

namespace po = boost::program_options;
using aim::cli::UsageError;

int main(int argc, char** argv) {
  std::string device, results, batch_list;
  std::vector<std::string> config;
  aim::infer::InferOptions io;
  int threads = 0;

  po::options_description opts("aim-infer MODEL [options]   (models: aim-infer --list)");
  // clang-format off
  opts.add_options()
    ("help,h", "show this help")
    ("list", "list the models with their --config keys, data and metrics")
    ("list-inputs", "print the tensors MODEL reads (--inputs) and writes (--dump-outputs)")
    ("device", po::value<std::string>(&device),
     "cpu | cuda | cuda:N (default: cuda when a GPU is present, else cpu)")
    ("batch-size", po::value<std::string>(&batch_list)->default_value("256"),
     "samples per batch; a comma-separated list runs once per size (a sweep)")
    ("iters", po::value<int64_t>(&io.iters)->default_value(50), "timed batches (> 0)")
    ("warmup", po::value<int64_t>(&io.warmup)->default_value(5), "untimed batches first (>= 0)")
    ("seed", po::value<uint64_t>(&io.seed)->default_value(1),
     "initialisation (without --weights) and synthetic data")
    ("data", po::value<std::string>(&io.data)->default_value("synthetic"),
     "synthetic | PATH (see --list)")
    ("config", po::value<std::vector<std::string>>(&config)->composing(),
     "key=value, repeatable (keys per model: see --list)")
    ("weights", po::value<std::string>(&io.weights), "weights to load (.safetensors state dict)")
    ("inputs", po::value<std::string>(&io.inputs),
     "run on these input tensors (.safetensors; names and shapes: --list-inputs)")
    ("dump-outputs", po::value<std::string>(&io.dump_outputs),
     "write the outputs of the first batch (.safetensors; with its inputs as input.<name> "
     "when they came from the model's data)")
    ("profile", "print per-op, per-layer and model summary tables of the timed batches "
     "(latencies then include the profiler's cost)")
    ("trace", po::value<std::string>(&io.trace), "write a Chrome/Perfetto trace (JSON) to FILE")
    ("roofline", po::value<std::string>(&io.roofline), "write a roofline plot (SVG) to FILE")
    ("ceilings", po::value<std::string>(&io.ceilings),
     "roofline ceilings from aim-bench peak --ceilings FILE")
    ("profile-ops", "CUDA: time every kernel with its own CUDA events (default: per layer)")
    ("nvtx", "NVTX ranges (domain aim) for Nsight Systems")
    ("threads", po::value<int>(&threads)->default_value(0), "OpenMP threads (0: default)")
    ("results", po::value<std::string>(&results), "append one JSON line per run to FILE");
  // clang-format on
  try {
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
    if (io.iters <= 0) throw UsageError("--iters must be > 0, got " + std::to_string(io.iters));
    if (io.warmup < 0) throw UsageError("--warmup must be >= 0, got " + std::to_string(io.warmup));
    if (!io.inputs.empty() && (vm["batch-size"].defaulted() == false || io.data != "synthetic"))
      throw UsageError(
          "--inputs fixes the batch: it cannot be combined with --batch-size or "
          "--data");
    if (!io.dump_outputs.empty() && batches.size() > 1)
      throw UsageError("--dump-outputs writes one batch: give one --batch-size");
    io.profile = vm.count("profile") > 0;
    aim::profiler::set_nvtx(vm.count("nvtx") > 0);
    aim::profiler::set_cuda_op_events(vm.count("profile-ops") > 0);
    aim::cli::set_threads(threads);
    const aim::Device dev = aim::cli::resolve_device(device);
    io.device = dev.str();

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
      j["precision"] = "fp32";
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
      j["gflop_per_batch"] = r.forward_flops / 1e9;
      j["achieved_gflops"] =
          r.latency_p50_ms > 0 ? r.forward_flops / (r.latency_p50_ms * 1e6) : 0.0;
      j["variants_used"] = aim::cli::variants_since(before);
      if (const std::string algos = aim::kernels::cudnn_conv_algorithms_summary(); !algos.empty())
        j["cudnn_conv_algorithms"] = algos;
      j["substitutions"] = aim::cli::substitutions_json();
      j["env"] = aim::profiler::environment_json();
      j["git_commit"] = aim::profiler::git_commit();
      j["command"] = aim::profiler::command_line(argc, argv);
      aim::cli::append_results(results, j);
    }
    return 0;
  } catch (const UsageError& u) {
    std::cerr << "aim-infer: " << u.what() << "\n(see aim-infer --help)\n";
    return 2;
  } catch (const aim::Error& e) {
    std::cerr << "aim-infer: error: " << e.what() << "\n";
    return 1;
  }
}
