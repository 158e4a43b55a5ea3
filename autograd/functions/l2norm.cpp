// l2_normalize on the fused kernels (kernels/norm/l2norm.h).
#include "autograd/functions/l2norm.h"

#include "autograd/amp.h"
#include "autograd/node.h"
#include "kernels/norm/l2norm.h"

namespace aim::autograd {
namespace {

struct L2NormNode final : Node {
  Tensor x, scale;
  double eps = 0;
  const char* name() const override { return "L2Norm"; }
  void backward(Grads& g) override {
    const bool dx = g.needs(0), ds = scale.defined() && g.needs(1);
    if (!dx && !ds) return;
    kernels::L2NormBwdArgs a;
    a.dy = g.dy();
    a.x = x;
    a.scale = scale;
    // dx is always computed with the dot product; without a consumer it goes to a scratch.
    a.dx = dx ? g.out(0) : Tensor::empty(x.sizes(), x.dtype(), x.device());
    if (ds) a.dscale = g.accum(1);
    a.eps = eps;
    kernels::l2norm_bwd(a);
  }
  void release() override { x = scale = Tensor(); }
};

}  // namespace

constexpr amp::Declaration kL2NormAmp{"l2_normalize", amp::OpClass::fp32, amp::kWhyNormStats};
Variable l2_normalize(const Variable& x, const Variable& scale, double eps) {
  if (auto c = amp::autocast(kL2NormAmp, {&x, &scale})) return l2_normalize((*c)[0], (*c)[1], eps);
  AIM_CHECK(x.defined() && x.dim() >= 2, "l2_normalize: x must be [N, C, ...], got ",
            x.defined() ? to_string(x.sizes()) : std::string("undefined"));
  AIM_CHECK(!scale.defined() || scale.sizes() == std::vector<int64_t>{x.size(1)},
            "l2_normalize: scale must be [", x.size(1), "] (x's channels), got ",
            to_string(scale.sizes()));
  const Tensor xc = x.data().contiguous();
  const Tensor sc = scale.defined() ? scale.data().contiguous() : Tensor();
  kernels::L2NormFwdArgs a;
  a.x = xc;
  a.scale = sc;
  a.y = Tensor::empty(xc.sizes(), xc.dtype(), xc.device());
  a.eps = eps;
  kernels::l2norm_fwd(a);
  if (!needs_grad({&x, &scale})) return Variable(a.y);
  auto n = std::make_shared<L2NormNode>();
  n->x = xc;
  n->scale = sc;
  n->eps = eps;
  return scale.defined() ? attach1(n, {x, scale}, a.y) : attach1(n, {x}, a.y);
}

void amp::declarations_l2norm(std::vector<amp::Declaration>& out) {
  out.insert(out.end(), {kL2NormAmp});
}

}  // namespace aim::autograd
