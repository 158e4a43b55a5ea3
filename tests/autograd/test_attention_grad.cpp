// autograd scaled_dot_product_attention: gradcheck in f64 (every mask kind, causal, Tq != Tk,
// dropout with a fixed generator), equal to the unfused graph (matmul, softmax, matmul) in values
// and gradients, inputs that need no gradient, and the errors.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/engine.h"
#include "autograd/functions/attention.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/matmul.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "autograd/functions/softmax.h"
#include "autograd/gradcheck.h"
#include "kernels/testing.h"
#include "tensor/check.h"

namespace aim::autograd {
namespace {

using Fn = std::function<Variable(const std::vector<Variable>&)>;

Variable param(const Shape& s, uint64_t seed, bool requires_grad = true) {
  return Variable(kernels::random_tensor(s, DType::f64, seed, -1, 1), requires_grad, "x");
}

void expect_gradcheck(const Fn& f, const std::vector<Variable>& in, const std::string& what) {
  const GradcheckResult r = gradcheck(f, in);
  EXPECT_TRUE(r.ok) << what << ": " << r.message;
}

TEST(AttentionAutograd, Gradcheck) {
  const Variable q = param({2, 2, 3, 4}, 1), k = param({2, 2, 5, 4}, 2), v = param({2, 2, 5, 4}, 3);
  Tensor pad = Tensor::zeros({2, 1, 1, 5}, DType::f64);
  pad.data<double>()[4] = -1e4;  // the last key of the first sequence is padding
  pad.data<double>()[5 + 1] = -1e4;
  const Tensor full = kernels::random_tensor({2, 2, 3, 5}, DType::f64, 4, -1, 1);
  for (int mask = 0; mask < 3; ++mask)
    for (bool causal : {false, true}) {
      AttentionOptions o;
      o.mask = mask == 1 ? pad : mask == 2 ? full : Tensor();
      o.causal = causal;
      expect_gradcheck(
          [o](const std::vector<Variable>& x) {
            return scaled_dot_product_attention(x[0], x[1], x[2], o);
          },
          {q, k, v}, "mask " + std::to_string(mask) + (causal ? " causal" : ""));
    }
  // Dropout: a generator at a fixed state makes the function deterministic.
  expect_gradcheck(
      [](const std::vector<Variable>& x) {
        kernels::Generator gen(11, 0);
        AttentionOptions o;
        o.dropout_p = 0.3;
        o.training = true;
        o.gen = &gen;
        o.scale = 0.7;
        return scaled_dot_product_attention(x[0], x[1], x[2], o);
      },
      {q, k, v}, "dropout");
  // Only some inputs need a gradient.
  const Variable kc = param({2, 2, 5, 4}, 2, false);
  expect_gradcheck(
      [](const std::vector<Variable>& x) { return scaled_dot_product_attention(x[0], x[1], x[2]); },
      {q, kc, v}, "constant k");
}

TEST(AttentionAutograd, EqualsTheUnfusedGraph) {
  const int64_t B = 2, NH = 3, T = 6, HS = 8;
  Variable q = param({B, NH, T, HS}, 5), k = param({B, NH, T, HS}, 6), v = param({B, NH, T, HS}, 7);
  const Tensor mask = kernels::random_tensor({B, 1, 1, T}, DType::f64, 8, -2, 0);
  AttentionOptions o;
  o.mask = mask;
  Variable fused = scaled_dot_product_attention(q, k, v, o);
  const Tensor w = kernels::random_tensor(fused.sizes(), DType::f64, 9, -1, 1);
  sum(mul(fused, Variable(w))).backward();
  const Tensor gq = q.grad().clone(), gk = k.grad().clone(), gv = v.grad().clone();
  Variable q2 = param({B, NH, T, HS}, 5), k2 = param({B, NH, T, HS}, 6),
           v2 = param({B, NH, T, HS}, 7);
  // The unfused graph on [B NH, T, HS] (matmul is 3-D), the mask added on [B, NH, T, T].
  auto bh = [&](const Variable& x) { return reshape(x, {B * NH, T, x.size(3)}); };
  Variable s =
      reshape(mul(matmul(bh(q2), bh(k2), false, true), 1 / std::sqrt(double(HS))), {B, NH, T, T});
  Variable p = softmax(add(s, Variable(mask)), -1);
  Variable unfused = reshape(matmul(bh(p), bh(v2)), {B, NH, T, HS});
  sum(mul(unfused, Variable(w))).backward();
  auto close = [](const Tensor& a, const Tensor& b, const char* what) {
    const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
    ASSERT_EQ(x.size(), y.size()) << what;
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-12) << what << " " << i;
  };
  close(fused.data(), unfused.data(), "output");
  close(gq, q2.grad(), "dq");
  close(gk, k2.grad(), "dk");
  close(gv, v2.grad(), "dv");
}

TEST(AttentionAutograd, Errors) {
  const Variable q = param({2, 3, 4}, 1);
  EXPECT_THROW(scaled_dot_product_attention(q, q, q), Error);
  const Variable q4 = param({1, 1, 2, 4}, 1);
  AttentionOptions o;
  o.dropout_p = 0.5;
  o.training = true;  // no generator
  EXPECT_THROW(scaled_dot_product_attention(q4, q4, q4, o), Error);
}

}  // namespace
}  // namespace aim::autograd
