// sync_batch_norm (sync_batch_norm.h): per-channel statistics combined over the ranks, from the
// differentiable reductions and elementwise ops (so any device: the few per-channel numbers go
// through the host in f64 for the collectives).
#include "autograd/functions/sync_batch_norm.h"

#include <cmath>
#include <optional>
#include <vector>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/reduce.h"
#include "autograd/node.h"
#include "autograd/tensor_ops.h"
#include "tensor/check.h"

namespace aim::autograd {
namespace {

// Plain tensor math through the differentiable ops, recording nothing.
Tensor t_sum(const Tensor& x, const std::vector<int64_t>& dims) {
  return sum(Variable(x), dims, /*keepdim=*/true).data();
}
Tensor t_mul(const Tensor& a, const Tensor& b) { return mul(Variable(a), Variable(b)).data(); }
Tensor t_sub(const Tensor& a, const Tensor& b) { return sub(Variable(a), Variable(b)).data(); }

// [C] per-channel values of a keepdim reduction, as host doubles.
std::vector<double> host(const Tensor& t) {
  return t.to(kCPU).to(DType::f64).contiguous().to_vector<double>();
}
// Host doubles -> a tensor of `shape` (the [1, .., C, .., 1] statistics shape) in `dtype` on `dev`.
Tensor device_tensor(const std::vector<double>& v, const Shape& shape, DType dtype, Device dev) {
  return Tensor::from_vector<double>(v, {int64_t(v.size())}).to(dtype).to(dev).reshape(shape);
}

struct SyncBatchNormNode final : Node {
  Tensor x;           // the input, as given
  Tensor mean, rstd;  // [stat shape] in the statistics dtype, as the fused kernels save them
  std::vector<int64_t> dims;
  double count = 0;  // N: values per channel over all ranks
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
    const std::vector<double> a = host(t_sum(dy, dims)), b = host(t_sum(t_mul(dy, xhat), dims));
    const int64_t C = int64_t(a.size());
    std::vector<double> both(a);
    both.insert(both.end(), b.begin(), b.end());
    Tensor packed = Tensor::from_vector<double>(both, {2 * C});
    sync.all_reduce_sum(packed);
    const std::vector<double> s = packed.to_vector<double>();
    std::vector<double> mean_dy(static_cast<size_t>(C)), mean_dy_xhat(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) {
      mean_dy[size_t(c)] = s[size_t(c)] / count;
      mean_dy_xhat[size_t(c)] = s[size_t(C + c)] / count;
    }
    const Tensor md = device_tensor(mean_dy, r.sizes(), DType::f64, x.device());
    const Tensor mdx = device_tensor(mean_dy_xhat, r.sizes(), DType::f64, x.device());
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
  // This rank's two-pass statistics, then Chan's combination over the ranks (f64 on the host).
  const Tensor mean_r = scale(t_sum(x64, dims), 1.0 / n_local);
  const Tensor dev_r = t_sub(x64, mean_r);
  const Tensor m2_r = t_sum(t_mul(dev_r, dev_r), dims);
  std::vector<double> mine = host(mean_r);
  const std::vector<double> m2 = host(m2_r);
  mine.insert(mine.end(), m2.begin(), m2.end());
  mine.push_back(n_local);
  const int64_t k = 2 * C + 1;
  Tensor all = Tensor::empty({sync.ranks * k}, DType::f64);
  sync.all_gather(Tensor::from_vector<double>(mine, {k}), all);
  const std::vector<double> a = all.to_vector<double>();
  double N = 0;
  for (int r = 0; r < sync.ranks; ++r) N += a[size_t(r * k + 2 * C)];
  AIM_CHECK(N > 1,
            "sync_batch_norm: expected more than 1 value per channel over all ranks when "
            "training, got input of shape ",
            to_string(x.sizes()), " on ", sync.ranks, " rank(s)");
  std::vector<double> mean(static_cast<size_t>(C), 0.0), var(static_cast<size_t>(C), 0.0),
      rstd(static_cast<size_t>(C));
  for (int r = 0; r < sync.ranks; ++r) {
    const double n = a[size_t(r * k + 2 * C)];
    for (int64_t c = 0; c < C; ++c) mean[size_t(c)] += n * a[size_t(r * k + c)];
  }
  for (double& m : mean) m /= N;
  for (int r = 0; r < sync.ranks; ++r) {
    const double n = a[size_t(r * k + 2 * C)];
    for (int64_t c = 0; c < C; ++c) {
      const double d = a[size_t(r * k + c)] - mean[size_t(c)];
      var[size_t(c)] += a[size_t(r * k + C + c)] + n * d * d;  // M2 for now
    }
  }
  std::vector<double> unbiased(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    unbiased[size_t(c)] = var[size_t(c)] / (N - 1);
    var[size_t(c)] /= N;
    rstd[size_t(c)] = 1.0 / std::sqrt(var[size_t(c)] + eps);
  }
  const Tensor xhat = t_mul(t_sub(x64, device_tensor(mean, stat_shape, DType::f64, dev)),
                            device_tensor(rstd, stat_shape, DType::f64, dev));
  if (running_mean.defined()) {
    auto blend = [&](const Tensor& running, const std::vector<double>& batch) {
      std::vector<double> r = host(running.reshape({C}));
      for (int64_t c = 0; c < C; ++c)
        r[size_t(c)] = (1.0 - momentum) * r[size_t(c)] + momentum * batch[size_t(c)];
      running.copy_(Tensor::from_vector<double>(r, {C}).reshape(running.sizes()));
    };
    blend(running_mean, mean);
    blend(running_var, unbiased);
  }
  const Tensor y = xhat.to(x.dtype());
  no_grad.reset();
  if (!grad) return Variable(y);
  auto node = std::make_shared<SyncBatchNormNode>();
  node->x = x.data();
  node->mean = device_tensor(mean, stat_shape, sd, dev);
  node->rstd = device_tensor(rstd, stat_shape, sd, dev);
  node->dims = dims;
  node->count = N;
  node->sync = sync;
  return attach1(node, {x}, y);
}

}  // namespace aim::autograd
