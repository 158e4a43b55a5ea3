// Post-training INT8 quantisation of a model for aim-infer --int8 (DESIGN §5, autograd/int8.h):
// calibration of per-tensor input scales on N batches (max, or a percentile of |x|), per-channel
// symmetric weight quantisation, saving and loading the result, and the comparison of a
// low-precision run's outputs with f32 on the same inputs.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "autograd/int8.h"
#include "models/model.h"

namespace aim::infer {

struct CalibrationOptions {
  std::string method = "max";  // max | percentile
  double percentile = 99.99;   // percentile of |x| per layer (method percentile)
};

struct QuantizedModel {
  std::unordered_map<const autograd::VariableImpl*, autograd::int8::QuantLayer> layers;
  std::vector<std::string> quantized;                     // weight names, model order
  std::vector<std::pair<std::string, std::string>> kept;  // weight name, why it stays f32
  std::string calibration;                                // "max over 8 batches", "loaded from F"
  std::map<std::string, std::string> metadata;            // load_quantized: the file's metadata
};

// Runs `batches` (the model's inputs, on its device) through `model` in f32 and records the
// inputs of every linear and conv2d; quantizes each layer's weight per output channel and
// derives its input scale. Layers whose weight matches the model's amp_fp32_params, or whose
// reduction exceeds the int32-safe 65536, stay f32 (listed with the reason).
QuantizedModel calibrate(models::Model& model, const std::vector<TensorMap>& batches,
                         const CalibrationOptions& opt);

// `<weight>.int8` (i8), `<weight>.scales` (f32 [out]), `<weight>.x_scale` (f32 [1]) per layer,
// metadata {format: aim-int8, model, config, calibration}.
void save_quantized(const std::string& path, const models::Model& model, const QuantizedModel& q,
                    const std::map<std::string, std::string>& metadata);
// Errors name the file and the tensor (unknown weight, shape or dtype mismatch, bad scale).
QuantizedModel load_quantized(const std::string& path, const models::Model& model);

// Output difference of a low-precision run against f32 on the same inputs, over every float
// output tensor.
struct OutputDiff {
  std::string output;  // tensor name
  double cosine = 1, max_abs = 0, rel_l2 = 0;
  // Integer outputs (decoded labels, class ids): the share of samples (rows along dim 0) whose
  // values are all equal; -1 for float outputs.
  double agreement = -1;
  int64_t samples = 0;
};
OutputDiff compare_outputs(const std::string& name, const Tensor& lowp, const Tensor& ref);
OutputDiff compare_integer_outputs(const std::string& name, const Tensor& lowp, const Tensor& ref);

}  // namespace aim::infer
