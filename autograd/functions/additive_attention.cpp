// additive_attention on the kernels of kernels/additive_attention.
#include "autograd/functions/additive_attention.h"

#include "autograd/amp.h"
#include "autograd/node.h"
#include "kernels/additive_attention/additive_attention.h"

namespace aim::autograd {
namespace {

// Inputs in order: keys, query, bias, v, g, values. Outputs: context, align.
struct AdditiveAttentionNode final : Node {
  Tensor keys, query, bias, v, g, values, lengths, align;
  const char* name() const override { return "AdditiveAttention"; }
  void backward(Grads& gr) override {
    kernels::AdditiveAttentionBwdArgs a;
    a.keys = keys, a.query = query, a.bias = bias, a.v = v, a.g = g, a.values = values;
    a.lengths = lengths, a.align = align;
    a.dcontext = gr.dy(0);
    a.dalign = gr.dy(1);
    if (gr.needs(0)) a.dkeys = gr.out(0);
    if (gr.needs(1)) a.dquery = gr.out(1);
    if (gr.needs(2)) a.dbias = gr.accum(2);
    if (gr.needs(3)) a.dv = gr.accum(3);
    if (gr.needs(4)) a.dg = gr.accum(4);
    if (gr.needs(5)) a.dvalues = gr.out(5);
    kernels::additive_attention_bwd(a);
  }
  void release() override { keys = query = bias = v = g = values = lengths = align = Tensor(); }
};

}  // namespace

// The softmax over source steps and the sums over them stay f32.
constexpr amp::Declaration kAdditiveAttentionAmp{"additive_attention", amp::OpClass::fp32,
                                                 "softmax over the source and its sums"};

AdditiveAttentionResult additive_attention(const Variable& keys, const Variable& query,
                                           const Variable& bias, const Variable& v,
                                           const Variable& g, const Variable& values,
                                           const Tensor& lengths) {
  if (auto c = amp::autocast(kAdditiveAttentionAmp, {&keys, &query, &bias, &v, &g, &values}))
    return additive_attention((*c)[0], (*c)[1], (*c)[2], (*c)[3], (*c)[4], (*c)[5], lengths);
  AIM_CHECK(keys.defined() && keys.dim() == 3 && values.defined() && values.dim() == 3,
            "additive_attention: keys [B, T, C] and values [B, T, D] needed, got keys ",
            keys.defined() ? to_string(keys.sizes()) : std::string("undefined"), ", values ",
            values.defined() ? to_string(values.sizes()) : std::string("undefined"));
  kernels::AdditiveAttentionFwdArgs a;
  a.keys = keys.data().contiguous();
  a.query = query.data().contiguous();
  a.bias = bias.data().contiguous();
  a.v = v.data().contiguous();
  a.g = g.data().contiguous();
  a.values = values.data().contiguous();
  a.lengths = lengths;
  const int64_t B = a.keys.size(0), T = a.keys.size(1), D = a.values.size(2);
  a.align = Tensor::empty({B, T}, a.keys.dtype(), a.keys.device());
  a.context = Tensor::empty({B, D}, a.keys.dtype(), a.keys.device());
  kernels::additive_attention_fwd(a);
  if (!needs_grad({&keys, &query, &bias, &v, &g, &values}))
    return {Variable(a.context), Variable(a.align)};
  auto n = std::make_shared<AdditiveAttentionNode>();
  n->keys = a.keys, n->query = a.query, n->bias = a.bias, n->v = a.v, n->g = a.g;
  n->values = a.values, n->lengths = lengths, n->align = a.align;
  std::vector<Variable> out = attach(n, {keys, query, bias, v, g, values}, {a.context, a.align});
  return {out[0], out[1]};
}

void amp::declarations_additive_attention(std::vector<amp::Declaration>& out) {
  out.push_back(kAdditiveAttentionAmp);
}

}  // namespace aim::autograd
