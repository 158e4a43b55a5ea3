// 2-D max and average pooling and adaptive average pooling over NCHW, as torch.nn.functional
// max_pool2d / avg_pool2d / adaptive_avg_pool2d, with asymmetric padding for TF "SAME".
// Shapes: x, dx [N, C, H, W]; y, dy, indices [N, C, P, Q]. The output extent comes from y's shape;
// pool2d_out_size gives PyTorch's (ceil_mode included).
// Windows: output row p covers input rows [p*stride_h - pad_top, p*stride_h - pad_top + kernel_h),
// clipped to the input. Max: padding never wins (it is -inf). Average: the divisor is the number
// of input elements in the window (count_include_pad = false), or the window clipped to the padded
// extent [-pad_top, H + pad_bottom) (count_include_pad = true, PyTorch's default).
// Adaptive average: output row p covers [floor(p*H/P), ceil((p+1)*H/P)); global pooling is P=Q=1.
// Math and gradient: kernels/pool/README.md
#pragma once
#include "kernels/op.h"

namespace aim::kernels {

struct Pool2dParams {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  bool count_include_pad = true;  // average pooling only
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.param("kernel_h", s.kernel_h), f.param("kernel_w", s.kernel_w);
    f.param("stride_h", s.stride_h), f.param("stride_w", s.stride_w);
    f.param("pad_top", s.pad_top), f.param("pad_bottom", s.pad_bottom);
    f.param("pad_left", s.pad_left), f.param("pad_right", s.pad_right);
    f.param("count_include_pad", s.count_include_pad);
  }
};

// PyTorch's output extent of one axis (symmetric pad: pad_before == pad_after). With ceil_mode
// the last window must still start inside the input or the leading padding.
inline int64_t pool2d_out_size(int64_t in, int64_t k, int64_t stride, int64_t pad_before,
                               int64_t pad_after, bool ceil_mode) {
  const int64_t span = in + pad_before + pad_after - k;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad_before) --out;
  return out;
}

struct MaxPool2dFwdArgs {
  Tensor x;        // [N, C, H, W]
  Tensor y;        // [N, C, P, Q]: written
  Tensor indices;  // [N, C, P, Q] i32: written, flat h*W + w of the max in its plane (first on
                   // ties); undefined when no backward will follow
  Pool2dParams p;
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.out("y", s.y), f.out_opt("indices", s.indices);
    f.group(s.p);
  }
};
struct MaxPool2dBwdArgs {
  Tensor dy;       // [N, C, P, Q]
  Tensor indices;  // [N, C, P, Q] i32 from the forward
  Tensor dx;       // [N, C, H, W]: written (=), zero where no window took the element
  Pool2dParams p;  // the forward's windows: a gather over dx (cuda.direct) needs them
  Device device() const { return dy.device(); }
  DType dtype() const { return dy.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dy", s.dy), f.in("indices", s.indices), f.out("dx", s.dx);
    f.group(s.p);
  }
};

struct AvgPool2dFwdArgs {
  Tensor x;  // [N, C, H, W]
  Tensor y;  // [N, C, P, Q]: written
  Pool2dParams p;
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.out("y", s.y);
    f.group(s.p);
  }
};
struct AvgPool2dBwdArgs {
  Tensor dy;  // [N, C, P, Q]
  Tensor dx;  // [N, C, H, W]: written (=)
  Pool2dParams p;
  Device device() const { return dy.device(); }
  DType dtype() const { return dy.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dy", s.dy), f.out("dx", s.dx);
    f.group(s.p);
  }
};

struct AdaptiveAvgPool2dFwdArgs {
  Tensor x;  // [N, C, H, W]
  Tensor y;  // [N, C, P, Q]: written
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.out("y", s.y);
  }
};
struct AdaptiveAvgPool2dBwdArgs {
  Tensor dy;  // [N, C, P, Q]
  Tensor dx;  // [N, C, H, W]: written (=)
  Device device() const { return dy.device(); }
  DType dtype() const { return dy.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dy", s.dy), f.out("dx", s.dx);
  }
};

// Costs: one compare or add per window element read; compulsory bytes are x once and y once.
inline double pool2d_window_reads(const Tensor& y, const Pool2dParams& p) {
  return double(y.numel()) * double(p.kernel_h) * double(p.kernel_w);
}
inline Cost pool2d_fwd_cost(const Tensor& x, const Tensor& y, double window_reads, double extra) {
  const double e = double(dtype_size(x.dtype()));
  return Cost{window_reads, double(x.numel()) * e, double(y.numel()) * e + extra};
}
inline Cost maxpool2d_fwd_cost(const MaxPool2dFwdArgs& a) {
  return pool2d_fwd_cost(a.x, a.y, pool2d_window_reads(a.y, a.p),
                         a.indices.defined() ? double(a.indices.numel()) * 4 : 0.0);
}
inline Cost maxpool2d_bwd_cost(const MaxPool2dBwdArgs& a) {
  const double e = double(dtype_size(a.dy.dtype()));
  return Cost{double(a.dy.numel()), double(a.dy.numel()) * (e + 4), double(a.dx.numel()) * e};
}
inline Cost avgpool2d_fwd_cost(const AvgPool2dFwdArgs& a) {
  return pool2d_fwd_cost(a.x, a.y, pool2d_window_reads(a.y, a.p) + double(a.y.numel()), 0.0);
}
inline Cost avgpool2d_bwd_cost(const AvgPool2dBwdArgs& a) {
  const double e = double(dtype_size(a.dy.dtype()));
  return Cost{pool2d_window_reads(a.dy, a.p), double(a.dy.numel()) * e, double(a.dx.numel()) * e};
}
inline Cost adaptive_avgpool2d_fwd_cost(const AdaptiveAvgPool2dFwdArgs& a) {
  // Every input element is read about once (windows overlap by at most one row/column).
  return pool2d_fwd_cost(a.x, a.y, double(a.x.numel()) + double(a.y.numel()), 0.0);
}
inline Cost adaptive_avgpool2d_bwd_cost(const AdaptiveAvgPool2dBwdArgs& a) {
  const double e = double(dtype_size(a.dy.dtype()));
  return Cost{double(a.dx.numel()), double(a.dy.numel()) * e, double(a.dx.numel()) * e};
}

// Host-side validation shared by every variant (throws "[maxpool2d_fwd] ..." naming the shapes).
void check_maxpool2d_fwd_args(const MaxPool2dFwdArgs& a);
void check_maxpool2d_bwd_args(const MaxPool2dBwdArgs& a);
void check_avgpool2d_fwd_args(const AvgPool2dFwdArgs& a);
void check_avgpool2d_bwd_args(const AvgPool2dBwdArgs& a);
void check_adaptive_avgpool2d_fwd_args(const AdaptiveAvgPool2dFwdArgs& a);
void check_adaptive_avgpool2d_bwd_args(const AdaptiveAvgPool2dBwdArgs& a);

void maxpool2d_fwd(const MaxPool2dFwdArgs& a);
void maxpool2d_bwd(const MaxPool2dBwdArgs& a);
void avgpool2d_fwd(const AvgPool2dFwdArgs& a);
void avgpool2d_bwd(const AvgPool2dBwdArgs& a);
void adaptive_avgpool2d_fwd(const AdaptiveAvgPool2dFwdArgs& a);
void adaptive_avgpool2d_bwd(const AdaptiveAvgPool2dBwdArgs& a);

}  // namespace aim::kernels
