// autograd l2_normalize (autograd/functions/l2norm.h, kernels/norm/l2norm.h): gradcheck in f64 on
// cpu.ref and cpu.omp (with and without the scale; [N, C] and [N, C, H, W]; x only, scale only),
// equal to the composed graph scale * x / clamp_min(norm(x, dim 1), eps) (F.normalize's
// definition) in values and gradients, a zero column (r = 0 < eps: d = eps, no gradient through
// the norm), and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/l2norm.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "autograd/gradcheck.h"
#include "kernels/registry.h"
#include "kernels/testing.h"

namespace aim::autograd {
namespace {

Variable param(const Shape& s, uint64_t seed, double lo, double hi) {
  return Variable(kernels::random_tensor(s, DType::f64, seed, lo, hi), true, "p");
}

// F.normalize(x, dim=1, eps) * scale.view(1, C, 1, ...), from elementwise ops.
Variable composed(const Variable& x, const Variable& scale, double eps) {
  const Variable n = norm(x, 2, {1}, true);
  const Variable d = maximum(n, Variable(Tensor::full(n.sizes(), eps, DType::f64)));
  Variable y = div(x, d);
  if (!scale.defined()) return y;
  Shape s(size_t(x.dim()), 1);
  s[1] = x.size(1);
  return mul(y, reshape(scale, s));
}

TEST(L2NormAutograd, GradcheckBothVariants) {
  for (const std::string variant : {"cpu.ref", "cpu.omp"}) {
    kernels::ScopedVariant vf("l2norm_fwd", variant), vb("l2norm_bwd", variant);
    for (const Shape& xs : {Shape{3, 5}, Shape{2, 4, 3, 5}, Shape{1, 1, 2, 2}}) {
      const Variable x = param(xs, 1, -2, 2), s = param({xs[1]}, 2, 0.5, 3);
      const std::string what = variant + " " + to_string(xs);
      auto with = [](const std::vector<Variable>& v) { return l2_normalize(v[0], v[1]); };
      auto without = [](const std::vector<Variable>& v) { return l2_normalize(v[0], Variable()); };
      GradcheckResult r = gradcheck(with, {x, s});
      EXPECT_TRUE(r.ok) << what << " scale: " << r.message;
      r = gradcheck(without, {x});
      EXPECT_TRUE(r.ok) << what << " no scale: " << r.message;
      // Only one input needing a gradient.
      const Variable xc(x.data(), false);
      r = gradcheck(with, {xc, s});
      EXPECT_TRUE(r.ok) << what << " scale only: " << r.message;
    }
  }
}

void expect_close(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(x[i], y[i], tol * (1 + std::fabs(y[i]))) << what << " at " << i;
}

TEST(L2NormAutograd, EqualsTheComposedGraphIncludingAZeroColumn) {
  for (const std::string variant : {"cpu.ref", "cpu.omp"}) {
    kernels::ScopedVariant vf("l2norm_fwd", variant), vb("l2norm_bwd", variant);
    Tensor xt = kernels::random_tensor({2, 6, 3, 4}, DType::f64, 5, -2, 2);
    for (int64_t c = 0; c < 6; ++c) xt.data<double>()[c * 12] = 0.0;  // column (0, 0, 0)
    const Tensor st = kernels::random_tensor({6}, DType::f64, 6, 0.5, 20);
    const Tensor dy = kernels::random_tensor({2, 6, 3, 4}, DType::f64, 7, -1, 1);
    const double eps = 1e-6;
    std::vector<Tensor> got, want;
    for (int k = 0; k < 2; ++k) {
      Variable x(xt.clone(), true, "x"), s(st.clone(), true, "scale");
      const Variable y = k == 0 ? l2_normalize(x, s, eps) : composed(x, s, eps);
      y.backward(dy);
      auto& out = k == 0 ? got : want;
      out = {y.data(), x.grad(), s.grad()};
    }
    expect_close(got[0], want[0], 1e-13, variant + " y");
    expect_close(got[1], want[1], 1e-11, variant + " dx");
    expect_close(got[2], want[2], 1e-11, variant + " dscale");
  }
}

TEST(L2NormAutograd, Errors) {
  auto expect_error = [](const std::function<void()>& f, const std::string& part) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one containing: " << part;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  const Variable x = param({2, 3, 4}, 1, -1, 1);
  expect_error([&] { l2_normalize(x, param({4}, 2, 1, 2)); }, "scale must be [3]");
  expect_error([&] { l2_normalize(param({3}, 3, -1, 1), Variable()); }, "x must be [N, C, ...]");
}

}  // namespace
}  // namespace aim::autograd
