// conv2d beyond the registry-driven comparison: hand-computed examples of groups, dilation and
// asymmetric (TF SAME) padding in all three directions for every CPU variant, conv_transpose2d
// through conv2d_bwd_data against a direct transposed convolution, and error messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "kernels/conv/conv2d.h"
#include "kernels/registry.h"
#include "kernels/testing.h"
#include "kernels/variant_check.h"

namespace aim::kernels {
namespace {

// The CPU variants that take f32 and every shape (cpu.widen is 16-bit only; cpu.winograd,
// cpu.winograd4 and cpu.winograd_5x5 take only 3x3 or 5x5 stride-1 ungrouped convolutions, none of
// the cases here: the registry test checks them on the registered 3x3 and 5x5 shapes).
std::vector<std::string> cpu_variants(const std::string& op) {
  std::vector<std::string> r;
  for (const VariantInfo& v : registry().find(op)->variant_infos())
    if (v.backend == Backend::CPU && v.name.rfind("cpu.winograd", 0) != 0 &&
        std::find(v.dtypes.begin(), v.dtypes.end(), DType::f32) != v.dtypes.end())
      r.push_back(v.name);
  return r;
}

std::vector<float> iota(int n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = float(i + 1);
  return v;
}

const float kNaN = std::numeric_limits<float>::quiet_NaN();

// x [1, 2, 2, 2] = channel 0 [[1,2],[3,4]], channel 1 [[5,6],[7,8]]; groups 2, w [2, 1, 2, 2]:
// k0 = [[1,0],[0,1]] sees channel 0 only: 1 + 4 = 5; k1 = ones sees channel 1: 26. Bias 10, 20.
TEST(Conv2d, GroupsHandComputed) {
  for (const std::string& v : cpu_variants("conv2d_fwd")) {
    SCOPED_TRACE(v);
    Conv2dFwdArgs a;
    a.x = Tensor::from_vector<float>(iota(8), {1, 2, 2, 2});
    a.w = Tensor::from_vector<float>({1, 0, 0, 1, 1, 1, 1, 1}, {2, 1, 2, 2});
    a.bias = Tensor::from_vector<float>({10, 20}, {2});
    a.y = Tensor::full({1, 2, 1, 1}, kNaN);
    a.p.groups = 2;
    ScopedVariant sv("conv2d_fwd", v);
    conv2d_fwd(a);
    EXPECT_EQ(a.y.to_vector<float>(), (std::vector<float>{15, 46}));
  }
}

// x [1, 1, 3, 3] = 1..9, w 2x2 ones, dilation 2: the window takes the four corners 1+3+7+9.
TEST(Conv2d, DilationHandComputed) {
  for (const std::string& v : cpu_variants("conv2d_fwd")) {
    SCOPED_TRACE(v);
    Conv2dFwdArgs a;
    a.x = Tensor::from_vector<float>(iota(9), {1, 1, 3, 3});
    a.w = Tensor::full({1, 1, 2, 2}, 1.0);
    a.y = Tensor::full({1, 1, 1, 1}, kNaN);
    a.p.dil_h = a.p.dil_w = 2;
    ScopedVariant sv("conv2d_fwd", v);
    conv2d_fwd(a);
    EXPECT_EQ(a.y.to_vector<float>(), (std::vector<float>{20}));
  }
}

// TF SAME for a 3x3 input, 2x2 kernel, stride 2: output 2x2, the one padding row/column goes
// after (bottom/right). x = [[1,2,3],[4,5,6],[7,8,9]], w = ones.
Conv2dParams tf_same_3x3_k2_s2() {
  Conv2dParams p;
  p.stride_h = p.stride_w = 2;
  std::tie(p.pad_top, p.pad_bottom) = tf_same_padding(3, 2, 2);
  std::tie(p.pad_left, p.pad_right) = tf_same_padding(3, 2, 2);
  return p;
}

TEST(Conv2d, AsymmetricPaddingHandComputed) {
  const Conv2dParams p = tf_same_3x3_k2_s2();
  ASSERT_EQ(p.pad_top, 0);
  ASSERT_EQ(p.pad_bottom, 1);
  ASSERT_FALSE(p.symmetric_padding());
  for (const std::string& v : cpu_variants("conv2d_fwd")) {
    SCOPED_TRACE(v);
    // Forward: windows {1,2,4,5}, {3,6}, {7,8}, {9}.
    Conv2dFwdArgs f;
    f.x = Tensor::from_vector<float>(iota(9), {1, 1, 3, 3});
    f.w = Tensor::full({1, 1, 2, 2}, 1.0);
    f.y = Tensor::full({1, 1, 2, 2}, kNaN);
    f.p = p;
    {
      ScopedVariant sv("conv2d_fwd", v);
      conv2d_fwd(f);
    }
    EXPECT_EQ(f.y.to_vector<float>(), (std::vector<float>{12, 9, 15, 9}));
    // Input gradient of dy = [[1,2],[3,4]]: each pixel belongs to exactly one window.
    Conv2dBwdDataArgs d;
    d.dy = Tensor::from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
    d.w = f.w;
    d.dx = Tensor::full({1, 1, 3, 3}, kNaN);
    d.p = p;
    {
      ScopedVariant sv("conv2d_bwd_data", v);
      conv2d_bwd_data(d);
    }
    EXPECT_EQ(d.dx.to_vector<float>(), (std::vector<float>{1, 1, 2, 1, 1, 2, 3, 3, 4}));
    // Weight gradient dw[r][s] = sum dy[p][q] x[2p + r][2q + s]: 64, 26, 16, 5, added to 1;
    // dbias = 0.5 + (1+2+3+4).
    Conv2dBwdFilterArgs b;
    b.dy = d.dy;
    b.x = f.x;
    b.dw = Tensor::full({1, 1, 2, 2}, 1.0);
    b.dbias = Tensor::full({1}, 0.5);
    b.p = p;
    {
      ScopedVariant sv("conv2d_bwd_filter", v);
      conv2d_bwd_filter(b);
    }
    EXPECT_EQ(b.dw.to_vector<float>(), (std::vector<float>{65, 27, 17, 6}));
    EXPECT_EQ(b.dbias.to_vector<float>(), (std::vector<float>{10.5f}));
  }
}

// conv_transpose2d(x_t, w, stride 2) with a 2x2 kernel of ones copies each input pixel into a
// 2x2 block: the forward of a transposed convolution is conv2d_bwd_data.
TEST(Conv2d, TransposeByBwdDataHandComputed) {
  for (const std::string& v : cpu_variants("conv2d_bwd_data")) {
    SCOPED_TRACE(v);
    Conv2dBwdDataArgs a;
    a.dy = Tensor::from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
    a.w = Tensor::full({1, 1, 2, 2}, 1.0);
    a.dx = Tensor::full({1, 1, 4, 4}, kNaN);
    a.p.stride_h = a.p.stride_w = 2;
    ScopedVariant sv("conv2d_bwd_data", v);
    conv2d_bwd_data(a);
    EXPECT_EQ(a.dx.to_vector<float>(),
              (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  }
}

// A direct transposed convolution (PyTorch's conv_transpose2d definition: every input pixel
// scatters w into the output at h = p*stride - pad + r*dil), compared with conv2d_bwd_data on a
// case with groups, stride, padding, dilation and output_padding.
TEST(Conv2d, TransposeByBwdDataEqualsDirectTransposedConv) {
  const int64_t N = 2, Kt = 4, Ct = 6, G = 2, R = 3, S = 2, P = 3, Q = 4;
  Conv2dParams p;
  p.stride_h = 2;
  p.stride_w = 3;
  p.pad_top = p.pad_bottom = 1;
  p.pad_left = p.pad_right = 0;
  p.dil_h = 1;
  p.dil_w = 2;
  p.groups = G;
  // Output size with output_padding 1 in both directions.
  const int64_t H = (P - 1) * p.stride_h - 2 * p.pad_top + p.dil_h * (R - 1) + 1 + 1;
  const int64_t W = (Q - 1) * p.stride_w + p.dil_w * (S - 1) + 1 + 1;
  ASSERT_EQ(conv2d_out_size(H, R, p.stride_h, p.pad_top, p.pad_bottom, p.dil_h), P);
  ASSERT_EQ(conv2d_out_size(W, S, p.stride_w, p.pad_left, p.pad_right, p.dil_w), Q);
  const Tensor xt = random_tensor({N, Kt, P, Q}, DType::f64, 5);
  const Tensor w = random_tensor({Kt, Ct / G, R, S}, DType::f64, 6);
  const std::vector<double> xv = xt.to_vector<double>(), wv = w.to_vector<double>();
  std::vector<double> want(size_t(N * Ct * H * W), 0.0);
  const int64_t Kg = Kt / G, Cg = Ct / G;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < Kt; ++k)
      for (int64_t i = 0; i < P; ++i)
        for (int64_t j = 0; j < Q; ++j)
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t r = 0; r < R; ++r)
              for (int64_t s = 0; s < S; ++s) {
                const int64_t h = i * p.stride_h - p.pad_top + r * p.dil_h;
                const int64_t x = j * p.stride_w - p.pad_left + s * p.dil_w;
                if (h < 0 || h >= H || x < 0 || x >= W) continue;
                const int64_t oc = (k / Kg) * Cg + c;
                want[size_t(((n * Ct + oc) * H + h) * W + x)] +=
                    xv[size_t(((n * Kt + k) * P + i) * Q + j)] *
                    wv[size_t(((k * Cg + c) * R + r) * S + s)];
              }
  for (const std::string& v : cpu_variants("conv2d_bwd_data")) {
    for (DType t : {DType::f64, DType::f32}) {
      if (t == DType::f64 && v != "cpu.ref") continue;
      SCOPED_TRACE(v + " " + dtype_name(t));
      Conv2dBwdDataArgs a;
      a.dy = xt.to(t);
      a.w = w.to(t);
      a.dx = Tensor::full({N, Ct, H, W}, kNaN, t);
      a.p = p;
      ScopedVariant sv("conv2d_bwd_data", v);
      conv2d_bwd_data(a);
      const std::vector<double> got = a.dx.to_vector<double>();
      const double tol = t == DType::f64 ? 1e-12 : 1e-5;
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(got[i], want[i], tol) << "at element " << i;
    }
  }
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

Conv2dFwdArgs good_fwd() {
  Conv2dFwdArgs a;
  a.x = Tensor::zeros({2, 4, 5, 5});
  a.w = Tensor::zeros({6, 2, 3, 3});
  a.bias = Tensor::zeros({6});
  a.y = Tensor::zeros({2, 6, 5, 5});
  a.p.pad_top = a.p.pad_bottom = a.p.pad_left = a.p.pad_right = 1;
  a.p.groups = 2;
  return a;
}

TEST(Conv2d, ErrorsNameShapesAndParameters) {
  EXPECT_NO_THROW(check_conv2d_fwd_args(good_fwd()));
  {
    Conv2dFwdArgs a = good_fwd();
    a.w = Tensor::zeros({6, 4, 3, 3});
    const std::string e = error_of([&] { check_conv2d_fwd_args(a); });
    EXPECT_NE(e.find("[conv2d_fwd] w must be [K, C/groups = 2, R, S]"), std::string::npos) << e;
    EXPECT_NE(e.find("got [6, 4, 3, 3]"), std::string::npos) << e;
  }
  {
    Conv2dFwdArgs a = good_fwd();
    a.p.groups = 3;
    const std::string e = error_of([&] { check_conv2d_fwd_args(a); });
    EXPECT_NE(e.find("channels C = 4 of x [2, 4, 5, 5] must be divisible by groups = 3"),
              std::string::npos)
        << e;
  }
  {
    Conv2dFwdArgs a = good_fwd();
    a.y = Tensor::zeros({2, 6, 3, 3});
    const std::string e = error_of([&] { check_conv2d_fwd_args(a); });
    EXPECT_NE(e.find("[conv2d_fwd] y must be [2, 6, 5, 5], got [2, 6, 3, 3]"), std::string::npos)
        << e;
  }
  {
    Conv2dFwdArgs a = good_fwd();
    a.p = Conv2dParams{};
    a.p.groups = 2;
    a.p.dil_h = 3;  // extent 7 > 5
    const std::string e = error_of([&] { check_conv2d_fwd_args(a); });
    EXPECT_NE(e.find("does not fit x [2, 4, 5, 5]"), std::string::npos) << e;
  }
  {
    Conv2dFwdArgs a = good_fwd();
    a.w = Tensor::zeros({6, 2, 3, 3}, DType::f64);
    const std::string e = error_of([&] { check_conv2d_fwd_args(a); });
    EXPECT_NE(e.find("[conv2d_fwd] w must be f32"), std::string::npos) << e;
    EXPECT_NE(e.find("got f64"), std::string::npos) << e;
  }
  {
    Conv2dFwdArgs a = good_fwd();
    a.bias = Tensor::zeros({5});
    const std::string e = error_of([&] { check_conv2d_fwd_args(a); });
    EXPECT_NE(e.find("bias must be [6], got [5]"), std::string::npos) << e;
  }
  {
    Conv2dFwdArgs a = good_fwd();
    a.p.stride_w = 0;
    const std::string e = error_of([&] { conv2d_fwd(a); });
    EXPECT_NE(e.find("stride must be >= 1, got 1,0"), std::string::npos) << e;
  }
  {
    Conv2dFwdArgs a = good_fwd();
    a.x = Tensor::zeros({2, 4, 5});
    const std::string e = error_of([&] { conv2d_fwd(a); });
    EXPECT_NE(e.find("x must be [N, C, H, W], got [2, 4, 5]"), std::string::npos) << e;
  }
  {
    Conv2dBwdDataArgs a;
    a.dy = Tensor::zeros({2, 6, 4, 5});
    a.w = Tensor::zeros({6, 2, 3, 3});
    a.dx = Tensor::zeros({2, 4, 5, 5});
    a.p = good_fwd().p;
    const std::string e = error_of([&] { conv2d_bwd_data(a); });
    EXPECT_NE(e.find("[conv2d_bwd_data] dy must be [2, 6, 5, 5], got [2, 6, 4, 5]"),
              std::string::npos)
        << e;
  }
  {
    Conv2dBwdFilterArgs a;
    a.dy = Tensor::zeros({2, 6, 5, 5});
    a.x = Tensor::zeros({2, 4, 5, 5});
    a.dw = Tensor::zeros({6, 2, 3, 3});
    a.dbias = Tensor::zeros({6, 1});
    a.p = good_fwd().p;
    const std::string e = error_of([&] { conv2d_bwd_filter(a); });
    EXPECT_NE(e.find("[conv2d_bwd_filter] dbias must be [6], got [6, 1]"), std::string::npos) << e;
    a.dbias = Tensor();  // not wanted: fine
    EXPECT_NO_THROW(conv2d_bwd_filter(a));
  }
}

// cuda.implicit_gemm_tc beyond the registry's shapes, which all fit one 128-row tile: several row
// tiles per group (K, C, K/G, C/G > 128), long reductions, many bwd_filter k-splits, f16 and bf16
// against cpu.ref. On a GPU this checks the mma.sync path; the SIMT emulator (aim_simt_tests) runs
// the variant's scalar fallback on the registry's shapes only.
TEST(Conv2d, ImplicitGemmTcSeveralTilesOnGpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  // {N, C, H, W, K, R, S, stride, pad (-1: TF SAME), dil, groups, bias}
  const std::vector<TestShape> shapes = {
      {2, 136, 7, 9, 144, 3, 3, 1, 1, 1, 1, 1},   // 2 row tiles; reductions 1224 and 1296
      {4, 40, 20, 20, 260, 1, 1, 2, 0, 1, 1, 1},  // 3 row tiles, 1x1 stride 2
      {1, 264, 9, 9, 264, 3, 3, 1, 1, 1, 2, 1},   // groups 2, 132 rows per group
      {8, 16, 32, 32, 32, 3, 3, 1, 1, 1, 1, 0},   // bwd_filter reduction 8192: several splits
      {2, 130, 6, 5, 3, 2, 3, 2, -1, 2, 1, 1},    // TF SAME, dilation 2, 130 input channels
      {2, 64, 28, 28, 64, 3, 3, 1, 1, 1, 1, 1}};  // ResNet-like
  for (const char* name : {"conv2d_fwd", "conv2d_bwd_data", "conv2d_bwd_filter"}) {
    OpBase* op = registry().find(name);
    ASSERT_NE(op, nullptr) << name;
    for (DType t : {DType::f16, DType::bf16})
      for (const TestShape& s : shapes) {
        SCOPED_TRACE(std::string(name) + " " + dtype_name(t) + " {" + shape_str(s) + "}");
        const CheckResult r =
            check_variant(*op, "cuda.implicit_gemm_tc", Backend::CUDA, s, t, /*seed=*/99);
        EXPECT_EQ(r.status, CheckStatus::Pass) << r.message;
      }
  }
}

// cpu.widen runs cpu.im2col's forward and input gradient in chunks of images once a batch's f32
// copies pass ~8 MiB (the registry's shapes are one chunk): 1x1 and 3x3 stride-2 convolutions of
// 5 images of 64x96x96 (~0.6M floats each: chunks of 2, 2, 1), f16 and bf16 against cpu.ref.
TEST(Conv2d, WidenChunksOfImages) {
  const std::vector<TestShape> shapes = {{5, 64, 96, 96, 8, 1, 1, 1, 0, 1, 1, 1},
                                         {5, 64, 96, 96, 8, 3, 3, 2, 1, 1, 1, 0}};
  for (const char* name : {"conv2d_fwd", "conv2d_bwd_data"}) {
    OpBase* op = registry().find(name);
    ASSERT_NE(op, nullptr) << name;
    for (DType t : {DType::f16, DType::bf16})
      for (const TestShape& s : shapes) {
        SCOPED_TRACE(std::string(name) + " " + dtype_name(t) + " {" + shape_str(s) + "}");
        const CheckResult r = check_variant(*op, "cpu.widen", Backend::CPU, s, t, /*seed=*/7);
        EXPECT_EQ(r.status, CheckStatus::Pass) << r.message;
      }
  }
}

// Outputs of 32 MiB and more are written with non-temporal stores by cpu.im2col's GEMMs (the
// forward without an epilogue, the pointwise input gradient): every value written, equal to the
// reference. 250 output rows: the 14-row micro-tiles end in a partial (plain-store) tile.
TEST(Conv2d, StreamedLargeOutputsMatchReference) {
  const Shape big = {3, 250, 120, 128};  // 46 MB of f32
  const Shape small = {3, 8, 120, 128};
  // run(variant) fills the NaN-initialised output `out` by op under that variant; cpu.im2col's
  // output must equal cpu.ref's everywhere.
  auto check = [&](const char* op, const char* what, Tensor& out, const auto& run) {
    Tensor got[2];
    const char* variants[2] = {"cpu.ref", "cpu.im2col"};
    for (int v = 0; v < 2; ++v) {
      ScopedVariant sv(op, variants[v]);
      out = Tensor::full(big, std::nan(""));
      run();
      got[v] = out;
    }
    const std::vector<double> g = got[1].to_vector<double>(), w = got[0].to_vector<double>();
    ASSERT_EQ(g.size(), w.size());
    int64_t bad = 0;
    for (size_t i = 0; i < g.size(); ++i)
      if (!(std::fabs(g[i] - w[i]) <= 1e-4 * (1.0 + std::fabs(w[i]))) && bad++ < 5)
        ADD_FAILURE() << what << "[" << i << "]: cpu.im2col " << g[i] << ", cpu.ref " << w[i];
    EXPECT_EQ(bad, 0) << what;
  };
  Conv2dFwdArgs f;
  f.x = random_tensor(small, DType::f32, 1, -1.0, 1.0);
  f.w = random_tensor({big[1], small[1], 1, 1}, DType::f32, 2, -1.0, 1.0);
  check("conv2d_fwd", "y", f.y, [&] { conv2d_fwd(f); });
  Conv2dBwdDataArgs d;
  d.dy = random_tensor(small, DType::f32, 3, -1.0, 1.0);
  d.w = random_tensor({small[1], big[1], 1, 1}, DType::f32, 4, -1.0, 1.0);
  check("conv2d_bwd_data", "dx", d.dx, [&] { conv2d_bwd_data(d); });
}

}  // namespace
}  // namespace aim::kernels
