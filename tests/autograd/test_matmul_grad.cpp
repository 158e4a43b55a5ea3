// matmul and linear (autograd/functions/matmul.h): gradcheck over every transpose combination,
// 2-D, batched and shared-operand batched calls, strided inputs, linear with 1-D/2-D/3-D x with
// and without bias; forward values by hand; parameter gradients accumulate across backwards.
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/functions/matmul.h"
#include "autograd/functions/shape.h"
#include "autograd/gradcheck.h"
#include "kernels/registry.h"
#include "kernels/testing.h"

namespace aim::autograd {
namespace {

using Fn = std::function<Variable(const std::vector<Variable>&)>;

Variable param(const Shape& s, uint64_t seed, const char* name, bool requires_grad = true) {
  return Variable(kernels::random_tensor(s, DType::f64, seed, -1, 1), requires_grad, name);
}

Tensor vec(const std::vector<double>& v, const Shape& s) {
  return Tensor::from_vector<double>(v, s);
}
// Value tests run in f32 (the default variants; small integers are exact).
Tensor vecf(const std::vector<double>& v, const Shape& s) { return vec(v, s).to(DType::f32); }

void expect_near(const std::vector<double>& got, const std::vector<double>& want,
                 double tol = 1e-12) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

void expect_gradcheck(const Fn& f, const std::vector<Variable>& in, const std::string& what) {
  const GradcheckResult r = gradcheck(f, in);
  EXPECT_TRUE(r.ok) << what << ": " << r.message;
}

// Stored shape of an operand: [rows, cols] of op(X), transposed when the flag is set, with an
// optional batch dim.
Shape stored(int64_t batch, int64_t rows, int64_t cols, bool trans) {
  Shape s = trans ? Shape{cols, rows} : Shape{rows, cols};
  if (batch > 0) s.insert(s.begin(), batch);
  return s;
}

TEST(MatmulGrad, TwoDAllTransposes) {
  const int64_t M = 3, K = 5, N = 4;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Variable a = param(stored(0, M, K, ta), 1, "a"), b = param(stored(0, K, N, tb), 2, "b");
      expect_gradcheck([&](const std::vector<Variable>& v) { return matmul(v[0], v[1], ta, tb); },
                       {a, b}, str("trans_a=", ta, " trans_b=", tb));
    }
}

TEST(MatmulGrad, BatchedAndSharedOperands) {
  const int64_t Bt = 2, M = 3, K = 5, N = 4;
  // {a batch, b batch}: 0 = shared 2-D operand.
  const std::vector<std::pair<int64_t, int64_t>> batches = {{Bt, Bt}, {Bt, 0}, {0, Bt}};
  for (auto [ba, bb] : batches)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        Variable a = param(stored(ba, M, K, ta), 3, "a"), b = param(stored(bb, K, N, tb), 4, "b");
        expect_gradcheck([&](const std::vector<Variable>& v) { return matmul(v[0], v[1], ta, tb); },
                         {a, b},
                         str("a batch ", ba, " b batch ", bb, " trans_a=", ta, " trans_b=", tb));
      }
}

TEST(MatmulGrad, OnlyOneOperandRequiresGrad) {
  Variable a = param({2, 3, 5}, 5, "a"), b = param({5, 4}, 6, "b", false);
  expect_gradcheck([](const std::vector<Variable>& v) { return matmul(v[0], v[1]); }, {a, b},
                   "a only");
  Variable a2 = param({3, 5}, 7, "a", false), b2 = param({2, 4, 5}, 8, "b");
  expect_gradcheck([](const std::vector<Variable>& v) { return matmul(v[0], v[1], false, true); },
                   {a2, b2}, "b only");
}

TEST(MatmulGrad, StridedInputs) {
  // a given as a transposed view: made contiguous, gradient routed back through the view.
  Variable a = param({5, 3}, 9, "a"), b = param({5, 4}, 10, "b");
  expect_gradcheck(
      [](const std::vector<Variable>& v) { return matmul(transpose(v[0], 0, 1), v[1]); }, {a, b},
      "transposed view");
}

TEST(MatmulGrad, ForwardValues) {
  Variable a(vecf({1, 2, 3, 4}, {2, 2})), b(vecf({5, 6, 7, 8}, {2, 2}));
  expect_near(matmul(a, b).data().to_vector<double>(), {19, 22, 43, 50});
  expect_near(matmul(a, b, true, false).data().to_vector<double>(), {26, 30, 38, 44});
  expect_near(matmul(a, b, false, true).data().to_vector<double>(), {17, 23, 39, 53});
  // Batched with a shared b: each batch element times b.
  Variable ab(vecf({1, 2, 3, 4, 1, 0, 0, 1}, {2, 2, 2}));
  const Variable c = matmul(ab, b);
  EXPECT_EQ(c.sizes(), (Shape{2, 2, 2}));
  expect_near(c.data().to_vector<double>(), {19, 22, 43, 50, 5, 6, 7, 8});
  EXPECT_FALSE(matmul(a, b).grad_fn());  // constants: nothing recorded
}

TEST(LinearGrad, ThreeDInputWithBias) {
  Variable x = param({2, 3, 5}, 11, "x"), w = param({4, 5}, 12, "w"), b = param({4}, 13, "b");
  expect_gradcheck([](const std::vector<Variable>& v) { return linear(v[0], v[1], v[2]); },
                   {x, w, b}, "3-D x, bias");
}

TEST(LinearGrad, WithoutBiasAndOneD) {
  Variable x = param({3, 5}, 14, "x"), w = param({4, 5}, 15, "w");
  expect_gradcheck([](const std::vector<Variable>& v) { return linear(v[0], v[1]); }, {x, w},
                   "2-D x, no bias");
  Variable x1 = param({5}, 16, "x"), b = param({4}, 17, "b");
  expect_gradcheck([](const std::vector<Variable>& v) { return linear(v[0], v[1], v[2]); },
                   {x1, w, b}, "1-D x");
  // Only the parameters require grad (x a constant), and only x.
  Variable xc = param({2, 3, 5}, 18, "x", false);
  expect_gradcheck([](const std::vector<Variable>& v) { return linear(v[0], v[1], v[2]); },
                   {xc, w, b}, "constant x");
  Variable wc = param({4, 5}, 19, "w", false), bc = param({4}, 20, "b", false);
  expect_gradcheck([](const std::vector<Variable>& v) { return linear(v[0], v[1], v[2]); },
                   {x, wc, bc}, "constant parameters");
}

TEST(LinearGrad, ForwardValues) {
  // x [2, 2], w [3, 2], b [3]: y = x w^T + b.
  Variable x(vecf({1, 2, 3, 4}, {2, 2}));
  Variable w(vecf({1, 0, 0, 1, 1, 1}, {3, 2})), b(vecf({10, 20, 30}, {3}));
  const Variable y = linear(x, w, b);
  EXPECT_EQ(y.sizes(), (Shape{2, 3}));
  expect_near(y.data().to_vector<double>(), {11, 22, 33, 13, 24, 37});
  const Variable y3 = linear(Variable(vecf({1, 2, 3, 4}, {1, 2, 2})), w);
  EXPECT_EQ(y3.sizes(), (Shape{1, 2, 3}));
  expect_near(y3.data().to_vector<double>(), {1, 2, 3, 3, 4, 7});
}

TEST(LinearGrad, ParameterGradientsAccumulateAcrossBackwards) {
  Variable x(vecf({1, 2, 3, 4}, {2, 2}), true, "x");
  Variable w(vecf({1, 0, 0, 1, 1, 1}, {3, 2}), true, "w"), b(vecf({0, 0, 0}, {3}), true, "b");
  const Tensor dy = vecf({1, 2, 3, 4, 5, 6}, {2, 3});
  linear(x, w, b).backward(dy);
  // dW = dy^T x, db = column sums of dy, dx = dy W.
  const std::vector<double> dw = {13, 18, 17, 24, 21, 30}, db = {5, 7, 9}, dx = {4, 5, 10, 11};
  expect_near(w.grad().to_vector<double>(), dw);
  expect_near(b.grad().to_vector<double>(), db);
  expect_near(x.grad().to_vector<double>(), dx);
  linear(x, w, b).backward(dy);
  auto twice = [](std::vector<double> v) {
    for (double& e : v) e *= 2;
    return v;
  };
  expect_near(w.grad().to_vector<double>(), twice(dw));
  expect_near(b.grad().to_vector<double>(), twice(db));
  expect_near(x.grad().to_vector<double>(), twice(dx));
  // matmul accumulates too (through the engine).
  Variable a(vecf({1, 2, 3, 4}, {2, 2}), true, "a");
  matmul(a, w, false, true).backward(dy);
  matmul(a, w, false, true).backward(dy);
  expect_near(a.grad().to_vector<double>(), twice(dx));
}

// The default f32 variants (batched, shared, transposed, fused bias) agree with an f64 cpu.ref
// computation, forward and gradients.
TEST(MatmulGrad, F32DefaultVariantsMatchF64Reference) {
  struct Case {
    std::string what;
    Shape a, b, c;
    std::function<Variable(const Variable&, const Variable&, const Variable&)> f;
  };
  const std::vector<Case> cases = {
      {"batched, shared b, trans_b",
       {3, 4, 5},
       {6, 5},
       {1},
       [](const Variable& a, const Variable& b, const Variable&) {
         return matmul(a, b, false, true);
       }},
      {"shared a, batched b, trans_a",
       {5, 4},
       {3, 5, 6},
       {1},
       [](const Variable& a, const Variable& b, const Variable&) {
         return matmul(a, b, true, false);
       }},
      {"linear 3-D x",
       {3, 4, 5},
       {6, 5},
       {6},
       [](const Variable& x, const Variable& w, const Variable& b) { return linear(x, w, b); }},
  };
  for (const Case& k : cases) {
    std::vector<Variable> v64, v32;
    uint64_t seed = 40;
    for (const Shape& s : {k.a, k.b, k.c}) {
      const Tensor t = kernels::random_tensor(s, DType::f64, seed++, -1, 1);
      v64.emplace_back(t, true);
      v32.emplace_back(t.to(DType::f32), true);
    }
    Variable y64;
    Tensor dy;
    {
      kernels::ScopedVariant ref("*", "cpu.ref");
      y64 = k.f(v64[0], v64[1], v64[2]);
      dy = kernels::random_tensor(y64.sizes(), DType::f64, 50);
      y64.backward(dy);
    }
    const Variable y32 = k.f(v32[0], v32[1], v32[2]);
    y32.backward(dy.to(DType::f32));
    auto close = [&](const Tensor& x, const Tensor& y, const std::string& what) {
      const auto a = x.to_vector<double>(), b = y.to_vector<double>();
      ASSERT_EQ(a.size(), b.size()) << what;
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4) << what << " " << i;
    };
    close(y64.data(), y32.data(), k.what + " y");
    for (size_t j = 0; j < 3; ++j)
      if (v64[j].grad().defined() || v32[j].grad().defined())
        close(v64[j].grad(), v32[j].grad(), str(k.what, " grad ", j));
  }
}

}  // namespace
}  // namespace aim::autograd
