// Fused bias + residual + LayerNorm over the last axis (BERT's "dense output + dropout + residual,
// then LayerNorm"): h = x + bias + residual, y = LayerNorm(h) · gamma + beta. h is written (it is
// what the backward reads, as layernorm_bwd reads x) and is h rounded to x's dtype; the
// normalisation is of h as stored, so y = layernorm_fwd(h) and the gradient is layernorm_bwd's.
// Shapes: x, residual, h, y, dy, dh [N, C] contiguous; bias, gamma, beta, dbias, dgamma, dbeta [C]
// (bias optional; gamma and beta both or neither); mean, rstd [N] in layernorm_stat_dtype (f32;
// f64 for f64). Math, gradient and cost: kernels/norm/README.md, "add_layernorm".
#pragma once
#include "kernels/norm/layernorm.h"
#include "kernels/op.h"

namespace aim::kernels {

struct AddLayerNormFwdArgs {
  Tensor x, bias, residual;  // x, residual: [N, C]; bias: [C] or undefined
  Tensor gamma, beta;        // [C], both or neither
  Tensor h, y;               // [N, C] (x's dtype): written
  Tensor mean, rstd;         // [N] (stat dtype): written
  float eps = 1e-5f;
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.in_opt("bias", s.bias), f.in("residual", s.residual);
    f.in_opt("gamma", s.gamma), f.in_opt("beta", s.beta);
    f.out("h", s.h), f.out("y", s.y), f.out("mean", s.mean), f.out("rstd", s.rstd);
    f.param("eps", s.eps);
  }
};

// The gradient of h, dh, is the gradient of both x and residual; dbias = Σ_n dh.
struct AddLayerNormBwdArgs {
  Tensor dy, h, gamma, mean, rstd;  // dy, h: [N, C]; gamma: [C] or undefined; mean, rstd: [N]
  Tensor dh;                        // [N, C]: written (=)
  Tensor dgamma, dbeta, dbias;      // [C]: accumulated (+=); any may be undefined
  Device device() const { return h.device(); }
  DType dtype() const { return h.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dy", s.dy), f.in("h", s.h), f.in_opt("gamma", s.gamma);
    f.in("mean", s.mean), f.in("rstd", s.rstd);
    f.out("dh", s.dh), f.out_opt("dgamma", s.dgamma), f.out_opt("dbeta", s.dbeta);
    f.out_opt("dbias", s.dbias);
  }
};

// Compulsory work: the two adds and layernorm_fwd's count per element; x, residual, bias and
// the affine parameters read once, h and y written, mean and rstd written. Backward:
// layernorm_bwd's, plus one add per element for dbias (read and written once).
inline Cost add_layernorm_fwd_cost(const AddLayerNormFwdArgs& a) {
  const double N = double(a.x.size(0)), C = double(a.x.size(1)),
               e = double(dtype_size(a.x.dtype()));
  const double s = double(dtype_size(layernorm_stat_dtype(a.x.dtype())));
  const double params = (a.bias.defined() ? C * e : 0) + (a.gamma.defined() ? 2 * C * e : 0);
  return Cost{/*flops=*/10 * N * C, /*bytes_read=*/2 * N * C * e + params,
              /*bytes_written=*/2 * N * C * e + 2 * N * s};
}
inline Cost add_layernorm_bwd_cost(const AddLayerNormBwdArgs& a) {
  const double N = double(a.h.size(0)), C = double(a.h.size(1)),
               e = double(dtype_size(a.h.dtype()));
  const double s = double(dtype_size(layernorm_stat_dtype(a.h.dtype())));
  const double g = a.gamma.defined() ? C * e : 0;
  const double acc = (a.dgamma.defined() ? C * e : 0) + (a.dbeta.defined() ? C * e : 0) +
                     (a.dbias.defined() ? C * e : 0);
  return Cost{/*flops=*/(a.dbias.defined() ? 13 : 12) * N * C,
              /*bytes_read=*/2 * N * C * e + 2 * N * s + g + acc,
              /*bytes_written=*/N * C * e + acc};
}

// Host-side validation shared by every variant (throws "[add_layernorm_fwd] ..." messages).
void check_add_layernorm_fwd_args(const AddLayerNormFwdArgs& a);
void check_add_layernorm_bwd_args(const AddLayerNormBwdArgs& a);

void add_layernorm_fwd(const AddLayerNormFwdArgs& a);
void add_layernorm_bwd(const AddLayerNormBwdArgs& a);  // gradient rules: autograd/node.h

}  // namespace aim::kernels
