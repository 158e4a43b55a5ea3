// Inference runs of aim-infer: a registered model in eval mode without autograd, timed per batch
// (latency percentiles, throughput), on the model's data or on tensors given in a safetensors file
// (--inputs), optionally writing the outputs (--dump-outputs) for parity checks against other
// frameworks.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>

#include "infer/quantize.h"
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
  // Precision (DESIGN §5): f32; f16 / bf16 (autocast: 16-bit GEMM/conv/rnn, the op policy of
  // autograd/amp.h, weights cast once); or int8 (post-training quantisation, infer/quantize.h).
  DType precision = DType::f32;
  bool int8 = false;
  int64_t calib_batches = 8;  // int8: calibration batches from the model's training stream
  CalibrationOptions calib;
  std::string save_quantized, load_quantized;  // int8 weights and scales (safetensors)
  // Low precision: outputs compared with f32 on the first batches, and the model's metric on
  // this many evaluation samples in both precisions (0: no metric comparison).
  int64_t compare_samples = 1000;
  // > 0: after timing, the model's metrics (its registry entry's evaluate: accuracy, BLEU against
  // the data's references...) on that many evaluation samples, in the run's precision.
  int64_t eval_samples = 0;
  // The model's post-processing (a detector's decoding and NMS, on the host) inside each timed
  // batch, as an end-to-end inference; its own time is reported too.
  bool postprocess = false;
  // CUDA: capture one inference step in a CUDA graph and replay it (launch overhead saved).
  bool cuda_graph = false;
  // Fold each eval-mode BatchNorm2d into the Conv2d that feeds it (layers/fold.h), checked
  // against the unfolded outputs on the first batch; --no-fold keeps them.
  bool fold_batchnorm = true;
  // f32 on the CPU: keep large weights also packed for the kernels that read them
  // (layers::Module::allow_prepack); --no-prepack copies them inside every batch.
  bool prepack = true;
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
  std::string precision = "fp32";  // fp32 | fp16 | bf16 | int8
  // Low precision against f32 on the same inputs: per float output, and the model's metrics.
  std::vector<OutputDiff> diffs;
  models::Metrics metrics_f32, metrics_lowp;
  models::Metrics metrics;  // --eval-samples
  std::string unit;         // the model's output unit (Model::output_units), "" = none
  double units_per_s = 0;   // those units over the timed wall time
  int64_t int8_layers = 0, int8_kept = 0;
  std::vector<std::string> folded;     // the batch-norm layers folded into their convolutions
  std::vector<std::string> prepacked;  // the layers whose weights were packed once
  // --postprocess: its time per batch (p50, ms), inside the latency above.
  double postprocess_p50_ms = 0;
  // --cuda-graph: eager and graph-replay device time per batch (ms).
  double eager_ms = 0, graph_ms = 0;
};

InferResult run_inference(const models::ModelEntry& entry, const models::ModelConfig& cfg,
                          const InferOptions& opt, std::ostream& log);

// `--list-inputs`: the tensors the model reads and writes (name, dtype, shape, meaning).
void print_io(const models::ModelEntry& entry, const models::ModelConfig& cfg, std::ostream& os);

}  // namespace aim::infer
