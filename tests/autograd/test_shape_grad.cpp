// Gradchecks of the differentiable views and casts (autograd/functions/shape.h).
#include <gtest/gtest.h>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/shape.h"
#include "autograd/gradcheck.h"
#include "kernels/testing.h"

namespace aim::autograd {
namespace {

Variable input(const Shape& s, uint64_t seed) {
  return Variable(kernels::random_tensor(s, DType::f64, seed), true, "x");
}

void expect_ok(const std::function<Variable(const std::vector<Variable>&)>& f,
               const std::vector<Variable>& in) {
  const GradcheckResult r = gradcheck(f, in);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(ShapeGrad, Views) {
  const Variable x = input({2, 3, 4}, 1);
  // Each view is followed by a product so the gradient is not all ones.
  auto sq = [](const Variable& v) { return mul(v, v); };
  expect_ok([&](auto& v) { return sq(reshape(v[0], {4, 6})); }, {x});
  expect_ok([&](auto& v) { return sq(permute(v[0], {2, 0, 1})); }, {x});
  expect_ok([&](auto& v) { return sq(transpose(v[0], 0, 2)); }, {x});
  expect_ok([&](auto& v) { return sq(slice(v[0], 2, 1, 4, 2)); }, {x});
  expect_ok([&](auto& v) { return sq(slice(v[0], -2, -2, 3)); }, {x});
  expect_ok([&](auto& v) { return sq(select(v[0], 1, -1)); }, {x});
  expect_ok([&](auto& v) { return sq(unsqueeze(squeeze(unsqueeze(v[0], 1), 1), 0)); }, {x});
  expect_ok([&](auto& v) { return sq(contiguous(transpose(v[0], 1, 2))); }, {x});
  const Variable y = input({3, 1}, 2);
  expect_ok([&](auto& v) { return sq(expand(v[0], {2, 3, 5})); }, {y});
}

TEST(ShapeGrad, SplitPiecesAssembleTheGradient) {
  const Variable x = input({5, 3}, 3);
  expect_ok(
      [&](auto& v) {
        auto parts = split(v[0], {2, 3}, 0);
        return add(mul(parts[0], parts[0]), mul(slice(parts[1], 0, 0, 2), parts[0]));
      },
      {x});
}

TEST(ShapeGrad, CastRoundTripsTheGradient) {
  Variable x(Tensor::from_vector<double>({1.5, -2.0, 3.25}, {3}), true);
  Variable y = cast(cast(x, DType::f32), DType::f64);
  mul(y, 2.0).backward(Tensor::ones({3}, DType::f64));
  EXPECT_EQ(x.grad().dtype(), DType::f64);
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 2, 2}));
}

}  // namespace
}  // namespace aim::autograd
