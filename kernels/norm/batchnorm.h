// Batch normalisation per channel, as torch.nn.functional.batch_norm, over x [N, C, S] where S is
// the product of the trailing (spatial) dims (S = 1 for [N, C]): the caller passes any contiguous
// x [N, C, ...] and the kernels read dims 0 and 1 and fold the rest.
// Training: y = (x - mean_c) * rstd_c * gamma_c + beta_c with the batch mean and the biased
// variance over N*S (rstd = 1/sqrt(var + eps)); save_mean/save_rstd are written for backward and,
// when running_mean/running_var are given, they are updated in place with the unbiased variance:
//   running = (1 - momentum) * running + momentum * batch_stat
// Eval: the running statistics normalise; save_mean/save_rstd, when given, receive running_mean
// and 1/sqrt(running_var + eps) so the same backward serves frozen BN. `relu` writes max(y, 0)
// (NaN stays NaN, as relu): BN -> ReLU in one pass over x instead of two; its backward takes that
// output as `y_relu` and masks dy with it (dy where y_relu > 0, else 0: relu's backward, which
// also reads its output) before the batch-norm gradient, in the same passes.
// gamma, beta, running_*, save_*: [C] in the statistics dtype (f32; f64 when x is f64): 16-bit
// activations keep fp32 parameters and statistics, as cuDNN does.
// Math and gradient: kernels/norm/README.md
#pragma once
#include "kernels/op.h"

namespace aim::kernels {

// Statistics and parameter dtype for an activation dtype: f64 for f64, else f32.
inline DType batchnorm_stat_dtype(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }

struct BatchNormFwdArgs {
  Tensor x;                          // [N, C, ...] contiguous
  Tensor gamma, beta;                // [C] or both undefined (no affine)
  Tensor running_mean, running_var;  // [C]: updated (training) or read (eval); may be undefined
                                     // in training (no tracking), required in eval
  Tensor y;                          // like x: written
  Tensor save_mean, save_rstd;       // [C]: written; required in training, optional in eval
  bool training = true;
  double momentum = 0.1;  // weight of the batch statistic in the running update
  double eps = 1e-5;
  bool relu = false;  // y = relu(batch_norm(x))
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  // The running statistics are declared as outputs: training updates them in place, so a test
  // compares them; in eval they are only read (and compare equal to their initial content).
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.in_opt("gamma", s.gamma), f.in_opt("beta", s.beta);
    f.out_opt("running_mean", s.running_mean), f.out_opt("running_var", s.running_var);
    f.out("y", s.y), f.out_opt("save_mean", s.save_mean), f.out_opt("save_rstd", s.save_rstd);
    f.param("training", s.training), f.param("momentum", s.momentum), f.param("eps", s.eps);
    f.param("relu", s.relu);
  }
};

struct BatchNormBwdArgs {
  Tensor dy, x;                 // [N, C, ...]
  Tensor gamma;                 // [C] or undefined (no affine)
  Tensor save_mean, save_rstd;  // [C] from the forward
  Tensor dx;                    // like x: written (=), or undefined (not wanted)
  Tensor dgamma, dbeta;         // [C]: accumulated (+=); either may be undefined
  // Like x, or undefined: the output of a forward that fused relu; dy counts where it is > 0.
  Tensor y_relu;
  bool training = true;  // false: statistics were constants (frozen BN): dx = dy*gamma*rstd
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dy", s.dy), f.in("x", s.x), f.in_opt("gamma", s.gamma);
    f.in("save_mean", s.save_mean), f.in("save_rstd", s.save_rstd), f.in_opt("y_relu", s.y_relu);
    f.out_opt("dx", s.dx), f.out_opt("dgamma", s.dgamma), f.out_opt("dbeta", s.dbeta);
    f.param("training", s.training);
  }
};

inline Cost batchnorm_fwd_cost(const BatchNormFwdArgs& a) {
  const double n = double(a.x.numel()), C = double(a.x.size(1)),
               e = double(dtype_size(a.x.dtype())),
               s = double(dtype_size(batchnorm_stat_dtype(a.x.dtype())));
  // Training reads x twice in a two-pass kernel, but compulsory traffic counts it once.
  const double flops = (a.training ? 7 * n : 2 * n) + (a.relu ? n : 0);
  const double params = (a.gamma.defined() ? 2 * C : 0) + 2 * C;
  return Cost{flops, n * e + params * s, n * e + 2 * C * s * (a.training ? 2 : 0)};
}
inline Cost batchnorm_bwd_cost(const BatchNormBwdArgs& a) {
  const double n = double(a.x.numel()), C = double(a.x.size(1)),
               e = double(dtype_size(a.x.dtype())),
               s = double(dtype_size(batchnorm_stat_dtype(a.x.dtype())));
  const double acc = (a.dgamma.defined() ? C : 0) + (a.dbeta.defined() ? C : 0);
  return Cost{(a.training ? 9 * n : 3 * n) + (a.y_relu.defined() ? n : 0),
              (a.y_relu.defined() ? 3 : 2) * n * e + (3 * C + acc) * s,
              (a.dx.defined() ? n * e : 0) + acc * s};
}

// Host-side validation shared by every variant (throws "[batchnorm_fwd] ..." naming the shapes).
void check_batchnorm_fwd_args(const BatchNormFwdArgs& a);
void check_batchnorm_bwd_args(const BatchNormBwdArgs& a);

void batchnorm_fwd(const BatchNormFwdArgs& a);
void batchnorm_bwd(const BatchNormBwdArgs& a);

}  // namespace aim::kernels
