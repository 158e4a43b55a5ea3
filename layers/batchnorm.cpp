#include "layers/batchnorm.h"

#include <cmath>
#include <optional>
#include <typeinfo>
#include <utility>

#include "autograd/functions/batch_norm.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/lrn.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "autograd/tensor_ops.h"
#include "layers/fold.h"
#include "tensor/check.h"

namespace aim::layers {

namespace {
thread_local const autograd::BatchStatsSync* t_sync = nullptr;

// The running statistics one training step updates, without reading num_batches_tracked on the
// host. The count is incremented on its own device. momentum set: the normalisation updates the
// buffers with factor = momentum. Unset (cumulative average, factor 1 / num_batches_tracked):
// the normalisation writes the batch statistics into zeroed temporaries (factor 1: 0 * 0 + 1 *
// stat), and finish() blends them into the buffers on the device in f64 with f = 1 / count:
// running = (1 - f) * running + f * stat, the kernels' formula and order.
struct RunningUpdate {
  Tensor rm, rv;  // what the normalisation updates
  double factor = 0;
  Tensor count, dst_m, dst_v;  // cumulative only: num_batches_tracked and the buffers

  RunningUpdate(const Tensor& running_mean, const Tensor& running_var, const Tensor& tracked,
                const std::optional<double>& momentum) {
    autograd::NoGradGuard no_grad;
    autograd::add_into(tracked, Tensor::ones({}, DType::i64, tracked.device()));
    if (momentum) {
      rm = running_mean;
      rv = running_var;
      factor = *momentum;
      return;
    }
    rm = autograd::zeros_like(running_mean);
    rv = autograd::zeros_like(running_var);
    factor = 1.0;
    count = tracked;
    dst_m = running_mean;
    dst_v = running_var;
  }

  void finish() const {
    if (!count.defined()) return;
    autograd::NoGradGuard no_grad;
    const Variable one(Tensor::ones({}, DType::f64, count.device()));
    const Variable f = autograd::div(one, Variable(count.to(DType::f64)));
    const Variable keep = autograd::sub(one, f);
    for (const auto& [dst, stat] : {std::pair{dst_m, rm}, std::pair{dst_v, rv}}) {
      const Variable r = autograd::add(autograd::mul(Variable(dst.to(DType::f64)), keep),
                                       autograd::mul(Variable(stat.to(DType::f64)), f));
      dst.copy_(r.data());
    }
  }
};
}  // namespace

SyncBatchNormScope::SyncBatchNormScope(const autograd::BatchStatsSync* sync) : prev_(t_sync) {
  t_sync = sync;
}
SyncBatchNormScope::~SyncBatchNormScope() { t_sync = prev_; }
const autograd::BatchStatsSync* sync_batch_stats() { return t_sync; }

Variable batch_normalize(const Variable& x, int64_t channel_dim, bool use_batch_stats,
                         const Tensor& running_mean, const Tensor& running_var, double factor,
                         double eps) {
  const int64_t cd = x.data().wrap_dim(channel_dim);
  const int64_t c = x.size(cd);
  std::vector<int64_t> dims;
  Shape stat_shape(size_t(x.dim()), 1);
  stat_shape[size_t(cd)] = c;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != cd) dims.push_back(d);

  if (!use_batch_stats) {
    AIM_CHECK(running_mean.defined() && running_var.defined(),
              "batch_normalize: eval without running statistics");
    const Variable rm(running_mean.to(x.device()).to(x.dtype()).reshape(stat_shape));
    const Variable rv(running_var.to(x.device()).to(x.dtype()).reshape(stat_shape));
    return autograd::mul(autograd::sub(x, rm), autograd::rsqrt(autograd::add(rv, eps)));
  }

  if (const autograd::BatchStatsSync* sync = sync_batch_stats())
    return autograd::sync_batch_norm(x, cd, running_mean, running_var, factor, eps, *sync);
  const int64_t n = x.numel() / c;
  AIM_CHECK(n > 1, "batch_normalize: expected more than 1 value per channel when training, got ",
            "input of shape ", to_string(x.sizes()));
  const Variable mean = autograd::mean(x, dims, /*keepdim=*/true);
  const Variable xc = autograd::sub(x, mean);
  const Variable var = autograd::mean(autograd::square(xc), dims, /*keepdim=*/true);  // biased
  const Variable y = autograd::mul(xc, autograd::rsqrt(autograd::add(var, eps)));

  if (running_mean.defined()) {
    autograd::NoGradGuard no_grad;
    auto blend = [&](const Tensor& running, const Tensor& batch) {
      const Tensor b = batch.reshape({c}).to(running.device()).to(running.dtype());
      running.copy_(
          autograd::add(autograd::scale(running, 1.0 - factor), autograd::scale(b, factor)));
    };
    blend(running_mean, mean.data());
    blend(running_var, autograd::scale(var.data(), double(n) / double(n - 1)));  // unbiased
  }
  return y;
}

BatchNorm1d::BatchNorm1d(int64_t num_features, double eps, std::optional<double> momentum,
                         bool affine, bool track_running_stats)
    : num_features_(num_features), eps_(eps), momentum_(momentum) {
  AIM_CHECK(num_features > 0, "BatchNorm1d: num_features must be positive, got ", num_features);
  if (affine) {
    weight = param("weight", Tensor::ones({num_features}));
    bias = param("bias", Tensor::zeros({num_features}));
  }
  if (track_running_stats) {
    running_mean_ = &buffer("running_mean", Tensor::zeros({num_features}));
    running_var_ = &buffer("running_var", Tensor::ones({num_features}));
    num_batches_tracked_ = &buffer("num_batches_tracked", Tensor::zeros({}, DType::i64));
  }
}

Variable BatchNorm1d::forward(const Variable& x) {
  AIM_CHECK((x.dim() == 2 || x.dim() == 3) && x.size(1) == num_features_,
            "BatchNorm1d: expected input [N, ", num_features_, "] or [N, ", num_features_,
            ", L], got ", to_string(x.sizes()));
  if (unit_statistics_) {
    AIM_CHECK(weight.defined(), "BatchNorm1d: unit statistics need the affine parameters");
    return autograd::add(autograd::mul(autograd::mul(x, weight), 1.0 / std::sqrt(1.0 + eps_)),
                         bias);
  }
  const bool tracking = running_mean_ != nullptr;
  const bool use_batch_stats = is_training() || !tracking;
  // Running stats are read in eval and updated in training; without tracking neither.
  Variable y;
  if (is_training() && tracking) {
    const RunningUpdate u(*running_mean_, *running_var_, *num_batches_tracked_, momentum_);
    y = batch_normalize(x, 1, use_batch_stats, u.rm, u.rv, u.factor, eps_);
    u.finish();
  } else {
    const Tensor rm = tracking ? *running_mean_ : Tensor();
    const Tensor rv = tracking ? *running_var_ : Tensor();
    y = batch_normalize(x, 1, use_batch_stats, rm, rv, 0.0, eps_);
  }
  if (weight.defined()) {
    const Shape s = x.dim() == 2 ? Shape{num_features_} : Shape{num_features_, 1};
    const Variable w = x.dim() == 2 ? weight : autograd::reshape(weight, s);
    const Variable b = x.dim() == 2 ? bias : autograd::reshape(bias, s);
    y = autograd::add(autograd::mul(y, w), b);
  }
  return y;
}

// ---- BatchNorm2d -----------------------------------------------------------------------------

BatchNorm2d::BatchNorm2d(int64_t num_features, double eps, std::optional<double> momentum,
                         bool affine, bool track_running_stats)
    : num_features_(num_features), eps_(eps), momentum_(momentum) {
  AIM_CHECK(num_features > 0, "BatchNorm2d: num_features must be positive, got ", num_features);
  if (affine) {
    weight = param("weight", Tensor::ones({num_features}));
    bias = param("bias", Tensor::zeros({num_features}));
  }
  if (track_running_stats) {
    running_mean_ = &buffer("running_mean", Tensor::zeros({num_features}));
    running_var_ = &buffer("running_var", Tensor::ones({num_features}));
    num_batches_tracked_ = &buffer("num_batches_tracked", Tensor::zeros({}, DType::i64));
  }
}

bool BatchNorm2d::eval_scale_shift(std::vector<double>& scale, std::vector<double>& shift) const {
  if (uses_batch_stats() || !running_var_) return false;
  const std::vector<double> mean = running_mean_->to(kCPU).to(DType::f64).to_vector<double>();
  const std::vector<double> var = running_var_->to(kCPU).to(DType::f64).to_vector<double>();
  std::vector<double> g(size_t(num_features_), 1.0), b(size_t(num_features_), 0.0);
  if (weight.defined()) {
    g = weight.data().to(kCPU).to(DType::f64).to_vector<double>();
    b = bias.data().to(kCPU).to(DType::f64).to_vector<double>();
  }
  scale.resize(size_t(num_features_));
  shift.resize(size_t(num_features_));
  for (size_t k = 0; k < scale.size(); ++k) {
    scale[k] = g[k] / std::sqrt(var[k] + eps_);
    shift[k] = b[k] - mean[k] * scale[k];
  }
  return true;
}

bool BatchNorm2d::uses_batch_stats() const {
  return running_mean_ == nullptr || (is_training() && !frozen_);
}

Variable BatchNorm2d::forward(const Variable& x) { return forward_impl(x, false); }
Variable BatchNorm2d::forward_relu(const Variable& x) {
  // A subclass with its own forward (ssd_resnet's CaffeBatchNorm2d) keeps it.
  if (typeid(*this) != typeid(BatchNorm2d)) return autograd::relu(forward(x));
  return forward_impl(x, true);
}

Variable BatchNorm2d::forward_impl(const Variable& x, bool relu) {
  AIM_CHECK(x.dim() == 4 && x.size(1) == num_features_, "BatchNorm2d: expected input [N, ",
            num_features_, ", H, W], got ", to_string(x.sizes()));
  if (FoldTrace* t = FoldTrace::active()) t->batchnorm_input(this, x.data(), relu);
  if (folded_) {
    AIM_CHECK(!uses_batch_stats(),
              "BatchNorm2d: folded into its convolution (aim-infer) and used "
              "with batch statistics; folding is for evaluation only");
    AIM_CHECK(relu || !relu_in_conv_,
              "BatchNorm2d: folded with its relu into its convolution (aim-infer), "
              "then called without relu; run aim-infer with --no-fold");
    return relu && !relu_in_conv_ ? autograd::relu(x) : x;
  }
  const bool batch_stats = uses_batch_stats();
  std::optional<RunningUpdate> u;
  if (batch_stats && running_mean_)
    u.emplace(*running_mean_, *running_var_, *num_batches_tracked_, momentum_);
  const Tensor rm = u ? u->rm : running_mean_ ? *running_mean_ : Tensor();
  const Tensor rv = u ? u->rv : running_var_ ? *running_var_ : Tensor();
  const double factor = u ? u->factor : 0.0;
  const autograd::BatchStatsSync* sync = batch_stats ? sync_batch_stats() : nullptr;
  if (!sync) {
    Variable y = autograd::batch_norm(x, weight, bias, rm, rv, batch_stats, factor, eps_, relu);
    if (u) u->finish();
    if (FoldTrace* t = FoldTrace::active()) t->batchnorm_output(this, y.data());
    return y;
  }
  // SyncBatchNorm: the statistics of all ranks, then the affine transform per channel.
  Variable y = autograd::sync_batch_norm(x, 1, rm, rv, factor, eps_, *sync);
  if (u) u->finish();
  if (weight.defined()) {
    // f32 parameters with 16-bit activations (mixed precision): the affine step in f32, as the
    // fused kernels do.
    const DType t = x.dtype();
    if (t != weight.dtype()) y = autograd::cast(y, weight.dtype());
    const Shape s{num_features_, 1, 1};
    y = autograd::add(autograd::mul(y, autograd::reshape(weight, s)), autograd::reshape(bias, s));
    if (t != y.dtype()) y = autograd::cast(y, t);
  }
  return relu ? autograd::relu(y) : y;
}

Shape BatchNorm2d::count_flops(const Shape& in, double& flops) const {
  double n = 1;
  for (int64_t d : in) n *= double(d);
  flops += (uses_batch_stats() ? 7 : 2) * n;  // as kernels/norm/batchnorm.h counts
  return in;
}

Variable LocalResponseNorm::forward(const Variable& x) {
  return autograd::local_response_norm(x, p_);
}

Shape LocalResponseNorm::count_flops(const Shape& in, double& flops) const {
  double n = 1;
  for (int64_t d : in) n *= double(d);
  flops += n * (2 * double(p_.size) + 4);  // as kernels/norm/lrn.h counts
  return in;
}

}  // namespace aim::layers
