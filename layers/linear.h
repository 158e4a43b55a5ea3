// Linear: y = x @ weight^T + bias (torch.nn.Linear). x [..., in] -> [..., out].
// Init as PyTorch: kaiming_uniform(a = sqrt(5)) for weight and U(-1/sqrt(in), 1/sqrt(in)) for
// bias, i.e. both U(-1/sqrt(in), 1/sqrt(in)), drawn from Philox(seed): weight first, then bias.
#pragma once
#include <cmath>
#include <cstdint>

#include "autograd/functions/matmul.h"
#include "kernels/random/random.h"
#include "layers/init.h"
#include "layers/module.h"

namespace aim::layers {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, uint64_t seed = 0, bool bias = true)
      : in_features_(in_features), out_features_(out_features) {
    AIM_CHECK(in_features > 0 && out_features > 0,
              "Linear: features must be positive, got in=", in_features, " out=", out_features);
    kernels::Generator gen(seed);
    const double bound = 1.0 / std::sqrt(double(in_features));
    weight = param("weight", uniform_init({out_features, in_features}, -bound, bound, gen));
    if (bias) this->bias = param("bias", uniform_init({out_features}, -bound, bound, gen));
  }
  Variable forward(const Variable& x) override { return autograd::linear(x, weight, bias); }
  // The GEMM's 2*rows*in*out (the fused bias is not counted, as kernels/matmul counts it).
  Shape count_flops(const Shape& in, double& flops) const override {
    AIM_CHECK(!in.empty() && in.back() == in_features_, "Linear(", in_features_, " -> ",
              out_features_, "): expected input [..., ", in_features_, "], got ", to_string(in));
    Shape out = in;
    out.back() = out_features_;
    flops += 2.0 * double(shape_numel(out)) * double(in_features_);
    return out;
  }
  std::string type_name() const override { return "Linear"; }
  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }

  Parameter weight;  // [out, in]
  Parameter bias;    // [out], undefined when bias = false

 private:
  int64_t in_features_, out_features_;
};

}  // namespace aim::layers
