// Reductions and softmax (autograd/functions/reduce.h): gradcheck of every function over several
// dim sets, keepdim both ways, transposed inputs and masks; forward values by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "autograd/engine.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "autograd/functions/softmax.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "kernels/elementwise/binary.h"
#include "kernels/testing.h"

namespace aim::autograd {
namespace {

using Fn = std::function<Variable(const std::vector<Variable>&)>;
const double kInf = std::numeric_limits<double>::infinity();

Variable input(const Shape& s, uint64_t seed, double lo = -1, double hi = 1) {
  return Variable(kernels::random_tensor(s, DType::f64, seed, lo, hi), true, "x");
}

void expect_gradcheck(const Fn& f, const Variable& x, const std::string& what) {
  const GradcheckResult r = gradcheck(f, {x});
  EXPECT_TRUE(r.ok) << what << ": " << r.message;
}

Tensor vec(const std::vector<double>& v, const Shape& s) {
  return Tensor::from_vector<double>(v, s);
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want,
                 double tol = 1e-12) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

// Bool mask from 0/1 values.
Tensor mask_of(const std::vector<int>& v, const Shape& s) {
  std::vector<double> d(v.begin(), v.end());
  return vec(d, s).to(DType::boolean);
}

// Test-local: y = mask ? x : 0 (masked log-softmax outputs are -inf, which finite differences
// cannot weigh). dx = mask ? dy : 0.
struct KeepNode final : Node {
  Tensor mask;
  const char* name() const override { return "Keep"; }
  void backward(Grads& g) override {
    kernels::WhereArgs a;
    a.cond = mask;
    a.a = g.dy();
    a.b = Tensor::zeros({}, g.dy().dtype());
    a.y = g.out(0);
    kernels::where(a);
  }
};
Variable keep(const Variable& x, const Tensor& mask) {
  kernels::WhereArgs a;
  a.cond = mask;
  a.a = x.data();
  a.b = Tensor::zeros({}, x.dtype());
  a.y = Tensor::empty(x.sizes(), x.dtype());
  kernels::where(a);
  auto n = std::make_shared<KeepNode>();
  n->mask = mask;
  return attach1(n, {x}, a.y);
}

const std::vector<std::vector<int64_t>> kDimSets = {{}, {0}, {1}, {-1}, {0, 2}, {2, 0, 1}, {1, 2}};

// ---- gradchecks ------------------------------------------------------------------------------

TEST(ReduceGrad, SumGradcheck) {
  const Variable x = input({3, 4, 5}, 1);
  for (const auto& dims : kDimSets)
    for (bool kd : {false, true})
      expect_gradcheck([&](const std::vector<Variable>& v) { return sum(v[0], dims, kd); }, x,
                       str("sum dims ", to_string(dims), " keepdim ", kd));
  // Transposed (strided) input.
  expect_gradcheck(
      [](const std::vector<Variable>& v) {
        return sum(transpose(v[0], 0, 2), {0, 1});
      },
      x, "sum of a transposed view");
}

TEST(ReduceGrad, MeanGradcheck) {
  const Variable x = input({3, 4, 5}, 2);
  for (const auto& dims : kDimSets)
    for (bool kd : {false, true})
      expect_gradcheck([&](const std::vector<Variable>& v) { return mean(v[0], dims, kd); }, x,
                       str("mean dims ", to_string(dims), " keepdim ", kd));
  expect_gradcheck(
      [](const std::vector<Variable>& v) { return mean(transpose(v[0], 1, 2), {1}, true); }, x,
      "mean of a transposed view");
}

TEST(ReduceGrad, MaxMinGradcheck) {
  const Variable x = input({3, 4, 5}, 3);  // random values: no ties
  for (int64_t dim : {0, 1, 2, -1})
    for (bool kd : {false, true}) {
      expect_gradcheck([&](const std::vector<Variable>& v) { return max(v[0], dim, kd).first; }, x,
                       str("max dim ", dim, " keepdim ", kd));
      expect_gradcheck([&](const std::vector<Variable>& v) { return min(v[0], dim, kd).first; }, x,
                       str("min dim ", dim, " keepdim ", kd));
    }
  expect_gradcheck(
      [](const std::vector<Variable>& v) { return max(transpose(v[0], 0, 2), 1).first; }, x,
      "max of a transposed view");
  expect_gradcheck(
      [](const std::vector<Variable>& v) { return min(transpose(v[0], 0, 1), 0).first; }, x,
      "min of a transposed view");
}

TEST(ReduceGrad, VarStdGradcheck) {
  const Variable x = input({3, 4, 5}, 4);
  for (const auto& dims : kDimSets)
    for (double c : {0.0, 1.0, 2.0})
      for (bool kd : {false, true}) {
        expect_gradcheck([&](const std::vector<Variable>& v) { return var(v[0], dims, c, kd); }, x,
                         str("var dims ", to_string(dims), " correction ", c, " keepdim ", kd));
        expect_gradcheck([&](const std::vector<Variable>& v) { return std(v[0], dims, c, kd); }, x,
                         str("std dims ", to_string(dims), " correction ", c, " keepdim ", kd));
      }
  expect_gradcheck(
      [](const std::vector<Variable>& v) {
        return std(transpose(v[0], 0, 2), {1, 2});
      },
      x, "std of a transposed view");
  expect_gradcheck([](const std::vector<Variable>& v) { return var(transpose(v[0], 0, 1), {0}); },
                   x, "var of a transposed view");
}

TEST(ReduceGrad, NormGradcheck) {
  const Variable x = input({3, 4, 5}, 5);  // no zeros, no ties of |x|
  for (double p : {1.0, 2.0, 3.0, 1.5, 0.5, kInf})
    for (const auto& dims : kDimSets)
      for (bool kd : {false, true})
        expect_gradcheck([&](const std::vector<Variable>& v) { return norm(v[0], p, dims, kd); }, x,
                         str("norm p ", p, " dims ", to_string(dims), " keepdim ", kd));
  expect_gradcheck(
      [](const std::vector<Variable>& v) { return norm(transpose(v[0], 0, 2), 2, {0}); }, x,
      "norm of a transposed view");
}

TEST(ReduceGrad, SoftmaxGradcheck) {
  const Variable x = input({3, 4, 5}, 6, -2, 2);
  for (int64_t dim : {0, 1, 2, -1}) {
    expect_gradcheck([&](const std::vector<Variable>& v) { return softmax(v[0], dim); }, x,
                     str("softmax dim ", dim));
    expect_gradcheck([&](const std::vector<Variable>& v) { return log_softmax(v[0], dim); }, x,
                     str("log_softmax dim ", dim));
  }
  expect_gradcheck([](const std::vector<Variable>& v) { return softmax(transpose(v[0], 0, 2), 1); },
                   x, "softmax of a transposed view");
  expect_gradcheck(
      [](const std::vector<Variable>& v) { return log_softmax(transpose(v[0], 1, 2), -1); }, x,
      "log_softmax of a transposed view");
}

TEST(ReduceGrad, MaskedSoftmaxGradcheck) {
  const Variable x = input({3, 4, 5}, 7, -2, 2);
  // Broadcast [4, 5] mask along dim -1: row 2 fully masked, row 0 fully kept.
  const Tensor m45 = mask_of({1, 1, 1, 1, 1,  //
                              1, 0, 1, 0, 1,  //
                              0, 0, 0, 0, 0,  //
                              0, 1, 1, 0, 0},
                             {4, 5});
  // [3, 1, 5] mask (size-1 dim broadcast): along dim 0 column 3 is fully masked; along dim 1
  // every masked (batch, column) is a fully masked row.
  const Tensor m315 = mask_of({1, 0, 1, 0, 1,  //
                               1, 1, 0, 0, 1,  //
                               0, 1, 1, 0, 1},
                              {3, 1, 5});
  const Tensor full45 = m45.expand({3, 4, 5}).contiguous();
  const Tensor full315 = m315.expand({3, 4, 5}).contiguous();
  expect_gradcheck([&](const std::vector<Variable>& v) { return softmax(v[0], -1, m45); }, x,
                   "masked softmax dim -1");
  expect_gradcheck([&](const std::vector<Variable>& v) { return softmax(v[0], 0, m315); }, x,
                   "masked softmax dim 0");
  expect_gradcheck([&](const std::vector<Variable>& v) { return softmax(v[0], 1, m315); }, x,
                   "masked softmax dim 1");
  expect_gradcheck(
      [&](const std::vector<Variable>& v) { return keep(log_softmax(v[0], -1, m45), full45); }, x,
      "masked log_softmax dim -1");
  expect_gradcheck(
      [&](const std::vector<Variable>& v) { return keep(log_softmax(v[0], 0, m315), full315); }, x,
      "masked log_softmax dim 0");
}

// ---- values ----------------------------------------------------------------------------------

TEST(ReduceGrad, SumMeanValuesAndShapes) {
  const Variable x(vec({1, 2, 3, 4, 5, 6}, {2, 3}), true);
  Variable s = sum(x, {1});
  EXPECT_EQ(s.sizes(), (Shape{2}));
  expect_near(s.data().to_vector<double>(), {6, 15});
  EXPECT_EQ(sum(x, {1}, true).sizes(), (Shape{2, 1}));
  Variable all = sum(x);
  EXPECT_EQ(all.sizes(), (Shape{}));
  EXPECT_EQ(all.data().item(), 21);
  EXPECT_EQ(sum(x, {}, true).sizes(), (Shape{1, 1}));
  expect_near(mean(x, {0}).data().to_vector<double>(), {2.5, 3.5, 4.5});
  EXPECT_EQ(mean(x, {-2, 1}).data().item(), 3.5);

  mean(x, {1}).backward(vec({3, 6}, {2}));
  expect_near(x.grad().to_vector<double>(), {1, 1, 1, 2, 2, 2});
}

TEST(ReduceGrad, MaxMinValuesIndicesAndGradient) {
  const Variable x(vec({1, 7, 3, 9, 2, 4}, {2, 3}), true);
  auto [mx, imx] = max(x, 1);
  EXPECT_EQ(mx.sizes(), (Shape{2}));
  expect_near(mx.data().to_vector<double>(), {7, 9});
  EXPECT_EQ(imx.dtype(), DType::i64);
  EXPECT_EQ(imx.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  auto [mn, imn] = min(x, 0, /*keepdim=*/true);
  EXPECT_EQ(mn.sizes(), (Shape{1, 3}));
  EXPECT_EQ(imn.sizes(), (Shape{1, 3}));
  expect_near(mn.data().to_vector<double>(), {1, 2, 3});
  EXPECT_EQ(imn.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0}));

  mx.backward(vec({10, 20}, {2}));
  expect_near(x.grad().to_vector<double>(), {0, 10, 0, 20, 0, 0});
  x.zero_grad();
  mn.backward(vec({1, 2, 3}, {1, 3}));
  expect_near(x.grad().to_vector<double>(), {1, 0, 3, 0, 2, 0});
}

TEST(ReduceGrad, VarStdValues) {
  const Variable x(vec({1, 2, 3, 4}, {4}), true);
  EXPECT_NEAR(var(x).data().item(), 5.0 / 3, 1e-12);
  EXPECT_NEAR(var(x, {}, 0).data().item(), 1.25, 1e-12);
  EXPECT_NEAR(std(x, {0}, 0).data().item(), std::sqrt(1.25), 1e-12);
  // d var / dx = 2 (x - mean) / (n - 1) = [-1, -1/3, 1/3, 1].
  var(x).backward();
  expect_near(x.grad().to_vector<double>(), {-1, -1.0 / 3, 1.0 / 3, 1});

  // A constant row: std = 0 and its gradient is 0 (not NaN).
  const Variable c(vec({2, 2, 2, 1, 3, 5}, {2, 3}), true);
  Variable s = std(c, {1});
  expect_near(s.data().to_vector<double>(), {0, 2});
  s.backward(vec({1, 1}, {2}));
  expect_near(c.grad().to_vector<double>(), {0, 0, 0, -0.5, 0, 0.5});
}

TEST(ReduceGrad, NormValuesAndSpecialPoints) {
  const Variable x(vec({3, -4}, {2}), true);
  EXPECT_NEAR(norm(x).data().item(), 5, 1e-12);
  EXPECT_NEAR(norm(x, 1).data().item(), 7, 1e-12);
  EXPECT_NEAR(norm(x, kInf).data().item(), 4, 1e-12);
  EXPECT_NEAR(norm(x, 3).data().item(), std::cbrt(91.0), 1e-12);
  norm(x).backward();
  expect_near(x.grad().to_vector<double>(), {0.6, -0.8});
  x.zero_grad();
  norm(x, 1).backward();
  expect_near(x.grad().to_vector<double>(), {1, -1});

  // inf-norm with a tie: the gradient is shared.
  const Variable t(vec({3, -3, 1}, {3}), true);
  norm(t, kInf).backward();
  expect_near(t.grad().to_vector<double>(), {0.5, -0.5, 0});

  // The zero vector: gradient 0 for every p.
  for (double p : {1.0, 2.0, 3.0, 0.5, kInf}) {
    const Variable z(Tensor::zeros({3}, DType::f64), true);
    norm(z, p).backward();
    expect_near(z.grad().to_vector<double>(), {0, 0, 0});
  }
  // p < 1 with one zero entry: that entry gets 0.
  const Variable h(vec({0, 4}, {2}), true);
  norm(h, 0.5).backward();
  const std::vector<double> g = h.grad().to_vector<double>();
  EXPECT_EQ(g[0], 0);
  EXPECT_NEAR(g[1], 1, 1e-12);  // (sum sqrt|x|)^2 = (0 + 2)^2, d/dx1 = 2 * 2 * 1/(2 * 2) = 1
}

TEST(ReduceGrad, SoftmaxValues) {
  const Variable x(vec({0, std::log(3.0), 1, 1}, {2, 2}), true);
  expect_near(softmax(x, 1).data().to_vector<double>(), {0.25, 0.75, 0.5, 0.5});
  expect_near(log_softmax(x, 1).data().to_vector<double>(),
              {std::log(0.25), std::log(0.75), std::log(0.5), std::log(0.5)});
  // Softmax sums to one along dim: its gradient against a constant dy is zero.
  softmax(x, 1).backward(Tensor::ones({2, 2}, DType::f64));
  expect_near(x.grad().to_vector<double>(), {0, 0, 0, 0});
}

TEST(ReduceGrad, MaskedSoftmaxFullyMaskedRowHasZeroGradient) {
  const Variable x(vec({1, 2, 3, 4, 5, 6}, {2, 3}), true);
  const Tensor m = mask_of({1, 0, 1, 0, 0, 0}, {2, 3});
  Variable y = softmax(x, 1, m);
  const double e = std::exp(2.0);
  expect_near(y.data().to_vector<double>(), {1 / (1 + e), 0, e / (1 + e), 0, 0, 0});
  y.backward(vec({1, 2, 3, 4, 5, 6}, {2, 3}));
  const std::vector<double> g = x.grad().to_vector<double>();
  EXPECT_EQ(g[1], 0);
  for (size_t i = 3; i < 6; ++i) EXPECT_EQ(g[i], 0) << i;
  // Row 0: y0 (dy0 - <dy, y>) with dy over the kept positions {1, 3}.
  const double y0 = 1 / (1 + e), y2 = e / (1 + e), dot = 1 * y0 + 3 * y2;
  EXPECT_NEAR(g[0], y0 * (1 - dot), 1e-12);
  EXPECT_NEAR(g[2], y2 * (3 - dot), 1e-12);

  const Variable x2(vec({1, 2, 3, 4, 5, 6}, {2, 3}), true);
  Variable ly = log_softmax(x2, 1, m);
  const std::vector<double> lv = ly.data().to_vector<double>();
  EXPECT_NEAR(lv[0], std::log(y0), 1e-12);
  EXPECT_TRUE(std::isinf(lv[1]) && lv[1] < 0);
  for (size_t i = 3; i < 6; ++i) EXPECT_TRUE(std::isinf(lv[i]) && lv[i] < 0) << i;
  ly.backward(vec({1, 2, 3, 4, 5, 6}, {2, 3}));
  const std::vector<double> lg = x2.grad().to_vector<double>();
  for (size_t i : {1, 3, 4, 5}) EXPECT_EQ(lg[i], 0) << i;
  EXPECT_NEAR(lg[0], 1 - y0 * 4, 1e-12);  // dy - softmax * sum(dy over kept)
  EXPECT_NEAR(lg[2], 3 - y2 * 4, 1e-12);
}

TEST(ReduceGrad, ConstantsRecordNothing) {
  const Variable x(vec({1, 2, 3}, {3}));
  EXPECT_FALSE(sum(x).grad_fn());
  EXPECT_FALSE(max(x, 0).first.grad_fn());
  EXPECT_FALSE(softmax(x, 0).grad_fn());
  const Variable w(vec({1, 2, 3}, {3}), true);
  NoGradGuard ng;
  EXPECT_FALSE(norm(w).grad_fn());
  EXPECT_FALSE(std(w).grad_fn());
}

TEST(ReduceGrad, NodeNames) {
  const Variable x(vec({1, 2, 3, 4}, {2, 2}), true);
  EXPECT_STREQ(sum(x).grad_fn()->name(), "Sum");
  EXPECT_STREQ(mean(x).grad_fn()->name(), "Mean");
  EXPECT_STREQ(max(x, 0).first.grad_fn()->name(), "Max");
  EXPECT_STREQ(min(x, 0).first.grad_fn()->name(), "Min");
  EXPECT_STREQ(var(x).grad_fn()->name(), "Var");
  EXPECT_STREQ(std(x).grad_fn()->name(), "Std");
  EXPECT_STREQ(norm(x).grad_fn()->name(), "Norm");
  EXPECT_STREQ(softmax(x, 0).grad_fn()->name(), "Softmax");
  EXPECT_STREQ(log_softmax(x, 0).grad_fn()->name(), "LogSoftmax");
}

// f32 on `device` (the optimised variants) against the f64 reference, forward and backward.
void check_f32_against_f64(Device device) {
  const Tensor x64 = kernels::random_tensor({5, 7, 3}, DType::f64, 11, -2, 2);
  const Tensor dy64 = kernels::random_tensor({5, 3}, DType::f64, 12, -1, 1);
  const Tensor m64 = mask_of({1, 0, 1, 1, 1, 0, 1}, {7, 1});
  const Tensor all_masked = Tensor::zeros({5, 1, 3}, DType::boolean);
  using Op = std::function<Variable(const Variable&, const Tensor&)>;
  const std::vector<std::pair<std::string, Op>> ops = {
      {"sum", [](const Variable& v, const Tensor&) { return sum(v, {1}); }},
      {"mean", [](const Variable& v, const Tensor&) { return mean(v, {1}); }},
      {"max", [](const Variable& v, const Tensor&) { return max(v, 1).first; }},
      {"min", [](const Variable& v, const Tensor&) { return min(v, 1).first; }},
      {"var", [](const Variable& v, const Tensor&) { return var(v, {1}); }},
      {"std", [](const Variable& v, const Tensor&) { return std(v, {1}); }},
      {"norm3", [](const Variable& v, const Tensor&) { return norm(v, 3, {1}); }},
      {"norm2", [](const Variable& v, const Tensor&) { return norm(v, 2, {1}); }},
      {"norm_inf", [](const Variable& v, const Tensor&) { return norm(v, kInf, {1}); }},
      {"softmax", [](const Variable& v, const Tensor& m) { return sum(softmax(v, 1, m), {1}); }},
      {"log_softmax",
       [](const Variable& v, const Tensor&) { return mean(log_softmax(v, 1), {1}); }},
      {"softmax_all_masked",
       [&](const Variable& v, const Tensor&) {
         return sum(softmax(v, 1, all_masked.to(v.device())), {1});
       }},
  };
  for (const auto& [name, op] : ops) {
    std::vector<double> out[2], grad[2];
    for (int k = 0; k < 2; ++k) {
      const DType t = k == 0 ? DType::f64 : DType::f32;
      const Device d = k == 0 ? kCPU : device;
      const Variable x(x64.to(t).to(d), true);
      Variable y = op(x, m64.to(d));
      y.backward(dy64.to(t).to(d));
      out[k] = y.data().to_vector<double>();
      grad[k] = x.grad().to_vector<double>();
    }
    for (size_t i = 0; i < out[0].size(); ++i)
      EXPECT_NEAR(out[1][i], out[0][i], 1e-4 * (1 + std::fabs(out[0][i])))
          << name << " on " << device.str() << " y " << i;
    for (size_t i = 0; i < grad[0].size(); ++i)
      EXPECT_NEAR(grad[1][i], grad[0][i], 1e-4 * (1 + std::fabs(grad[0][i])))
          << name << " on " << device.str() << " dx " << i;
  }
}

TEST(ReduceGrad, Float32MatchesFloat64) { check_f32_against_f64(kCPU); }

TEST(ReduceGrad, CudaFloat32MatchesFloat64) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  check_f32_against_f64(cuda_device(0));
}

}  // namespace
}  // namespace aim::autograd
