#include "layers/conv.h"

#include <cmath>
#include <tuple>

#include "autograd/functions/conv.h"
#include "layers/fold.h"
#include "layers/init.h"

namespace aim::layers {
namespace {

void check_options(const char* what, int64_t in, int64_t out, int64_t kh, int64_t kw,
                   const ConvOptions& o) {
  AIM_CHECK(in > 0 && out > 0 && kh > 0 && kw > 0, what,
            ": channels and kernel must be positive, got in=", in, " out=", out, " kernel=", kh,
            "x", kw);
  AIM_CHECK(o.groups >= 1 && in % o.groups == 0 && out % o.groups == 0, what, ": groups ", o.groups,
            " must divide in_channels ", in, " and out_channels ", out);
  AIM_CHECK(o.stride_h >= 1 && o.stride_w >= 1 && o.dil_h >= 1 && o.dil_w >= 1 && o.pad_h >= 0 &&
                o.pad_w >= 0,
            what, ": stride and dilation must be >= 1 and padding >= 0");
}

}  // namespace

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_h, int64_t kernel_w,
               const ConvOptions& o, uint64_t seed)
    : in_(in_channels), out_(out_channels), kh_(kernel_h), kw_(kernel_w), o_(o) {
  check_options("Conv2d", in_, out_, kh_, kw_, o_);
  kernels::Generator gen(seed);
  const double bound = 1.0 / std::sqrt(double(in_ / o_.groups * kh_ * kw_));
  weight = param("weight", uniform_init({out_, in_ / o_.groups, kh_, kw_}, -bound, bound, gen));
  if (o_.bias) bias = param("bias", uniform_init({out_}, -bound, bound, gen));
}

kernels::Conv2dParams Conv2d::params_for(int64_t H, int64_t W) const {
  kernels::Conv2dParams p;
  p.stride_h = o_.stride_h;
  p.stride_w = o_.stride_w;
  p.dil_h = o_.dil_h;
  p.dil_w = o_.dil_w;
  p.groups = o_.groups;
  if (o_.tf_same) {
    std::tie(p.pad_top, p.pad_bottom) = kernels::tf_same_padding(H, kh_, o_.stride_h, o_.dil_h);
    std::tie(p.pad_left, p.pad_right) = kernels::tf_same_padding(W, kw_, o_.stride_w, o_.dil_w);
  } else {
    p.pad_top = p.pad_bottom = o_.pad_h;
    p.pad_left = p.pad_right = o_.pad_w;
  }
  return p;
}

Shape Conv2d::output_shape(const Shape& in) const {
  AIM_CHECK(in.size() == 4 && in[1] == in_, "Conv2d(", in_, " -> ", out_, "): expected input [N, ",
            in_, ", H, W], got ", to_string(in));
  const kernels::Conv2dParams p = params_for(in[2], in[3]);
  const int64_t P =
      kernels::conv2d_out_size(in[2], kh_, p.stride_h, p.pad_top, p.pad_bottom, p.dil_h);
  const int64_t Q =
      kernels::conv2d_out_size(in[3], kw_, p.stride_w, p.pad_left, p.pad_right, p.dil_w);
  AIM_CHECK(P > 0 && Q > 0, "Conv2d: kernel ", kh_, "x", kw_, " does not fit input ",
            to_string(in));
  return {in[0], out_, P, Q};
}

Variable Conv2d::forward(const Variable& x) {
  const Shape out = output_shape(x.sizes());
  (void)out;
  FoldTrace* t = FoldTrace::active();
  if (t) t->conv_input(this, x.data());
  Variable y = autograd::conv2d(x, weight, bias, params_for(x.size(2), x.size(3)), fused_relu_,
                                Variable(), input_affine_);
  if (t) t->conv_output(this, y.data());
  return y;
}

Variable Conv2d::forward_relu(const Variable& x) {
  // Not reported to a fold trace: a batch norm after it reads relu's output, not the conv's, so
  // it must not be folded into this conv (nor one before it: the pairs are found on forward).
  return autograd::conv2d(x, weight, bias, params_for(x.size(2), x.size(3)), true, Variable(),
                          input_affine_);
}

Variable Conv2d::forward_residual_relu(const Variable& x, const Variable& residual) {
  AIM_CHECK(!fused_relu_, "Conv2d(", in_, " -> ", out_,
            "): forward_residual_relu on a conv whose relu was fused before the residual");
  return autograd::conv2d(x, weight, bias, params_for(x.size(2), x.size(3)), true, residual,
                          input_affine_);
}

bool Conv2d::pointwise() const {
  // TF SAME pads a 1x1 stride-1 convolution by nothing, whatever the input size.
  return kernels::conv2d_pointwise(kh_, kw_, params_for(1, 1));
}

void Conv2d::set_input_affine(const std::vector<double>& scale, const std::vector<double>& shift,
                              bool relu) {
  AIM_CHECK(pointwise(), "Conv2d(", in_, " -> ", out_, "): an input transform needs a pointwise ",
            "convolution (1x1, stride 1, unpadded), got ", kh_, "x", kw_);
  AIM_CHECK(int64_t(scale.size()) == in_ && int64_t(shift.size()) == in_, "Conv2d(", in_, " -> ",
            out_, "): the input transform needs ", in_, " scales and shifts, got ", scale.size());
  const Device dev = weight.data().device();
  input_affine_.scale = Tensor::from_vector(scale, {in_}).to(DType::f32).to(dev);
  input_affine_.shift = Tensor::from_vector(shift, {in_}).to(DType::f32).to(dev);
  input_affine_.relu = relu;
}

void Conv2d::fold_scale_shift(const std::vector<double>& scale, const std::vector<double>& shift) {
  AIM_CHECK(int64_t(scale.size()) == out_ && int64_t(shift.size()) == out_, "Conv2d(", in_, " -> ",
            out_, "): folding needs ", out_, " scales and shifts, got ", scale.size());
  const Tensor& w = weight.data();
  std::vector<double> wv = w.to(kCPU).to(DType::f64).to_vector<double>();
  const size_t per = wv.size() / size_t(out_);
  for (size_t k = 0; k < size_t(out_); ++k)
    for (size_t i = 0; i < per; ++i) wv[k * per + i] *= scale[k];
  w.copy_(Tensor::from_vector(wv, w.sizes()));
  std::vector<double> bv(size_t(out_), 0.0);
  if (bias.defined()) bv = bias.data().to(kCPU).to(DType::f64).to_vector<double>();
  for (size_t k = 0; k < bv.size(); ++k) bv[k] = bv[k] * scale[k] + shift[k];
  const Tensor b = Tensor::from_vector(bv, {out_});
  if (bias.defined())
    bias.data().copy_(b);
  else
    bias = param("bias", b.to(w.dtype()).to(w.device()));
}

Shape Conv2d::count_flops(const Shape& in, double& flops) const {
  const Shape out = output_shape(in);
  const double y = double(shape_numel(out));
  flops += 2 * y * double(in_ / o_.groups * kh_ * kw_) + (o_.bias ? y : 0.0);
  return out;
}

ConvTranspose2d::ConvTranspose2d(int64_t in_channels, int64_t out_channels, int64_t kernel,
                                 const ConvOptions& o, uint64_t seed)
    : in_(in_channels), out_(out_channels), k_(kernel), o_(o) {
  check_options("ConvTranspose2d", in_, out_, k_, k_, o_);
  AIM_CHECK(!o_.tf_same,
            "ConvTranspose2d: TF SAME padding is not supported; give explicit padding");
  kernels::Generator gen(seed);
  // PyTorch's fan_in of a transposed conv weight [in, out/g, k, k] is (out/g) * k * k.
  const double bound = 1.0 / std::sqrt(double(out_ / o_.groups * k_ * k_));
  weight = param("weight", uniform_init({in_, out_ / o_.groups, k_, k_}, -bound, bound, gen));
  if (o_.bias) bias = param("bias", uniform_init({out_}, -bound, bound, gen));
}

kernels::Conv2dParams ConvTranspose2d::params() const {
  kernels::Conv2dParams p;
  p.stride_h = o_.stride_h;
  p.stride_w = o_.stride_w;
  p.pad_top = p.pad_bottom = o_.pad_h;
  p.pad_left = p.pad_right = o_.pad_w;
  p.dil_h = o_.dil_h;
  p.dil_w = o_.dil_w;
  p.groups = o_.groups;
  return p;
}

Variable ConvTranspose2d::forward(const Variable& x) {
  AIM_CHECK(x.dim() == 4 && x.size(1) == in_, "ConvTranspose2d(", in_, " -> ", out_,
            "): expected input [N, ", in_, ", H, W], got ", to_string(x.sizes()));
  return autograd::conv_transpose2d(x, weight, bias, params(), o_.out_pad_h, o_.out_pad_w);
}

Shape ConvTranspose2d::count_flops(const Shape& in, double& flops) const {
  AIM_CHECK(in.size() == 4 && in[1] == in_, "ConvTranspose2d: expected input [N, ", in_,
            ", H, W], got ", to_string(in));
  const kernels::Conv2dParams p = params();
  const Shape out = {
      in[0], out_, (in[2] - 1) * p.stride_h - 2 * o_.pad_h + p.dil_h * (k_ - 1) + o_.out_pad_h + 1,
      (in[3] - 1) * p.stride_w - 2 * o_.pad_w + p.dil_w * (k_ - 1) + o_.out_pad_w + 1};
  // The same multiply-adds as the plain conv it transposes; the bias is a separate add.
  flops += 2 * double(shape_numel(in)) * double(out_ / o_.groups * k_ * k_) +
           (o_.bias ? double(shape_numel(out)) : 0.0);
  return out;
}

}  // namespace aim::layers
