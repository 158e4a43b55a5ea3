// softmax and log_softmax: forward by the softmax kernel on a contiguous x, backward by
// softmax_bwd (mask passed through).
#include "autograd/functions/softmax.h"

#include "autograd/amp.h"
#include "autograd/node.h"
#include "kernels/softmax/softmax.h"

namespace aim::autograd {
namespace {

struct SoftmaxNode final : Node {
  Tensor y, mask;
  int64_t dim = -1;
  bool log = false;
  const char* name() const override { return log ? "LogSoftmax" : "Softmax"; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    kernels::SoftmaxBwdArgs a;
    a.dy = g.dy();
    a.y = y;
    a.dx = g.out(0);
    a.mask = mask;
    a.dim = dim;
    a.log = log;
    kernels::softmax_bwd(a);
  }
  void release() override { y = mask = Tensor(); }
};

Variable softmax_impl(const Variable& x, int64_t dim, const Tensor& mask, bool log) {
  kernels::SoftmaxArgs a;
  a.x = x.data().contiguous();
  a.y = Tensor::empty(a.x.sizes(), a.x.dtype(), a.x.device());
  a.mask = mask;
  a.dim = x.data().wrap_dim(dim);
  a.log = log;
  kernels::softmax(a);
  if (!needs_grad({&x})) return Variable(a.y);
  auto n = std::make_shared<SoftmaxNode>();
  n->y = a.y;
  n->mask = mask;
  n->dim = a.dim;
  n->log = log;
  return attach1(n, {x}, a.y);
}

}  // namespace

// The reason several of this file's declarations share.
constexpr char kWhySoftmax[] = "normalisation over a row; feeds losses";

constexpr amp::Declaration kSoftmaxAmp{"softmax", amp::OpClass::fp32, kWhySoftmax};
Variable softmax(const Variable& x, int64_t dim, const Tensor& mask) {
  if (auto c = amp::autocast(kSoftmaxAmp, {&x})) return softmax((*c)[0], dim, mask);
  return softmax_impl(x, dim, mask, /*log=*/false);
}

constexpr amp::Declaration kLogSoftmaxAmp{"log_softmax", amp::OpClass::fp32, kWhySoftmax};
Variable log_softmax(const Variable& x, int64_t dim, const Tensor& mask) {
  if (auto c = amp::autocast(kLogSoftmaxAmp, {&x})) return log_softmax((*c)[0], dim, mask);
  return softmax_impl(x, dim, mask, /*log=*/true);
}

void amp::declarations_softmax(std::vector<amp::Declaration>& out) {
  out.insert(out.end(), {kSoftmaxAmp, kLogSoftmaxAmp});
}

}  // namespace aim::autograd
