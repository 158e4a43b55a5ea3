// The test cases of the quant ops (quant_cpu.h): shapes, case makers, binders, tolerance.
#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "kernels/quant/quant_cpu.h"

namespace aim::kernels::quant_cpu {

std::vector<TestShape> quantize_shapes() {
  // {d0, d1, d2, axis (-1 per-tensor)}
  return {{1, 1, 1, -1}, {3, 5, 7, -1}, {2, 33, 65, -1},  {4, 3, 5, 0},
          {3, 17, 9, 1}, {2, 3, 31, 2}, {64, 32, 33, -1}, {8, 64, 130, 1}};
}
std::vector<TestShape> quantize_per_channel_shapes() {
  return {{1, 1, 1, 0}, {5, 3, 7, 0}, {4, 9, 3, 1}, {3, 2, 33, -1}, {64, 16, 9, 0}};
}
std::vector<TestShape> qlinear_shapes() {
  // {M, N, K, bias, relu}
  return {{1, 1, 1, 0, 0},    {1, 1, 1, 1, 1},      {3, 5, 7, 1, 0},     {7, 17, 13, 0, 1},
          {13, 31, 33, 1, 1}, {6, 64, 64, 1, 0},    {31, 67, 129, 1, 1}, {97, 61, 89, 0, 0},
          {5, 3, 0, 1, 1},    {256, 130, 301, 1, 0}};
}
std::vector<TestShape> qconv2d_shapes() {
  // {N, C, H, W, K, R, S, stride, pad (-1: TF SAME), dil, groups, bias, relu}
  return {{1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 0},    {2, 7, 5, 6, 13, 1, 1, 1, 0, 1, 1, 1, 1},
          {3, 3, 9, 11, 7, 3, 3, 1, 1, 1, 1, 0, 0},   {1, 3, 17, 15, 5, 7, 7, 2, 3, 1, 1, 1, 1},
          {2, 5, 9, 10, 6, 3, 3, 2, 1, 1, 1, 1, 0},   {1, 6, 13, 12, 4, 3, 3, 1, 2, 2, 1, 1, 1},
          {2, 6, 7, 9, 10, 3, 3, 1, 1, 1, 2, 1, 0},   {2, 8, 10, 7, 8, 3, 3, 1, 1, 1, 8, 0, 1},
          {2, 3, 9, 7, 5, 2, 2, 2, -1, 1, 1, 1, 0},   {2, 31, 9, 9, 33, 3, 3, 1, 1, 1, 1, 1, 1},
          {1, 4, 6, 7, 70, 3, 3, 1, 1, 1, 1, 1, 0},   {1, 16, 19, 21, 70, 3, 3, 1, 1, 1, 1, 1, 0},
          {2, 64, 28, 28, 64, 3, 3, 1, 1, 1, 1, 1, 1}};
}

namespace {

// quantize / dequantize / quantize_per_channel: {d0, d1, d2, axis (-1: per-tensor; quantize_per_
// channel always per-channel, -1 meaning the last axis)}.
Shape shape3(const TestShape& s) { return {s[0], s[1], s[2]}; }

}  // namespace

TestCase make_quantize_case(const TestShape& s, DType t, uint64_t seed) {
  TestCase c;
  // Values in [-2, 2) with scales near 1/80: some saturate at +-127.
  c.add_in("x", random_tensor(shape3(s), t, seed, -2.0, 2.0));
  c.add_in("scales",
           s[3] >= 0 ? random_tensor({s[s[3]]}, DType::f32, seed + 1, 0.01, 0.02) : Tensor());
  c.add_out("q", poison_tensor(shape3(s), DType::i8));
  c.params["scale"] = 1.0 / 80.0;
  c.params["axis"] = double(std::max<int64_t>(s[3], 0));
  return c;
}

TestCase make_dequantize_case(const TestShape& s, DType, uint64_t seed) {
  TestCase c;
  c.add_in("q", random_tensor(shape3(s), DType::i8, seed, -128.0, 128.0));
  c.add_in("scales",
           s[3] >= 0 ? random_tensor({s[s[3]]}, DType::f32, seed + 1, 0.01, 0.02) : Tensor());
  c.add_out("y", poison_tensor(shape3(s), DType::f32));
  c.params["scale"] = 0.0123;
  c.params["axis"] = double(std::max<int64_t>(s[3], 0));
  return c;
}

TestCase make_quantize_per_channel_case(const TestShape& s, DType t, uint64_t seed) {
  TestCase c;
  const int64_t axis = s[3] >= 0 ? s[3] : 2;
  c.add_in("w", random_tensor(shape3(s), t, seed, -0.5, 0.5));
  c.add_out("q", poison_tensor(shape3(s), DType::i8));
  c.add_out("scales", poison_tensor({s[axis]}, DType::f32));
  c.params["axis"] = double(s[3]);
  return c;
}

// qlinear: {M, N, K, bias, relu}; the case's dtype is y's (f32 or i8).
TestCase make_qlinear_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t M = s[0], N = s[1], K = s[2];
  TestCase c;
  c.add_in("x", random_tensor({M, K}, DType::i8, seed, -128.0, 128.0));
  c.add_in("w", random_tensor({N, K}, DType::i8, seed + 1, -128.0, 128.0));
  c.add_in("w_scales", random_tensor({N}, DType::f32, seed + 2, 0.002, 0.006));
  c.add_in("bias", s[3] ? random_tensor({N}, DType::f32, seed + 3, -4.0, 4.0) : Tensor());
  c.add_out("y", poison_tensor({M, N}, t == DType::i8 ? DType::i8 : DType::f32));
  c.params["x_scale"] = 0.02;
  c.params["relu"] = double(s[4]);
  // y is about 0.4*sqrt(K) wide: +-2 sigma spans the int8 range, the tails saturate.
  c.params["out_scale"] = 0.8 * std::sqrt(double(std::max<int64_t>(K, 1))) / 127.0 + 0.01;
  return c;
}

QLinearArgs bind_qlinear_case(const TestCase& c) {
  QLinearArgs a;
  a.x = c.in("x");
  a.w = c.in("w");
  a.w_scales = c.in("w_scales");
  a.bias = c.in("bias");
  a.y = c.out("y");
  a.x_scale = float(c.param("x_scale"));
  a.out_scale = float(c.param("out_scale"));
  a.relu = c.param("relu") != 0;
  return a;
}

namespace {

// qconv2d: conv2d's fields {N, C, H, W, K, R, S, stride, pad (-1: TF SAME), dil, groups, bias}
// plus relu.
struct QCaseDims {
  int64_t N, C, H, W, K, R, S, P, Q;
  Conv2dParams p;
};
QCaseDims qcase_dims(const TestShape& s) {
  QCaseDims d{s[0], s[1], s[2], s[3], s[4], s[5], s[6], 0, 0, {}};
  const int64_t stride = s[7], pad = s[8], dil = s[9];
  d.p.stride_h = d.p.stride_w = stride;
  d.p.dil_h = d.p.dil_w = dil;
  d.p.groups = s[10];
  if (pad < 0) {
    std::tie(d.p.pad_top, d.p.pad_bottom) = tf_same_padding(d.H, d.R, stride, dil);
    std::tie(d.p.pad_left, d.p.pad_right) = tf_same_padding(d.W, d.S, stride, dil);
  } else {
    d.p.pad_top = d.p.pad_bottom = d.p.pad_left = d.p.pad_right = pad;
  }
  d.P = conv2d_out_size(d.H, d.R, stride, d.p.pad_top, d.p.pad_bottom, dil);
  d.Q = conv2d_out_size(d.W, d.S, stride, d.p.pad_left, d.p.pad_right, dil);
  return d;
}

}  // namespace

TestCase make_qconv2d_case(const TestShape& s, DType t, uint64_t seed) {
  const QCaseDims d = qcase_dims(s);
  TestCase c;
  c.add_in("x", random_tensor({d.N, d.C, d.H, d.W}, DType::i8, seed, -128.0, 128.0));
  c.add_in("w",
           random_tensor({d.K, d.C / d.p.groups, d.R, d.S}, DType::i8, seed + 1, -128.0, 128.0));
  c.add_in("w_scales", random_tensor({d.K}, DType::f32, seed + 2, 0.002, 0.006));
  c.add_in("bias", s[11] ? random_tensor({d.K}, DType::f32, seed + 3, -4.0, 4.0) : Tensor());
  c.add_out("y", poison_tensor({d.N, d.K, d.P, d.Q}, t == DType::i8 ? DType::i8 : DType::f32));
  c.params["x_scale"] = 0.02;
  c.params["relu"] = double(s[12]);
  const double red = double(d.C / d.p.groups * d.R * d.S);
  c.params["out_scale"] = 0.8 * std::sqrt(red) / 127.0 + 0.01;
  c.params["stride"] = double(s[7]);
  c.params["dil"] = double(s[9]);
  c.params["groups"] = double(s[10]);
  c.params["pad_top"] = double(d.p.pad_top);
  c.params["pad_bottom"] = double(d.p.pad_bottom);
  c.params["pad_left"] = double(d.p.pad_left);
  c.params["pad_right"] = double(d.p.pad_right);
  return c;
}

QConv2dArgs bind_qconv2d_case(const TestCase& c) {
  QConv2dArgs a;
  a.x = c.in("x");
  a.w = c.in("w");
  a.w_scales = c.in("w_scales");
  a.bias = c.in("bias");
  a.y = c.out("y");
  a.x_scale = float(c.param("x_scale"));
  a.out_scale = float(c.param("out_scale"));
  a.relu = c.param("relu") != 0;
  a.p.stride_h = a.p.stride_w = int64_t(c.param("stride"));
  a.p.dil_h = a.p.dil_w = int64_t(c.param("dil"));
  a.p.groups = int64_t(c.param("groups"));
  a.p.pad_top = int64_t(c.param("pad_top"));
  a.p.pad_bottom = int64_t(c.param("pad_bottom"));
  a.p.pad_left = int64_t(c.param("pad_left"));
  a.p.pad_right = int64_t(c.param("pad_right"));
  return a;
}

// Integer paths are exact; the f32 epilogue is the same fp32 operations everywhere, so f32
// outputs agree bit for bit too. The tolerance is the brief's 1e-6 relative.
Tolerance quant_tolerance(DType, const TestShape&) { return {0.0, 1e-6}; }

bool qconv2d_simt_small(const TestShape& s) {
  const QCaseDims d = qcase_dims(s);
  return double(d.N * d.K * d.P * d.Q) * double(d.C / d.p.groups * d.R * d.S) <= 1.5e6;
}

}  // namespace aim::kernels::quant_cpu
