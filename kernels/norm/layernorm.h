// LayerNorm over the last axis: y = (x - mean(x)) * rstd * gamma + beta, rstd = 1/sqrt(var + eps)
// with the biased variance (as torch.nn.functional.layer_norm).
// Shapes: x, y, dy, dx [N, C]; gamma, beta, dgamma, dbeta [C] (optional: undefined = no affine /
// not wanted); mean, rstd [N], f32 (f64 when x is f64), saved for backward.
// Math and gradient: kernels/norm/README.md
#pragma once
#include "kernels/op.h"

namespace aim::kernels {

struct LayerNormFwdArgs {
  Tensor x, gamma, beta;  // x: [N, C]; gamma, beta: [C] or undefined
  Tensor y, mean, rstd;   // y: [N, C] (x's dtype); mean, rstd: [N] (stat dtype), written
  float eps = 1e-5f;
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.in_opt("gamma", s.gamma), f.in_opt("beta", s.beta);
    f.out("y", s.y), f.out("mean", s.mean), f.out("rstd", s.rstd);
    f.param("eps", s.eps);
  }
};

struct LayerNormBwdArgs {
  Tensor dy, x, gamma, mean, rstd;  // dy, x: [N, C]; gamma: [C] or undefined; mean, rstd: [N]
  Tensor dx;                        // [N, C]: written (=)
  Tensor dgamma, dbeta;             // [C]: accumulated (+=); either may be undefined
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dy", s.dy), f.in("x", s.x), f.in_opt("gamma", s.gamma);
    f.in("mean", s.mean), f.in("rstd", s.rstd);
    f.out("dx", s.dx), f.out_opt("dgamma", s.dgamma), f.out_opt("dbeta", s.dbeta);
  }
};

// Statistics dtype for an input dtype: f64 for f64, else f32.
inline DType layernorm_stat_dtype(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }

inline Cost layernorm_fwd_cost(const LayerNormFwdArgs& a) {
  const double N = double(a.x.size(0)), C = double(a.x.size(1)),
               e = double(dtype_size(a.x.dtype()));
  const double s = double(dtype_size(layernorm_stat_dtype(a.x.dtype())));
  const double affine = a.gamma.defined() ? 2 * C * e : 0;
  return Cost{/*flops=*/8 * N * C, /*bytes_read=*/N * C * e + affine,
              /*bytes_written=*/N * C * e + 2 * N * s};
}
inline Cost layernorm_bwd_cost(const LayerNormBwdArgs& a) {
  const double N = double(a.x.size(0)), C = double(a.x.size(1)),
               e = double(dtype_size(a.x.dtype()));
  const double s = double(dtype_size(layernorm_stat_dtype(a.x.dtype())));
  const double g = a.gamma.defined() ? C * e : 0;
  const double acc = (a.dgamma.defined() ? C * e : 0) + (a.dbeta.defined() ? C * e : 0);
  return Cost{/*flops=*/12 * N * C, /*bytes_read=*/2 * N * C * e + 2 * N * s + g + acc,
              /*bytes_written=*/N * C * e + acc};
}

// Host-side validation shared by every variant (throws "[layernorm_fwd] ..." messages).
void check_layernorm_fwd_args(const LayerNormFwdArgs& a);
void check_layernorm_bwd_args(const LayerNormBwdArgs& a);

void layernorm_fwd(const LayerNormFwdArgs& a);
void layernorm_bwd(const LayerNormBwdArgs& a);  // gradient rules: autograd/node.h

}  // namespace aim::kernels
