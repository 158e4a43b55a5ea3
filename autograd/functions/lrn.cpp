// local_response_norm on the fused kernels (kernels/norm/lrn.h).
#include "autograd/functions/lrn.h"

#include "autograd/amp.h"
#include "autograd/node.h"

namespace aim::autograd {
namespace {

struct LrnNode final : Node {
  Tensor x;
  kernels::LrnParams p;
  const char* name() const override { return "LocalResponseNorm"; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    kernels::LrnBwdArgs a;
    a.dy = g.dy();
    a.x = x;
    a.dx = g.out(0);
    a.p = p;
    kernels::lrn_bwd(a);
  }
  void release() override { x = Tensor(); }
};

}  // namespace

constexpr amp::Declaration kLrnAmp{"local_response_norm", amp::OpClass::fp32, amp::kWhyNormStats};
Variable local_response_norm(const Variable& x, const kernels::LrnParams& p) {
  if (auto c = amp::autocast(kLrnAmp, {&x})) return local_response_norm((*c)[0], p);
  AIM_CHECK(x.defined() && x.dim() >= 2, "local_response_norm: x must be [N, C, ...], got ",
            x.defined() ? to_string(x.sizes()) : std::string("undefined"));
  const Tensor xc = x.data().contiguous();
  kernels::LrnFwdArgs a;
  a.x = xc;
  a.y = Tensor::empty(xc.sizes(), xc.dtype(), xc.device());
  a.p = p;
  kernels::lrn_fwd(a);
  if (!needs_grad({&x})) return Variable(a.y);
  auto n = std::make_shared<LrnNode>();
  n->x = xc;
  n->p = p;
  return attach1(n, {x}, a.y);
}

void amp::declarations_lrn(std::vector<amp::Declaration>& out) { out.insert(out.end(), {kLrnAmp}); }

}  // namespace aim::autograd
