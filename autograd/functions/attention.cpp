// scaled_dot_product_attention: forward by attention_fwd (o and the rows' log-sum-exp), backward
// by attention_bwd from the saved q, k, v, o and lse (the probabilities are recomputed there).
#include "autograd/functions/attention.h"

#include "autograd/amp.h"
#include "autograd/node.h"
#include "kernels/attention/attention.h"

namespace aim::autograd {
namespace {

struct AttentionNode final : Node {
  kernels::AttentionFwdArgs fwd;  // q, k, v, mask, o, lse and the parameters
  const char* name() const override { return "ScaledDotProductAttention"; }
  void backward(Grads& g) override {
    if (!g.needs(0) && !g.needs(1) && !g.needs(2)) return;
    kernels::AttentionBwdArgs a;
    a.dout = g.dy();
    a.q = fwd.q, a.k = fwd.k, a.v = fwd.v, a.o = fwd.o, a.lse = fwd.lse, a.mask = fwd.mask;
    // One kernel writes the three gradients: an input that needs none gets a scratch tensor.
    auto grad = [&](int j, const Tensor& like) {
      return g.needs(j) ? g.out(j) : Tensor::empty(like.sizes(), like.dtype(), like.device());
    };
    a.dq = grad(0, fwd.q), a.dk = grad(1, fwd.k), a.dv = grad(2, fwd.v);
    a.scale = fwd.scale, a.causal = fwd.causal, a.dropout_p = fwd.dropout_p;
    a.seed = fwd.seed, a.offset = fwd.offset;
    kernels::attention_bwd(a);
  }
  void release() override { fwd = kernels::AttentionFwdArgs(); }
};

}  // namespace

// GEMM-shaped work (q k^T and p v) with f32 accumulation and an f32 softmax inside the kernel.
constexpr amp::Declaration kAttentionAmp{"scaled_dot_product_attention", amp::OpClass::lowp,
                                         "two GEMMs per head; softmax and lse in f32 inside"};
Variable scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v,
                                      const AttentionOptions& o) {
  if (auto c = amp::autocast(kAttentionAmp, {&q, &k, &v}))
    return scaled_dot_product_attention((*c)[0], (*c)[1], (*c)[2], o);
  AIM_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
            "[scaled_dot_product_attention] q, k, v must be [B, NH, T, HS], got ",
            to_string(q.sizes()), ", ", to_string(k.sizes()), ", ", to_string(v.sizes()));
  AIM_CHECK(o.dropout_p >= 0 && o.dropout_p <= 1,
            "[scaled_dot_product_attention] dropout_p must be in [0, 1], got ", o.dropout_p);
  kernels::AttentionFwdArgs a;
  a.q = q.data().contiguous();
  a.k = k.data().contiguous();
  a.v = v.data().contiguous();
  a.mask = o.mask;
  a.o = Tensor::empty(a.q.sizes(), a.q.dtype(), a.q.device());
  const DType lse_dtype = a.q.dtype() == DType::f64 ? DType::f64 : DType::f32;
  a.lse = Tensor::empty({a.q.size(0), a.q.size(1), a.q.size(2)}, lse_dtype, a.q.device());
  a.scale = float(o.scale);
  a.causal = o.causal;
  if (o.training && o.dropout_p > 0) {
    AIM_CHECK(o.gen, "[scaled_dot_product_attention] dropout in training needs a generator");
    a.dropout_p = float(o.dropout_p);
    a.seed = o.gen->seed();
    a.offset = o.gen->next(a.q.size(0) * a.q.size(1) * a.q.size(2) * a.k.size(2));
  }
  kernels::attention_fwd(a);
  if (!needs_grad({&q, &k, &v})) return Variable(a.o);
  auto n = std::make_shared<AttentionNode>();
  n->fwd = a;
  return attach1(n, {q, k, v}, a.o);
}

void amp::declarations_attention(std::vector<amp::Declaration>& out) {
  out.insert(out.end(), {kAttentionAmp});
}

}  // namespace aim::autograd
