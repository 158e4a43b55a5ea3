// Activation modules: ReLU, Sigmoid, PReLU, GELU (torch.nn.*) and Dice (DIN, Zhou et al. 2018).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "autograd/functions/elementwise.h"
#include "layers/module.h"

namespace aim::layers {

class ReLU : public Module {
 public:
  Variable forward(const Variable& x) override { return autograd::relu(x); }
  Shape count_flops(const Shape& in, double& flops) const override {
    flops += double(shape_numel(in));
    return in;
  }
  std::string type_name() const override { return "ReLU"; }
};

class Sigmoid : public Module {
 public:
  Variable forward(const Variable& x) override { return autograd::sigmoid(x); }
  std::string type_name() const override { return "Sigmoid"; }
};

// y = max(0, x) + weight * min(0, x), weight [num_parameters] along dim 1 (or one shared value).
class PReLU : public Module {
 public:
  explicit PReLU(int64_t num_parameters = 1, double init = 0.25)
      : weight(param("weight", Tensor::full({num_parameters}, init))) {}
  Variable forward(const Variable& x) override { return autograd::prelu(x, weight); }
  std::string type_name() const override { return "PReLU"; }

  Parameter weight;  // [num_parameters]
};

// GELU (torch.nn.GELU): exact x * Phi(x) by default, or the tanh approximation (approximate =
// "tanh"; BERT's original TF code used it, Hugging Face's BERT uses the exact form).
class GELU : public Module {
 public:
  explicit GELU(bool tanh_approximation = false) : tanh_(tanh_approximation) {}
  Variable forward(const Variable& x) override { return autograd::gelu(x, tanh_); }
  std::string type_name() const override { return "GELU"; }
  bool tanh_approximation() const { return tanh_; }

 private:
  bool tanh_;
};

// Dice over x [..., C] (channels last, as DIN's Dice.py with axis = -1):
//   p = sigmoid((x - mean) / sqrt(var + eps)),  y = p * x + (1 - p) * alpha * x
// Training: mean and biased var of the batch over every dim but C, and running_mean /
// running_var updated with momentum (unbiased var, as BatchNorm1d). Eval: running stats.
// alpha [C] starts at 0 (DIN); eps 1e-8 as DeepCTR's Dice.
class Dice : public Module {
 public:
  explicit Dice(int64_t channels, double eps = 1e-8, double momentum = 0.1,
                double alpha_init = 0.0);
  Variable forward(const Variable& x) override;
  std::string type_name() const override { return "Dice"; }
  bool uses_batch_statistics() const override { return true; }

  Parameter alpha;  // [C]

 private:
  int64_t channels_;
  double eps_, momentum_;
  Tensor& running_mean_;  // [C] buffer slots
  Tensor& running_var_;
};

// An activation by name for configs: "relu", "sigmoid", "prelu", "dice"; `channels` sizes the
// PReLU / Dice parameters. nullptr for "none" / "".
std::shared_ptr<Module> make_activation(const std::string& name, int64_t channels);

}  // namespace aim::layers
