// dropout: forward by dropout_fwd (kernels/random: the mask drawn from the Philox stream of
// the generator), backward by dropout_bwd with the saved mask.
#include "autograd/functions/dropout.h"

#include "autograd/amp.h"
#include "autograd/node.h"

namespace aim::autograd {
namespace {

struct DropoutNode final : Node {
  Tensor mask;  // u8, 1 = kept
  float p = 0;
  const char* name() const override { return "Dropout"; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    kernels::DropoutBwdArgs a;
    a.dy = g.dy();
    a.mask = mask;
    a.dx = g.out(0);
    a.p = p;
    kernels::dropout_bwd(a);
  }
  void release() override { mask = Tensor(); }
};

}  // namespace

constexpr amp::Declaration kDropoutAmp{"dropout", amp::OpClass::native, amp::kWhyDataMovement};
Variable dropout(const Variable& x, double p, bool training, kernels::Generator& gen) {
  AIM_CHECK(p >= 0 && p <= 1, "[dropout] p must be in [0, 1], got ", p);
  if (!training || p == 0) return x;
  kernels::DropoutFwdArgs a;
  a.x = x.data().contiguous();
  a.y = Tensor::empty(x.sizes(), x.dtype(), x.device());
  a.mask = Tensor::empty(x.sizes(), DType::u8, x.device());
  a.p = float(p);
  a.seed = gen.seed();
  a.offset = gen.next(x.numel());
  kernels::dropout_fwd(a);
  if (!needs_grad({&x})) return Variable(a.y);
  auto n = std::make_shared<DropoutNode>();
  n->mask = a.mask;
  n->p = a.p;
  return attach1(n, {x}, a.y);
}

void amp::declarations_dropout(std::vector<amp::Declaration>& out) {
  out.insert(out.end(), {kDropoutAmp});
}

}  // namespace aim::autograd
