// Losses, forward and backward (PyTorch semantics: F.cross_entropy,
// F.binary_cross_entropy_with_logits, F.mse_loss, F.smooth_l1_loss). Math and gradients:
// kernels/loss/README.md Shapes: cross entropy: logits, dlogits [N, V]; target [N] i32/i64 class
// indices; lse [N].
//         pointwise losses: input/logits, target, dinput/dlogits: same shape (any, >= 1 dim);
//         pos_weight [C] (C = last dim), optional.
//         loss, dloss: [] (scalar) for mean/sum; [N] (cross entropy) or the input's shape for none.
// Dtypes: inputs f32, f64, f16, bf16. loss, dloss and lse are f32 for f32/f16/bf16 inputs and
// f64 for f64 (losses accumulate in f32/f64); gradients have the input's dtype.
#pragma once
#include <math.h>

#include <cmath>

#include "kernels/op.h"

namespace aim::kernels {

enum class Reduction { none, mean, sum };
const char* reduction_name(Reduction r);
inline DType loss_dtype(DType input) { return input == DType::f64 ? DType::f64 : DType::f32; }

struct CrossEntropyFwdArgs {
  Tensor logits, target;  // [N, V]; [N] i32/i64
  Tensor loss, lse;       // [N] (none) or []; [N]: written
  int64_t ignore_index = -100;
  float label_smoothing = 0.0f;
  Reduction reduction = Reduction::mean;
  Device device() const { return logits.device(); }
  DType dtype() const { return logits.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("logits", s.logits), f.in("target", s.target), f.out("loss", s.loss), f.out("lse", s.lse);
    f.param("ignore_index", s.ignore_index), f.param("label_smoothing", s.label_smoothing);
    f.param("reduction", s.reduction);
  }
};
struct CrossEntropyBwdArgs {
  Tensor dloss, logits, target, lse;  // dloss: [N] (none) or []; lse from the forward
  Tensor dlogits;                     // [N, V]: written (=)
  int64_t ignore_index = -100;
  float label_smoothing = 0.0f;
  Reduction reduction = Reduction::mean;
  Device device() const { return logits.device(); }
  DType dtype() const { return logits.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dloss", s.dloss), f.in("logits", s.logits), f.in("target", s.target), f.in("lse", s.lse);
    f.out("dlogits", s.dlogits);
    f.param("ignore_index", s.ignore_index), f.param("label_smoothing", s.label_smoothing);
    f.param("reduction", s.reduction);
  }
};

// The pointwise losses' fields call the input (logits) "x" and its gradient "dx", as their test
// cases do (one case maker for the three losses).
struct BceWithLogitsFwdArgs {
  Tensor logits, target, pos_weight;  // pos_weight: [C] or undefined
  Tensor loss;
  Reduction reduction = Reduction::mean;
  Device device() const { return logits.device(); }
  DType dtype() const { return logits.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.logits), f.in("target", s.target), f.in_opt("pos_weight", s.pos_weight);
    f.out("loss", s.loss), f.param("reduction", s.reduction);
  }
};
struct BceWithLogitsBwdArgs {
  Tensor dloss, logits, target, pos_weight;
  Tensor dlogits;  // written (=)
  Reduction reduction = Reduction::mean;
  Device device() const { return logits.device(); }
  DType dtype() const { return logits.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dloss", s.dloss), f.in("x", s.logits), f.in("target", s.target);
    f.in_opt("pos_weight", s.pos_weight), f.out("dx", s.dlogits), f.param("reduction", s.reduction);
  }
};

struct MseFwdArgs {
  Tensor input, target;
  Tensor loss;
  Reduction reduction = Reduction::mean;
  Device device() const { return input.device(); }
  DType dtype() const { return input.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.input), f.in("target", s.target), f.out("loss", s.loss);
    f.param("reduction", s.reduction);
  }
};
struct MseBwdArgs {
  Tensor dloss, input, target;
  Tensor dinput;  // written (=)
  Reduction reduction = Reduction::mean;
  Device device() const { return input.device(); }
  DType dtype() const { return input.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dloss", s.dloss), f.in("x", s.input), f.in("target", s.target), f.out("dx", s.dinput);
    f.param("reduction", s.reduction);
  }
};

struct SmoothL1FwdArgs {
  Tensor input, target;
  Tensor loss;
  Reduction reduction = Reduction::mean;
  float beta = 1.0f;  // >= 0; 0 is the L1 loss
  Device device() const { return input.device(); }
  DType dtype() const { return input.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.input), f.in("target", s.target), f.out("loss", s.loss);
    f.param("reduction", s.reduction), f.param("beta", s.beta);
  }
};
struct SmoothL1BwdArgs {
  Tensor dloss, input, target;
  Tensor dinput;  // written (=)
  Reduction reduction = Reduction::mean;
  float beta = 1.0f;
  Device device() const { return input.device(); }
  DType dtype() const { return input.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dloss", s.dloss), f.in("x", s.input), f.in("target", s.target), f.out("dx", s.dinput);
    f.param("reduction", s.reduction), f.param("beta", s.beta);
  }
};

// ---- costs: compulsory work from shapes ----
inline Cost cross_entropy_fwd_cost(const CrossEntropyFwdArgs& a) {
  const double n = double(a.logits.numel()), N = double(a.logits.size(0));
  const double e = double(dtype_size(a.logits.dtype())),
               s = double(dtype_size(loss_dtype(a.logits.dtype())));
  return Cost{4 * n, n * e + N * double(dtype_size(a.target.dtype())),
              double(a.loss.numel()) * s + N * s};
}
inline Cost cross_entropy_bwd_cost(const CrossEntropyBwdArgs& a) {
  const double n = double(a.logits.numel()), N = double(a.logits.size(0));
  const double e = double(dtype_size(a.logits.dtype())),
               s = double(dtype_size(loss_dtype(a.logits.dtype())));
  return Cost{4 * n,
              n * e + N * (s + double(dtype_size(a.target.dtype()))) + double(a.dloss.numel()) * s,
              n * e};
}
// Pointwise losses: `flops` per element forward/backward (rough: exp/log count as one).
inline Cost pointwise_loss_fwd_cost(const Tensor& x, const Tensor& loss, double flops) {
  const double n = double(x.numel()), e = double(dtype_size(x.dtype()));
  return Cost{flops * n, 2 * n * e, double(loss.nbytes())};
}
inline Cost pointwise_loss_bwd_cost(const Tensor& x, const Tensor& dloss, double flops) {
  const double n = double(x.numel()), e = double(dtype_size(x.dtype()));
  return Cost{flops * n, 2 * n * e + double(dloss.nbytes()), n * e};
}
inline Cost bce_with_logits_fwd_cost(const BceWithLogitsFwdArgs& a) {
  return pointwise_loss_fwd_cost(a.logits, a.loss, 8);
}
inline Cost bce_with_logits_bwd_cost(const BceWithLogitsBwdArgs& a) {
  return pointwise_loss_bwd_cost(a.logits, a.dloss, 6);
}
inline Cost mse_fwd_cost(const MseFwdArgs& a) {
  return pointwise_loss_fwd_cost(a.input, a.loss, 3);
}
inline Cost mse_bwd_cost(const MseBwdArgs& a) {
  return pointwise_loss_bwd_cost(a.input, a.dloss, 3);
}
inline Cost smooth_l1_fwd_cost(const SmoothL1FwdArgs& a) {
  return pointwise_loss_fwd_cost(a.input, a.loss, 4);
}
inline Cost smooth_l1_bwd_cost(const SmoothL1BwdArgs& a) {
  return pointwise_loss_bwd_cost(a.input, a.dloss, 3);
}

// ---- the pointwise losses in one form, shared by cpu.omp and the CUDA variants ----
// (cpu.ref writes each formula out on its own.)
enum class PointwiseKind { bce_with_logits, mse, smooth_l1 };
struct PointwiseLoss {
  PointwiseKind kind;
  const char* op;  // "mse_fwd", ... for messages
  Tensor x, target, pos_weight;
  Tensor dloss;  // backward only
  Tensor out;    // forward: loss; backward: dx
  Reduction reduction;
  double beta = 0;  // smooth_l1
};
PointwiseLoss to_pointwise(const BceWithLogitsFwdArgs& a);
PointwiseLoss to_pointwise(const BceWithLogitsBwdArgs& a);
PointwiseLoss to_pointwise(const MseFwdArgs& a);
PointwiseLoss to_pointwise(const MseBwdArgs& a);
PointwiseLoss to_pointwise(const SmoothL1FwdArgs& a);
PointwiseLoss to_pointwise(const SmoothL1BwdArgs& a);

#if defined(__CUDACC__)
#define AIM_LOSS_HD __host__ __device__
#else
#define AIM_LOSS_HD
#endif
// Loss of one element and its derivative d loss / d x. A: float or double.
template <class A>
AIM_LOSS_HD inline A pointwise_value(PointwiseKind k, A x, A y, A pw, A beta) {
  if (k == PointwiseKind::bce_with_logits) {
    // (1 - y) x + (1 + (pw - 1) y) softplus(-x), softplus(-x) = max(-x, 0) + log1p(exp(-|x|))
    const A sp = (x < A(0) ? -x : A(0)) + log1p(exp(-fabs(x)));
    return (A(1) - y) * x + (A(1) + (pw - A(1)) * y) * sp;
  }
  const A d = x - y;
  if (k == PointwiseKind::mse) return d * d;
  const A ad = fabs(d);
  return ad < beta ? A(0.5) * d * d / beta : ad - A(0.5) * beta;
}
template <class A>
AIM_LOSS_HD inline A pointwise_grad(PointwiseKind k, A x, A y, A pw, A beta) {
  if (k == PointwiseKind::bce_with_logits) {
    const A sig = A(1) / (A(1) + exp(-x));
    return (A(1) + (pw - A(1)) * y) * sig - pw * y;
  }
  const A d = x - y;
  if (k == PointwiseKind::mse) return A(2) * d;
  if (fabs(d) < beta) return d / beta;
  return d > A(0) ? A(1) : d < A(0) ? A(-1) : A(0);
}

// Host-side validation shared by every variant ("[op] ..." messages).
void check_cross_entropy_fwd_args(const CrossEntropyFwdArgs& a);
void check_cross_entropy_bwd_args(const CrossEntropyBwdArgs& a);
void check_pointwise_args(const PointwiseLoss& p, bool backward);
[[noreturn]] void cross_entropy_target_error(const char* op, int64_t position, int64_t target,
                                             int64_t V, int64_t ignore_index);

void cross_entropy_fwd(const CrossEntropyFwdArgs& a);
void cross_entropy_bwd(const CrossEntropyBwdArgs& a);
void bce_with_logits_fwd(const BceWithLogitsFwdArgs& a);
void bce_with_logits_bwd(const BceWithLogitsBwdArgs& a);
void mse_fwd(const MseFwdArgs& a);
void mse_bwd(const MseBwdArgs& a);
void smooth_l1_fwd(const SmoothL1FwdArgs& a);
void smooth_l1_bwd(const SmoothL1BwdArgs& a);

}  // namespace aim::kernels
