// Pooling: what the registry-driven comparison with cpu.ref cannot show — PyTorch's output-size
// formula, hand-checked ceil-mode averages, TF-SAME max pooling where padding must never win,
// and the error messages. Runs on the CPU variants, and on cuda.direct when a GPU is present.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/pool/pool2d.h"
#include "kernels/registry.h"

namespace aim::kernels {
namespace {

struct Where {
  const char* variant;
  Device device;
};
std::vector<Where> variants() {
  std::vector<Where> v = {{"cpu.ref", kCPU}, {"cpu.omp", kCPU}};
  if (cuda_device_count() > 0) v.push_back({"cuda.direct", cuda_device(0)});
  return v;
}

// PyTorch's pooling_output_shape_pad_lr (aten/src/ATen/native/Pool.h), dilation 1, written out
// independently: floor division (div_rtn), ceil mode adds stride - 1, and the last window must
// start inside the input or the leading padding.
int64_t torch_out_size(int64_t in, int64_t k, int64_t pad_l, int64_t pad_r, int64_t stride,
                       bool ceil_mode) {
  const int64_t num = in + pad_l + pad_r - (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t q = num / stride;
  if (num % stride != 0 && num < 0) --q;  // round toward -inf
  int64_t out = q + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad_l) --out;
  return out;
}

Pool2dParams params(int64_t k, int64_t s, int64_t pt, int64_t pb, int64_t pl, int64_t pr,
                    bool count_include_pad = true) {
  Pool2dParams p;
  p.kernel_h = p.kernel_w = k;
  p.stride_h = p.stride_w = s;
  p.pad_top = pt;
  p.pad_bottom = pb;
  p.pad_left = pl;
  p.pad_right = pr;
  p.count_include_pad = count_include_pad;
  return p;
}

std::vector<double> avg_fwd(const Where& v, const Tensor& x, const Shape& ys,
                            const Pool2dParams& p) {
  ScopedVariant sv("avgpool2d_fwd", v.variant);
  AvgPool2dFwdArgs a;
  a.x = x.to(v.device);
  a.y = Tensor::empty(ys, x.dtype(), v.device);
  a.p = p;
  avgpool2d_fwd(a);
  return a.y.to_vector<double>();
}

std::vector<double> avg_bwd(const Where& v, const Tensor& dy, const Shape& xs,
                            const Pool2dParams& p) {
  ScopedVariant sv("avgpool2d_bwd", v.variant);
  AvgPool2dBwdArgs a;
  a.dy = dy.to(v.device);
  a.dx = Tensor::empty(xs, dy.dtype(), v.device);
  a.p = p;
  avgpool2d_bwd(a);
  return a.dx.to_vector<double>();
}

struct MaxResult {
  std::vector<double> y;
  std::vector<int32_t> indices;
};
MaxResult max_fwd(const Where& v, const Tensor& x, const Shape& ys, const Pool2dParams& p) {
  ScopedVariant sv("maxpool2d_fwd", v.variant);
  MaxPool2dFwdArgs a;
  a.x = x.to(v.device);
  a.y = Tensor::empty(ys, x.dtype(), v.device);
  a.indices = Tensor::empty(ys, DType::i32, v.device);
  a.p = p;
  maxpool2d_fwd(a);
  return {a.y.to_vector<double>(), a.indices.to_vector<int32_t>()};
}

std::vector<double> max_bwd(const Where& v, const Tensor& dy, const Tensor& indices,
                            const Shape& xs, const Pool2dParams& p) {
  ScopedVariant sv("maxpool2d_bwd", v.variant);
  MaxPool2dBwdArgs a;
  a.dy = dy.to(v.device);
  a.indices = indices.to(v.device);
  a.dx = Tensor::empty(xs, dy.dtype(), v.device);
  a.p = p;
  maxpool2d_bwd(a);
  return a.dx.to_vector<double>();
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

TEST(Pool2d, OutSizeMatchesPyTorchFormula) {
  // Known values: ResNet stem, GoogLeNet/Caffe ceil-mode pools, a dropped padding-only window.
  EXPECT_EQ(pool2d_out_size(112, 3, 2, 1, 1, false), 56);
  EXPECT_EQ(pool2d_out_size(112, 3, 2, 0, 0, true), 56);
  EXPECT_EQ(pool2d_out_size(56, 3, 2, 0, 0, true), 28);
  EXPECT_EQ(pool2d_out_size(14, 3, 2, 0, 0, true), 7);
  EXPECT_EQ(pool2d_out_size(13, 3, 2, 0, 0, true), 6);
  EXPECT_EQ(pool2d_out_size(55, 3, 2, 0, 0, false), 27);  // AlexNet
  EXPECT_EQ(pool2d_out_size(7, 3, 1, 1, 1, false), 7);    // SAME, stride 1
  EXPECT_EQ(pool2d_out_size(5, 2, 2, 1, 1, true), 3);     // 4th window would be padding only
  EXPECT_EQ(pool2d_out_size(5, 2, 2, 1, 1, false), 3);
  EXPECT_EQ(pool2d_out_size(32, 3, 2, 0, 1, false), 16);  // TF SAME, asymmetric
  // The whole table of small cases against the formula.
  int checked = 0;
  for (int64_t in = 1; in <= 40; ++in)
    for (int64_t k = 1; k <= 5; ++k)
      for (int64_t s = 1; s <= 3; ++s)
        for (int64_t pl = 0; pl <= k / 2; ++pl)
          for (int64_t pr = 0; pr <= k / 2; ++pr)
            for (bool ceil_mode : {false, true}) {
              if (in + pl + pr < k) continue;
              ASSERT_EQ(pool2d_out_size(in, k, s, pl, pr, ceil_mode),
                        torch_out_size(in, k, pl, pr, s, ceil_mode))
                  << "in " << in << " k " << k << " s " << s << " pad " << pl << "," << pr
                  << " ceil " << ceil_mode;
              ++checked;
            }
  EXPECT_GT(checked, 1000);
}

// x [1, 1, 6, 6] = 1..36 row-major; 3x3/2, padding 1, ceil_mode: 4x4 outputs, the last row and
// column of windows start at input 5 and stop at the padded edge 7 (2 rows, 1 of them input).
TEST(Pool2d, CeilModeAverageHandChecked) {
  std::vector<float> xv(36);
  for (int i = 0; i < 36; ++i) xv[size_t(i)] = float(i + 1);
  const Tensor x = Tensor::from_vector(xv, {1, 1, 6, 6});
  ASSERT_EQ(pool2d_out_size(6, 3, 2, 1, 1, true), 4);
  const Shape ys = {1, 1, 4, 4};
  for (const Where& v : variants()) {
    SCOPED_TRACE(v.variant);
    const std::vector<double> inc = avg_fwd(v, x, ys, params(3, 2, 1, 1, 1, 1, true));
    const std::vector<double> exc = avg_fwd(v, x, ys, params(3, 2, 1, 1, 1, 1, false));
    // (0,0): rows/cols [-1, 2) -> inputs {0,1}^2 = 1+2+7+8 = 18; 9 with padding, 4 without.
    EXPECT_NEAR(inc[0], 18.0 / 9, 1e-6);
    EXPECT_NEAR(exc[0], 18.0 / 4, 1e-6);
    // (0,3): rows [-1, 2), cols [5, 8) clipped to the padded [5, 7): 3x2 with, 2x1 without;
    // inputs x[0][5] + x[1][5] = 6 + 12.
    EXPECT_NEAR(inc[3], 18.0 / 6, 1e-6);
    EXPECT_NEAR(exc[3], 18.0 / 2, 1e-6);
    // (1,1): rows, cols [1, 4): all inside, mean of x[1..3][1..3] = x[2][2] = 15.
    EXPECT_NEAR(inc[5], 15.0, 1e-6);
    EXPECT_NEAR(exc[5], 15.0, 1e-6);
    // (3,3): rows, cols [5, 7) padded, input x[5][5] = 36 only: 36/4 with padding, 36/1 without.
    EXPECT_NEAR(inc[15], 9.0, 1e-6);
    EXPECT_NEAR(exc[15], 36.0, 1e-6);

    // Backward with dy = 1: dx[5][5] lies in windows (2|3, 2|3) with divisors 9, 6, 6, 4
    // (padding counted) or 9, 3, 3, 1 (not); dx[0][0] only in window (0,0).
    const Tensor ones = Tensor::ones(ys);
    const std::vector<double> dinc = avg_bwd(v, ones, {1, 1, 6, 6}, params(3, 2, 1, 1, 1, 1));
    const std::vector<double> dexc =
        avg_bwd(v, ones, {1, 1, 6, 6}, params(3, 2, 1, 1, 1, 1, false));
    EXPECT_NEAR(dinc[35], 1.0 / 9 + 2.0 / 6 + 1.0 / 4, 1e-6);
    EXPECT_NEAR(dexc[35], 1.0 / 9 + 2.0 / 3 + 1.0, 1e-6);
    EXPECT_NEAR(dinc[0], 1.0 / 9, 1e-6);
    EXPECT_NEAR(dexc[0], 1.0 / 4, 1e-6);
  }
}

// TF "SAME" 3x3/2 on 4x4: padding 0 before, 1 after, 2x2 outputs. All inputs negative: a
// padding that counted as 0 would win the last row and column of windows.
TEST(Pool2d, TfSameMaxPoolPaddingNeverWins) {
  std::vector<float> xv(16);
  for (int i = 0; i < 16; ++i) xv[size_t(i)] = -10.f - float(i);  // x[h][w] = -10 - (4h + w)
  const Tensor x = Tensor::from_vector(xv, {1, 1, 4, 4});
  const Pool2dParams p = params(3, 2, 0, 1, 0, 1);
  ASSERT_EQ(pool2d_out_size(4, 3, 2, 0, 1, false), 2);
  const Shape ys = {1, 1, 2, 2};
  for (const Where& v : variants()) {
    SCOPED_TRACE(v.variant);
    const MaxResult r = max_fwd(v, x, ys, p);
    // Each window's top-left input is its largest (least negative) element.
    EXPECT_EQ(r.y, (std::vector<double>{-10, -12, -18, -20}));
    EXPECT_EQ(r.indices, (std::vector<int32_t>{0, 2, 8, 10}));
    // All -inf: the output is -inf and the index the window's first input element.
    const Tensor ninf = Tensor::full({1, 1, 4, 4}, -std::numeric_limits<double>::infinity());
    const MaxResult r2 = max_fwd(v, ninf, ys, p);
    for (double y : r2.y) EXPECT_TRUE(std::isinf(y) && y < 0) << y;
    EXPECT_EQ(r2.indices, (std::vector<int32_t>{0, 2, 8, 10}));
    // Ties: the first maximum in row-major order.
    const MaxResult r3 = max_fwd(v, Tensor::full({1, 1, 4, 4}, -3.0), ys, p);
    EXPECT_EQ(r3.indices, (std::vector<int32_t>{0, 2, 8, 10}));
    // NaN propagates (as PyTorch).
    std::vector<float> xn = xv;
    xn[15] = std::numeric_limits<float>::quiet_NaN();
    const MaxResult r4 = max_fwd(v, Tensor::from_vector(xn, {1, 1, 4, 4}), ys, p);
    EXPECT_TRUE(std::isnan(r4.y[3]));
    EXPECT_EQ(r4.indices[3], 15);
    EXPECT_EQ(r4.y[0], -10);
    // Backward routes dy to the argmax; overlapping windows (stride < kernel) add up.
    const Tensor dy = Tensor::from_vector<float>({1, 2, 3, 4}, ys);
    const std::vector<double> dx =
        max_bwd(v, dy, Tensor::from_vector(r3.indices, ys), {1, 1, 4, 4}, p);
    std::vector<double> want(16, 0.0);
    want[0] = 1, want[2] = 2, want[8] = 3, want[10] = 4;
    EXPECT_EQ(dx, want);
    // Two windows choosing the shared element 2 (row 0, col 2 is in windows (0,0) and (0,1)).
    const std::vector<double> dx2 =
        max_bwd(v, dy, Tensor::from_vector<int32_t>({2, 2, 10, 10}, ys), {1, 1, 4, 4}, p);
    std::vector<double> want2(16, 0.0);
    want2[2] = 3, want2[10] = 7;
    EXPECT_EQ(dx2, want2);
  }
}

// 3x3/1 and 3x3/2 (cpu.omp takes them separably, rows then columns) on inputs built to break a
// separable maximum that got the order wrong: few distinct values (ties across rows and columns),
// -inf patches, and NaNs (the last in the row-major scan wins), at every padding of the SAME branch
// and the unpadded and ceil shapes, in rows shorter and longer than a vector. Every variant equals
// cpu.ref exactly.
TEST(Pool2d, MaxPoolSeparableTiesNansAndInfAsTheReference) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const int64_t H = 9;
  // W = 37: rows of 17 to 37 outputs, the f32 3x3/2 vector path's whole and overlapping blocks.
  for (const int64_t W : {int64_t(11), int64_t(37)}) {
    std::vector<float> xv(size_t(2 * H * W));
    uint64_t r = 12345;
    for (float& v : xv) {
      r = r * 6364136223846793005ull + 1442695040888963407ull;
      const int k = int(r >> 59);  // 0..31
      v = k < 2 ? nan : k < 6 ? -inf : float(k % 3);
    }
    for (int i = 0; i < 6; ++i) xv[size_t(H * W + i)] = -inf;  // a window of -inf only
    const Tensor x = Tensor::from_vector(xv, {1, 2, H, W});
    struct Pads {
      int64_t pt, pb, pl, pr;
      bool ceil;
    };
    for (const auto& [k, st] : {std::pair<int64_t, int64_t>{3, 1}, {3, 2}, {2, 2}})
      for (const Pads& pd : {Pads{1, 1, 1, 1, false}, Pads{0, 0, 0, 0, false},
                             Pads{0, 1, 1, 0, true}, Pads{1, 0, 0, 1, false}}) {
        const Pool2dParams p = params(k, st, pd.pt, pd.pb, pd.pl, pd.pr);
        const Shape ys = {1, 2, pool2d_out_size(H, k, st, pd.pt, pd.pb, pd.ceil),
                          pool2d_out_size(W, k, st, pd.pl, pd.pr, pd.ceil)};
        const MaxResult want = max_fwd({"cpu.ref", kCPU}, x, ys, p);
        for (const Where& v : variants()) {
          SCOPED_TRACE(std::string(v.variant) + " W " + std::to_string(W) + " " +
                       std::to_string(k) + "x" + std::to_string(k) + "/" + std::to_string(st) +
                       " pads " + std::to_string(pd.pt) + std::to_string(pd.pb) +
                       std::to_string(pd.pl) + std::to_string(pd.pr));
          const MaxResult got = max_fwd(v, x, ys, p);
          ASSERT_EQ(got.indices, want.indices);
          for (size_t i = 0; i < want.y.size(); ++i)
            EXPECT_TRUE(got.y[i] == want.y[i] || (std::isnan(got.y[i]) && std::isnan(want.y[i])))
                << i << ": " << got.y[i] << " vs " << want.y[i];
        }
      }
  }
}

TEST(Pool2d, ErrorsNameWhatWasExpected) {
  const Tensor x = Tensor::zeros({2, 3, 5, 5});
  for (const Where& v : variants()) {
    SCOPED_TRACE(v.variant);
    auto has = [](const std::string& msg, const std::string& want) {
      EXPECT_NE(msg.find(want), std::string::npos) << "message: " << msg << "\nwanted: " << want;
    };
    has(error_of([&] {
          avg_fwd(v, x, {2, 3, 2, 2}, params(0, 2, 0, 0, 0, 0));
        }),
        "[avgpool2d_fwd] kernel and stride must be >= 1, got kernel 0x0 stride 2x2");
    has(error_of([&] {
          avg_fwd(v, x, {2, 3, 4, 3}, params(2, 2, 0, 0, 0, 0));
        }),
        "[avgpool2d_fwd] output [2, 3, 4, 3] is too large for input [2, 3, 5, 5] with kernel 2x2 "
        "stride 2x2");
    has(error_of([&] {
          avg_fwd(v, x, {2, 3, 3, 3}, params(2, 2, 2, 0, 0, 0));
        }),
        "[avgpool2d_fwd] the first window lies in the padding only");
    has(error_of([&] {
          avg_fwd(v, x, {2, 4, 2, 2}, params(2, 2, 0, 0, 0, 0));
        }),
        "[avgpool2d_fwd] x [2, 3, 5, 5] and y [2, 4, 2, 2] must have the same N and C");
    has(error_of([&] {
          avg_fwd(v, Tensor::zeros({3, 5, 5}), {2, 3, 2, 2}, params(2, 2, 0, 0, 0, 0));
        }),
        "[avgpool2d_fwd] x must be [N, C, H, W], got [3, 5, 5] f32");
    has(error_of([&] {
          ScopedVariant sv("maxpool2d_fwd", v.variant);
          MaxPool2dFwdArgs a;
          a.x = x.to(v.device);
          a.y = Tensor::empty({2, 3, 2, 2}, DType::f32, v.device);
          a.indices = Tensor::empty({2, 3, 2, 2}, DType::i64, v.device);
          a.p = params(2, 2, 0, 0, 0, 0);
          maxpool2d_fwd(a);
        }),
        "[maxpool2d_fwd] indices must be contiguous [2, 3, 2, 2] i32, got [2, 3, 2, 2] i64");
    has(error_of([&] {
          ScopedVariant sv("maxpool2d_fwd", v.variant);
          MaxPool2dFwdArgs a;
          a.x = x.to(v.device);
          a.y = Tensor::empty({2, 3, 2, 2}, DType::f64, v.device);
          a.p = params(2, 2, 0, 0, 0, 0);
          maxpool2d_fwd(a);
        }),
        "[maxpool2d_fwd] y must have x's dtype f32, got f64");
    has(error_of([&] {
          ScopedVariant sv("adaptive_avgpool2d_bwd", v.variant);
          AdaptiveAvgPool2dBwdArgs a;
          a.dy = Tensor::zeros({2, 3, 0, 1}).to(v.device);
          a.dx = Tensor::empty({2, 3, 5, 5}, DType::f32, v.device);
          adaptive_avgpool2d_bwd(a);
        }),
        "[adaptive_avgpool2d_bwd] planes must not be empty, got dx [2, 3, 5, 5] and dy "
        "[2, 3, 0, 1]");
  }
}

// The CPU variants check that every index lies in its output's window: indices from another
// forward (or a backward called with the wrong p) are an error, not a silently wrong gradient.
TEST(Pool2d, MaxBackwardRejectsIndicesOutsideTheirWindow) {
  const Shape ys = {1, 1, 2, 2};
  const Tensor dy = Tensor::ones(ys);
  const Tensor bad = Tensor::from_vector<int32_t>({0, 2, 8, 0}, ys);  // output (1,1) -> x[0][0]
  for (const char* v : {"cpu.ref", "cpu.omp"}) {
    const std::string msg = error_of([&] {
      max_bwd({v, kCPU}, dy, bad, {1, 1, 4, 4}, params(3, 2, 0, 1, 0, 1));
    });
    EXPECT_NE(msg.find("[maxpool2d_bwd] index 0 of plane 0 output (1, 1) is outside its window "
                       "rows [2, 4) columns [2, 4)"),
              std::string::npos)
        << v << ": " << msg;
    // Large enough for cpu.omp's parallel region: the error still leaves it and names the first
    // plane (output (0,1) of 3x3/2 pad 1 covers columns [1, 4), not index 0).
    const std::string big = error_of([&] {
      max_bwd({v, kCPU}, Tensor::ones({2, 64, 8, 8}), Tensor::zeros({2, 64, 8, 8}, DType::i32),
              {2, 64, 16, 16}, params(3, 2, 1, 1, 1, 1));
    });
    EXPECT_NE(big.find("[maxpool2d_bwd] index 0 of plane 0 output (0, 1) is outside its window"),
              std::string::npos)
        << v << ": " << big;
    // Output (0,0) covers rows [0, 3) and columns [0, 3) of the 4x4 plane: the row below the
    // window, the column after it, and a negative index are refused (cpu.omp finds the row by
    // comparisons, not a division).
    for (const int32_t i : {12, 3, 7, -1}) {
      const Tensor one = Tensor::from_vector<int32_t>({i, 2, 8, 10}, ys);
      const std::string m = error_of([&] {
        max_bwd({v, kCPU}, dy, one, {1, 1, 4, 4}, params(3, 2, 0, 1, 0, 1));
      });
      EXPECT_NE(m.find("[maxpool2d_bwd] index " + std::to_string(i) +
                       " of plane 0 output (0, 0) is outside its window rows [0, 3) columns "
                       "[0, 3)"),
                std::string::npos)
          << v << ": " << m;
    }
  }
}

}  // namespace
}  // namespace aim::kernels
