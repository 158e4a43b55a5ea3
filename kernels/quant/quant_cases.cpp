// The test cases of the quant ops (quant_cpu.h): shapes and their fields, case makers, tolerance,
// the emulator's budget.
#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "kernels/quant/quant_cpu.h"

namespace aim::kernels::quant_cpu {

// quantize / dequantize / quantize_per_channel: {d0, d1, d2, axis (-1: per-tensor; quantize_per_
// channel always per-channel, -1 meaning the last axis)}.
std::vector<std::string> quantize_shape_fields() { return {"d0", "d1", "d2", "axis"}; }
std::vector<std::string> qlinear_shape_fields() { return {"M", "N", "K", "bias", "relu"}; }
// qconv2d: conv2d's fields (pad -1: TF SAME) plus relu.
std::vector<std::string> qconv2d_shape_fields() {
  return {"N", "C", "H", "W", "K", "R", "S", "stride", "pad", "dil", "groups", "bias", "relu"};
}

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

Shape shape3(const TestShape& s) { return {s[0], s[1], s[2]}; }

}  // namespace

TestCase make_quantize_case(const TestShape& s, DType t, uint64_t seed) {
  QuantizeArgs a;
  // Values in [-2, 2) with scales near 1/80: some saturate at +-127.
  a.x = random_tensor(shape3(s), t, seed, -2.0, 2.0);
  if (s[3] >= 0) a.scales = random_tensor({s[s[3]]}, DType::f32, seed + 1, 0.01, 0.02);
  a.q = poison_tensor(shape3(s), DType::i8);
  a.scale = float(1.0 / 80.0);
  a.axis = std::max<int64_t>(s[3], 0);
  return to_case(a);
}

TestCase make_dequantize_case(const TestShape& s, DType, uint64_t seed) {
  DequantizeArgs a;
  a.q = random_tensor(shape3(s), DType::i8, seed, -128.0, 128.0);
  if (s[3] >= 0) a.scales = random_tensor({s[s[3]]}, DType::f32, seed + 1, 0.01, 0.02);
  a.y = poison_tensor(shape3(s), DType::f32);
  a.scale = float(0.0123);
  a.axis = std::max<int64_t>(s[3], 0);
  return to_case(a);
}

TestCase make_quantize_per_channel_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t axis = s[3] >= 0 ? s[3] : 2;
  QuantizePerChannelArgs a;
  a.w = random_tensor(shape3(s), t, seed, -0.5, 0.5);
  a.q = poison_tensor(shape3(s), DType::i8);
  a.scales = poison_tensor({s[axis]}, DType::f32);
  a.axis = s[3];
  return to_case(a);
}

// qlinear: {M, N, K, bias, relu}; the case's dtype is y's (f32 or i8).
TestCase make_qlinear_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t M = s[0], N = s[1], K = s[2];
  QLinearArgs a;
  a.x = random_tensor({M, K}, DType::i8, seed, -128.0, 128.0);
  a.w = random_tensor({N, K}, DType::i8, seed + 1, -128.0, 128.0);
  a.w_scales = random_tensor({N}, DType::f32, seed + 2, 0.002, 0.006);
  if (s[3]) a.bias = random_tensor({N}, DType::f32, seed + 3, -4.0, 4.0);
  a.y = poison_tensor({M, N}, t == DType::i8 ? DType::i8 : DType::f32);
  a.x_scale = float(0.02);
  a.relu = s[4] != 0;
  // y is about 0.4*sqrt(K) wide: +-2 sigma spans the int8 range, the tails saturate.
  a.out_scale = float(0.8 * std::sqrt(double(std::max<int64_t>(K, 1))) / 127.0 + 0.01);
  return to_case(a);
}

bool qlinear_simt_small(const TestShape& s) { return s[0] * s[1] * s[2] <= 600000; }

namespace {

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
  QConv2dArgs a;
  a.x = random_tensor({d.N, d.C, d.H, d.W}, DType::i8, seed, -128.0, 128.0);
  a.w = random_tensor({d.K, d.C / d.p.groups, d.R, d.S}, DType::i8, seed + 1, -128.0, 128.0);
  a.w_scales = random_tensor({d.K}, DType::f32, seed + 2, 0.002, 0.006);
  if (s[11]) a.bias = random_tensor({d.K}, DType::f32, seed + 3, -4.0, 4.0);
  a.y = poison_tensor({d.N, d.K, d.P, d.Q}, t == DType::i8 ? DType::i8 : DType::f32);
  a.x_scale = float(0.02);
  a.relu = s[12] != 0;
  const double red = double(d.C / d.p.groups * d.R * d.S);
  a.out_scale = float(0.8 * std::sqrt(red) / 127.0 + 0.01);
  a.p = d.p;
  return to_case(a);
}

// Integer paths are exact; the f32 epilogue is the same fp32 operations everywhere, so f32
// outputs agree bit for bit too. The tolerance is the brief's 1e-6 relative.
Tolerance quant_tolerance(DType, const TestShape&) { return {0.0, 1e-6}; }

bool qconv2d_simt_small(const TestShape& s) {
  const QCaseDims d = qcase_dims(s);
  return double(d.N * d.K * d.P * d.Q) * double(d.C / d.p.groups * d.R * d.S) <= 1.5e6;
}

}  // namespace aim::kernels::quant_cpu
