// sync_batch_norm (sync_batch_norm.h): per-channel statistics combined over the ranks, from the
// differentiable reductions and elementwise ops (so any device; the per-channel numbers and
// Chan's combination stay on x's device in f64, no host read).
#include "autograd/functions/sync_batch_norm.h"

#include <cmath>
#include <optional>
#include <vector>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/reduce.h"
#include "autograd/node.h"
#include "autograd/tensor_ops.h"
#include "tensor/check.h"

namespace aim::autograd {
namespace {

// Plain tensor math through the differentiable ops, recording nothing. Everything stays on x's
// device: no host reads (the collectives take device tensors; the trainer's wrappers move them
// to the communicator's device when that differs).
Tensor t_sum(const Tensor& x, const std::vector<int64_t>& dims) {
  return sum(Variable(x), dims, /*keepdim=*/true).data();
}
Tensor t_mul(const Tensor& a, const Tensor& b) { return mul(Variable(a), Variable(b)).data(); }
Tensor t_sub(const Tensor& a, const Tensor& b) { return sub(Variable(a), Variable(b)).data(); }
Tensor t_add(const Tensor& a, const Tensor& b) { return add(Variable(a), Variable(b)).data(); }
Tensor t_div(const Tensor& a, const Tensor& b) { return div(Variable(a), Variable(b)).data(); }
Tensor t_cat(const std::vector<Tensor>& ts) {
  std::vector<Variable> vs;
  for (const Tensor& t : ts) vs.emplace_back(t.contiguous().reshape({t.numel()}));
  return concat(vs, 0).data().contiguous();
}

struct SyncBatchNormNode final : Node {
  Tensor x;           // the input, as given
  Tensor mean, rstd;  // [stat shape] in the statistics dtype, as the fused kernels save them
  std::vector<int64_t> dims;
  Tensor count;  // N: values per channel over all ranks, 0-d f64 on x's device
  BatchStatsSync sync;
  const char* name() const override { return "SyncBatchNorm"; }
  void backward(Grads& g) override {
    // needs(0) is the same on every rank (same model, same graph): all skip or all communicate.
    if (!g.needs(0)) return;
    NoGradGuard no_grad;
    // In f64 throughout, from the saved (statistics-dtype) mean and rstd: kernels/norm's cpu.ref.
    const Tensor m = mean.to(DType::f64), r = rstd.to(DType::f64);
    const Tensor xhat = t_mul(t_sub(x.to(DType::f64), m), r);
    const Tensor dy = g.dy().to(DType::f64);
    const int64_t C = r.numel();
    Tensor packed = t_cat({t_sum(dy, dims), t_sum(t_mul(dy, xhat), dims)});  // [2C] on x's device
    sync.all_reduce_sum(packed);
    const Tensor md = t_div(packed.slice(0, 0, C).reshape(r.sizes()), count);
    const Tensor mdx = t_div(packed.slice(0, C, 2 * C).reshape(r.sizes()), count);
    // dx = rstd * (dy - mean(dy) - xhat * mean(dy * xhat))
    const Tensor dx = t_mul(r, t_sub(t_sub(dy, md), t_mul(xhat, mdx)));
    g.set(0, dx.to(x.dtype()));
  }
  void release() override { x = mean = rstd = Tensor(); }
};

}  // namespace

Variable sync_batch_norm(const Variable& x, int64_t channel_dim, const Tensor& running_mean,
                         const Tensor& running_var, double momentum, double eps,
                         const BatchStatsSync& sync) {
  AIM_CHECK(x.defined() && x.dim() >= 2,
            "sync_batch_norm: x must have a batch and a channel dim, "
            "got ",
            x.defined() ? to_string(x.sizes()) : std::string("undefined"));
  AIM_CHECK(is_floating(x.dtype()), "sync_batch_norm: x must be a float tensor, got ",
            dtype_name(x.dtype()));
  AIM_CHECK(sync.ranks >= 1 && sync.all_gather && sync.all_reduce_sum,
            "sync_batch_norm: the rank group's collectives are not set");
  AIM_CHECK(running_mean.defined() == running_var.defined(),
            "sync_batch_norm: running_mean and running_var must both be given or both undefined");
  const int64_t cd = x.data().wrap_dim(channel_dim);
  const int64_t C = x.size(cd);
  std::vector<int64_t> dims;
  Shape stat_shape(size_t(x.dim()), 1);
  stat_shape[size_t(cd)] = C;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != cd) dims.push_back(d);
  const DType sd = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  const Device dev = x.device();

  const bool grad = needs_grad({&x});
  std::optional<NoGradGuard> no_grad(std::in_place);  // the statistics are plain tensor math
  // f64 throughout (as kernels/norm's cpu.ref): a channel whose values barely vary normalises
  // rounding noise in f32, and each implementation's noise differs.
  const Tensor x64 = x.data().to(DType::f64).contiguous();
  const double n_local = double(x64.numel() / C);
  // This rank's two-pass statistics, then Chan's combination over the ranks, in f64 on the
  // device (no host read): all-gather [mean_r (C), M2_r (C), n_r] of every rank, then
  //   N = sum n_r, mean = sum(n_r m_r) / N, M2 = sum(M2_r + n_r (m_r - mean)^2).
  // N > 1 is checked on the host from what every rank knows: one rank needs n > 1; several
  // ranks, n >= 1 each (so N >= 2).
  AIM_CHECK(sync.ranks == 1 ? n_local > 1 : n_local >= 1,
            "sync_batch_norm: expected more than 1 value per channel over all ranks when "
            "training, got input of shape ",
            to_string(x.sizes()), " on ", sync.ranks, " rank(s)");
  const Tensor mean_r = scale(t_sum(x64, dims), 1.0 / n_local);
  const Tensor dev_r = t_sub(x64, mean_r);
  const Tensor m2_r = t_sum(t_mul(dev_r, dev_r), dims);
  const int64_t k = 2 * C + 1;
  const Tensor mine = t_cat({mean_r, m2_r, Tensor::full({1}, n_local, DType::f64, dev)});
  Tensor all = Tensor::empty({sync.ranks * k}, DType::f64, dev);
  sync.all_gather(mine, all);
  const Tensor ga = all.view({sync.ranks, k});
  const Tensor m = ga.slice(1, 0, C), M2 = ga.slice(1, C, 2 * C), n = ga.slice(1, 2 * C, k);
  const Tensor N = t_sum(n, {0});                         // [1, 1]
  const Tensor mean = t_div(t_sum(t_mul(n, m), {0}), N);  // [1, C]
  const Tensor d = t_sub(m, mean);                        // [R, C]
  const Tensor M2t = t_sum(t_add(M2, t_mul(t_mul(n, d), d)), {0});
  const Tensor one = Tensor::ones({1, 1}, DType::f64, dev);
  const Tensor var = t_div(M2t, N);
  const Tensor unbiased = t_div(M2t, t_sub(N, one));
  const Tensor rstd = t_div(
      one, sqrt(add(Variable(var), Variable(Tensor::full({1, 1}, eps, DType::f64, dev)))).data());
  const Tensor mean_s = mean.reshape(stat_shape), rstd_s = rstd.reshape(stat_shape);
  const Tensor xhat = t_mul(t_sub(x64, mean_s), rstd_s);
  if (running_mean.defined()) {
    // (1 - momentum) * running + momentum * batch, in f64, on the running statistics' device.
    auto blend = [&](const Tensor& running, const Tensor& batch) {
      const Tensor r = running.reshape({C}).to(DType::f64);
      const Tensor b = batch.reshape({C}).to(running.device());
      const Tensor v = add(mul(Variable(r), 1.0 - momentum), mul(Variable(b), momentum)).data();
      running.copy_(v.reshape(running.sizes()));
    };
    blend(running_mean, mean);
    blend(running_var, unbiased);
  }
  const Tensor y = xhat.to(x.dtype());
  no_grad.reset();
  if (!grad) return Variable(y);
  auto node = std::make_shared<SyncBatchNormNode>();
  node->x = x.data();
  node->mean = mean_s.to(sd);
  node->rstd = rstd_s.to(sd);
  node->dims = dims;
  node->count = N.reshape({});
  node->sync = sync;
  return attach1(node, {x}, y);
}

}  // namespace aim::autograd
