// Linear: y = x @ weight^T + bias (torch.nn.Linear). x [..., in] -> [..., out].
// Init as PyTorch: kaiming_uniform(a = sqrt(5)) for weight and U(-1/sqrt(in), 1/sqrt(in)) for
// bias, i.e. both U(-1/sqrt(in), 1/sqrt(in)), drawn from Philox(seed): weight first, then bias.
#pragma once
#include <cmath>
#include <cstdint>

#include "autograd/functions/matmul.h"
#include "kernels/matmul/matmul.h"
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
  Variable forward(const Variable& x) override {
    return autograd::linear(x, weight, bias, packed_weight(x));
  }
  // Inference with frozen weights (aim-infer): from the next eval-mode forward on, a weight that
  // the CPU GEMM's path for few rows reads (kernels::matmul_reads_packed_b: a large weight at a
  // small batch) is packed once and kept (same bits; the FMAs then overlap the weight's stream from
  // memory instead of following a copy of it in every call). About the weight's size more memory.
  // The copy is used only by eval-mode forwards without autograd (a forward in training mode or
  // recording a graph drops it: an optimizer may change the weight next), while the weight is the
  // tensor that was packed, and until load_state_dict writes into it.
  bool allow_prepack(bool on) override {
    prepack_ = on;
    if (!on) packed_ = Tensor();
    return true;
  }
  int64_t prepacked_bytes() const override {
    return packed_.defined() ? packed_.numel() * int64_t(sizeof(float)) : 0;
  }
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
  // allow_prepack(): the weight packed for kernels::MatmulArgs::b_packed, and its source.
  void parameters_written() override { packed_ = Tensor(); }
  Tensor packed_weight(const Variable& x) {
    if (!prepack_ || !x.defined()) return Tensor();
    if (is_training() || autograd::grad_enabled()) {
      packed_ = Tensor();
      return Tensor();
    }
    const Tensor& w = weight.data();
    if (!kernels::matmul_reads_packed_b(w, true, x.numel() / in_features_)) return Tensor();
    if (!packed_.defined() || packed_of_ != w.raw_data()) {
      packed_ = kernels::matmul_pack_b(w, true);
      packed_of_ = w.raw_data();
    }
    return packed_;
  }
  bool prepack_ = false;
  Tensor packed_;
  const void* packed_of_ = nullptr;
};

}  // namespace aim::layers
