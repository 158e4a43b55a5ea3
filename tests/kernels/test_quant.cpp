// INT8 quantisation beyond the registry-driven comparison (kernels/quant/quant.h): round trips,
// round-half-even and saturation edges, per-channel scales (all-zero channels included), qlinear
// and qconv2d of every CPU variant against fp32 matmul/conv2d of the dequantised values, the
// int32 limits of the VNNI shift trick, and the error messages of bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/conv/conv2d.h"
#include "kernels/matmul/matmul.h"
#include "kernels/quant/quant.h"
#include "kernels/registry.h"
#include "kernels/testing.h"
#include "tests/support/common.h"

namespace aim::kernels {
namespace {

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

bool have_vnni() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vnni");
}

// The CPU variants of an op that can run on this machine.
std::vector<std::string> cpu_variants(const std::string& op) {
  std::vector<std::string> r;
  for (const VariantInfo& v : registry().find(op)->variant_infos())
    if (v.backend == Backend::CPU && (v.name != "cpu.vnni" || have_vnni())) r.push_back(v.name);
  return r;
}

std::vector<int> as_ints(const Tensor& q) {
  std::vector<int> r;
  for (int8_t v : q.to_vector<int8_t>()) r.push_back(v);
  return r;
}

TEST(Quant, RoundTripWithinHalfAStep) {
  for (const std::string& v : cpu_variants("quantize")) {
    SCOPED_TRACE(v);
    ScopedVariant sv("quantize", v);
    const Tensor x = random_tensor({7, 33}, DType::f32, 11, -3.0, 3.0);
    float absmax = 0;
    for (float f : x.to_vector<float>()) absmax = std::max(absmax, std::fabs(f));
    const float scale = absmax / 127.f;
    const Tensor q = quantize_tensor(x, scale);
    ASSERT_EQ(q.dtype(), DType::i8);
    const std::vector<float> y = dequantize_tensor(q, scale).to_vector<float>();
    const std::vector<float> xv = x.to_vector<float>();
    for (size_t i = 0; i < xv.size(); ++i)
      EXPECT_LE(std::fabs(y[i] - xv[i]), 0.5f * scale * (1 + 1e-6f)) << "at " << i;
    int extreme = 0;
    for (int c : as_ints(q)) {
      EXPECT_LE(std::abs(c), 127);
      extreme += std::abs(c) == 127;
    }
    EXPECT_GE(extreme, 1);  // the absmax element maps to +-127
  }
}

// Ties go to the even integer; beyond +-127 (and at +-inf) the value saturates, -128 is never
// produced; NaN quantises to 0. Every input is exact in f32, f16 and bf16.
TEST(Quant, RoundHalfEvenAndSaturation) {
  const std::vector<float> x = {0.5f,   1.5f,  2.5f,   -0.5f, -1.5f, -2.5f, 3.5f, 126.5f, -126.5f,
                                127.5f, 128.f, -128.f, 300.f, kInf,  -kInf, kNaN, 0.49f,  -0.f};
  const std::vector<int> want = {0,   2,   2,    0,   -2,  -2,   4, 126, -126,
                                 127, 127, -127, 127, 127, -127, 0, 0,   0};
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    for (const std::string& v : cpu_variants("quantize")) {
      SCOPED_TRACE(v + " " + dtype_name(t));
      ScopedVariant sv("quantize", v);
      const Tensor xt = Tensor::from_vector<float>(x, {int64_t(x.size())}).to(t);
      EXPECT_EQ(as_ints(quantize_tensor(xt, 1.0f)), want);
      // The same ties through a non-unit scale: x / 0.25.
      std::vector<float> xs;
      for (float f : x) xs.push_back(f * 0.25f);
      const Tensor xst = Tensor::from_vector<float>(xs, {int64_t(xs.size())}).to(t);
      EXPECT_EQ(as_ints(quantize_tensor(xst, 0.25f)), want);
    }
  }
}

TEST(Quant, PerChannelScalesAndZeroChannel) {
  // w [3, 4]: channel 0 all zero, channel 1 absmax 2.54 (scale 0.02), channel 2 absmax 127.
  const Tensor w = Tensor::from_vector<float>(
      {0, 0, 0, 0, 0.01f, -2.54f, 1.0f, 0.03f, 127.f, -63.5f, 0.5f, -1.5f}, {3, 4});
  for (const std::string& v : cpu_variants("quantize_per_channel")) {
    SCOPED_TRACE(v);
    ScopedVariant sv("quantize_per_channel", v);
    const QuantizedWeight qw = quantize_weight(w, 0);
    EXPECT_EQ(qw.axis, 0);
    const std::vector<float> s = qw.scales.to_vector<float>();
    ASSERT_EQ(s.size(), 3u);
    EXPECT_EQ(s[0], kQMinScale);  // the documented safe scale of an all-zero channel
    EXPECT_EQ(s[1], 2.54f / 127.f);
    EXPECT_EQ(s[2], 1.0f);
    const std::vector<int> q = as_ints(qw.q);
    // Row 0 zeros; channel 1's absmax -> -127; channel 2 (scale 1): 127, -63.5 -> -64 (tie to
    // even), 0.5 -> 0, -1.5 -> -2. Every element follows quantize_value with its channel's scale.
    std::vector<int> rule;
    const std::vector<float> wv = w.to_vector<float>();
    for (size_t i = 0; i < wv.size(); ++i) rule.push_back(quantize_value(wv[i], s[i / 4]));
    EXPECT_EQ(q, rule);
    EXPECT_EQ(q[5], -127);
    EXPECT_EQ(q[8], 127);
    EXPECT_EQ(q[9], -64);
    EXPECT_EQ(q[11], -2);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(q[size_t(i)], 0);
    // Dequantised channel 0 is exactly zero.
    const std::vector<float> y = dequantize_tensor(qw.q, qw.scales, 0).to_vector<float>();
    for (int i = 0; i < 4; ++i) EXPECT_EQ(y[size_t(i)], 0.f);
  }
}

// Per-channel along a middle and the last axis against the per-element rule.
TEST(Quant, PerChannelAxes) {
  const Tensor x = random_tensor({2, 3, 5}, DType::f32, 5, -1.0, 1.0);
  const std::vector<float> xv = x.to_vector<float>();
  for (int64_t axis : {1, -1, 2, 0}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    const int64_t ax = axis < 0 ? axis + 3 : axis;
    const int64_t C = x.size(ax);
    const Tensor scales = random_tensor({C}, DType::f32, 9, 0.004, 0.01);
    const std::vector<float> sv = scales.to_vector<float>();
    auto channel = [&](size_t i) {
      const int64_t idx[3] = {int64_t(i) / 15, (int64_t(i) / 5) % 3, int64_t(i) % 5};
      return size_t(idx[ax]);
    };
    for (const std::string& v : cpu_variants("quantize")) {
      ScopedVariant use("quantize", v);
      const std::vector<int> q = as_ints(quantize_tensor(x, scales, axis));
      for (size_t i = 0; i < xv.size(); ++i)
        EXPECT_EQ(q[i], quantize_value(xv[i], sv[channel(i)])) << v << " at " << i;
      const std::vector<float> y =
          dequantize_tensor(quantize_tensor(x, scales, axis), scales, axis).to_vector<float>();
      for (size_t i = 0; i < xv.size(); ++i)
        EXPECT_EQ(y[i], float(q[i]) * sv[channel(i)]) << v << " at " << i;
    }
    const QuantizedWeight qw = quantize_weight(x, axis);
    EXPECT_EQ(qw.axis, ax);
    EXPECT_EQ(qw.scales.numel(), C);
  }
}

TEST(Quant, NonFiniteWeightIsAnError) {
  const Tensor w = Tensor::from_vector<float>({1, 2, 3, kNaN, 5, 6}, {3, 2});
  AIM_EXPECT_ERROR(quantize_weight(w, 0), "non-finite value (nan) in channel 1 of axis 0");
  const Tensor wi = Tensor::from_vector<float>({1, 2, 3, 4, kInf, 6}, {3, 2});
  AIM_EXPECT_ERROR(quantize_weight(wi, 1), "in channel 0 of axis 1");
}

// Activations quantised per tensor, weights per channel; qlinear (f32 out, bias, ReLU) against
// the fp32 matmul of the dequantised values, and the int8 output against quantising that.
TEST(Quant, QLinearMatchesFp32MatmulOfDequantised) {
  const int64_t M = 19, N = 37, K = 70;
  const Tensor xf = random_tensor({M, K}, DType::f32, 21, -2.0, 2.0);
  const Tensor wf = random_tensor({N, K}, DType::f32, 22, -0.3, 0.3);
  const Tensor bias = random_tensor({N}, DType::f32, 23, -1.0, 1.0);
  float absmax = 0;
  for (float f : xf.to_vector<float>()) absmax = std::max(absmax, std::fabs(f));
  const float xs = absmax / 127.f;
  const Tensor xq = quantize_tensor(xf, xs);
  const QuantizedWeight qw = quantize_weight(wf, 0);

  // fp32 reference: dequantise, then y = x w^T + bias, ReLU.
  MatmulArgs mm;
  mm.a = dequantize_tensor(xq, xs);
  mm.b = dequantize_tensor(qw.q, qw.scales, 0);
  mm.trans_b = true;
  mm.bias = bias;
  mm.c = Tensor::empty({M, N});
  matmul(mm);
  std::vector<float> ref = mm.c.to_vector<float>();
  for (float& f : ref) f = std::max(f, 0.f);

  for (const std::string& v : cpu_variants("qlinear")) {
    SCOPED_TRACE(v);
    ScopedVariant sv("qlinear", v);
    QLinearArgs a;
    a.x = xq;
    a.w = qw.q;
    a.x_scale = xs;
    a.w_scales = qw.scales;
    a.bias = bias;
    a.relu = true;
    a.y = Tensor::full({M, N}, kNaN);
    qlinear(a);
    const std::vector<float> y = a.y.to_vector<float>();
    for (size_t i = 0; i < y.size(); ++i)
      EXPECT_NEAR(y[i], ref[i], 1e-5 * (1 + std::fabs(ref[i]))) << "at " << i;
    // Fused requantisation == quantising the f32 output with the same scale.
    const float os = 0.05f;
    QLinearArgs b = a;
    b.y = Tensor::zeros({M, N}, DType::i8);
    b.out_scale = os;
    qlinear(b);
    std::vector<int> want;
    for (float f : y) want.push_back(quantize_value(f, os));
    EXPECT_EQ(as_ints(b.y), want);
  }
}

// qconv2d (stride 2, pad 1, groups 2, bias, no ReLU) against conv2d_fwd of the dequantised
// values.
TEST(Quant, QConv2dMatchesFp32ConvOfDequantised) {
  const Tensor xf = random_tensor({2, 6, 9, 8}, DType::f32, 31, -1.0, 1.0);
  const Tensor wf = random_tensor({10, 3, 3, 3}, DType::f32, 32, -0.5, 0.5);
  const Tensor bias = random_tensor({10}, DType::f32, 33, -1.0, 1.0);
  const float xs = 1.f / 127.f;
  const Tensor xq = quantize_tensor(xf, xs);
  const QuantizedWeight qw = quantize_weight(wf, 0);
  Conv2dFwdArgs c;
  c.x = dequantize_tensor(xq, xs);
  c.w = dequantize_tensor(qw.q, qw.scales, 0);
  c.bias = bias;
  c.p.stride_h = c.p.stride_w = 2;
  c.p.pad_top = c.p.pad_bottom = c.p.pad_left = c.p.pad_right = 1;
  c.p.groups = 2;
  const int64_t P = conv2d_out_size(9, 3, 2, 1, 1, 1), Q = conv2d_out_size(8, 3, 2, 1, 1, 1);
  c.y = Tensor::empty({2, 10, P, Q});
  conv2d_fwd(c);
  const std::vector<float> ref = c.y.to_vector<float>();
  for (const std::string& v : cpu_variants("qconv2d")) {
    SCOPED_TRACE(v);
    ScopedVariant sv("qconv2d", v);
    QConv2dArgs a;
    a.x = xq;
    a.w = qw.q;
    a.x_scale = xs;
    a.w_scales = qw.scales;
    a.bias = bias;
    a.p = c.p;
    a.y = Tensor::full({2, 10, P, Q}, kNaN);
    qconv2d(a);
    const std::vector<float> y = a.y.to_vector<float>();
    for (size_t i = 0; i < y.size(); ++i)
      EXPECT_NEAR(y[i], ref[i], 1e-5 * (1 + std::fabs(ref[i]))) << "at " << i;
  }
}

// The extremes of the int32 accumulator at K = kQMaxReduction: x = 127 and w = -128 give the
// largest shifted VNNI sum (255 * -128 * 65536); x = -128 (shifted to 0) the other corner.
TEST(Quant, QLinearInt32LimitsAtMaxK) {
  const int64_t K = kQMaxReduction;
  for (int xv : {127, -128}) {
    for (int wv : {-128, 127}) {
      SCOPED_TRACE("x " + std::to_string(xv) + " w " + std::to_string(wv));
      QLinearArgs a;
      a.x = Tensor::full({3, K}, double(xv), DType::i8);
      a.w = Tensor::full({2, K}, double(wv), DType::i8);
      a.x_scale = 1.f;
      a.w_scales = Tensor::full({2}, 1.0, DType::f32);
      const float want = float(int64_t(xv) * wv * K);
      for (const std::string& v : cpu_variants("qlinear")) {
        ScopedVariant sv("qlinear", v);
        a.y = Tensor::full({3, 2}, kNaN);
        qlinear(a);
        for (float f : a.y.to_vector<float>()) EXPECT_EQ(f, want) << v;
      }
    }
  }
}

TEST(Quant, BadArgumentsNameTheTensor) {
  const Tensor x = Tensor::zeros({4, 8}, DType::i8);
  const Tensor w = Tensor::zeros({5, 8}, DType::i8);
  const Tensor ws = Tensor::full({5}, 0.1, DType::f32);
  auto args = [&] {
    QLinearArgs a;
    a.x = x;
    a.w = w;
    a.x_scale = 0.1f;
    a.w_scales = ws;
    a.y = Tensor::empty({4, 5});
    return a;
  };
  for (const std::string& v : cpu_variants("qlinear")) {
    SCOPED_TRACE(v);
    ScopedVariant sv("qlinear", v);
    QLinearArgs a = args();
    a.x = Tensor::zeros({4, 8});
    AIM_EXPECT_ERROR(qlinear(a), "[qlinear] x must be i8, got f32");
    a = args();
    a.w = Tensor::zeros({5, 7}, DType::i8);
    AIM_EXPECT_ERROR(qlinear(a), "[qlinear] w must be [N, K] with K = 8");
    a = args();
    a.x_scale = 0.f;
    AIM_EXPECT_ERROR(qlinear(a), "[qlinear] x_scale must be a finite scale > 0, got 0");
    a = args();
    a.x_scale = -1.f;
    AIM_EXPECT_ERROR(qlinear(a), "x_scale must be a finite scale > 0, got -1");
    a = args();
    a.w_scales = Tensor::from_vector<float>({0.1f, 0.f, 0.1f, 0.1f, 0.1f}, {5});
    AIM_EXPECT_ERROR(qlinear(a), "[qlinear] w_scales[1] must be a finite scale > 0, got 0");
    a = args();
    a.w_scales = Tensor::full({4}, 0.1, DType::f32);
    AIM_EXPECT_ERROR(qlinear(a), "[qlinear] w_scales must be [5], got [4]");
    a = args();
    a.bias = Tensor::zeros({5}, DType::f64);
    AIM_EXPECT_ERROR(qlinear(a), "[qlinear] bias must be f32, got f64");
    a = args();
    a.y = Tensor::empty({4, 5}, DType::i32);
    AIM_EXPECT_ERROR(qlinear(a), "[qlinear] y must be f32 or i8 (requantised), got i32");
    a = args();
    a.y = Tensor::empty({4, 6});
    AIM_EXPECT_ERROR(qlinear(a), "[qlinear] y must be [4, 5], got [4, 6]");
    a = args();
    a.y = Tensor::empty({4, 5}, DType::i8);
    AIM_EXPECT_ERROR(qlinear(a), "[qlinear] out_scale (i8 y) must be a finite scale > 0, got 0");
    a = args();
    a.x = Tensor::zeros({8, 4}, DType::i8).transpose(0, 1);
    AIM_EXPECT_ERROR(qlinear(a), "[qlinear] x [4, 8] must be contiguous");
    a = args();
    a.x = Tensor::zeros({1, kQMaxReduction + 1}, DType::i8);
    a.w = Tensor::zeros({5, kQMaxReduction + 1}, DType::i8);
    a.y = Tensor::empty({1, 5});
    AIM_EXPECT_ERROR(qlinear(a), "[qlinear] K = 65537 exceeds 65536");
  }

  for (const std::string& v : cpu_variants("quantize")) {
    SCOPED_TRACE(v);
    ScopedVariant sv("quantize", v);
    AIM_EXPECT_ERROR(quantize_tensor(Tensor::zeros({3}), 0.f),
                     "[quantize] scale must be a finite scale > 0, got 0");
    AIM_EXPECT_ERROR(quantize_tensor(Tensor::zeros({3}), -2.f), "scale must be a finite scale > 0");
    AIM_EXPECT_ERROR(quantize_tensor(Tensor::zeros({3}), std::nanf("")),
                     "[quantize] scale must be a finite scale > 0, got nan");
    AIM_EXPECT_ERROR(quantize_tensor(Tensor::zeros({3}, DType::i32), 1.f),
                     "[quantize] x must be f32, f16 or bf16, got i32");
    AIM_EXPECT_ERROR(quantize_tensor(Tensor::zeros({2, 3}), Tensor::full({2}, 1.0), 1),
                     "[quantize] scales must be [3], got [2]");
    AIM_EXPECT_ERROR(quantize_tensor(Tensor::zeros({2, 3}), Tensor::full({3}, -1.0), 1),
                     "[quantize] scales[0] must be a finite scale > 0, got -1");
    AIM_EXPECT_ERROR(quantize_tensor(Tensor::zeros({2, 3}), Tensor::full({3}, 1.0), 2),
                     "[quantize] axis 2 out of range for x with 2 dimensions");
    QuantizeArgs qa;
    qa.x = Tensor::zeros({3});
    qa.q = Tensor::empty({3}, DType::u8);
    qa.scale = 1.f;
    AIM_EXPECT_ERROR(quantize(qa), "[quantize] q must be i8, got u8");
  }
  AIM_EXPECT_ERROR(dequantize_tensor(Tensor::zeros({3}), 1.f),
                   "[dequantize] q must be i8, got f32");
  AIM_EXPECT_ERROR(dequantize_tensor(Tensor::zeros({3}, DType::i8), 0.f),
                   "[dequantize] scale must be a finite scale > 0");
  AIM_EXPECT_ERROR(quantize_weight(Tensor::zeros({3}, DType::i8), 0),
                   "[quantize_per_channel] w must be f32, f16 or bf16, got i8");

  auto cargs = [] {
    QConv2dArgs a;
    a.x = Tensor::zeros({1, 4, 5, 5}, DType::i8);
    a.w = Tensor::zeros({6, 2, 3, 3}, DType::i8);
    a.x_scale = 0.1f;
    a.w_scales = Tensor::full({6}, 0.1, DType::f32);
    a.p.groups = 2;
    a.y = Tensor::empty({1, 6, 3, 3});
    return a;
  };
  for (const std::string& v : cpu_variants("qconv2d")) {
    SCOPED_TRACE(v);
    ScopedVariant sv("qconv2d", v);
    QConv2dArgs a = cargs();
    a.w = Tensor::zeros({6, 2, 3, 3});
    AIM_EXPECT_ERROR(qconv2d(a), "[qconv2d] w must be i8, got f32");
    a = cargs();
    a.p.groups = 3;
    AIM_EXPECT_ERROR(qconv2d(a), "[qconv2d] channels C = 4 of x [1, 4, 5, 5] must be divisible");
    a = cargs();
    a.w_scales = Tensor::full({3}, 0.1, DType::f32);
    AIM_EXPECT_ERROR(qconv2d(a), "[qconv2d] w_scales must be [6], got [3]");
    a = cargs();
    a.y = Tensor::empty({1, 6, 5, 5});
    AIM_EXPECT_ERROR(qconv2d(a), "[qconv2d] y must be [1, 6, 3, 3], got [1, 6, 5, 5]");
    a = cargs();
    a.x_scale = std::numeric_limits<float>::infinity();
    AIM_EXPECT_ERROR(qconv2d(a), "[qconv2d] x_scale must be a finite scale > 0, got inf");
  }
}

TEST(Quant, CostCountsInt8Ops) {
  QLinearArgs a;
  a.x = Tensor::zeros({256, 1024}, DType::i8);
  a.w = Tensor::zeros({512, 1024}, DType::i8);
  a.y = Tensor::empty({256, 512}, DType::i8);
  const Cost c = qlinear_cost(a);
  EXPECT_EQ(c.flops, 2.0 * 256 * 512 * 1024 + 3.0 * 256 * 512);
  EXPECT_EQ(c.bytes_read, 256.0 * 1024 + 512.0 * 1024 + 4.0 * 512);
  EXPECT_EQ(c.bytes_written, 256.0 * 512);
}

}  // namespace
}  // namespace aim::kernels
