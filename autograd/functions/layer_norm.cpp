// layer_norm: forward by the layernorm kernel on a contiguous [N, C] view, backward by its
// backward kernel. With only one of weight/bias the kernel runs with ones/zeros for the missing
// one; the dx kernel output is always computed (into a temporary when x needs no gradient)
// because the backward kernel writes it unconditionally.
#include "autograd/functions/layer_norm.h"

#include "autograd/amp.h"
#include "autograd/node.h"
#include "autograd/tensor_ops.h"
#include "kernels/norm/layernorm.h"

namespace aim::autograd {
namespace {

// ---- layer_norm ------------------------------------------------------------------------------

struct LayerNormNode final : Node {
  Tensor x, gamma, mean, rstd;  // x as [N, C]; gamma: the one the forward used, or undefined
  bool has_weight = false, has_bias = false;
  const char* name() const override { return "LayerNorm"; }
  void backward(Grads& g) override {
    kernels::LayerNormBwdArgs a;
    a.dy = g.dy().view(x.sizes());
    a.x = x;
    a.gamma = gamma;
    a.mean = mean;
    a.rstd = rstd;
    a.dx = g.needs(0) ? g.out(0).view(x.sizes()) : empty_like(x);  // activation: written
    if (has_weight && g.needs(1)) a.dgamma = g.accum(1);           // parameters: accumulated
    if (has_bias && g.needs(2)) a.dbeta = g.accum(2);
    kernels::layernorm_bwd(a);
  }
  void release() override { x = gamma = mean = rstd = Tensor(); }
};

}  // namespace

constexpr amp::Declaration kLayerNormAmp{"layer_norm", amp::OpClass::fp32, amp::kWhyNormStats};
Variable layer_norm(const Variable& x, const Variable& weight, const Variable& bias, double eps) {
  if (auto c = amp::autocast(kLayerNormAmp, {&x, &weight, &bias}))
    return layer_norm((*c)[0], (*c)[1], (*c)[2], eps);
  AIM_CHECK(x.defined() && x.dim() >= 1, "layer_norm: x must have at least one dim");
  const int64_t C = x.size(-1);
  const int64_t N = C ? x.numel() / C : 0;
  const Tensor x2 = x.data().contiguous().view({N, C});
  kernels::LayerNormFwdArgs a;
  a.x = x2;
  if (weight.defined() || bias.defined()) {
    a.gamma =
        weight.defined() ? weight.data().contiguous() : Tensor::ones({C}, x.dtype(), x.device());
    a.beta = bias.defined() ? bias.data().contiguous() : Tensor::zeros({C}, x.dtype(), x.device());
  }
  const DType s = kernels::layernorm_stat_dtype(x.dtype());
  a.y = Tensor::empty({N, C}, x.dtype(), x.device());
  a.mean = Tensor::empty({N}, s, x.device());
  a.rstd = Tensor::empty({N}, s, x.device());
  a.eps = float(eps);
  kernels::layernorm_fwd(a);
  const Tensor y = a.y.view(x.sizes());
  if (!needs_grad({&x, &weight, &bias})) return Variable(y);
  auto n = std::make_shared<LayerNormNode>();
  n->x = x2;
  n->gamma = weight.defined() ? a.gamma : Tensor();  // ones would change nothing
  n->mean = a.mean;
  n->rstd = a.rstd;
  n->has_weight = weight.defined();
  n->has_bias = bias.defined();
  return attach1(n, {x, weight, bias}, y);
}

void amp::declarations_layer_norm(std::vector<amp::Declaration>& out) {
  out.insert(out.end(), {kLayerNormAmp});
}

}  // namespace aim::autograd
