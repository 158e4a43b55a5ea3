// batch_norm on the fused kernels (kernels/norm/batchnorm.h).
#include "autograd/functions/batch_norm.h"

#include "autograd/amp.h"
#include "autograd/node.h"
#include "kernels/norm/batchnorm.h"

namespace aim::autograd {
namespace {

struct BatchNormNode final : Node {
  Tensor x, gamma, save_mean, save_rstd;
  Tensor y_relu;  // the output, when the forward fused relu: its backward masks dy with it
  bool training = true, affine = false;
  const char* name() const override { return "BatchNorm"; }
  void backward(Grads& g) override {
    kernels::BatchNormBwdArgs a;
    a.dy = g.dy();
    a.x = x;
    a.gamma = gamma;
    a.save_mean = save_mean;
    a.save_rstd = save_rstd;
    a.y_relu = y_relu;
    a.training = training;
    if (g.needs(0)) a.dx = g.out(0);
    if (affine && g.needs(1)) a.dgamma = g.accum(1);
    if (affine && g.needs(2)) a.dbeta = g.accum(2);
    if (!a.dx.defined() && !a.dgamma.defined() && !a.dbeta.defined()) return;
    kernels::batchnorm_bwd(a);
  }
  void release() override { x = gamma = save_mean = save_rstd = y_relu = Tensor(); }
};

}  // namespace

constexpr amp::Declaration kBatchNormAmp{
    "batch_norm", amp::OpClass::native,
    "16-bit activations with f32 statistics and affine parameters"};
Variable batch_norm(const Variable& x, const Variable& weight, const Variable& bias,
                    const Tensor& running_mean, const Tensor& running_var, bool training,
                    double momentum, double eps, bool relu) {
  AIM_CHECK(x.defined() && x.dim() >= 2, "batch_norm: x must be [N, C, ...], got ",
            x.defined() ? to_string(x.sizes()) : std::string("undefined"));
  AIM_CHECK(weight.defined() == bias.defined(),
            "batch_norm: weight and bias must both be given or both be undefined");
  AIM_CHECK(training || (running_mean.defined() && running_var.defined()),
            "batch_norm: evaluation needs running_mean and running_var");
  // relu fused in training too: the backward masks dy by the saved output (y_relu) inside its
  // passes, bit-identical to batch_norm followed by relu in every dtype (the kernel's sums run in
  // fixed lanes; ConvGrad.BatchNormFusedReluMatchesBatchNormThenRelu).
  const Tensor xc = x.data().contiguous();
  const int64_t C = xc.size(1);
  const DType s = kernels::batchnorm_stat_dtype(xc.dtype());
  kernels::BatchNormFwdArgs a;
  a.x = xc;
  if (weight.defined()) {
    a.gamma = weight.data().contiguous();
    a.beta = bias.data().contiguous();
  }
  a.running_mean = running_mean;
  a.running_var = running_var;
  a.y = Tensor::empty(xc.sizes(), xc.dtype(), xc.device());
  const bool grad = needs_grad({&x, &weight, &bias});
  a.relu = relu;
  if (training || grad) {
    a.save_mean = Tensor::empty({C}, s, xc.device());
    a.save_rstd = Tensor::empty({C}, s, xc.device());
  }
  a.training = training;
  a.momentum = momentum;
  a.eps = eps;
  kernels::batchnorm_fwd(a);
  if (!grad) return Variable(a.y);
  auto n = std::make_shared<BatchNormNode>();
  n->x = xc;
  n->gamma = a.gamma;
  n->save_mean = a.save_mean;
  n->save_rstd = a.save_rstd;
  n->training = training;
  n->affine = weight.defined();
  if (relu) n->y_relu = a.y;
  return attach1(n, {x, weight, bias}, a.y);
}

void amp::declarations_batch_norm(std::vector<amp::Declaration>& out) {
  out.insert(out.end(), {kBatchNormAmp});
}

}  // namespace aim::autograd
