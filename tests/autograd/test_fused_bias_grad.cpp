// autograd bias_gelu and add_layer_norm (autograd/functions/fused_bias.h): gradcheck in f64 (erf
// and tanh forms; every combination of optional bias / weight / ln_bias; inputs that need no
// gradient; x and residual the same variable; strided x), equal to the unfused graphs
// gelu(add(x, bias)) and layer_norm(add(add(x, bias), residual)) in values and gradients (f64 on
// cpu.ref; f32 on the default variants), parameter gradients accumulating, the autocast classes
// (the unfused chain's dtypes), and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/amp.h"
#include "autograd/engine.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/fused_bias.h"
#include "autograd/functions/layer_norm.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "autograd/gradcheck.h"
#include "kernels/testing.h"
#include "tests/support/common.h"

namespace aim::autograd {
namespace {

using Fn = std::function<Variable(const std::vector<Variable>&)>;

Variable param(const Shape& s, uint64_t seed, double lo = -1, double hi = 1,
               bool requires_grad = true, DType t = DType::f64) {
  return Variable(kernels::random_tensor(s, t, seed, lo, hi), requires_grad, "p");
}

void expect_gradcheck(const Fn& f, const std::vector<Variable>& in, const std::string& what) {
  const GradcheckResult r = gradcheck(f, in);
  EXPECT_TRUE(r.ok) << what << ": " << r.message;
}

void expect_close(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(x[i], y[i], tol * (1 + std::fabs(y[i]))) << what << " at " << i;
}

// ---- bias_gelu -------------------------------------------------------------------------------

TEST(FusedBiasAutograd, BiasGeluGradcheck) {
  const Variable x = param({2, 3, 5}, 1, -3, 3), b = param({5}, 2);
  for (bool tanh : {false, true}) {
    const std::string form = tanh ? "tanh" : "erf";
    expect_gradcheck([tanh](const std::vector<Variable>& v) { return bias_gelu(v[0], v[1], tanh); },
                     {x, b}, form);
    expect_gradcheck(
        [tanh](const std::vector<Variable>& v) {
          return bias_gelu(transpose(v[0], 0, 1), v[1], tanh);  // a strided x
        },
        {x, b}, form + " transposed x");
    expect_gradcheck([tanh](const std::vector<Variable>& v) { return bias_gelu(v[0], v[1], tanh); },
                     {param({4, 5}, 3, -3, 3, false), b}, form + " constant x");
    expect_gradcheck([tanh](const std::vector<Variable>& v) { return bias_gelu(v[0], v[1], tanh); },
                     {x, param({5}, 4, -1, 1, false)}, form + " constant bias");
    expect_gradcheck(
        [tanh](const std::vector<Variable>& v) { return bias_gelu(v[0], Variable(), tanh); }, {x},
        form + " no bias");
  }
}

// Values and gradients equal to gelu(add(x, bias)): f64 on cpu.ref to rounding, f32 on the
// default variants (cpu.avx512's erf/exp approximations against libm's) to a few ulps.
TEST(FusedBiasAutograd, BiasGeluEqualsTheUnfusedGraph) {
  for (DType t : {DType::f64, DType::f32})
    for (bool tanh : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + (tanh ? " tanh" : " erf"));
      const double tol = t == DType::f64 ? 1e-13 : 2e-6;
      const Tensor w = kernels::random_tensor({6, 7, 96}, t, 9, -1, 1);
      Variable x = param({6, 7, 96}, 5, -4, 3, true, t), b = param({96}, 6, -1, 1, true, t);
      Variable fused = bias_gelu(x, b, tanh);
      sum(mul(fused, Variable(w))).backward();
      Variable x2 = param({6, 7, 96}, 5, -4, 3, true, t), b2 = param({96}, 6, -1, 1, true, t);
      Variable unfused = gelu(add(x2, b2), tanh);
      sum(mul(unfused, Variable(w))).backward();
      expect_close(fused.data(), unfused.data(), tol, "y");
      expect_close(x.grad(), x2.grad(), tol, "dx");
      expect_close(b.grad(), b2.grad(), t == DType::f64 ? 1e-12 : 1e-4, "dbias");  // 42 rows
      EXPECT_STREQ(fused.grad_fn()->name(), "BiasGelu");
    }
}

// ---- add_layer_norm --------------------------------------------------------------------------

TEST(FusedBiasAutograd, AddLayerNormGradcheck) {
  const Variable x = param({2, 3, 6}, 11, -2, 2), r = param({2, 3, 6}, 12, -1, 2);
  const Variable b = param({6}, 13), w = param({6}, 14, 0.5, 1.5), lb = param({6}, 15);
  const Variable none;
  // {use bias, use weight, use ln_bias}
  for (int mask = 0; mask < 8; ++mask) {
    const bool ub = mask & 1, uw = mask & 2, ul = mask & 4;
    expect_gradcheck(
        [=](const std::vector<Variable>& v) {
          return add_layer_norm(v[0], ub ? v[2] : none, v[1], uw ? v[3] : none, ul ? v[4] : none,
                                1e-5);
        },
        {x, r, b, w, lb},
        "bias " + std::to_string(ub) + " weight " + std::to_string(uw) + " ln_bias " +
            std::to_string(ul));
  }
  const Variable rc = param({2, 3, 6}, 12, -1, 2, false);
  expect_gradcheck(
      [](const std::vector<Variable>& v) { return add_layer_norm(v[0], v[2], v[1], v[3], v[4]); },
      {x, rc, b, w, lb}, "constant residual");
  const Variable xc = param({2, 3, 6}, 11, -2, 2, false);
  expect_gradcheck(
      [](const std::vector<Variable>& v) { return add_layer_norm(v[0], v[2], v[1], v[3], v[4]); },
      {xc, r, b, w, lb}, "constant x");
  expect_gradcheck(
      [](const std::vector<Variable>& v) { return add_layer_norm(v[0], v[1], v[0], v[2], v[3]); },
      {x, b, w, lb}, "x as its own residual");
  expect_gradcheck(
      [](const std::vector<Variable>& v) {
        return add_layer_norm(transpose(v[0], 0, 1), v[2], v[1], v[3], v[4]);
      },
      {param({3, 2, 6}, 16, -2, 2), param({2, 3, 6}, 17), b, w, lb}, "strided x");
}

// Values and gradients equal to layer_norm(add(add(x, bias), residual)).
TEST(FusedBiasAutograd, AddLayerNormEqualsTheUnfusedGraph) {
  for (DType t : {DType::f64, DType::f32}) {
    SCOPED_TRACE(dtype_name(t));
    const double tol = t == DType::f64 ? 1e-12 : 1e-5;
    const Shape s = {4, 9, 64};
    const Tensor g = kernels::random_tensor(s, t, 29, -1, 1);
    auto inputs = [&] {
      return std::vector<Variable>{param(s, 21, -2, 2, true, t), param({64}, 22, -1, 1, true, t),
                                   param(s, 23, -1, 2, true, t), param({64}, 24, 0.5, 1.5, true, t),
                                   param({64}, 25, -1, 1, true, t)};
    };
    std::vector<Variable> a = inputs(), b = inputs();
    Variable fused = add_layer_norm(a[0], a[1], a[2], a[3], a[4], 1e-12);
    sum(mul(fused, Variable(g))).backward();
    Variable unfused = layer_norm(add(add(b[0], b[1]), b[2]), b[3], b[4], 1e-12);
    sum(mul(unfused, Variable(g))).backward();
    expect_close(fused.data(), unfused.data(), tol, "y");
    const char* names[] = {"dx", "dbias", "dresidual", "dweight", "dln_bias"};
    for (size_t i = 0; i < a.size(); ++i)
      expect_close(a[i].grad(), b[i].grad(), i == 0 || i == 2 ? tol : tol * 10, names[i]);
    EXPECT_STREQ(fused.grad_fn()->name(), "AddLayerNorm");
  }
}

// Gradients accumulate over backward passes: after two identical passes every leaf's gradient
// (x, residual, bias, weight, ln_bias, and bias_gelu's bias) is twice one pass's.
TEST(FusedBiasAutograd, GradientsAccumulateOverPasses) {
  const Variable x = param({5, 8}, 31, -2, 2), r = param({5, 8}, 32), b = param({8}, 33),
                 w = param({8}, 34, 0.5, 1.5), lb = param({8}, 35), gb = param({8}, 36);
  const Tensor g = kernels::random_tensor({5, 8}, DType::f64, 37, -1, 1);
  const std::vector<const Variable*> leaves = {&x, &r, &b, &w, &lb, &gb};
  auto pass = [&] {
    sum(mul(add_layer_norm(x, b, r, w, lb), Variable(g))).backward();
    sum(mul(bias_gelu(x, gb), Variable(g))).backward();
  };
  pass();
  std::vector<Tensor> one;
  for (const Variable* p : leaves) one.push_back(p->grad().clone());
  pass();
  for (size_t i = 0; i < leaves.size(); ++i) {
    std::vector<double> want = one[i].to_vector<double>();
    for (double& e : want) e *= 2;
    expect_close(leaves[i]->grad(), Tensor::from_vector(want, one[i].sizes()), 1e-12,
                 "leaf " + std::to_string(i));
  }
}

// The classes of the unfused chains: bias_gelu promotes (add), add_layer_norm runs in f32
// (layer_norm); outputs and gradients keep the chain's dtypes.
TEST(FusedBiasAutograd, AutocastClassesAreTheUnfusedChains) {
  const Variable x(kernels::random_tensor({4, 16}, DType::f32, 41, -2, 2).to(DType::f16));
  const Variable b(kernels::random_tensor({16}, DType::f32, 42, -1, 1), true);
  const Variable w(kernels::random_tensor({16}, DType::f32, 43, 0.5, 1.5), true);
  const Variable x16 = Variable(x.data(), true);
  amp::Autocast ac(DType::f16);
  EXPECT_EQ(bias_gelu(x, b).dtype(), gelu(add(x, b)).dtype());  // mixed: f32
  EXPECT_EQ(bias_gelu(x, b).dtype(), DType::f32);
  const Variable b16(b.data().to(DType::f16));
  EXPECT_EQ(bias_gelu(x, b16).dtype(), DType::f16);  // one 16-bit dtype: as is
  const Variable y = add_layer_norm(x16, b, x, w, Variable());
  EXPECT_EQ(y.dtype(), layer_norm(add(add(x16, b), x), w, Variable()).dtype());
  EXPECT_EQ(y.dtype(), DType::f32);
  sum(y).backward();
  EXPECT_EQ(x16.grad().dtype(), DType::f16);  // back through the cast
  EXPECT_EQ(b.grad().dtype(), DType::f32);
  EXPECT_EQ(w.grad().dtype(), DType::f32);
}

TEST(FusedBiasAutograd, Errors) {
  const Variable x = param({3, 4}, 51), v4 = param({4}, 52), v5 = param({5}, 53);
  AIM_EXPECT_ERROR(bias_gelu(x, v5), "bias_gelu: bias must be [4] for x [3, 4], got [5]");
  AIM_EXPECT_ERROR(add_layer_norm(x, v4, param({4, 3}, 54), v4, v4),
                   "add_layer_norm: residual [4, 3] must have x's shape [3, 4]");
  AIM_EXPECT_ERROR(add_layer_norm(x, v5, x, v4, v4), "must be [4] for x [3, 4], got [5]");
  AIM_EXPECT_ERROR(add_layer_norm(x, v4, Variable(), v4, v4), "residual must be defined");
}

}  // namespace
}  // namespace aim::autograd
