// autograd additive_attention (normalised Bahdanau, kernels/additive_attention): gradcheck in f64
// with and without source lengths (a zero-length row included), equal to the same math written
// with elementwise ops, and the errors.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/functions/additive_attention.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "autograd/functions/softmax.h"
#include "autograd/gradcheck.h"
#include "kernels/testing.h"
#include "tensor/check.h"

namespace aim::autograd {
namespace {

Variable param(const Shape& s, uint64_t seed, double lo = -1, double hi = 1) {
  return Variable(kernels::random_tensor(s, DType::f64, seed, lo, hi), true, "x");
}

struct Inputs {
  Variable keys, query, bias, v, g, values;
  std::vector<Variable> all() const { return {keys, query, bias, v, g, values}; }
};

Inputs make(int64_t B, int64_t T, int64_t C, int64_t D) {
  return {param({B, T, C}, 1, -1.5, 1.5),
          param({B, C}, 2),
          param({C}, 3, -0.5, 0.5),
          param({C}, 4),
          param({1}, 5, 1, 3),
          param({B, T, D}, 6)};
}

TEST(AdditiveAttentionAutograd, Gradcheck) {
  const Inputs in = make(3, 5, 4, 3);
  const Tensor lengths = Tensor::from_vector(std::vector<int32_t>{5, 2, 0}, {3});
  for (const Tensor& len : {Tensor(), lengths}) {
    auto f = [&](const std::vector<Variable>& x) {
      const AdditiveAttentionResult r = additive_attention(x[0], x[1], x[2], x[3], x[4], x[5], len);
      return concat({reshape(r.context, {-1}), reshape(r.align, {-1})}, 0);
    };
    const GradcheckResult r = gradcheck(f, in.all());
    EXPECT_TRUE(r.ok) << (len.defined() ? "with lengths: " : "no lengths: ") << r.message;
  }
}

// The same attention from elementwise ops, softmax and reductions (no lengths).
TEST(AdditiveAttentionAutograd, EqualsUnfusedGraph) {
  const Inputs in = make(2, 6, 5, 4);
  const AdditiveAttentionResult r =
      additive_attention(in.keys, in.query, in.bias, in.v, in.g, in.values, Tensor());
  const Variable h = tanh(add(add(in.keys, unsqueeze(in.query, 1)), in.bias));  // [B, T, C]
  const Variable nv = mul(div(in.v, sqrt(sum(square(in.v)))), in.g);
  const Variable e = sum(mul(h, nv), {2});  // [B, T]
  const Variable a = softmax(e, 1);
  const Variable ctx = sum(mul(unsqueeze(a, 2), in.values), {1});
  const std::vector<double> x = r.context.data().to_vector<double>(),
                            y = ctx.data().to_vector<double>(),
                            p = r.align.data().to_vector<double>(),
                            q = a.data().to_vector<double>();
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-12) << i;
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(p[i], q[i], 1e-12) << i;
}

TEST(AdditiveAttentionAutograd, Errors) {
  const Inputs in = make(2, 3, 4, 5);
  const Tensor bad = Tensor::from_vector(std::vector<int32_t>{3, 4}, {2});
  EXPECT_THROW(additive_attention(in.keys, in.query, in.bias, in.v, in.g, in.values, bad), Error);
  EXPECT_THROW(
      additive_attention(in.keys, in.query, in.v, in.v, in.g, param({2, 4, 5}, 9), Tensor()),
      Error);
  EXPECT_THROW(
      additive_attention(in.keys, param({2, 3}, 8), in.bias, in.v, in.g, in.values, Tensor()),
      Error);
}

}  // namespace
}  // namespace aim::autograd
