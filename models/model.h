// Model: what aim-train and aim-infer need of every model, independent of its kind.
//
// A batch is a set of named tensors (TensorMap), the same names a model's --inputs file uses and
// --list-inputs prints: DIN takes item, cate, hist_item, hist_cate, mask (and label to train);
// image models take one f32 tensor "input" [B, 3, H, W]. Outputs are named too ("output" is the
// model's user-facing result: DIN's click probability, an image model's logits).
//
// Shapes in a TensorSpec use letters for sizes that vary per batch ("B", "T") and numbers for
// fixed ones, so --list-inputs can print them and check_inputs() can check a given file.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "layers/module.h"
#include "tensor/tensor.h"

namespace aim::models {

using autograd::Variable;

struct TensorSpec {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::string> dims;  // "B", "T", or a decimal size
  std::string doc;                // one line: meaning and value range
  std::string shape_str() const;  // "[B, T]"
};

class Model : public layers::Module {
 public:
  // Tensors infer() reads, and the extra ones training_loss() reads (labels, targets).
  virtual std::vector<TensorSpec> input_specs() const = 0;
  virtual std::vector<TensorSpec> label_specs() const = 0;
  virtual std::vector<TensorSpec> output_specs() const = 0;
  // Forward pass on a batch (tensors on the module's device); returns the outputs by name. Runs
  // in the module's current mode; callers use eval() and NoGradGuard for inference.
  virtual TensorMap infer(const TensorMap& batch) = 0;
  // Scalar training loss of a batch (inputs and labels) with the autograd graph attached.
  virtual Variable training_loss(const TensorMap& batch) = 0;
  // Analytic FLOPs of one forward pass over this batch (DESIGN §7 cost model).
  virtual double forward_flops(const TensorMap& batch) const = 0;
  // FLOPs of a training step (forward + backward) over this batch; the usual 3x forward unless a
  // model knows better.
  virtual double train_flops(const TensorMap& batch) const { return 3 * forward_flops(batch); }
  // Tensors the model reads on the host as shape metadata (sequence lengths), computed from the
  // host batch before it moves to the device (batch_to_device): they stay on the CPU, so a step
  // on a GPU reads nothing back for them (PyTorch's CTC loss and pack_padded_sequence take
  // lengths on the CPU for the same reason). Default: none.
  virtual TensorMap host_metadata(const TensorMap& host_batch) const {
    (void)host_batch;
    return {};
  }

  // What infer()'s outputs hold besides samples, for aim-infer's second rate (NMT: "tokens"
  // translated): the unit's name ("" = none) and its count in these host outputs. Default: none.
  virtual std::pair<std::string, int64_t> output_units(const TensorMap& host_outputs) const {
    (void)host_outputs;
    return {"", 0};
  }

  // The model's post-processing of infer()'s outputs into its final results (a detector's
  // decoding and NMS), on the host: aim-infer --postprocess times it with the network, as a user's
  // end-to-end inference. Default: none (has_postprocess() false; postprocess_outputs() fails).
  virtual bool has_postprocess() const { return false; }
  virtual TensorMap postprocess_outputs(const TensorMap& host_outputs) const;

  // CUDA graphs (aim-train --cuda-graph) replay one captured step, so every batch must have the
  // captured shapes. padded_shape(): the shape a batch tensor is padded to before a capture
  // (default: its own, no padding); pad_batch(): the batch padded to `shapes` (each dimension at
  // least the batch's) with values that leave the loss and every gradient unchanged (DIN: history
  // positions with mask 0). The default refuses a batch whose shapes differ, naming the tensor.
  virtual Shape padded_shape(const std::string& name, const Shape& shape) const {
    (void)name;
    return shape;
  }
  virtual TensorMap pad_batch(const TensorMap& batch,
                              const std::map<std::string, Shape>& shapes) const;

  // Mixed precision (autograd/amp.h, --precision fp16|bf16): the parameters that stay f32 even in
  // the low-precision ops (matmul, linear, conv, rnn), as regular expressions over parameter
  // names with the reason. Softmax, losses, reductions and normalisation statistics are f32 for
  // every model by the op policy (amp::policy()); this is each model's own list, in one place.
  struct Fp32Params {
    std::string pattern, why;
  };
  virtual std::vector<Fp32Params> amp_fp32_params() const = 0;

  // Checks that `batch` has every tensor of `specs` with the right dtype, rank and fixed sizes,
  // and that letters bind to one size throughout; errors name the tensor, the expected and the
  // found shape ("<where>: hist_item has shape [4, 7], expected [B, T] with B = 5").
  static void check_batch(const std::vector<TensorSpec>& specs, const TensorMap& batch,
                          const std::string& where);
};

// The batch on `d` for model `m`: every tensor moved there (shared when already there), plus the
// model's host_metadata() computed from the host batch and kept on the CPU.
TensorMap batch_to_device(const Model& m, const TensorMap& host_batch, Device d);

// Loads `path` (a safetensors state dict, e.g. --save-weights) into `m` for the flag `flag`
// (--weights): a file written for another model is refused naming both; an aim-train checkpoint
// (checkpoint.safetensors: model.* and optim.* tensors) gives its model.* weights. Errors name
// the flag and the file.
void load_weights_file(Model& m, const std::string& model_name, const std::string& path,
                       const std::string& flag = "--weights");

}  // namespace aim::models
