// Fused in-place optimizer updates (torch.optim semantics): SGD (momentum, dampening, Nesterov,
// weight decay), Adam / AdamW, Adagrad. One call updates one parameter tensor and its state.
// Shapes: param, grad: any shape, same numel, contiguous; state tensors (momentum_buf, exp_avg,
// exp_avg_sq, sum): same numel, contiguous, dtype optim_state_dtype(param dtype) (f32 for
// f32/f16/bf16 parameters, f64 for f64). Everything on the same device.
// Math: kernels/optim/README.md
#pragma once
#include "kernels/op.h"

namespace aim::kernels {

// The state dtype for a parameter dtype: f64 for f64, else f32 (16-bit params keep f32 state).
inline DType optim_state_dtype(DType param) {
  return param == DType::f64 ? DType::f64 : DType::f32;
}

struct SgdUpdateArgs {
  Tensor param;         // [n] updated in place
  Tensor grad;          // [n]
  Tensor momentum_buf;  // [n] updated in place; undefined when momentum == 0
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
  bool first_step = false;  // momentum_buf has no content yet: buf = grad (PyTorch's clone)
  Device device() const { return param.device(); }
  DType dtype() const { return param.dtype(); }
};

struct AdamUpdateArgs {
  Tensor param;       // [n] updated in place
  Tensor grad;        // [n]
  Tensor exp_avg;     // [n] updated in place
  Tensor exp_avg_sq;  // [n] updated in place
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled = false;  // AdamW: param *= 1 - lr * weight_decay instead of grad += wd * param
  int64_t step = 1;        // this step's number, counted from 1 (after PyTorch's step += 1)
  Device device() const { return param.device(); }
  DType dtype() const { return param.dtype(); }
};

struct AdagradUpdateArgs {
  Tensor param;  // [n] updated in place
  Tensor grad;   // [n]
  Tensor sum;    // [n] updated in place
  double lr = 0, lr_decay = 0, weight_decay = 0, eps = 1e-10;
  int64_t step = 1;  // counted from 1
  Device device() const { return param.device(); }
  DType dtype() const { return param.dtype(); }
};

// Mixed-precision loss scaling (train/amp.h): grad *= inv_scale in place, and found_inf[0] = 1
// when any element of grad (before scaling) is Inf or NaN; found_inf is never reset here, so one
// flag collects a whole set of gradients (torch._amp_foreach_non_finite_check_and_unscale_).
struct AmpUnscaleArgs {
  Tensor grad;       // [n] any float dtype, contiguous, updated in place
  Tensor found_inf;  // [1] optim_state_dtype(grad) (f32; f64 for f64) on grad's device: set to 1
  double inv_scale = 1;
  Device device() const { return grad.device(); }
  DType dtype() const { return grad.dtype(); }
};

// Bytes: param and grad read, param written, each state tensor read and written.
inline Cost optim_cost(const Tensor& param, int states, double flops_per_elem) {
  const double n = double(param.numel());
  const double p = double(dtype_size(param.dtype()));
  const double s = double(dtype_size(optim_state_dtype(param.dtype())));
  return Cost{flops_per_elem * n, n * (2 * p + states * s), n * (p + states * s)};
}
inline Cost sgd_update_cost(const SgdUpdateArgs& a) {
  return optim_cost(a.param, a.momentum_buf.defined() ? 1 : 0, 6);
}
inline Cost adam_update_cost(const AdamUpdateArgs& a) { return optim_cost(a.param, 2, 14); }
inline Cost adagrad_update_cost(const AdagradUpdateArgs& a) { return optim_cost(a.param, 1, 8); }
inline Cost amp_unscale_cost(const AmpUnscaleArgs& a) {
  const double n = double(a.grad.numel()), e = double(dtype_size(a.grad.dtype()));
  return Cost{2 * n, n * e, n * e};
}

void sgd_update(const SgdUpdateArgs& a);
void adam_update(const AdamUpdateArgs& a);
void adagrad_update(const AdagradUpdateArgs& a);
void amp_unscale(const AmpUnscaleArgs& a);

// Argument checks shared by every variant ("" when fine, else the reason, prefixed by the op).
std::string check_sgd_update(const SgdUpdateArgs& a);
std::string check_adam_update(const AdamUpdateArgs& a);
std::string check_adagrad_update(const AdagradUpdateArgs& a);
std::string check_amp_unscale(const AmpUnscaleArgs& a);

// Host-side scalars of one Adam step (in double), shared by every variant.
struct AdamScalars {
  double step_size, bc2_sqrt, decay;  // param -= step_size * m / (sqrt(v) / bc2_sqrt + eps)
};
AdamScalars adam_scalars(const AdamUpdateArgs& a);

}  // namespace aim::kernels
