// Channel L2 normalisation with a learned per-channel scale (SSD's conv4_3 "L2Norm", SegLink's),
// as torchvision's ssd300_vgg16: y = scale[c] * F.normalize(x, p=2, dim=1, eps), i.e. over x
// [N, C, ...] (contiguous; trailing dims folded into S), at each (n, s):
//   r = sqrt(sum_c x[n,c,s]^2),  d = max(r, eps),  y[n,c,s] = scale[c] x[n,c,s] / d.
// Gradient (d's derivative passes where r >= eps, as torch's clamp_min):
//   g = sum_c scale[c] dy[n,c,s] x[n,c,s]
//   dx[n,c,s] = scale[c] dy / d - [r >= eps] x g / (d^2 r)      (= x g / r^3 there)
//   dscale[c] += sum_{n,s} dy x / d
// scale is optional (undefined: 1, F.normalize alone). Math and cost: kernels/norm/README.md.
#pragma once
#include "kernels/op.h"

namespace aim::kernels {

struct L2NormFwdArgs {
  Tensor x;      // [N, C, ...]
  Tensor scale;  // [C], x's dtype; undefined = 1
  Tensor y;      // like x: written
  double eps = 1e-12;
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.in_opt("scale", s.scale), f.out("y", s.y);
    f.param("eps", s.eps);
  }
};

struct L2NormBwdArgs {
  Tensor dy, x;   // [N, C, ...]
  Tensor scale;   // [C] or undefined
  Tensor dx;      // like x: written (=); r recomputed from x
  Tensor dscale;  // [C]: accumulated (+=); undefined = not wanted
  double eps = 1e-12;
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dy", s.dy), f.in("x", s.x), f.in_opt("scale", s.scale);
    f.out("dx", s.dx), f.out_opt("dscale", s.dscale);
    f.param("eps", s.eps);
  }
};

// Forward: per element a square-add and a scaled product (3 FLOPs), a sqrt and a max per column;
// x read once, y written once, scale read once. Backward: per element the dot's 3, dx's 4, dscale's
// 3 when wanted; dy and x read, dx written.
inline Cost l2norm_fwd_cost(const L2NormFwdArgs& a) {
  const double n = double(a.x.numel()), C = double(a.x.size(1)),
               e = double(dtype_size(a.x.dtype()));
  return Cost{n * 3 + 2 * n / C, n * e + (a.scale.defined() ? C * e : 0), n * e};
}
inline Cost l2norm_bwd_cost(const L2NormBwdArgs& a) {
  const double n = double(a.x.numel()), C = double(a.x.size(1)),
               e = double(dtype_size(a.x.dtype()));
  const bool ds = a.dscale.defined();
  return Cost{n * (7 + (ds ? 3 : 0)) + 2 * n / C,
              2 * n * e + (a.scale.defined() ? C * e : 0) + (ds ? C * e : 0),
              n * e + (ds ? C * e : 0)};
}

void check_l2norm_fwd_args(const L2NormFwdArgs& a);
void check_l2norm_bwd_args(const L2NormBwdArgs& a);

void l2norm_fwd(const L2NormFwdArgs& a);
void l2norm_bwd(const L2NormBwdArgs& a);

}  // namespace aim::kernels
