// The test cases of conv2d_fwd, conv2d_bwd_data and conv2d_bwd_filter (conv2d_cpu.h): shapes and
// their fields, case makers, tolerance, the emulator's budget.
#include <algorithm>
#include <tuple>
#include <vector>

#include "kernels/conv/conv2d_cpu.h"
#include "kernels/testing.h"

namespace aim::kernels::conv_cpu {

// TestShape: {N, C, H, W, K, R, S, stride, pad, dil, groups, bias}. pad >= 0: the same on every
// side; pad == -1: TensorFlow SAME (asymmetric when the total is odd). bias: 1 fwd adds a bias,
// bwd_filter accumulates dbias; 2 as 1 with the forward's relu epilogue; 3 relu without a bias;
// 4 as 2 with a residual added before the relu (ResNet's last conv of a block); 5 a residual
// without bias or relu; 6 the forward's input prologue (a batch norm and relu before the
// convolution: in_scale, in_shift, in_relu), x's images farther apart than C*H*W when N > 1 (a
// channel slice of a wider tensor); 7 the prologue without its relu, with a bias and relu.
std::vector<std::string> conv2d_shape_fields() {
  return {"N", "C", "H", "W", "K", "R", "S", "stride", "pad", "dil", "groups", "bias"};
}

std::vector<TestShape> conv2d_test_shapes() {
  // {N, C, H, W, K, R, S, stride, pad (-1: TF SAME), dil, groups, bias}; the last one is the
  // largest (aim-bench op checks big timed shapes on it).
  return {
      {1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1},       // tiny 1x1x1x1
      {2, 7, 5, 6, 13, 1, 1, 1, 0, 1, 1, 2},      // 1x1 pointwise, odd channels, relu
      {3, 3, 9, 11, 7, 3, 3, 1, 1, 1, 1, 2},      // 3x3 pad 1, non-square, relu
      {2, 13, 8, 7, 3, 5, 5, 1, 2, 1, 1, 3},      // 5x5 pad 2, relu without bias
      {1, 3, 17, 15, 5, 7, 7, 2, 3, 1, 1, 2},     // 7x7 stride 2 pad 3 (ResNet stem), relu
      {2, 5, 9, 10, 6, 3, 3, 2, 1, 1, 1, 0},      // 3x3 stride 2
      {2, 4, 11, 9, 7, 1, 1, 2, 0, 1, 1, 4},      // 1x1 stride 2 (downsample), residual + relu
      {1, 6, 13, 12, 4, 3, 3, 1, 2, 2, 1, 1},     // dilation 2
      {2, 6, 7, 9, 10, 3, 3, 1, 1, 1, 2, 1},      // groups 2
      {2, 8, 10, 7, 8, 3, 3, 1, 1, 1, 8, 1},      // depthwise
      {1, 7, 6, 5, 14, 3, 3, 2, 1, 1, 7, 0},      // depthwise multiplier 2, stride 2
      {2, 3, 9, 7, 5, 2, 2, 2, -1, 1, 1, 1},      // TF SAME, even kernel, odd input, stride 2
      {1, 4, 11, 13, 3, 4, 4, 2, -1, 1, 1, 0},    // TF SAME 4x4 stride 2 (asymmetric pads)
      {1, 3, 7, 31, 2, 3, 2, 1, 0, 1, 1, 1},      // unpadded, rectangular kernel
      {2, 31, 9, 9, 33, 3, 3, 1, 1, 1, 1, 2},     // channels around 32 (winograd), relu
      {1, 16, 79, 79, 4, 3, 3, 2, 1, 1, 1, 1},    // stride 2 over several column chunks
      {1, 16, 45, 47, 3, 3, 3, 1, 0, 1, 1, 0},    // unpadded (Q != W) over several chunks
      {1, 136, 5, 5, 140, 1, 1, 1, 0, 1, 1, 4},   // 136/140 channels: GPU row tiles, residual
      {7, 5, 4, 6, 9, 3, 3, 1, 1, 1, 1, 2},       // small images: blocks of images, relu
      {9, 6, 3, 5, 4, 1, 1, 1, 0, 1, 2, 4},       // pointwise grouped, blocks of images, residual
      {6, 4, 5, 7, 6, 2, 2, 2, -1, 1, 1, 0},      // strided TF SAME, blocks of images
      {2, 5, 7, 8, 4, 3, 3, 1, 2, 1, 1, 5},       // 3x3 pad 2 (winograd: beyond x), residual only
      {1, 8, 70, 66, 5, 3, 3, 1, 1, 1, 1, 1},     // winograd: chunks of tile rows of one image
      {2, 48, 21, 21, 40, 3, 3, 1, 1, 1, 1, 2},   // winograd4: partial tiles, SSD-ResNet layer3
      {3, 24, 38, 37, 20, 3, 3, 1, 1, 1, 1, 1},   // winograd4: 38x37 (SSD's 38x38 maps)
      {2, 3, 27, 25, 4, 11, 11, 4, 2, 1, 1, 1},   // 11x11 stride 4 (AlexNet conv1): 4 phases
      {1, 3, 13, 14, 4, 3, 3, 2, 2, 2, 1, 0},     // stride 2 with dilation 2
      {2, 20, 15, 13, 18, 5, 5, 1, 2, 1, 1, 2},   // winograd_5x5: partial tiles, relu
      {1, 17, 36, 35, 6, 5, 5, 1, 2, 1, 1, 1},    // winograd_5x5: chunks of tile rows
      {6, 5, 7, 6, 9, 5, 5, 1, 1, 1, 1, 4},       // winograd_5x5: blocks of images, residual
      {2, 3, 6, 7, 4, 5, 5, 1, 3, 1, 1, 5},       // 5x5 pad 3 (beyond x), residual only
      {1, 4, 9, 11, 3, 5, 5, 1, 0, 1, 1, 0},      // 5x5 unpadded
      {1, 16, 18, 16, 16, 5, 5, 1, 2, 1, 1, 2},   // 5x5 the default takes by F(2x2, 5x5) (widen)
      {5, 24, 7, 7, 20, 1, 1, 1, 0, 1, 1, 2},     // pointwise, images as column blocks, relu
      {5, 12, 7, 7, 20, 3, 3, 1, 1, 1, 1, 4},     // 3x3 on 7x7: y and dy in column blocks
      {5, 24, 7, 7, 20, 1, 1, 1, 0, 1, 1, 6},     // input prologue, images as column blocks
      {2, 20, 24, 21, 12, 1, 1, 1, 0, 1, 1, 7},   // input prologue, chunks of rows of one image
      {3, 8, 9, 9, 6, 1, 1, 1, 0, 1, 2, 6},       // input prologue, grouped pointwise
      {2, 5, 7, 8, 4, 3, 3, 1, 1, 1, 1, 6},       // input prologue, 3x3: cpu.ref only
      {2, 64, 28, 28, 64, 3, 3, 1, 1, 1, 1, 2}};  // ResNet-like, relu (too big for the emulator)
}

namespace {

Conv2dParams params_of(const TestShape& s) {
  Conv2dParams p;
  p.stride_h = p.stride_w = s[7];
  p.dil_h = p.dil_w = s[9];
  p.groups = s[10];
  if (s[8] >= 0) {
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = s[8];
  } else {
    std::tie(p.pad_top, p.pad_bottom) = tf_same_padding(s[2], s[5], s[7], s[9]);
    std::tie(p.pad_left, p.pad_right) = tf_same_padding(s[3], s[6], s[7], s[9]);
  }
  return p;
}

struct CaseDims {
  Conv2dParams p;
  int64_t N, C, H, W, K, R, S, P, Q;
};
CaseDims case_dims(const TestShape& s) {
  AIM_CHECK(s.size() == 12, "[conv2d] test shape needs 12 fields {N, C, H, W, K, R, S, stride, ",
            "pad (-1: TF SAME), dil, groups, bias}, got ", shape_str(s));
  CaseDims c;
  c.p = params_of(s);
  c.N = s[0];
  c.C = s[1];
  c.H = s[2];
  c.W = s[3];
  c.K = s[4];
  c.R = s[5];
  c.S = s[6];
  c.P = conv2d_out_size(c.H, c.R, c.p.stride_h, c.p.pad_top, c.p.pad_bottom, c.p.dil_h);
  c.Q = conv2d_out_size(c.W, c.S, c.p.stride_w, c.p.pad_left, c.p.pad_right, c.p.dil_w);
  return c;
}

}  // namespace

TestCase make_conv2d_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  const CaseDims d = case_dims(s);
  Conv2dFwdArgs a;
  const int64_t mode = s[11];
  const bool prologue = mode == 6 || mode == 7;
  if (prologue && d.N > 1)  // the first C channels of a wider tensor: images farther apart
    a.x = random_tensor({d.N, d.C + 3, d.H, d.W}, t, seed, -1.0, 1.0).narrow(1, 0, d.C);
  else
    a.x = random_tensor({d.N, d.C, d.H, d.W}, t, seed, -1.0, 1.0);
  a.w = random_tensor({d.K, d.C / d.p.groups, d.R, d.S}, t, seed + 1, -1.0, 1.0);
  if (mode == 1 || mode == 2 || mode == 4 || mode == 7)
    a.bias = random_tensor({d.K}, t, seed + 2, -1.0, 1.0);
  if (mode == 4 || mode == 5)
    a.residual = random_tensor({d.N, d.K, d.P, d.Q}, t, seed + 6, -1.0, 1.0);
  if (prologue) {  // f32 whatever x's dtype (batch-norm parameters)
    a.in_scale = random_tensor({d.C}, DType::f32, seed + 7, -1.5, 1.5);
    a.in_shift = random_tensor({d.C}, DType::f32, seed + 8, -1.0, 1.0);
    a.in_relu = mode == 6;
  }
  a.y = poison_tensor({d.N, d.K, d.P, d.Q}, t);
  a.p = d.p;
  a.relu = (mode >= 2 && mode <= 4) || mode == 7;
  return to_case(a);
}

TestCase make_conv2d_bwd_data_case(const TestShape& s, DType t, uint64_t seed) {
  const CaseDims d = case_dims(s);
  Conv2dBwdDataArgs a;
  a.dy = random_tensor({d.N, d.K, d.P, d.Q}, t, seed + 3, -1.0, 1.0);
  a.w = random_tensor({d.K, d.C / d.p.groups, d.R, d.S}, t, seed + 1, -1.0, 1.0);
  a.dx = poison_tensor({d.N, d.C, d.H, d.W}, t);
  a.p = d.p;
  return to_case(a);
}

TestCase make_conv2d_bwd_filter_case(const TestShape& s, DType t, uint64_t seed) {
  const CaseDims d = case_dims(s);
  Conv2dBwdFilterArgs a;
  a.dy = random_tensor({d.N, d.K, d.P, d.Q}, t, seed + 3, -1.0, 1.0);
  a.x = random_tensor({d.N, d.C, d.H, d.W}, t, seed, -1.0, 1.0);
  // Accumulated outputs start from random values: a variant that writes instead of adding fails.
  a.dw = random_tensor({d.K, d.C / d.p.groups, d.R, d.S}, t, seed + 4, -1.0, 1.0);
  if (s[11] == 1 || s[11] == 2 || s[11] == 4)
    a.dbias = random_tensor({d.K}, t, seed + 5, -1.0, 1.0);
  a.p = d.p;
  return to_case(a);
}

// Sums of up to a few thousand products of values in [-1, 1]: the magnitude grows like the square
// root of the terms, so 16-bit outputs carry an absolute rounding error beyond the default.
Tolerance conv2d_tolerance(DType t, const TestShape&) {
  if (t == DType::f16) return {1e-2, 4e-3};
  if (t == DType::bf16) return {6e-2, 2e-2};
  if (t == DType::f32) return {1e-4, 1e-4};
  return default_tolerance(t);
}

// cpu.winograd4 (f32 only): F(4x4, 3x3)'s transforms (coefficients 4, 5, 8 and 1/24) round ~10x
// more than F(2x2)'s: the registry's shapes show up to 2e-4 (fwd), 1.4e-4 (bwd_data) and 4.8e-4
// (bwd_filter, values near 2) absolute, against 1-6e-5 for cpu.winograd and cpu.im2col.
Tolerance conv2d_winograd4_tolerance(DType t, const TestShape& s) {
  if (t == DType::f32) return {5e-4, 5e-4};
  return conv2d_tolerance(t, s);
}

// The Winograd variants' filter gradient (cpu.winograd4, cpu.winograd_5x5, their _ordered twins):
// each dw sums N·P·Q tile products of transformed values (up to ~50x the inputs) before
// G^T dU G cancels most of their size, so the absolute error grows with the terms summed while
// the values grow like their square root: F(2x2, 5x5) at 16 images of 28x28 (12544 terms,
// values of scale ~40) is 1.4e-3 from cpu.ref's double sum, at 56x56 2.9e-3 (cpu.im2col there:
// 2.1e-3). The registry's shapes (<= 4620 terms) keep 5e-4; aim-bench checks at its shape.
Tolerance conv2d_winograd_filter_tolerance(DType t, const TestShape& s) {
  Tolerance tol = conv2d_winograd4_tolerance(t, s);
  if (t == DType::f32) {
    const CaseDims d = case_dims(s);
    tol.atol = tol.rtol = std::max(tol.atol, 1.2e-7 * double(d.N * d.P * d.Q));
  }
  return tol;
}

// Direct-convolution work of a shape, for the emulator's budget.
bool conv2d_simt_small(const TestShape& s) {
  const CaseDims d = case_dims(s);
  const double macs = double(d.N * d.K * d.P * d.Q) * double(d.C / d.p.groups) * double(d.R * d.S);
  return macs <= 2.0e6;
}

}  // namespace aim::kernels::conv_cpu
