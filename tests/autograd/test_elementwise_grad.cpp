// Elementwise functions (autograd/functions/elementwise.h): finite-difference gradchecks of every
// function (f64, cpu.ref) on small odd shapes, broadcasting of either or both sides, transposed
// inputs, shared inputs, and forward/gradient values against hand-computed numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/shape.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "kernels/testing.h"

namespace aim::autograd {
namespace {

using Fn = std::function<Variable(const std::vector<Variable>&)>;
using Fn1 = std::function<Variable(const Variable&)>;
using Fn2 = std::function<Variable(const Variable&, const Variable&)>;

// f64 values uniform in [lo, hi), requiring grad.
Variable uniform(const Shape& s, uint64_t seed, double lo = -1, double hi = 1,
                 const std::string& name = "x") {
  return Variable(kernels::random_tensor(s, DType::f64, seed, lo, hi), true, name);
}

// f64 values with |v| in [0.2, 1) and random signs: away from the kinks at 0.
Variable away_from_zero(const Shape& s, uint64_t seed, const std::string& name = "x") {
  std::vector<double> mag = kernels::random_tensor(s, DType::f64, seed, 0.2, 1).to_vector<double>();
  const std::vector<double> sgn =
      kernels::random_tensor(s, DType::f64, seed + 1000, -1, 1).to_vector<double>();
  for (size_t i = 0; i < mag.size(); ++i)
    if (sgn[i] < 0) mag[i] = -mag[i];
  return Variable(Tensor::from_vector<double>(mag, s), true, name);
}

Variable f64(const std::vector<double>& v, const Shape& s, bool requires_grad = true) {
  return Variable(Tensor::from_vector<double>(v, s), requires_grad);
}
Variable f32(const std::vector<float>& v, const Shape& s, bool requires_grad = false) {
  return Variable(Tensor::from_vector<float>(v, s), requires_grad);
}

::testing::AssertionResult grads_ok(const Fn& f, const std::vector<Variable>& inputs) {
  const GradcheckResult r = gradcheck(f, inputs);
  if (r.ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << r.message;
}

Fn unary_fn(Fn1 f) {
  return [f](const std::vector<Variable>& v) { return f(v[0]); };
}
Fn binary_fn(Fn2 f) {
  return [f](const std::vector<Variable>& v) { return f(v[0], v[1]); };
}

// ---- unary ----------------------------------------------------------------------------------

struct UnaryCase {
  const char* name;
  Fn1 f;
  double lo, hi;      // input domain
  bool kink_at_zero;  // inputs must stay away from 0
};

std::vector<UnaryCase> unary_cases() {
  return {
      {"neg", [](const Variable& x) { return neg(x); }, -2, 2, false},
      {"exp", [](const Variable& x) { return exp(x); }, -2, 2, false},
      {"log", [](const Variable& x) { return log(x); }, 0.3, 2, false},
      {"sqrt", [](const Variable& x) { return sqrt(x); }, 0.3, 2, false},
      {"rsqrt", [](const Variable& x) { return rsqrt(x); }, 0.3, 2, false},
      {"abs", [](const Variable& x) { return abs(x); }, 0, 0, true},
      {"relu", [](const Variable& x) { return relu(x); }, 0, 0, true},
      {"gelu", [](const Variable& x) { return gelu(x); }, -3, 3, false},
      {"gelu_tanh", [](const Variable& x) { return gelu(x, true); }, -3, 3, false},
      {"sigmoid", [](const Variable& x) { return sigmoid(x); }, -3, 3, false},
      {"tanh", [](const Variable& x) { return tanh(x); }, -2, 2, false},
      {"square", [](const Variable& x) { return square(x); }, -2, 2, false},
      {"leaky_relu", [](const Variable& x) { return leaky_relu(x, 0.1); }, 0, 0, true},
      {"leaky_relu_default", [](const Variable& x) { return leaky_relu(x); }, 0, 0, true},
  };
}

TEST(ElementwiseGrad, UnaryGradcheck) {
  uint64_t seed = 1;
  for (const UnaryCase& c : unary_cases()) {
    SCOPED_TRACE(c.name);
    for (const Shape& s : {Shape{3, 5}, Shape{2, 3, 5}, Shape{7}}) {
      const Variable x =
          c.kink_at_zero ? away_from_zero(s, seed++) : uniform(s, seed++, c.lo, c.hi);
      EXPECT_TRUE(grads_ok(unary_fn(c.f), {x}));
    }
  }
}

TEST(ElementwiseGrad, UnaryOnTransposedInput) {
  uint64_t seed = 100;
  for (const UnaryCase& c : unary_cases()) {
    SCOPED_TRACE(c.name);
    const Variable x =
        c.kink_at_zero ? away_from_zero({3, 5}, seed++) : uniform({3, 5}, seed++, c.lo, c.hi);
    const Fn1 f = c.f;
    EXPECT_TRUE(
        grads_ok([f](const std::vector<Variable>& v) { return f(transpose(v[0], 0, 1)); }, {x}));
  }
}

TEST(ElementwiseGrad, ClampGradcheck) {
  // Away from the bounds -0.5 and 0.5; inside, below and above.
  const Variable x = f64(
      {-0.9, -0.3, 0.1, 0.45, 0.7, -0.6, 0.2, 1.3, -0.45, 0.0, 0.6, -2.0, 0.33, -0.1, 0.9}, {3, 5});
  EXPECT_TRUE(grads_ok(unary_fn([](const Variable& v) { return clamp(v, -0.5, 0.5); }), {x}));
  EXPECT_TRUE(grads_ok(
      unary_fn([](const Variable& v) { return clamp(transpose(v, 0, 1), -0.5, 0.5); }), {x}));
}

TEST(ElementwiseGrad, UnaryValues) {
  const Variable x = f32({-2, -0.5, 0, 1.5, 4}, {5});
  EXPECT_EQ(relu(x).data().to_vector<float>(), (std::vector<float>{0, 0, 0, 1.5f, 4}));
  EXPECT_EQ(abs(x).data().to_vector<float>(), (std::vector<float>{2, 0.5f, 0, 1.5f, 4}));
  EXPECT_EQ(neg(x).data().to_vector<float>(), (std::vector<float>{2, 0.5f, 0, -1.5f, -4}));
  EXPECT_EQ(square(x).data().to_vector<float>(), (std::vector<float>{4, 0.25f, 0, 2.25f, 16}));
  EXPECT_EQ(leaky_relu(x, 0.5).data().to_vector<float>(),
            (std::vector<float>{-1, -0.25f, 0, 1.5f, 4}));
  EXPECT_EQ(clamp(x, -1, 2).data().to_vector<float>(), (std::vector<float>{-1, -0.5f, 0, 1.5f, 2}));
  const Variable p = f32({0.25f, 1, 4}, {3});
  EXPECT_EQ(sqrt(p).data().to_vector<float>(), (std::vector<float>{0.5f, 1, 2}));
  EXPECT_EQ(rsqrt(p).data().to_vector<float>(), (std::vector<float>{2, 1, 0.5f}));
  EXPECT_EQ(sigmoid(f32({0}, {1})).data().item(), 0.5);
  EXPECT_EQ(gelu(f32({0}, {1})).data().item(), 0.0);

  // Gradients at the kinks, as PyTorch: relu'(0) = abs'(0) = 0, clamp passes at its bounds.
  const Variable k = f64({-1, 0, 2}, {3});
  relu(k).backward(Tensor::ones({3}, DType::f64));
  EXPECT_EQ(k.grad().to_vector<double>(), (std::vector<double>{0, 0, 1}));
  k.zero_grad();
  abs(k).backward(Tensor::ones({3}, DType::f64));
  EXPECT_EQ(k.grad().to_vector<double>(), (std::vector<double>{-1, 0, 1}));
  const Variable c = f64({-1, -0.5, 0.5, 1}, {4});
  clamp(c, -0.5, 0.5).backward(Tensor::ones({4}, DType::f64));
  EXPECT_EQ(c.grad().to_vector<double>(), (std::vector<double>{0, 1, 1, 0}));
}

// ---- binary ---------------------------------------------------------------------------------

struct BinaryCase {
  const char* name;
  Fn2 f;
  double alo, ahi, blo, bhi;
  bool b_away_from_zero;  // div
};

std::vector<BinaryCase> binary_cases() {
  return {
      {"add", [](const Variable& a, const Variable& b) { return add(a, b); }, -2, 2, -2, 2, false},
      {"sub", [](const Variable& a, const Variable& b) { return sub(a, b); }, -2, 2, -2, 2, false},
      {"mul", [](const Variable& a, const Variable& b) { return mul(a, b); }, -2, 2, -2, 2, false},
      {"div", [](const Variable& a, const Variable& b) { return div(a, b); }, -2, 2, 0, 0, true},
      {"pow", [](const Variable& a, const Variable& b) { return pow(a, b); }, 0.5, 2, -1.5, 1.5,
       false},
      {"maximum", [](const Variable& a, const Variable& b) { return maximum(a, b); }, -2, 2, -2, 2,
       false},
      {"minimum", [](const Variable& a, const Variable& b) { return minimum(a, b); }, -2, 2, -2, 2,
       false},
  };
}

Variable make_b(const BinaryCase& c, const Shape& s, uint64_t seed) {
  return c.b_away_from_zero ? away_from_zero(s, seed, "b") : uniform(s, seed, c.blo, c.bhi, "b");
}

TEST(ElementwiseGrad, BinaryGradcheckShapes) {
  // Same shape, both sides broadcast, one side broadcast (leading dims, size-1 dims), a scalar.
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{3, 5}, {3, 5}},    {{3, 1}, {1, 4}}, {{2, 3, 5}, {5}},      {{5}, {2, 3, 5}},
      {{2, 3, 5}, {3, 1}}, {{3, 5}, {}},     {{1, 3, 1}, {2, 1, 5}}};
  uint64_t seed = 200;
  for (const BinaryCase& c : binary_cases()) {
    for (const auto& [sa, sb] : shapes) {
      SCOPED_TRACE(std::string(c.name) + " " + to_string(sa) + " . " + to_string(sb));
      const Variable a = uniform(sa, seed++, c.alo, c.ahi, "a");
      const Variable b = make_b(c, sb, seed++);
      EXPECT_TRUE(grads_ok(binary_fn(c.f), (std::vector<Variable>{a, b})));
    }
  }
}

TEST(ElementwiseGrad, BinaryGradcheckTransposedInputs) {
  uint64_t seed = 300;
  for (const BinaryCase& c : binary_cases()) {
    SCOPED_TRACE(c.name);
    const Variable a = uniform({5, 3}, seed++, c.alo, c.ahi, "a");
    const Variable b = make_b(c, {3, 5}, seed++);
    const Fn2 f = c.f;
    // a transposed against a contiguous b, and both transposed.
    EXPECT_TRUE(
        grads_ok([f](const std::vector<Variable>& v) { return f(transpose(v[0], 0, 1), v[1]); },
                 (std::vector<Variable>{a, b})));
    EXPECT_TRUE(grads_ok(
        [f](const std::vector<Variable>& v) {
          return f(transpose(v[0], 0, 1), transpose(transpose(v[1], 0, 1), 0, 1));
        },
        (std::vector<Variable>{a, b})));
    // Transposed and broadcast: [3, 5] . [5, 1]^T = [1, 5].
    const Variable row = make_b(c, {5, 1}, seed++);
    EXPECT_TRUE(grads_ok(
        [f](const std::vector<Variable>& v) {
          return f(transpose(v[0], 0, 1), transpose(v[1], 0, 1));
        },
        (std::vector<Variable>{a, row})));
  }
}

TEST(ElementwiseGrad, BinaryOneSideConstant) {
  uint64_t seed = 400;
  for (const BinaryCase& c : binary_cases()) {
    SCOPED_TRACE(c.name);
    const Variable a = uniform({3, 4}, seed++, c.alo, c.ahi, "a");
    const Variable b = make_b(c, {4}, seed++);
    const Variable a_const(a.data().clone()), b_const(b.data().clone());
    EXPECT_TRUE(grads_ok(binary_fn(c.f), (std::vector<Variable>{a, b_const})));
    EXPECT_FALSE(b_const.grad().defined());
    EXPECT_TRUE(grads_ok(binary_fn(c.f), (std::vector<Variable>{a_const, b})));
    EXPECT_FALSE(a_const.grad().defined());
  }
}

TEST(ElementwiseGrad, SharedInput) {
  const Variable x = uniform({3, 5}, 500, -2, 2);
  EXPECT_TRUE(grads_ok([](const std::vector<Variable>& v) { return mul(v[0], v[0]); }, {x}));
  EXPECT_TRUE(grads_ok(
      [](const std::vector<Variable>& v) { return div(v[0], add(square(v[0]), 1.0)); }, {x}));
  EXPECT_TRUE(grads_ok(
      [](const std::vector<Variable>& v) {
        return maximum(v[0], mul(transpose(reshape(v[0], {5, 3}), 0, 1), 0.5));
      },
      {x}));
  // d(x * x)/dx = 2x.
  const Variable y = f64({1, -2, 3}, {3});
  mul(y, y).backward(Tensor::ones({3}, DType::f64));
  EXPECT_EQ(y.grad().to_vector<double>(), (std::vector<double>{2, -4, 6}));
}

TEST(ElementwiseGrad, BinaryValues) {
  // [3, 1] + [1, 4] -> [3, 4].
  const Variable a = f32({1, 2, 3}, {3, 1});
  const Variable b = f32({10, 20, 30, 40}, {1, 4});
  const Variable s = add(a, b);
  EXPECT_EQ(s.sizes(), (Shape{3, 4}));
  EXPECT_EQ(s.data().to_vector<float>(),
            (std::vector<float>{11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43}));
  EXPECT_EQ(sub(a, b).data().to_vector<float>()[5], 2 - 20);
  EXPECT_EQ(mul(a, b).data().to_vector<float>()[11], 120);
  EXPECT_EQ(div(b, a).data().to_vector<float>()[4], 5);
  EXPECT_EQ(pow(f32({2, 3}, {2}), f32({3, 2}, {2})).data().to_vector<float>(),
            (std::vector<float>{8, 9}));
  EXPECT_EQ(maximum(f32({1, 5, 3}, {3}), f32({4}, {1})).data().to_vector<float>(),
            (std::vector<float>{4, 5, 4}));
  EXPECT_EQ(minimum(f32({1, 5, 3}, {3}), f32({4}, {1})).data().to_vector<float>(),
            (std::vector<float>{1, 4, 3}));

  // Gradients of the broadcast product: d/da = row sums of b, d/db = column sums of a.
  const Variable ga = f64({1, 2, 3}, {3, 1});
  const Variable gb = f64({10, 20, 30, 40}, {1, 4});
  mul(ga, gb).backward(Tensor::ones({3, 4}, DType::f64));
  EXPECT_EQ(ga.grad().to_vector<double>(), (std::vector<double>{100, 100, 100}));
  EXPECT_EQ(gb.grad().to_vector<double>(), (std::vector<double>{6, 6, 6, 6}));

  // d(a / b): 1 / b and -a / b^2.
  const Variable na = f64({3}, {1});
  const Variable nb = f64({2}, {1});
  div(na, nb).backward();
  EXPECT_EQ(na.grad().item(), 0.5);
  EXPECT_EQ(nb.grad().item(), -0.75);

  // sub: d/db = -1, summed over the broadcast dim.
  const Variable sa = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  const Variable sb = f64({1, 1, 1}, {3});
  sub(sa, sb).backward(Tensor::ones({2, 3}, DType::f64));
  EXPECT_EQ(sb.grad().to_vector<double>(), (std::vector<double>{-2, -2, -2}));
}

TEST(ElementwiseGrad, MaximumMinimumTiesSplit) {
  const Variable a = f64({1, 2, 3}, {3});
  const Variable b = f64({1, 0, 5}, {3});
  maximum(a, b).backward(Tensor::ones({3}, DType::f64));
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0.5, 1, 0}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{0.5, 0, 1}));
  a.zero_grad();
  b.zero_grad();
  minimum(a, b).backward(Tensor::ones({3}, DType::f64));
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0.5, 0, 1}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{0.5, 1, 0}));
  // A broadcast tie: b [1] ties with two elements of a.
  const Variable c = f64({2, 2, 1}, {3});
  const Variable d = f64({2}, {1});
  maximum(c, d).backward(Tensor::ones({3}, DType::f64));
  EXPECT_EQ(c.grad().to_vector<double>(), (std::vector<double>{0.5, 0.5, 0}));
  EXPECT_EQ(d.grad().to_vector<double>(), (std::vector<double>{2}));
}

TEST(ElementwiseGrad, PowGradientAtZeroMatchesTorch) {
  // torch.pow: d/da = 0 where b == 0; d/db = 0 where a == 0 and b >= 0.
  const Variable a = f64({0, 2, 0, 0}, {4});
  const Variable b = f64({0, 3, 2, -1}, {4});
  pow(a, b).backward(Tensor::ones({4}, DType::f64));
  const std::vector<double> da = a.grad().to_vector<double>();
  const std::vector<double> db = b.grad().to_vector<double>();
  EXPECT_EQ(da[0], 0);
  EXPECT_EQ(da[1], 12);
  EXPECT_EQ(da[2], 0);
  EXPECT_EQ(db[0], 0);
  EXPECT_NEAR(db[1], 8 * std::log(2.0), 1e-12);
  EXPECT_EQ(db[2], 0);
  EXPECT_TRUE(std::isinf(db[3]));  // 0^-1 * log(0) = inf * -inf, as PyTorch
}

// ---- scalar ---------------------------------------------------------------------------------

TEST(ElementwiseGrad, ScalarGradcheck) {
  const Variable x = uniform({3, 5}, 600, 0.3, 2);
  EXPECT_TRUE(grads_ok(unary_fn([](const Variable& v) { return add(v, 0.7); }), {x}));
  EXPECT_TRUE(grads_ok(unary_fn([](const Variable& v) { return mul(v, -1.3); }), {x}));
  for (double e : {2.0, 0.5, -1.0, 3.0, 1.7, -0.5, 0.0, 1.0, -2.5}) {
    SCOPED_TRACE(e);
    EXPECT_TRUE(grads_ok(unary_fn([e](const Variable& v) { return pow(v, e); }), {x}));
    EXPECT_TRUE(
        grads_ok(unary_fn([e](const Variable& v) { return pow(transpose(v, 0, 1), e); }), {x}));
  }
}

TEST(ElementwiseGrad, ScalarValues) {
  const Variable x = f32({1, 2, 4}, {3});
  EXPECT_EQ(add(x, 0.5).data().to_vector<float>(), (std::vector<float>{1.5f, 2.5f, 4.5f}));
  EXPECT_EQ(mul(x, -2).data().to_vector<float>(), (std::vector<float>{-2, -4, -8}));
  EXPECT_EQ(pow(x, 2).data().to_vector<float>(), (std::vector<float>{1, 4, 16}));
  EXPECT_EQ(pow(x, 0.5).data().to_vector<float>()[2], 2);
  EXPECT_EQ(pow(x, -1).data().to_vector<float>(), (std::vector<float>{1, 0.5f, 0.25f}));
  EXPECT_EQ(pow(x, 3).data().to_vector<float>(), (std::vector<float>{1, 8, 64}));
  EXPECT_EQ(pow(x, 0).data().to_vector<float>(), (std::vector<float>{1, 1, 1}));

  const Variable g = f64({1, 2, 4}, {3});
  pow(g, 3).backward(Tensor::ones({3}, DType::f64));
  EXPECT_EQ(g.grad().to_vector<double>(), (std::vector<double>{3, 12, 48}));
  g.zero_grad();
  pow(g, 0).backward(Tensor::ones({3}, DType::f64));
  EXPECT_EQ(g.grad().to_vector<double>(), (std::vector<double>{0, 0, 0}));
  g.zero_grad();
  mul(g, 2.5).backward(Tensor::ones({3}, DType::f64));
  EXPECT_EQ(g.grad().to_vector<double>(), (std::vector<double>{2.5, 2.5, 2.5}));
}

TEST(ElementwiseGrad, SixteenBitScalarsKeepPrecision) {
  // 1000 ** (1/3) rounds to 10 in f16; with the exponent rounded to f16 (0.33325) it would
  // give 9.9922.
  const Variable x(Tensor::from_vector<float>({1000, 8}, {2}).to(DType::f16));
  const std::vector<float> y = pow(x, 1.0 / 3).data().to_vector<float>();
  EXPECT_EQ(y[0], 10);
  EXPECT_EQ(y[1], 2);
  // 100 * 0.3 = 30 in bf16; with 0.3 rounded to bf16 (0.30078) it would give 30.125.
  const Variable t(Tensor::from_vector<float>({100, 10}, {2}).to(DType::bf16));
  EXPECT_EQ(mul(t, 0.3).data().to_vector<float>()[0], 30);
  EXPECT_EQ(add(t, 0.25).data().to_vector<float>()[1], 10.25f);
}

// ---- prelu, where ---------------------------------------------------------------------------

TEST(ElementwiseGrad, PreluGradcheck) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3, 5}, {3}}, {{4, 3}, {3}}, {{2, 3, 5}, {1}}, {{5}, {5}}, {{2, 3, 2, 3}, {3}}};
  uint64_t seed = 700;
  for (const auto& [sx, sw] : shapes) {
    SCOPED_TRACE(to_string(sx) + " weight " + to_string(sw));
    const Variable x = away_from_zero(sx, seed++, "x");
    const Variable w = uniform(sw, seed++, -0.5, 0.5, "weight");
    EXPECT_TRUE(
        grads_ok(binary_fn([](const Variable& a, const Variable& b) { return prelu(a, b); }),
                 (std::vector<Variable>{x, w})));
  }
  // Transposed x: [3, 2] viewed as [2, 3].
  const Variable x = away_from_zero({3, 2}, seed++, "x");
  const Variable w = uniform({3}, seed++, -0.5, 0.5, "weight");
  EXPECT_TRUE(
      grads_ok([](const std::vector<Variable>& v) { return prelu(transpose(v[0], 0, 1), v[1]); },
               (std::vector<Variable>{x, w})));
}

TEST(ElementwiseGrad, PreluValuesAndWeightAccumulates) {
  // x [2, 2]: channel 0 slope 0.5, channel 1 slope 0.25.
  const Variable x = f64({-2, -4, 3, -8}, {2, 2});
  const Variable w = f64({0.5, 0.25}, {2});
  const Variable y = prelu(x, w);
  EXPECT_EQ(y.data().to_vector<double>(), (std::vector<double>{-1, -1, 3, -2}));
  EXPECT_STREQ(y.grad_fn()->name(), "Prelu");
  y.backward(Tensor::ones({2, 2}, DType::f64));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0.5, 0.25, 1, 0.25}));
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{-2, -12}));
  prelu(x, w).backward(Tensor::ones({2, 2}, DType::f64));  // parameter gradients accumulate
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{-4, -24}));
  EXPECT_THROW(prelu(x, f64({1, 2, 3}, {3})), Error);
}

TEST(ElementwiseGrad, WhereGradcheck) {
  const Tensor cond = kernels::random_tensor({3, 1}, DType::boolean, 800);
  const Tensor cond_full = kernels::random_tensor({3, 4}, DType::boolean, 801);
  const Variable a = uniform({3, 4}, 802, -1, 1, "a");
  const Variable b = uniform({4}, 803, -1, 1, "b");
  for (const Tensor& c : {cond, cond_full}) {
    EXPECT_TRUE(grads_ok([c](const std::vector<Variable>& v) { return where(c, v[0], v[1]); },
                         (std::vector<Variable>{a, b})));
  }
  const Variable t = uniform({4, 3}, 804, -1, 1, "t");
  EXPECT_TRUE(grads_ok(
      [cond](const std::vector<Variable>& v) { return where(cond, transpose(v[0], 0, 1), v[1]); },
      (std::vector<Variable>{t, b})));
}

TEST(ElementwiseGrad, WhereValues) {
  const Tensor cond = Tensor::from_vector<uint8_t>({1, 0}, {2, 1}).to(DType::boolean);
  const Variable a = f64({1, 2, 3}, {3});
  const Variable b = f64({-1}, {1});
  const Variable y = where(cond, a, b);
  EXPECT_EQ(y.data().to_vector<double>(), (std::vector<double>{1, 2, 3, -1, -1, -1}));
  y.backward(Tensor::ones({2, 3}, DType::f64));
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{3}));
}

// ---- comparisons, recording -----------------------------------------------------------------

TEST(ElementwiseGrad, Comparisons) {
  const Variable a = f32({1, 2, 3}, {3}, true);
  const Variable b = f32({2}, {1}, true);
  auto bools = [](const Tensor& t) {
    EXPECT_EQ(t.dtype(), DType::boolean);
    std::vector<int> r;
    for (float v : t.to_vector<float>()) r.push_back(int(v));
    return r;
  };
  EXPECT_EQ(bools(eq(a, b)), (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(bools(ne(a, b)), (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(bools(lt(a, b)), (std::vector<int>{1, 0, 0}));
  EXPECT_EQ(bools(le(a, b)), (std::vector<int>{1, 1, 0}));
  EXPECT_EQ(bools(gt(a, b)), (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(bools(ge(a, b)), (std::vector<int>{0, 1, 1}));
}

TEST(ElementwiseGrad, RecordsOnlyWhenNeeded) {
  const Variable c = f32({1, 2}, {2});
  EXPECT_FALSE(mul(c, c).grad_fn());
  EXPECT_FALSE(exp(c).grad_fn());
  const Variable x = f32({1, 2}, {2}, true);
  EXPECT_STREQ(mul(x, c).grad_fn()->name(), "Mul");
  EXPECT_STREQ(sub(c, x).grad_fn()->name(), "Sub");
  EXPECT_STREQ(gelu(x).grad_fn()->name(), "Gelu");
  NoGradGuard ng;
  EXPECT_FALSE(mul(x, c).grad_fn());
  EXPECT_FALSE(relu(x).grad_fn());
}

TEST(ElementwiseGrad, MismatchedInputsThrow) {
  const Variable a = f32({1, 2, 3}, {3});
  EXPECT_THROW(add(a, f64({1, 2, 3}, {3})), Error);
  EXPECT_THROW(mul(a, f32({1, 2}, {2})), Error);
}

}  // namespace
}  // namespace aim::autograd
