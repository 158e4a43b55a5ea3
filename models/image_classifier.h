// ImageClassifier: the Model face shared by the CNN classifiers of MODELS.md §2 (resnet, vgg,
// alexnet, squeezenet, googlenet, densenet, synnet). A subclass builds its layers as children
// with torchvision's names (so torchvision state dicts load as they are) and implements
// forward(x) -> logits and count_flops(in) -> analytic FLOPs; this class supplies the batch
// interface, the loss and the FLOP totals.
//   inputs:  "input" f32 [B, 3, H, W] (normalised image, NCHW; f64 for a model moved to f64)
//   labels:  "label" i64 [B] in [0, classes)
//   outputs: "logits" f32 [B, classes] (also named "output")
// Loss: softmax cross-entropy, mean over the batch, optional label smoothing (PyTorch's rule).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/model.h"

namespace aim::models {

struct ImageModelConfig {
  int64_t classes = 1000;
  int64_t height = 224, width = 224;
  double label_smoothing = 0;
  std::string variant;  // model-specific ("v1.5", "v1", "aimatrix_tf", ...)
  bool tiny = false;    // the model's tiny configuration (narrow, shallow; for tests and CI)
  uint64_t seed = 0;
};

class ImageClassifier : public Model {
 public:
  explicit ImageClassifier(const ImageModelConfig& c) : cfg_(c) {}

  std::vector<TensorSpec> input_specs() const override;
  std::vector<TensorSpec> label_specs() const override;
  std::vector<TensorSpec> output_specs() const override;
  std::vector<Fp32Params> amp_fp32_params() const override;
  TensorMap infer(const TensorMap& batch) override;
  Variable training_loss(const TensorMap& batch) override;
  // count_flops of the network on [B, 3, H, W] in the current mode (the loss is not counted).
  double forward_flops(const TensorMap& batch) const override;

  const ImageModelConfig& config() const { return cfg_; }
  // The parameters' dtype, which the input must have: f32, or f64 after to(DType::f64)
  // (the gradient parity tests).
  DType compute_dtype() const;

 protected:
  ImageModelConfig cfg_;
};

// Profiler layer scopes for the CNNs (the per-layer tables, the trace, NVTX fwd/<layer>): m's
// forward inside a layer scope `name`; and each child of a chain in its own scope
// "<prefix>.<child name>" (features.denseblock1, features.0), matching the parameter names.
Variable forward_in_layer(const std::string& name, layers::Module& m, const Variable& x);
Variable forward_children_in_layers(const std::string& prefix, const layers::Module& chain,
                                    const Variable& x);

// The initialisers the references use, applied to a built network (layers/init.h draws).
// torchvision ResNet/DenseNet: conv weights kaiming_normal(fan_out, relu), BN weight 1 bias 0.
void init_kaiming_normal_fan_out(layers::Module& m, uint64_t seed);
// TF (nvcnn.py): conv and FC weights Glorot-uniform, biases 0.
void init_glorot_uniform(layers::Module& m, uint64_t seed);

}  // namespace aim::models
