// layer_norm, embedding and the losses: forward by the family kernels on contiguous 2-D (or
// flattened) views, backward by the family's backward kernels. layer_norm with only one of
// weight/bias runs the kernel with ones/zeros for the missing one; the dx kernel output is
// always computed (into a temporary when x needs no gradient) because the backward kernel
// writes it unconditionally.
#include "autograd/functions/nn.h"

#include "autograd/amp.h"
#include "autograd/node.h"
#include "autograd/tensor_ops.h"
#include "kernels/embedding/embedding.h"
#include "kernels/norm/layernorm.h"

namespace aim::autograd {
namespace {

using kernels::Reduction;

Shape loss_shape(const Tensor& x, Reduction r, int64_t rows) {
  if (r != Reduction::none) return {};
  return rows >= 0 ? Shape{rows} : x.sizes();
}

// A plain tensor moved to `like`'s device (and cast to its dtype when cast is set), contiguous.
Tensor conform(const Tensor& t, const Tensor& like, bool cast) {
  if (!t.defined()) return t;
  Tensor r = t.to(like.device());
  if (cast) r = r.to(like.dtype());
  return r.contiguous();
}

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

// ---- embedding -------------------------------------------------------------------------------

struct EmbeddingNode final : Node {
  Tensor indices;  // [N], contiguous, on the weight's device
  int64_t padding_idx = -1, C = 0;
  const char* name() const override { return "Embedding"; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    kernels::EmbeddingBwdArgs a;
    a.dout = g.dy().view({indices.numel(), C});
    a.indices = indices;
    a.dweight = g.accum(0);
    a.padding_idx = padding_idx;
    kernels::embedding_bwd(a);
  }
  void release() override { indices = Tensor(); }
};

// ---- cross entropy ---------------------------------------------------------------------------

struct CrossEntropyNode final : Node {
  Tensor logits, target, lse;
  int64_t ignore_index = -100;
  float label_smoothing = 0;
  Reduction reduction = Reduction::mean;
  const char* name() const override { return "CrossEntropy"; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    kernels::CrossEntropyBwdArgs a;
    a.dloss = g.dy();
    a.logits = logits;
    a.target = target;
    a.lse = lse;
    a.dlogits = g.out(0);
    a.ignore_index = ignore_index;
    a.label_smoothing = label_smoothing;
    a.reduction = reduction;
    kernels::cross_entropy_bwd(a);
  }
  void release() override { logits = target = lse = Tensor(); }
};

// ---- pointwise losses ------------------------------------------------------------------------

struct PointwiseLossNode final : Node {
  kernels::PointwiseKind kind = kernels::PointwiseKind::mse;
  Tensor x, target, pos_weight;
  Reduction reduction = Reduction::mean;
  float beta = 1;
  const char* name() const override {
    switch (kind) {
      case kernels::PointwiseKind::bce_with_logits:
        return "BceWithLogits";
      case kernels::PointwiseKind::mse:
        return "MseLoss";
      case kernels::PointwiseKind::smooth_l1:
        return "SmoothL1Loss";
    }
    return "PointwiseLoss";
  }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    const Tensor dx = g.out(0);
    switch (kind) {
      case kernels::PointwiseKind::bce_with_logits: {
        kernels::BceWithLogitsBwdArgs a;
        a.dloss = g.dy();
        a.logits = x;
        a.target = target;
        a.pos_weight = pos_weight;
        a.dlogits = dx;
        a.reduction = reduction;
        kernels::bce_with_logits_bwd(a);
        break;
      }
      case kernels::PointwiseKind::mse: {
        kernels::MseBwdArgs a;
        a.dloss = g.dy();
        a.input = x;
        a.target = target;
        a.dinput = dx;
        a.reduction = reduction;
        kernels::mse_bwd(a);
        break;
      }
      case kernels::PointwiseKind::smooth_l1: {
        kernels::SmoothL1BwdArgs a;
        a.dloss = g.dy();
        a.input = x;
        a.target = target;
        a.dinput = dx;
        a.reduction = reduction;
        a.beta = beta;
        kernels::smooth_l1_bwd(a);
        break;
      }
    }
  }
  void release() override { x = target = pos_weight = Tensor(); }
};

Variable record_pointwise(kernels::PointwiseKind kind, const Variable& input, const Tensor& x,
                          const Tensor& target, const Tensor& pos_weight, const Tensor& loss,
                          Reduction r, float beta) {
  if (!needs_grad({&input})) return Variable(loss);
  auto n = std::make_shared<PointwiseLossNode>();
  n->kind = kind;
  n->x = x;
  n->target = target;
  n->pos_weight = pos_weight;
  n->reduction = r;
  n->beta = beta;
  return attach1(n, {input}, loss);
}

}  // namespace

Variable layer_norm(const Variable& x, const Variable& weight, const Variable& bias, double eps) {
  if (auto c = amp::autocast(amp::OpClass::fp32, {&x, &weight, &bias}))
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

Variable embedding(const Variable& weight, const Tensor& indices, int64_t padding_idx) {
  AIM_CHECK(weight.defined() && weight.dim() == 2, "embedding: weight must be [V, C]");
  AIM_CHECK(indices.defined(), "embedding: undefined indices");
  const int64_t C = weight.size(1);
  const Tensor w = weight.data().contiguous();
  kernels::EmbeddingFwdArgs a;
  a.weight = w;
  a.indices = conform(indices, w, false).view({indices.numel()});
  a.out = Tensor::empty({indices.numel(), C}, w.dtype(), w.device());
  a.padding_idx = padding_idx < 0 ? -1 : padding_idx;
  kernels::embedding_fwd(a);
  Shape s = indices.sizes();
  s.push_back(C);
  const Tensor y = a.out.view(s);
  if (!needs_grad({&weight})) return Variable(y);
  auto n = std::make_shared<EmbeddingNode>();
  n->indices = a.indices;
  n->padding_idx = a.padding_idx;
  n->C = C;
  return attach1(n, {weight}, y);
}

Variable cross_entropy(const Variable& logits, const Tensor& target, Reduction r,
                       int64_t ignore_index, double label_smoothing) {
  if (auto c = amp::autocast(amp::OpClass::fp32, {&logits}))
    return cross_entropy((*c)[0], target, r, ignore_index, label_smoothing);
  AIM_CHECK(logits.defined() && logits.dim() == 2, "cross_entropy: logits must be [N, V], got ",
            logits.defined() ? to_string(logits.sizes()) : std::string("undefined"));
  kernels::CrossEntropyFwdArgs a;
  a.logits = logits.data().contiguous();
  a.target = conform(target, a.logits, false);
  const int64_t N = a.logits.size(0);
  const DType ld = kernels::loss_dtype(a.logits.dtype());
  a.loss = Tensor::empty(loss_shape(a.logits, r, N), ld, a.logits.device());
  a.lse = Tensor::empty({N}, ld, a.logits.device());
  a.ignore_index = ignore_index;
  a.label_smoothing = float(label_smoothing);
  a.reduction = r;
  kernels::cross_entropy_fwd(a);
  if (!needs_grad({&logits})) return Variable(a.loss);
  auto n = std::make_shared<CrossEntropyNode>();
  n->logits = a.logits;
  n->target = a.target;
  n->lse = a.lse;
  n->ignore_index = ignore_index;
  n->label_smoothing = a.label_smoothing;
  n->reduction = r;
  return attach1(n, {logits}, a.loss);
}

Variable bce_with_logits(const Variable& logits, const Tensor& target, Reduction r,
                         const Tensor& pos_weight) {
  if (auto c = amp::autocast(amp::OpClass::fp32, {&logits}))
    return bce_with_logits((*c)[0], target, r, pos_weight);
  AIM_CHECK(logits.defined(), "bce_with_logits: undefined logits");
  kernels::BceWithLogitsFwdArgs a;
  a.logits = logits.data().contiguous();
  a.target = conform(target, a.logits, true);
  a.pos_weight = conform(pos_weight, a.logits, true);
  a.loss = Tensor::empty(loss_shape(a.logits, r, -1), kernels::loss_dtype(a.logits.dtype()),
                         a.logits.device());
  a.reduction = r;
  kernels::bce_with_logits_fwd(a);
  return record_pointwise(kernels::PointwiseKind::bce_with_logits, logits, a.logits, a.target,
                          a.pos_weight, a.loss, r, 0);
}

Variable mse_loss(const Variable& input, const Tensor& target, Reduction r) {
  if (auto c = amp::autocast(amp::OpClass::fp32, {&input})) return mse_loss((*c)[0], target, r);
  AIM_CHECK(input.defined(), "mse_loss: undefined input");
  kernels::MseFwdArgs a;
  a.input = input.data().contiguous();
  a.target = conform(target, a.input, true);
  a.loss = Tensor::empty(loss_shape(a.input, r, -1), kernels::loss_dtype(a.input.dtype()),
                         a.input.device());
  a.reduction = r;
  kernels::mse_fwd(a);
  return record_pointwise(kernels::PointwiseKind::mse, input, a.input, a.target, Tensor(), a.loss,
                          r, 0);
}

Variable smooth_l1_loss(const Variable& input, const Tensor& target, double beta, Reduction r) {
  if (auto c = amp::autocast(amp::OpClass::fp32, {&input}))
    return smooth_l1_loss((*c)[0], target, beta, r);
  AIM_CHECK(input.defined(), "smooth_l1_loss: undefined input");
  kernels::SmoothL1FwdArgs a;
  a.input = input.data().contiguous();
  a.target = conform(target, a.input, true);
  a.loss = Tensor::empty(loss_shape(a.input, r, -1), kernels::loss_dtype(a.input.dtype()),
                         a.input.device());
  a.reduction = r;
  a.beta = float(beta);
  kernels::smooth_l1_fwd(a);
  return record_pointwise(kernels::PointwiseKind::smooth_l1, input, a.input, a.target, Tensor(),
                          a.loss, r, a.beta);
}

}  // namespace aim::autograd
