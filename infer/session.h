// Inference runs of aim-infer: a registered model in eval mode without autograd, timed per batch
// (latency percentiles, throughput), on the model's data or on tensors given in a safetensors file
// (--inputs), optionally writing the outputs (--dump-outputs) for parity checks against other
// frameworks.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>

#include "models/registry.h"

namespace aim::infer {

struct InferOptions {
  std::string device = "cpu";
  int64_t batch_size = 256;
  int64_t iters = 50;  // timed batches
  int64_t warmup = 5;  // untimed batches before them
  uint64_t seed = 1;   // weights (when none are given) and synthetic data
  std::string data = "synthetic";
  std::string weights;       // safetensors state dict; "" = the seeded initialisation
  std::string inputs;        // safetensors with the model's input tensors (batch from the file)
  std::string dump_outputs;  // write the outputs of the first timed batch (and its inputs)
  // Profiling of the timed batches (profiler/profiler.h): tables, Chrome trace, roofline SVG.
  bool profile = false;
  std::string trace, roofline, ceilings;
};

struct InferResult {
  int64_t batch = 0, iters = 0;
  // Latency of one batch: inputs in host memory -> outputs in host memory (device copies
  // included); device = the same without the host<->device copies (equal on the CPU).
  double latency_p50_ms = 0, latency_p90_ms = 0, latency_p99_ms = 0, latency_mean_ms = 0;
  double samples_per_s = 0;         // batch * iters / timed wall time
  double device_samples_per_s = 0;  // batch / mean device time
  double forward_flops = 0;         // analytic, per batch (mean)
  std::string data_description;
};

InferResult run_inference(const models::ModelEntry& entry, const models::ModelConfig& cfg,
                          const InferOptions& opt, std::ostream& log);

// `--list-inputs`: the tensors the model reads and writes (name, dtype, shape, meaning).
void print_io(const models::ModelEntry& entry, const models::ModelConfig& cfg, std::ostream& os);

}  // namespace aim::infer
