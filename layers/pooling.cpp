#include "layers/pooling.h"

#include "autograd/functions/pool.h"
#include "autograd/functions/shape.h"
#include "kernels/conv/conv2d.h"  // tf_same_padding

namespace aim::layers {
namespace {

PoolOptions checked(PoolOptions o, const char* what) {
  if (o.stride == 0) o.stride = o.kernel;
  AIM_CHECK(o.kernel >= 1 && o.stride >= 1 && o.padding >= 0, what,
            ": kernel and stride must be >= 1 and padding >= 0, got kernel ", o.kernel, " stride ",
            o.stride, " padding ", o.padding);
  AIM_CHECK(!(o.tf_same && (o.padding || o.ceil_mode)), what,
            ": TF SAME padding excludes explicit padding and ceil_mode");
  if (o.tf_same) o.count_include_pad = false;
  return o;
}

void check_input(const Shape& in, const char* what) {
  AIM_CHECK(in.size() == 4, what, ": expected input [N, C, H, W], got ", to_string(in));
}

}  // namespace

kernels::Pool2dParams pool_params(const PoolOptions& o, const Shape& in, const char* what) {
  check_input(in, what);
  kernels::Pool2dParams p;
  p.kernel_h = p.kernel_w = o.kernel;
  p.stride_h = p.stride_w = o.stride;
  p.count_include_pad = o.count_include_pad;
  if (o.tf_same) {
    std::tie(p.pad_top, p.pad_bottom) = kernels::tf_same_padding(in[2], o.kernel, o.stride);
    std::tie(p.pad_left, p.pad_right) = kernels::tf_same_padding(in[3], o.kernel, o.stride);
  } else {
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = o.padding;
  }
  return p;
}

Shape pooled_shape(const PoolOptions& o, const Shape& in, const char* what) {
  const kernels::Pool2dParams p = pool_params(o, in, what);
  return {in[0], in[1],
          autograd::pooled_size(in[2], p.kernel_h, p.stride_h, p.pad_top, p.pad_bottom, o.ceil_mode,
                                what),
          autograd::pooled_size(in[3], p.kernel_w, p.stride_w, p.pad_left, p.pad_right, o.ceil_mode,
                                what)};
}

MaxPool2d::MaxPool2d(const PoolOptions& o) : o_(checked(o, "MaxPool2d")) {}
MaxPool2d::MaxPool2d(int64_t kernel, int64_t stride, int64_t padding, bool ceil_mode)
    : MaxPool2d(PoolOptions{kernel, stride, padding, ceil_mode, true, false}) {}

Variable MaxPool2d::forward(const Variable& x) {
  return autograd::max_pool2d(x, pool_params(o_, x.sizes(), "MaxPool2d"), o_.ceil_mode);
}
Shape MaxPool2d::count_flops(const Shape& in, double& flops) const {
  const Shape out = pooled_shape(o_, in, "MaxPool2d");
  flops += double(shape_numel(out)) * double(o_.kernel * o_.kernel);
  return out;
}

AvgPool2d::AvgPool2d(const PoolOptions& o) : o_(checked(o, "AvgPool2d")) {}
AvgPool2d::AvgPool2d(int64_t kernel, int64_t stride, int64_t padding, bool ceil_mode,
                     bool count_include_pad)
    : AvgPool2d(PoolOptions{kernel, stride, padding, ceil_mode, count_include_pad, false}) {}

Variable AvgPool2d::forward(const Variable& x) {
  return autograd::avg_pool2d(x, pool_params(o_, x.sizes(), "AvgPool2d"), o_.ceil_mode);
}
Shape AvgPool2d::count_flops(const Shape& in, double& flops) const {
  const Shape out = pooled_shape(o_, in, "AvgPool2d");
  flops += double(shape_numel(out)) * double(o_.kernel * o_.kernel + 1);
  return out;
}

Variable AdaptiveAvgPool2d::forward(const Variable& x) {
  return autograd::adaptive_avg_pool2d(x, out_h_, out_w_);
}
Shape AdaptiveAvgPool2d::count_flops(const Shape& in, double& flops) const {
  check_input(in, "AdaptiveAvgPool2d");
  const Shape out = {in[0], in[1], out_h_, out_w_};
  flops += double(shape_numel(in)) + double(shape_numel(out));
  return out;
}

Variable Flatten::forward(const Variable& x) {
  AIM_CHECK(x.dim() >= 2, "Flatten: expected at least [N, d], got ", to_string(x.sizes()));
  return autograd::reshape(x, {x.size(0), x.numel() / x.size(0)});
}
Shape Flatten::count_flops(const Shape& in, double&) const {
  AIM_CHECK(in.size() >= 2, "Flatten: expected at least [N, d], got ", to_string(in));
  return {in[0], shape_numel(in) / in[0]};
}

}  // namespace aim::layers
