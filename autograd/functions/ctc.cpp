// ctc_loss: the forward kernel writes the loss and log_alpha; the node keeps log_alpha (and the
// inputs) for ctc_bwd, which writes the whole gradient of log_probs.
#include "autograd/functions/ctc.h"

#include "autograd/node.h"
#include "kernels/loss/ctc.h"

namespace aim::autograd {
namespace {

using kernels::Reduction;

struct CtcLossNode final : Node {
  Tensor log_probs, targets, input_lengths, target_lengths, log_alpha;
  int64_t blank = 0;
  Reduction reduction = Reduction::mean;
  bool zero_infinity = false;
  const char* name() const override { return "CtcLoss"; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    kernels::CtcBwdArgs a;
    a.dloss = g.dy();
    a.log_probs = log_probs;
    a.targets = targets;
    a.input_lengths = input_lengths;
    a.target_lengths = target_lengths;
    a.log_alpha = log_alpha;
    a.dlog_probs = g.out(0);  // activation gradient: written
    a.blank = blank;
    a.reduction = reduction;
    a.zero_infinity = zero_infinity;
    kernels::ctc_bwd(a);
  }
  void release() override {
    log_probs = targets = input_lengths = target_lengths = log_alpha = Tensor();
  }
};

}  // namespace

Variable ctc_loss(const Variable& log_probs, const Tensor& targets, const Tensor& input_lengths,
                  const Tensor& target_lengths, int64_t blank, Reduction r, bool zero_infinity) {
  AIM_CHECK(log_probs.defined() && log_probs.dim() == 3,
            "ctc_loss: log_probs must be [T, B, C], got ",
            log_probs.defined() ? to_string(log_probs.sizes()) : std::string("undefined"));
  AIM_CHECK(targets.defined() && input_lengths.defined() && target_lengths.defined(),
            "ctc_loss: targets, input_lengths and target_lengths must all be given");
  kernels::CtcFwdArgs a;
  a.log_probs = log_probs.data().contiguous();
  a.targets = targets.to(a.log_probs.device()).contiguous();
  a.input_lengths = input_lengths.to(kCPU).contiguous();
  a.target_lengths = target_lengths.to(kCPU).contiguous();
  const Device d = a.log_probs.device();
  const DType ld = kernels::loss_dtype(a.log_probs.dtype());
  const int64_t B = a.log_probs.size(1);
  a.loss = Tensor::empty(r == Reduction::none ? Shape{B} : Shape{}, ld, d);
  a.log_alpha =
      Tensor::empty(kernels::ctc_log_alpha_shape(a.log_probs, a.targets, a.target_lengths), ld, d);
  a.blank = blank;
  a.reduction = r;
  a.zero_infinity = zero_infinity;
  kernels::ctc_fwd(a);
  if (!needs_grad({&log_probs})) return Variable(a.loss);
  auto n = std::make_shared<CtcLossNode>();
  n->log_probs = a.log_probs;
  n->targets = a.targets;
  n->input_lengths = a.input_lengths;
  n->target_lengths = a.target_lengths;
  n->log_alpha = a.log_alpha;
  n->blank = blank;
  n->reduction = r;
  n->zero_infinity = zero_infinity;
  return attach1(n, {log_probs}, a.loss);
}

}  // namespace aim::autograd
