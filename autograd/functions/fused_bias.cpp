// bias_gelu and add_layer_norm: forward by bias_gelu_fwd / add_layernorm_fwd on a contiguous
// [N, C] view, backward by their backward kernels. Autocast classes: those the unfused chain
// gives, so that autocast changes nothing but the fusion (docs/precision.md).
#include "autograd/functions/fused_bias.h"

#include "autograd/amp.h"
#include "autograd/functions/elementwise.h"
#include "autograd/node.h"
#include "autograd/tensor_ops.h"
#include "kernels/elementwise/bias_gelu.h"
#include "kernels/norm/add_layernorm.h"

namespace aim::autograd {
namespace {

// [..., C] -> N = numel / C rows.
int64_t rows_of(const Variable& x) {
  const int64_t C = x.size(-1);
  return C ? x.numel() / C : 0;
}

// ---- bias_gelu -------------------------------------------------------------------------------

struct BiasGeluNode final : Node {
  Tensor x, bias;  // x as [N, C]
  bool tanh = false;
  const char* name() const override { return "BiasGelu"; }
  void backward(Grads& g) override {
    if (!g.needs(0) && !g.needs(1)) return;
    kernels::BiasGeluBwdArgs a;
    a.dy = g.dy().view(x.sizes());
    a.x = x;
    a.bias = bias;
    a.dx = g.needs(0) ? g.out(0).view(x.sizes()) : empty_like(x);  // activation: written
    if (g.needs(1)) a.dbias = g.accum(1);                          // parameter: accumulated
    a.tanh = tanh;
    kernels::bias_gelu_bwd(a);
  }
  void release() override { x = bias = Tensor(); }
};

// ---- add_layer_norm --------------------------------------------------------------------------

struct AddLayerNormNode final : Node {
  Tensor h, gamma, mean, rstd;  // h as [N, C]; gamma: the one the forward used, or undefined
  bool has_bias = false, has_weight = false, has_ln_bias = false;
  const char* name() const override { return "AddLayerNorm"; }
  // Inputs: 0 x, 1 bias, 2 residual, 3 weight, 4 ln_bias.
  void backward(Grads& g) override {
    kernels::AddLayerNormBwdArgs a;
    a.dy = g.dy().view(h.sizes());
    a.h = h;
    a.gamma = gamma;
    a.mean = mean;
    a.rstd = rstd;
    // dh is the gradient of x and of residual: written once, handed to both.
    if (g.needs(0)) {
      const Tensor dh = g.out(0);
      a.dh = dh.view(h.sizes());
      if (g.needs(2)) g.set(2, dh);
    } else if (g.needs(2)) {
      a.dh = g.out(2).view(h.sizes());
    } else {
      a.dh = empty_like(h);  // the kernel writes dh unconditionally
    }
    if (has_bias && g.needs(1)) a.dbias = g.accum(1);
    if (has_weight && g.needs(3)) a.dgamma = g.accum(3);
    if (has_ln_bias && g.needs(4)) a.dbeta = g.accum(4);
    kernels::add_layernorm_bwd(a);
  }
  void release() override { h = gamma = mean = rstd = Tensor(); }
};

}  // namespace

// The unfused chain is add (promote) then gelu (native): mixed 16-bit/f32 inputs (a 16-bit
// activation and an f32 bias) run in f32, one dtype runs in that dtype. That is promote.
constexpr amp::Declaration kBiasGeluAmp{"bias_gelu", amp::OpClass::promote, amp::kWhyPromote};
Variable bias_gelu(const Variable& x, const Variable& bias, bool tanh_approximation) {
  if (!bias.defined()) return gelu(x, tanh_approximation);
  if (auto c = amp::autocast(kBiasGeluAmp, {&x, &bias}))
    return bias_gelu((*c)[0], (*c)[1], tanh_approximation);
  AIM_CHECK(x.defined() && x.dim() >= 1, "bias_gelu: x must have at least one dim");
  const int64_t C = x.size(-1), N = rows_of(x);
  AIM_CHECK(bias.sizes() == Shape{C}, "bias_gelu: bias must be [", C, "] for x ",
            to_string(x.sizes()), ", got ", to_string(bias.sizes()));
  kernels::BiasGeluFwdArgs a;
  a.x = x.data().contiguous().view({N, C});
  a.bias = bias.data().contiguous();
  a.y = Tensor::empty({N, C}, x.dtype(), x.device());
  a.tanh = tanh_approximation;
  kernels::bias_gelu_fwd(a);
  const Tensor y = a.y.view(x.sizes());
  if (!needs_grad({&x, &bias})) return Variable(y);
  auto n = std::make_shared<BiasGeluNode>();
  n->x = a.x;
  n->bias = a.bias;
  n->tanh = tanh_approximation;
  return attach1(n, {x, bias}, y);
}

// The unfused chain ends in layer_norm (fp32: normalisation statistics), whose f32 cast of the sum
// decides the output's dtype; in the fused op the adds run in f32 too (h is not rounded to 16 bits
// first: a little more accurate than the chain, never less).
constexpr amp::Declaration kAddLayerNormAmp{"add_layer_norm", amp::OpClass::fp32,
                                            amp::kWhyNormStats};
Variable add_layer_norm(const Variable& x, const Variable& bias, const Variable& residual,
                        const Variable& weight, const Variable& ln_bias, double eps) {
  if (auto c = amp::autocast(kAddLayerNormAmp, {&x, &bias, &residual, &weight, &ln_bias}))
    return add_layer_norm((*c)[0], (*c)[1], (*c)[2], (*c)[3], (*c)[4], eps);
  AIM_CHECK(x.defined() && x.dim() >= 1 && residual.defined(),
            "add_layer_norm: x (at least one dim) and residual must be defined");
  AIM_CHECK(residual.sizes() == x.sizes(), "add_layer_norm: residual ", to_string(residual.sizes()),
            " must have x's shape ", to_string(x.sizes()));
  const int64_t C = x.size(-1), N = rows_of(x);
  for (const Variable* p : {&bias, &weight, &ln_bias})
    AIM_CHECK(!p->defined() || p->sizes() == Shape{C}, "add_layer_norm: bias, weight and ln_bias ",
              "must be [", C, "] for x ", to_string(x.sizes()), ", got ", to_string(p->sizes()));
  kernels::AddLayerNormFwdArgs a;
  a.x = x.data().contiguous().view({N, C});
  a.residual = residual.data().contiguous().view({N, C});
  if (bias.defined()) a.bias = bias.data().contiguous();
  if (weight.defined() || ln_bias.defined()) {  // the kernel takes both or neither
    a.gamma =
        weight.defined() ? weight.data().contiguous() : Tensor::ones({C}, x.dtype(), x.device());
    a.beta =
        ln_bias.defined() ? ln_bias.data().contiguous() : Tensor::zeros({C}, x.dtype(), x.device());
  }
  const DType s = kernels::layernorm_stat_dtype(x.dtype());
  a.h = Tensor::empty({N, C}, x.dtype(), x.device());
  a.y = Tensor::empty({N, C}, x.dtype(), x.device());
  a.mean = Tensor::empty({N}, s, x.device());
  a.rstd = Tensor::empty({N}, s, x.device());
  a.eps = float(eps);
  kernels::add_layernorm_fwd(a);
  const Tensor y = a.y.view(x.sizes());
  if (!needs_grad({&x, &bias, &residual, &weight, &ln_bias})) return Variable(y);
  auto n = std::make_shared<AddLayerNormNode>();
  n->h = a.h;
  n->gamma = weight.defined() ? a.gamma : Tensor();  // ones would change nothing
  n->mean = a.mean;
  n->rstd = a.rstd;
  n->has_bias = bias.defined();
  n->has_weight = weight.defined();
  n->has_ln_bias = ln_bias.defined();
  return attach1(n, {x, bias, residual, weight, ln_bias}, y);
}

void amp::declarations_fused_bias(std::vector<amp::Declaration>& out) {
  out.insert(out.end(), {kBiasGeluAmp, kAddLayerNormAmp});
}

}  // namespace aim::autograd
