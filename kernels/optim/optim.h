// Fused in-place optimizer updates (torch.optim semantics): SGD (momentum, dampening, Nesterov,
// weight decay), Adam / AdamW, Adagrad, FTRL, and LAMB in two stages (apex FusedLAMB). One call
// updates one parameter tensor and its state.
// Shapes: param, grad: any shape, same numel, contiguous; state tensors (momentum_buf, exp_avg,
// exp_avg_sq, sum): same numel, contiguous, dtype optim_state_dtype(param dtype) (f32 for
// f32/f16/bf16 parameters, f64 for f64). Everything on the same device.
// Math: kernels/optim/README.md
//
// Capturable updates (CUDA graphs): `hyper`, when defined, is a [2] device tensor {lr, step}
// (f64; the CPU variants also read f32) from which the kernel takes the learning rate and the
// step number instead of the `lr` and `step` fields, so one captured update follows a schedule
// and counts its steps on the device at every replay (PyTorch's capturable=True).
#pragma once
#include <cmath>
#include <type_traits>

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
  Tensor hyper;             // optional {lr, step} on the device (capturable): lr read there
  Device device() const { return param.device(); }
  DType dtype() const { return param.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("grad", s.grad), f.in_opt("hyper", s.hyper);
    f.out("param", s.param), f.out_opt("momentum_buf", s.momentum_buf);
    f.param("lr", s.lr), f.param("momentum", s.momentum), f.param("dampening", s.dampening);
    f.param("weight_decay", s.weight_decay), f.param("nesterov", s.nesterov);
    f.param("first_step", s.first_step);
  }
};

struct AdamUpdateArgs {
  Tensor param;       // [n] updated in place
  Tensor grad;        // [n]
  Tensor exp_avg;     // [n] updated in place
  Tensor exp_avg_sq;  // [n] updated in place
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled = false;  // AdamW: param *= 1 - lr * weight_decay instead of grad += wd * param
  int64_t step = 1;        // this step's number, counted from 1 (after PyTorch's step += 1)
  Tensor hyper;            // optional {lr, step} on the device (capturable): both read there
  Device device() const { return param.device(); }
  DType dtype() const { return param.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("grad", s.grad), f.in_opt("hyper", s.hyper);
    f.out("param", s.param), f.out("exp_avg", s.exp_avg), f.out("exp_avg_sq", s.exp_avg_sq);
    f.param("lr", s.lr), f.param("beta1", s.beta1), f.param("beta2", s.beta2);
    f.param("eps", s.eps), f.param("weight_decay", s.weight_decay);
    f.param("decoupled", s.decoupled), f.param("step", s.step);
  }
};

struct AdagradUpdateArgs {
  Tensor param;  // [n] updated in place
  Tensor grad;   // [n]
  Tensor sum;    // [n] updated in place
  double lr = 0, lr_decay = 0, weight_decay = 0, eps = 1e-10;
  int64_t step = 1;  // counted from 1
  Tensor hyper;      // optional {lr, step} on the device (capturable): both read there
  Device device() const { return param.device(); }
  DType dtype() const { return param.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("grad", s.grad), f.in_opt("hyper", s.hyper), f.out("param", s.param), f.out("sum", s.sum);
    f.param("lr", s.lr), f.param("lr_decay", s.lr_decay);
    f.param("weight_decay", s.weight_decay), f.param("eps", s.eps), f.param("step", s.step);
  }
};

// LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning"; NVIDIA apex FusedLAMB with
// bias_correction, adam_w_mode, grad_averaging, no gradient clipping inside) in two stages per
// parameter tensor, so the trust ratio is never read on the host:
//   stage 1: m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2   (Adam's moments, adam_moments)
//            u = (m / bc1) / (sqrt(v / bc2) + eps) + weight_decay * w,  bc = 1 - b^step
//            norms[0] += sum w^2,  norms[1] += sum u^2  (in double; the caller zeroes norms)
//   stage 2: r = ||w|| / ||u|| when both are > 0, else 1 (lamb_trust_ratio);  w -= lr * r * u
// `update` is a scratch tensor of the state dtype holding u between the stages.
struct LambStage1Args {
  Tensor param;       // [n] read: w before the update
  Tensor grad;        // [n]
  Tensor exp_avg;     // [n] updated in place (m)
  Tensor exp_avg_sq;  // [n] updated in place (v)
  Tensor update;      // [n] state dtype, written: u
  Tensor norms;       // [2] f64 on param's device: += {sum w^2, sum u^2}
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-6, weight_decay = 0.01;
  int64_t step = 1;  // this step's number, counted from 1
  Tensor hyper;      // optional {lr, step} on the device (capturable): step read there
  Device device() const { return param.device(); }
  DType dtype() const { return param.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("param", s.param), f.in("grad", s.grad), f.in_opt("hyper", s.hyper);
    f.out("exp_avg", s.exp_avg), f.out("exp_avg_sq", s.exp_avg_sq), f.out("update", s.update);
    f.out("norms", s.norms);
    f.param("beta1", s.beta1), f.param("beta2", s.beta2), f.param("eps", s.eps);
    f.param("weight_decay", s.weight_decay), f.param("step", s.step);
  }
};
struct LambStage2Args {
  Tensor param;   // [n] updated in place
  Tensor update;  // [n] state dtype: u from stage 1
  Tensor norms;   // [2] f64 on param's device: {sum w^2, sum u^2} from stage 1
  double lr = 0;
  Tensor hyper;  // optional {lr, step} on the device (capturable): lr read there
  Device device() const { return param.device(); }
  DType dtype() const { return param.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("update", s.update), f.in("norms", s.norms), f.in_opt("hyper", s.hyper);
    f.out("param", s.param), f.param("lr", s.lr);
  }
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
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.out("grad", s.grad), f.out("found_inf", s.found_inf), f.param("inv_scale", s.inv_scale);
  }
};

// FTRL-proximal (TensorFlow's tf.keras.optimizers.Ftrl with l2_shrinkage 0), per element, with
// p = -learning_rate_power >= 0 and n (accum), z (linear):
//   n' = n + g^2;  z += g - (n'^p - n^p) / lr * w;  n = n'
//   w  = |z| > l1 ? (sign(z) * l1 - z) / (n'^p / lr + 2 * l2) : 0
struct FtrlUpdateArgs {
  Tensor param;   // [n] updated in place
  Tensor grad;    // [n]
  Tensor accum;   // [n] updated in place (n, starts at initial_accumulator_value > 0)
  Tensor linear;  // [n] updated in place (z)
  double lr = 0.05, lr_power = -0.5, l1 = 0, l2 = 0;
  Tensor hyper;  // optional {lr, step} on the device (capturable): lr read there
  Device device() const { return param.device(); }
  DType dtype() const { return param.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("grad", s.grad), f.in_opt("hyper", s.hyper);
    f.out("param", s.param), f.out("accum", s.accum), f.out("linear", s.linear);
    f.param("lr", s.lr), f.param("lr_power", s.lr_power), f.param("l1", s.l1);
    f.param("l2", s.l2);
  }
};

// Gradient clipping by the global L2 norm, on the device (train/optim.h clip_grad_norm):
// grad_sq_sum adds sum(x^2) of one tensor into a device accumulator, in double;
// grad_clip_scale multiplies x in place by coef = max_norm / (norm + 1e-6) when coef < 1 (coef
// computed per thread from the device scalar `norm`; rounded to x's dtype before the multiply,
// exactly as x * full({}, coef, dtype)).
struct GradSqSumArgs {
  Tensor x;    // [n] any float dtype, contiguous
  Tensor acc;  // [1] f64 on x's device: acc[0] += sum over x of double(x)^2
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.out("acc", s.acc);
  }
};
struct GradClipScaleArgs {
  Tensor x;     // [n] any float dtype, contiguous, scaled in place
  Tensor norm;  // [1] or [] f64 on x's device: the global norm
  double max_norm = 1;
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("norm", s.norm), f.out("x", s.x), f.param("max_norm", s.max_norm);
  }
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
inline Cost ftrl_update_cost(const FtrlUpdateArgs& a) { return optim_cost(a.param, 2, 16); }
inline Cost grad_sq_sum_cost(const GradSqSumArgs& a) {
  const double n = double(a.x.numel()), e = double(dtype_size(a.x.dtype()));
  return Cost{2 * n, n * e, 8};
}
inline Cost grad_clip_scale_cost(const GradClipScaleArgs& a) {
  const double n = double(a.x.numel()), e = double(dtype_size(a.x.dtype()));
  return Cost{n, n * e + 8, n * e};
}
// Stage 1 reads w, g, m, v and writes m, v, u (and the two norms); stage 2 reads w, u and the
// norms and writes w.
inline Cost lamb_stage1_cost(const LambStage1Args& a) {
  const double n = double(a.param.numel()), p = double(dtype_size(a.param.dtype()));
  const double s = double(dtype_size(optim_state_dtype(a.param.dtype())));
  return Cost{18 * n, n * (2 * p + 2 * s) + 16, n * 3 * s + 16};
}
inline Cost lamb_stage2_cost(const LambStage2Args& a) {
  const double n = double(a.param.numel()), p = double(dtype_size(a.param.dtype()));
  const double s = double(dtype_size(optim_state_dtype(a.param.dtype())));
  return Cost{2 * n, n * (p + s) + 16, n * p};
}
inline Cost amp_unscale_cost(const AmpUnscaleArgs& a) {
  const double n = double(a.grad.numel()), e = double(dtype_size(a.grad.dtype()));
  return Cost{2 * n, n * e, n * e};
}

void sgd_update(const SgdUpdateArgs& a);
void adam_update(const AdamUpdateArgs& a);
void adagrad_update(const AdagradUpdateArgs& a);
void amp_unscale(const AmpUnscaleArgs& a);
void ftrl_update(const FtrlUpdateArgs& a);
void grad_sq_sum(const GradSqSumArgs& a);
void grad_clip_scale(const GradClipScaleArgs& a);
void lamb_stage1(const LambStage1Args& a);
void lamb_stage2(const LambStage2Args& a);

// Argument checks shared by every variant ("" when fine, else the reason, prefixed by the op).
std::string check_sgd_update(const SgdUpdateArgs& a);
std::string check_adam_update(const AdamUpdateArgs& a);
std::string check_adagrad_update(const AdagradUpdateArgs& a);
std::string check_amp_unscale(const AmpUnscaleArgs& a);
std::string check_ftrl_update(const FtrlUpdateArgs& a);
std::string check_grad_sq_sum(const GradSqSumArgs& a);
std::string check_grad_clip_scale(const GradClipScaleArgs& a);
std::string check_lamb_stage1(const LambStage1Args& a);
std::string check_lamb_stage2(const LambStage2Args& a);

// Host and device code (__host__ __device__ under nvcc).
#if defined(__CUDACC__)
#define AIM_OPTIM_HD __host__ __device__
#else
#define AIM_OPTIM_HD
#endif
// Scalars of one Adam step (in double), shared by every variant (host and device code):
// param -= step_size * m / (sqrt(v) / bc2_sqrt + eps); decay = 1 - lr * wd (AdamW).
struct AdamScalars {
  double step_size, bc2_sqrt, decay;
};
AIM_OPTIM_HD inline AdamScalars adam_scalars(double lr, double step, double beta1, double beta2,
                                             double weight_decay) {
  return {lr / (1.0 - pow(beta1, step)), sqrt(1.0 - pow(beta2, step)), 1.0 - lr * weight_decay};
}
// Adam's moments of one element in the compute type A, every Adam and LAMB variant:
// m = m + (1 - beta1) (g - m) (PyTorch's lerp; = beta1 m + (1 - beta1) g), v = beta2 v + (1 -
// beta2) g^2. b1c = 1 - beta1, b2c = 1 - beta2.
template <class A>
AIM_OPTIM_HD inline void adam_moments(A g, A& m, A& v, A b1c, A b2, A b2c) {
  m += b1c * (g - m);
  v = b2 * v + b2c * g * g;
}
// Adam's bias-corrected direction times step_size (Adam: lr / bc1, LAMB: 1 / bc1; both from
// adam_scalars): step_size * m / (sqrt(v) / bc2_sqrt + eps).
template <class A>
AIM_OPTIM_HD inline A adam_direction(A m, A v, A step_size, A bc2_sqrt, A eps) {
  if constexpr (std::is_same_v<A, float>) {
    return step_size * m / (sqrtf(v) / bc2_sqrt + eps);
  } else {
    return step_size * m / (sqrt(v) / bc2_sqrt + eps);
  }
}
// LAMB's trust ratio from the squared norms of w and u: ||w|| / ||u|| when both are > 0, else 1.
AIM_OPTIM_HD inline double lamb_trust_ratio(double w_sq, double u_sq) {
  return w_sq > 0 && u_sq > 0 ? sqrt(w_sq) / sqrt(u_sq) : 1.0;
}
// Adagrad's decayed learning rate at a step (counted from 1).
AIM_OPTIM_HD inline double adagrad_lr(double lr, double step, double lr_decay) {
  return lr / (1.0 + (step - 1.0) * lr_decay);
}

// One FTRL element in double given the powers s1 = (n + g^2)^mp and s0 = n^mp (mp =
// -lr_power): updates w and z; n becomes n + g^2 (the caller's).
AIM_OPTIM_HD inline void ftrl_step(double& w, double g, double& z, double s1, double s0, double lr,
                                   double l1, double l2) {
  z += g - (s1 - s0) / lr * w;
  const double quad = s1 / lr + 2 * l2;
  w = fabs(z) > l1 ? ((z > 0 ? l1 : -l1) - z) / quad : 0.0;
}
// One FTRL element in double with pow, cpu.ref and cuda.fused (the same numbers as the host loop
// they replaced). Updates w, n, z.
AIM_OPTIM_HD inline void ftrl_element(double& w, double g, double& n, double& z, double lr,
                                      double mp, double l1, double l2) {
  const double n1 = n + g * g;
  ftrl_step(w, g, z, pow(n1, mp), pow(n, mp), lr, l1, l2);
  n = n1;
}

}  // namespace aim::kernels
