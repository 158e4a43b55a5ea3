// Dropout (torch.nn.Dropout): inverted dropout in training, identity in eval. The layer owns its
// Philox generator, so a run with the same seed drops the same elements.
#pragma once
#include <cstdint>

#include "autograd/functions/dropout.h"
#include "kernels/random/random.h"
#include "layers/module.h"

namespace aim::layers {

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, uint64_t seed = 0) : p_(p), gen_(seed) {
    AIM_CHECK(p >= 0 && p <= 1, "Dropout: p must lie in [0, 1], got ", p);
  }
  Variable forward(const Variable& x) override {
    return autograd::dropout(x, p_, is_training(), gen_);
  }
  std::string type_name() const override { return "Dropout"; }
  Shape count_flops(const Shape& in, double& flops) const override {
    if (is_training() && p_ > 0) flops += double(shape_numel(in));  // as dropout_fwd_cost
    return in;
  }
  double p() const { return p_; }
  void set_p(double p) {
    AIM_CHECK(p >= 0 && p <= 1, "Dropout: p must lie in [0, 1], got ", p);
    p_ = p;
  }
  kernels::Generator& generator() { return gen_; }

 private:
  double p_;
  kernels::Generator gen_;
};

}  // namespace aim::layers
