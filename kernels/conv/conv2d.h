// 2-D convolution (cross-correlation, as torch.nn.functional.conv2d), NCHW, with groups, stride,
// dilation, asymmetric zero padding (TF-SAME) and a fused bias.
// Shapes: x, dx [N, C, H, W]; w, dw [K, C/G, R, S]; bias, dbias [K]; y, dy [N, K, P, Q] with
//   P = (H + pad_top + pad_bottom - dil_h*(R-1) - 1) / stride_h + 1   (Q likewise)
// conv_transpose2d needs no kernels of its own: its forward is conv2d_bwd_data, its input
// gradient conv2d_fwd, its weight gradient conv2d_bwd_filter with x and dy exchanged.
// Math and gradient: kernels/conv/README.md
#pragma once
#include <string>
#include <utility>

#include "kernels/op.h"

namespace aim::kernels {

struct Conv2dParams {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int64_t dil_h = 1, dil_w = 1;
  int64_t groups = 1;
  bool symmetric_padding() const { return pad_top == pad_bottom && pad_left == pad_right; }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.param("stride_h", s.stride_h), f.param("stride_w", s.stride_w);
    f.param("pad_top", s.pad_top), f.param("pad_bottom", s.pad_bottom);
    f.param("pad_left", s.pad_left), f.param("pad_right", s.pad_right);
    f.param("dil_h", s.dil_h), f.param("dil_w", s.dil_w), f.param("groups", s.groups);
  }
};

// Output extent of one spatial axis (0 or less: the window does not fit).
inline int64_t conv2d_out_size(int64_t in, int64_t k, int64_t stride, int64_t pad_before,
                               int64_t pad_after, int64_t dil) {
  return (in + pad_before + pad_after - dil * (k - 1) - 1) / stride + 1;
}
// TensorFlow "SAME" padding of one axis: output ceil(in / stride); the odd pixel goes after.
inline std::pair<int64_t, int64_t> tf_same_padding(int64_t in, int64_t k, int64_t stride,
                                                   int64_t dil = 1) {
  const int64_t out = (in + stride - 1) / stride;
  int64_t total = (out - 1) * stride + dil * (k - 1) + 1 - in;
  if (total < 0) total = 0;
  return {total / 2, total - total / 2};
}

struct Conv2dFwdArgs {
  Tensor x;     // [N, C, H, W]
  Tensor w;     // [K, C/G, R, S]
  Tensor bias;  // [K] or undefined (no bias)
  Tensor y;     // [N, K, P, Q]: written (=)
  Conv2dParams p;
  // y = relu(conv + bias + residual) (NaN stays NaN): an inference epilogue (a folded conv -> BN
  // -> ReLU; a ResNet block's last conv -> BN, + shortcut, -> ReLU), applied where each output is
  // stored instead of in passes of their own. residual: like y, or undefined (none).
  Tensor residual;
  bool relu = false;
  // Input prologue (inference): the convolution reads x'[n, c] = in_scale[c] * x[n, c] +
  // in_shift[c], then max(0, .) when in_relu (NaN stays NaN), instead of x: a batch norm and
  // relu before a pointwise convolution (DenseNet's BN -> ReLU -> 1x1 conv; layers/fold.h),
  // applied while the convolution copies its input into its column matrix, so no pass writes x'
  // and reads it back. in_scale, in_shift: f32 [C] on x's device, both or neither. Padding would
  // stay zero after the prologue. With a prologue x's images may lie farther apart than C*H*W
  // (x.stride(0) >= C*H*W, each image contiguous: the leading channels of a DenseNet block's
  // buffer). Only cpu.ref (any shape) and cpu.im2col / cpu.widen (pointwise: 1x1, stride 1,
  // unpadded) take it; the others say so (conv2d_fwd_plain_reason).
  Tensor in_scale, in_shift;
  bool in_relu = false;
  bool has_prologue() const { return in_scale.defined(); }
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.in("w", s.w), f.in_opt("bias", s.bias), f.in_opt("residual", s.residual);
    f.in_opt("in_scale", s.in_scale), f.in_opt("in_shift", s.in_shift);
    f.out("y", s.y);
    f.group(s.p);
    f.param("relu", s.relu);
    f.param("in_relu", s.in_relu);
  }
};
// A pointwise convolution: 1x1, stride 1, unpadded (the shape the CPU's input prologue takes).
inline bool conv2d_pointwise(int64_t R, int64_t S, const Conv2dParams& p) {
  return R == 1 && S == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_top == 0 &&
         p.pad_bottom == 0 && p.pad_left == 0 && p.pad_right == 0;
}
// Whether x [N, C, H, W] holds each image contiguous, its images possibly farther apart than
// C*H*W (a channel slice of a wider tensor does).
inline bool conv2d_images_contiguous(const Tensor& x) {
  const int64_t H = x.size(2), W = x.size(3);
  return x.stride(3) == 1 && x.stride(2) == W && x.stride(1) == H * W &&
         (x.size(0) <= 1 || x.stride(0) >= x.size(1) * H * W);
}
// "" when the call has no input prologue and a contiguous x, else why a variant that takes
// neither cannot run it.
inline std::string conv2d_fwd_plain_reason(const Conv2dFwdArgs& a) {
  if (a.has_prologue() || a.in_shift.defined())
    return "takes no input prologue (in_scale/in_shift: cpu.ref, cpu.im2col and cpu.widen do)";
  if (a.x.defined() && !a.x.is_contiguous())
    return "needs a contiguous x (images farther apart come with an input prologue)";
  return "";
}

struct Conv2dBwdDataArgs {
  Tensor dy;  // [N, K, P, Q]
  Tensor w;   // [K, C/G, R, S]
  Tensor dx;  // [N, C, H, W]: written (=); its shape fixes H, W (several H give the same P)
  Conv2dParams p;
  Device device() const { return dy.device(); }
  DType dtype() const { return dy.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dy", s.dy), f.in("w", s.w), f.out("dx", s.dx);
    f.group(s.p);
  }
};

struct Conv2dBwdFilterArgs {
  Tensor dy;     // [N, K, P, Q]
  Tensor x;      // [N, C, H, W]
  Tensor dw;     // [K, C/G, R, S]: accumulated (+=), a parameter gradient (autograd/node.h)
  Tensor dbias;  // [K]: accumulated (+=), or undefined (not wanted)
  Conv2dParams p;
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dy", s.dy), f.in("x", s.x), f.out("dw", s.dw), f.out_opt("dbias", s.dbias);
    f.group(s.p);
  }
};

// Multiply-adds of one direct convolution: N*K*P*Q * (C/G)*R*S; each direction does the same.
inline double conv2d_macs(const Tensor& w, const Tensor& y) {
  return double(y.size(0)) * double(y.size(1)) * double(y.size(2)) * double(y.size(3)) *
         double(w.size(1)) * double(w.size(2)) * double(w.size(3));
}
inline Cost conv2d_fwd_cost(const Conv2dFwdArgs& a) {
  const double e = double(dtype_size(a.x.dtype()));
  const double n = double(a.y.numel()), r = a.residual.defined() ? n : 0.0;
  const double b = (a.bias.defined() ? n : 0.0) + (a.relu ? n : 0.0) + r;
  // The prologue: a multiply-add per input element (2 FLOPs) and its relu; its [C] vectors.
  const double xn = double(a.x.numel());
  const double pro = a.has_prologue() ? 2 * xn + (a.in_relu ? xn : 0.0) : 0.0;
  const double pro_bytes = a.has_prologue() ? 2 * double(a.in_scale.numel()) * 4 : 0.0;
  return Cost{
      /*flops=*/2 * conv2d_macs(a.w, a.y) + b + pro,
      /*bytes_read=*/
      (xn + double(a.w.numel()) + (a.bias.defined() ? double(a.bias.numel()) : 0.0) + r) * e +
          pro_bytes,
      /*bytes_written=*/double(a.y.numel()) * e};
}
inline Cost conv2d_bwd_data_cost(const Conv2dBwdDataArgs& a) {
  const double e = double(dtype_size(a.dy.dtype()));
  return Cost{/*flops=*/2 * conv2d_macs(a.w, a.dy),
              /*bytes_read=*/(double(a.dy.numel()) + double(a.w.numel())) * e,
              /*bytes_written=*/double(a.dx.numel()) * e};
}
inline Cost conv2d_bwd_filter_cost(const Conv2dBwdFilterArgs& a) {
  const double e = double(dtype_size(a.x.dtype()));
  const double db = a.dbias.defined() ? double(a.dbias.numel()) : 0.0;
  return Cost{
      /*flops=*/2 * conv2d_macs(a.dw, a.dy) + (db > 0 ? double(a.dy.numel()) : 0.0),
      /*bytes_read=*/(double(a.dy.numel()) + double(a.x.numel()) + double(a.dw.numel()) + db) * e,
      /*bytes_written=*/(double(a.dw.numel()) + db) * e};
}

// Host-side validation shared by every variant (throws "[conv2d_fwd] ..." naming the shapes).
void check_conv2d_fwd_args(const Conv2dFwdArgs& a);
void check_conv2d_bwd_data_args(const Conv2dBwdDataArgs& a);
void check_conv2d_bwd_filter_args(const Conv2dBwdFilterArgs& a);

// Batch chunks of the own CUDA variants (conv2d_cuda.cu, conv2d_cuda_tc.cu). Their kernels index
// with 32-bit ints, so the launchers run a batch in chunks of whole images whose x-side and
// y-side slices each hold at most conv2d_chunk_elems() elements (INT_MAX), every chunk a
// convolution of its own over offset pointers (bwd_filter: all chunks' partial sums are added
// into dw at once, in order). Tests lower the limit (set_conv2d_chunk_elems, or the environment
// variable AIM_CONV_MAX_ELEMS_TEST read once) to run several chunks on small shapes.
int64_t conv2d_chunk_elems();
void set_conv2d_chunk_elems(int64_t elems);  // <= 0: back to AIM_CONV_MAX_ELEMS_TEST or INT_MAX
// "" when the chunks can take the call (xs: x or dx, w: w or dw, ys: y or dy): the batch fits an
// int and w and one image of xs and of ys each hold at most conv2d_chunk_elems(); else why not.
std::string conv2d_chunk_reason(const Tensor& xs, const Tensor& w, const Tensor& ys);
// Images per chunk (>= 1, <= N) when conv2d_chunk_reason is "".
int64_t conv2d_images_per_chunk(const Tensor& xs, const Tensor& ys);

void conv2d_fwd(const Conv2dFwdArgs& a);
void conv2d_bwd_data(const Conv2dBwdDataArgs& a);
void conv2d_bwd_filter(const Conv2dBwdFilterArgs& a);

}  // namespace aim::kernels
