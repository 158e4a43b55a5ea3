// The engine's contract (autograd/node.h): fan-out sums, parameter accumulation, grad-ready
// hooks, retain_graph, no_grad, views.
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/functions/shape.h"
#include "autograd/node.h"
#include "autograd/tensor_ops.h"

namespace aim::autograd {
namespace {

// y = s * x (activation gradient written) — test-local nodes keep this test independent of the
// op families.
struct TimesNode final : Node {
  double s = 1;
  const char* name() const override { return "Times"; }
  void backward(Grads& g) override {
    if (g.needs(0)) g.out(0).copy_(scale(g.dy(), s));
  }
};
Variable times(const Variable& x, double s) {
  const Tensor y = scale(x.data(), s);
  if (!needs_grad({&x})) return Variable(y);
  auto n = std::make_shared<TimesNode>();
  n->s = s;
  return attach1(n, {x}, y);
}

// y = a + w, where w is a "parameter": its gradient is accumulated (+=) through accum().
struct AddParamNode final : Node {
  const char* name() const override { return "AddParam"; }
  void backward(Grads& g) override {
    if (g.needs(0)) g.set(0, g.dy());
    if (g.needs(1)) add_into(g.accum(1), g.dy());
  }
};
Variable add_param(const Variable& a, const Variable& w) {
  const Tensor y = add(a.data(), w.data());
  if (!needs_grad({&a, &w})) return Variable(y);
  return attach1(std::make_shared<AddParamNode>(), {a, w}, y);
}

Tensor vec(std::vector<float> v) { return Tensor::from_vector<float>(v, {int64_t(v.size())}); }

TEST(Engine, FanOutSums) {
  Variable x(vec({1, 2, 3}), true, "x");
  Variable z = add_param(times(x, 2), times(x, 3));  // both inputs depend on x
  z.backward(vec({1, 1, 1}));
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{5, 5, 5}));
}

TEST(Engine, ParameterGradientsAccumulateAcrossBackwards) {
  Variable w(vec({0, 0}), true, "w");
  for (int i = 0; i < 3; ++i) add_param(Variable(vec({1, 1})), w).backward(vec({1, 2}));
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{3, 6}));
  w.zero_grad();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{0, 0}));
}

// zero_grad() leaves the buffer unfilled (stale): reading the gradient fills it; a node's
// accum() fills it before accumulating; accum_or_overwrite() hands it to a kernel that writes it
// (beta 0, no fill op); a leaf reached through set()/out() gets a copy. After each, the
// gradient equals one backward's, whatever the stale buffer held.
struct OverwriteParamNode final : Node {  // y = a + w, w's gradient written through beta
  const char* name() const override { return "OverwriteParam"; }
  void backward(Grads& g) override {
    if (g.needs(0)) g.set(0, g.dy());
    if (g.needs(1)) {
      float beta = -1.0f;
      Tensor dw = g.accum_or_overwrite(1, beta);
      if (beta == 0.0f)
        dw.copy_(g.dy());
      else
        add_into(dw, g.dy());
    }
  }
};
TEST(Engine, ZeroGradIsLazyAndExact) {
  Variable w(vec({0, 0}), true, "w");
  auto overwrite = [&] {
    const Tensor y = add(vec({1, 1}), w.data());
    attach1(std::make_shared<OverwriteParamNode>(), {Variable(vec({1, 1})), w}, y)
        .backward(vec({1, 2}));
  };
  overwrite();  // fresh buffer: written
  overwrite();  // accumulated
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{2, 4}));
  w.zero_grad();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{0, 0}));  // read: filled
  add_param(Variable(vec({1, 1})), w).backward(vec({5, 5}));
  w.zero_grad();
  overwrite();  // stale {5, 5} overwritten, not added to
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{1, 2}));
  w.zero_grad();
  add_param(Variable(vec({1, 1})), w).backward(vec({3, 1}));  // accum(): filled, then added
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{3, 1}));
  w.zero_grad();
  times(w, 2).backward(vec({1, 1}));  // out() into a leaf: copied into the stale buffer
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{2, 2}));
}

TEST(Engine, GradReadyHookFiresOnceWithFinalGradient) {
  Variable x(vec({1, 1}), true, "x");
  int calls = 0;
  std::vector<float> seen;
  x.add_grad_ready_hook([&](VariableImpl& v) {
    ++calls;
    seen = v.grad.to_vector<float>();
  });
  Variable y = add_param(times(x, 2), times(times(x, 1), 4));
  y.backward(vec({1, 1}));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, (std::vector<float>{6, 6}));
}

TEST(Engine, SecondBackwardNeedsRetainGraph) {
  Variable x(vec({1}), true);
  Variable y = times(times(x, 2), 3);
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{12}));
  try {
    y.backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("retain_graph"), std::string::npos) << e.what();
  }
}

TEST(Engine, NoGradRecordsNothing) {
  Variable x(vec({1}), true);
  NoGradGuard g;
  EXPECT_FALSE(times(x, 2).grad_fn());
}

TEST(Engine, ViewsRouteGradients) {
  Variable x(Tensor::arange(6).view({2, 3}), true, "x");
  Variable t = transpose(x, 0, 1);  // [3, 2]
  Variable s = slice(t, 0, 1, 3);   // rows 1, 2 of t = columns 1, 2 of x
  Variable r = reshape(times(s, 2), {4});
  r.backward(vec({1, 2, 3, 4}));
  // s[i][j] = x[j][i+1]; dr = [1,2,3,4] -> ds = [[1,2],[3,4]] * 2
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{0, 2, 6, 0, 4, 8}));
}

TEST(Engine, ExpandSumsBroadcastDims) {
  Variable x(vec({1, 2, 3}), true);
  Variable e = expand(reshape(x, {1, 3}), {4, 3});
  e.backward(Tensor::ones({4, 3}));
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{4, 4, 4}));
}

}  // namespace
}  // namespace aim::autograd
