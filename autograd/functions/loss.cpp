// The losses: forward by the loss kernels on contiguous 2-D (or flattened) views, backward by
// their backward kernels.
#include "autograd/functions/loss.h"

#include "autograd/amp.h"
#include "autograd/node.h"
#include "autograd/tensor_ops.h"

namespace aim::autograd {
namespace {

using kernels::Reduction;

Shape loss_shape(const Tensor& x, Reduction r, int64_t rows) {
  if (r != Reduction::none) return {};
  return rows >= 0 ? Shape{rows} : x.sizes();
}

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

// The reason the four declarations of this file share.
constexpr char kWhyLoss[] = "losses";

constexpr amp::Declaration kCrossEntropyAmp{"cross_entropy", amp::OpClass::fp32, kWhyLoss};
Variable cross_entropy(const Variable& logits, const Tensor& target, Reduction r,
                       int64_t ignore_index, double label_smoothing) {
  if (auto c = amp::autocast(kCrossEntropyAmp, {&logits}))
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

constexpr amp::Declaration kBceWithLogitsAmp{"bce_with_logits", amp::OpClass::fp32, kWhyLoss};
Variable bce_with_logits(const Variable& logits, const Tensor& target, Reduction r,
                         const Tensor& pos_weight) {
  if (auto c = amp::autocast(kBceWithLogitsAmp, {&logits}))
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

constexpr amp::Declaration kMseLossAmp{"mse_loss", amp::OpClass::fp32, kWhyLoss};
Variable mse_loss(const Variable& input, const Tensor& target, Reduction r) {
  if (auto c = amp::autocast(kMseLossAmp, {&input})) return mse_loss((*c)[0], target, r);
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

constexpr amp::Declaration kSmoothL1LossAmp{"smooth_l1_loss", amp::OpClass::fp32, kWhyLoss};
Variable smooth_l1_loss(const Variable& input, const Tensor& target, double beta, Reduction r) {
  if (auto c = amp::autocast(kSmoothL1LossAmp, {&input}))
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

void amp::declarations_loss(std::vector<amp::Declaration>& out) {
  out.insert(out.end(), {kCrossEntropyAmp, kBceWithLogitsAmp, kMseLossAmp, kSmoothL1LossAmp});
}

}  // namespace aim::autograd
