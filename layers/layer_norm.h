// LayerNorm (torch.nn.LayerNorm over the last dimension): y = (x - mean) / sqrt(var + eps) *
// weight + bias, weight initialised to ones and bias to zeros (elementwise_affine), eps as
// given (BERT: 1e-12). Through autograd::layer_norm (kernels/norm/layernorm.h).
#pragma once
#include <cstdint>

#include "autograd/functions/layer_norm.h"
#include "layers/module.h"

namespace aim::layers {

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t normalized_shape, double eps = 1e-5, bool elementwise_affine = true)
      : features_(normalized_shape), eps_(eps) {
    AIM_CHECK(normalized_shape > 0, "LayerNorm: normalized_shape must be > 0, got ",
              normalized_shape);
    AIM_CHECK(eps > 0, "LayerNorm: eps must be > 0, got ", eps);
    if (elementwise_affine) {
      weight = param("weight", Tensor::ones({normalized_shape}));
      bias = param("bias", Tensor::zeros({normalized_shape}));
    }
  }
  Variable forward(const Variable& x) override {
    AIM_CHECK(x.dim() >= 1 && x.size(x.dim() - 1) == features_, "LayerNorm(", features_,
              "): expected input [..., ", features_, "], got ", to_string(x.sizes()));
    return autograd::layer_norm(x, weight, bias, eps_);
  }
  // Mean, variance, normalise and the affine: about 8 FLOPs per element.
  Shape count_flops(const Shape& in, double& flops) const override {
    flops += 8.0 * double(shape_numel(in));
    return in;
  }
  std::string type_name() const override { return "LayerNorm"; }
  double eps() const { return eps_; }

  Parameter weight, bias;  // [normalized_shape], undefined without elementwise_affine

 private:
  int64_t features_;
  double eps_;
};

}  // namespace aim::layers
