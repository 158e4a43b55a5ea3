// Local response normalisation across channels, as torch.nn.LocalResponseNorm(size, alpha, beta, k)
// over x [N, C, ...] (contiguous; trailing dims folded into S):
//   scale[n,c,s] = k + alpha/size * sum_{c' = c - size/2}^{c + (size-1)/2} x[n,c',s]^2
//                  (c' in [0, C))
//   y = x * scale^-beta
// TensorFlow's tf.nn.lrn(depth_radius r, bias, alpha, beta) is size = 2r+1, alpha*size, k = bias.
// Math and gradient: kernels/norm/README.md
#pragma once
#include "kernels/op.h"

namespace aim::kernels {

struct LrnParams {
  int64_t size = 5;
  double alpha = 1e-4, beta = 0.75, k = 1.0;
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.param("size", s.size), f.param("alpha", s.alpha), f.param("beta", s.beta);
    f.param("k", s.k);
  }
};

struct LrnFwdArgs {
  Tensor x;  // [N, C, ...]
  Tensor y;  // like x: written
  LrnParams p;
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.out("y", s.y);
    f.group(s.p);
  }
};
struct LrnBwdArgs {
  Tensor dy, x;  // [N, C, ...]
  Tensor dx;     // like x: written (=); scale is recomputed from x
  LrnParams p;
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dy", s.dy), f.in("x", s.x), f.out("dx", s.dx);
    f.group(s.p);
  }
};

inline Cost lrn_fwd_cost(const LrnFwdArgs& a) {
  const double n = double(a.x.numel()), e = double(dtype_size(a.x.dtype()));
  return Cost{n * (2 * double(a.p.size) + 4), n * e, n * e};
}
inline Cost lrn_bwd_cost(const LrnBwdArgs& a) {
  const double n = double(a.x.numel()), e = double(dtype_size(a.x.dtype()));
  return Cost{n * (4 * double(a.p.size) + 8), 2 * n * e, n * e};
}

void check_lrn_fwd_args(const LrnFwdArgs& a);
void check_lrn_bwd_args(const LrnBwdArgs& a);

void lrn_fwd(const LrnFwdArgs& a);
void lrn_bwd(const LrnBwdArgs& a);

}  // namespace aim::kernels
