// Index ops and dropout (autograd/functions/index.h): gradcheck of every differentiable function
// (concat along every dim with a non-contiguous input, repeated indices for index_select /
// gather / scatter_add, padding and cropping), forward values by hand, one_hot, and dropout's
// mask: reproducible from the generator state, keep fraction, gradient = mask / (1 - p).
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/engine.h"
#include "autograd/functions/dropout.h"
#include "autograd/functions/index.h"
#include "autograd/functions/shape.h"
#include "autograd/gradcheck.h"
#include "kernels/registry.h"
#include "kernels/testing.h"

namespace aim::autograd {
namespace {

using Fn = std::function<Variable(const std::vector<Variable>&)>;

Variable input(const Shape& s, uint64_t seed, const std::string& name = "x") {
  return Variable(kernels::random_tensor(s, DType::f64, seed, -1, 1), true, name);
}

void expect_gradcheck(const Fn& f, const std::vector<Variable>& xs, const std::string& what) {
  const GradcheckResult r = gradcheck(f, xs);
  EXPECT_TRUE(r.ok) << what << ": " << r.message;
}

Tensor vec(const std::vector<double>& v, const Shape& s) {
  return Tensor::from_vector<double>(v, s);
}
Tensor idx64(const std::vector<int64_t>& v, const Shape& s) {
  return Tensor::from_vector<int64_t>(v, s);
}
Tensor idx32(const std::vector<int32_t>& v, const Shape& s) {
  return Tensor::from_vector<int32_t>(v, s);
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want,
                 double tol = 1e-12) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

// ---- concat ---------------------------------------------------------------------------------

TEST(IndexGrad, ConcatGradcheckEveryDimWithTransposedInput) {
  const Shape base = {2, 3, 4};
  for (int64_t dim = 0; dim < 3; ++dim) {
    Shape s0 = base, s1 = base, s2 = base;
    s0[size_t(dim)] = 1;
    s1[size_t(dim)] = 2;
    s2[size_t(dim)] = 3;
    // Input 1 is stored with its last two dims swapped and transposed back inside f: concat
    // sees a non-contiguous view.
    Shape s1t = s1;
    std::swap(s1t[1], s1t[2]);
    const std::vector<Variable> xs = {input(s0, 1, "a"), input(s1t, 2, "b"), input(s2, 3, "c")};
    for (int64_t d : {dim, dim - 3}) {
      expect_gradcheck(
          [d](const std::vector<Variable>& v) {
            return concat({v[0], transpose(v[1], 1, 2), v[2]}, d);
          },
          xs, "concat dim " + std::to_string(d));
    }
  }
}

TEST(IndexGrad, ConcatValuesAndConstantInput) {
  Variable a(vec({1, 2, 3, 4}, {2, 2}), true, "a");
  Variable b(vec({5, 6}, {2, 1}));  // constant: no gradient
  Variable c(vec({7, 8, 9, 10}, {2, 2}), true, "c");
  Variable y = concat({a, b, c}, 1);
  EXPECT_EQ(y.sizes(), (Shape{2, 5}));
  expect_near(y.data().to_vector<double>(), {1, 2, 5, 7, 8, 3, 4, 6, 9, 10});
  y.backward(vec({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {2, 5}));
  expect_near(a.grad().to_vector<double>(), {1, 2, 6, 7});
  expect_near(c.grad().to_vector<double>(), {4, 5, 9, 10});
  EXPECT_FALSE(b.grad().defined());
  EXPECT_STREQ(y.grad_fn()->name(), "Concat");
}

TEST(IndexGrad, ConcatSameInputTwiceSumsGradients) {
  Variable a(vec({1, 2}, {2}), true, "a");
  concat({a, a}, 0).backward(vec({1, 2, 3, 4}, {4}));
  expect_near(a.grad().to_vector<double>(), {4, 6});
}

// ---- index_select ---------------------------------------------------------------------------

TEST(IndexGrad, IndexSelectGradcheckRepeatedIndicesEveryDim) {
  const Shape s = {3, 4, 5};
  for (int64_t dim = 0; dim < 3; ++dim) {
    const int64_t n = s[size_t(dim)];
    // 7 picks from n <= 5 rows: repeats guaranteed; some rows may be skipped.
    const Tensor index = kernels::random_indices({7}, n, DType::i64, 10 + uint64_t(dim));
    expect_gradcheck([&](const std::vector<Variable>& v) { return index_select(v[0], dim, index); },
                     {input(s, 4)}, "index_select dim " + std::to_string(dim));
    const Tensor i32 = idx32({0, int32_t(n - 1), 0, 1, int32_t(n - 1)}, {5});
    expect_gradcheck(
        [&](const std::vector<Variable>& v) { return index_select(v[0], -3 + dim, i32); },
        {input(s, 5)}, "index_select i32 dim " + std::to_string(dim));
  }
  // Non-contiguous x: a transposed view.
  const Tensor index = idx64({2, 0, 2, 1}, {4});
  expect_gradcheck(
      [&](const std::vector<Variable>& v) { return index_select(transpose(v[0], 0, 1), 1, index); },
      {input({3, 4}, 6)}, "index_select transposed");
}

TEST(IndexGrad, IndexSelectValuesAndAccumulatedGradient) {
  Variable x(vec({1, 2, 3, 4, 5, 6}, {3, 2}), true, "table");
  const Tensor index = idx64({2, 0, 2}, {3});
  Variable y = index_select(x, 0, index);
  expect_near(y.data().to_vector<double>(), {5, 6, 1, 2, 5, 6});
  EXPECT_STREQ(y.grad_fn()->name(), "IndexSelect");
  y.backward(vec({1, 2, 3, 4, 5, 6}, {3, 2}));
  expect_near(x.grad().to_vector<double>(), {3, 4, 0, 0, 6, 8});
  // A second backward accumulates into the table's gradient.
  index_select(x, 0, index).backward(vec({1, 1, 1, 1, 1, 1}, {3, 2}));
  expect_near(x.grad().to_vector<double>(), {4, 5, 0, 0, 8, 10});
  // 0-d index: one element, the dim is kept.
  EXPECT_EQ(index_select(x, 1, Tensor::from_vector<int64_t>({1}, {})).sizes(), (Shape{3, 1}));
}

TEST(IndexGrad, IndexSelectOutOfRangeIsAnError) {
  Variable x(vec({1, 2, 3}, {3}), true);
  EXPECT_THROW(index_select(x, 0, idx64({3}, {1})), Error);
  EXPECT_THROW(index_select(x, 0, idx64({-1}, {1})), Error);
  EXPECT_THROW(index_select(x, 0, vec({0}, {1})), Error);  // f64 index
}

// ---- gather / scatter_add -------------------------------------------------------------------

TEST(IndexGrad, GatherGradcheckRepeatedIndicesEveryDim) {
  const Shape s = {3, 4, 5};
  for (int64_t dim = 0; dim < 3; ++dim) {
    // Longer than x at dim (repeats guaranteed), shorter elsewhere.
    Shape is = {2, 3, 4};
    is[size_t(dim)] = s[size_t(dim)] + 2;
    const Tensor index =
        kernels::random_indices(is, s[size_t(dim)], DType::i64, 20 + uint64_t(dim));
    expect_gradcheck([&](const std::vector<Variable>& v) { return gather(v[0], dim, index); },
                     {input(s, 7)}, "gather dim " + std::to_string(dim));
  }
  const Tensor index = kernels::random_indices({4, 2}, 3, DType::i32, 30);
  expect_gradcheck(
      [&](const std::vector<Variable>& v) { return gather(transpose(v[0], 0, 1), 1, index); },
      {input({3, 4}, 8)}, "gather transposed, i32");
}

TEST(IndexGrad, GatherValues) {
  Variable x(vec({1, 2, 3, 4, 5, 6}, {2, 3}), true, "x");
  Variable y = gather(x, 1, idx64({2, 2, 0, 1}, {2, 2}));
  expect_near(y.data().to_vector<double>(), {3, 3, 4, 5});
  EXPECT_STREQ(y.grad_fn()->name(), "Gather");
  y.backward(vec({1, 2, 3, 4}, {2, 2}));
  expect_near(x.grad().to_vector<double>(), {0, 0, 3, 3, 4, 0});
}

TEST(IndexGrad, ScatterAddGradcheckBothInputs) {
  const Shape ys = {3, 4, 5};
  for (int64_t dim = 0; dim < 3; ++dim) {
    // src larger than index in every dim (its extra elements get zero gradient); index longer
    // than y at dim so targets repeat.
    Shape is = {2, 3, 4};
    is[size_t(dim)] = ys[size_t(dim)] + 2;
    Shape ss = is;
    for (auto& e : ss) e += 1;
    const Tensor index =
        kernels::random_indices(is, ys[size_t(dim)], DType::i64, 40 + uint64_t(dim));
    expect_gradcheck(
        [&](const std::vector<Variable>& v) { return scatter_add(v[0], dim, index, v[1]); },
        {input(ys, 9, "base"), input(ss, 10, "src")}, "scatter_add dim " + std::to_string(dim));
    // src exactly index's shape, base constant.
    expect_gradcheck(
        [&](const std::vector<Variable>& v) { return scatter_add(v[0], dim, index, v[1]); },
        {Variable(kernels::random_tensor(ys, DType::f64, 11)), input(is, 12, "src")},
        "scatter_add same shape dim " + std::to_string(dim));
  }
}

TEST(IndexGrad, ScatterAddValuesOutOfPlace) {
  const Tensor b = vec({1, 1, 1, 1, 1, 1}, {2, 3});
  Variable base(b, true, "base");
  Variable src(vec({10, 20, 30, 40}, {2, 2}), true, "src");
  Variable y = scatter_add(base, 1, idx64({2, 2, 0, 1}, {2, 2}), src);
  expect_near(y.data().to_vector<double>(), {1, 1, 31, 31, 41, 1});
  expect_near(base.data().to_vector<double>(), {1, 1, 1, 1, 1, 1});  // untouched
  EXPECT_STREQ(y.grad_fn()->name(), "ScatterAdd");
  y.backward(vec({1, 2, 3, 4, 5, 6}, {2, 3}));
  expect_near(base.grad().to_vector<double>(), {1, 2, 3, 4, 5, 6});
  expect_near(src.grad().to_vector<double>(), {3, 3, 4, 5});
}

// ---- pad ------------------------------------------------------------------------------------

TEST(IndexGrad, PadGradcheckPadAndCrop) {
  const std::vector<std::vector<int64_t>> cases = {
      {1, 2}, {0, 1, 2, 0}, {-1, 2, 1, -1}, {1, 1, 0, 0, 2, 1}, {-1, -1, 0, 0, -1, 1}};
  for (const auto& pads : cases) {
    std::string what = "pad";
    for (int64_t p : pads) what += " " + std::to_string(p);
    expect_gradcheck([&](const std::vector<Variable>& v) { return pad(v[0], pads, 0.5); },
                     {input({2, 3, 4}, 13)}, what);
  }
  expect_gradcheck(
      [](const std::vector<Variable>& v) {
        return pad(transpose(v[0], 0, 1), {1, -1, 2, 0});
      },
      {input({4, 3}, 14)}, "pad transposed");
}

TEST(IndexGrad, PadValues) {
  Variable x(vec({1, 2, 3, 4, 5, 6}, {2, 3}), true, "x");
  Variable y = pad(x, {1, -1, 0, 1}, 9);  // last dim: +1 before, crop 1 after; dim 0: +1 after
  EXPECT_EQ(y.sizes(), (Shape{3, 3}));
  expect_near(y.data().to_vector<double>(), {9, 1, 2, 9, 4, 5, 9, 9, 9});
  EXPECT_STREQ(y.grad_fn()->name(), "Pad");
  y.backward(vec({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}));
  expect_near(x.grad().to_vector<double>(), {2, 3, 0, 5, 6, 0});
}

// ---- one_hot --------------------------------------------------------------------------------

TEST(IndexGrad, OneHotValues) {
  const Tensor y = one_hot(idx64({2, 0, 1, 2}, {2, 2}), 3);
  EXPECT_EQ(y.sizes(), (Shape{2, 2, 3}));
  EXPECT_EQ(y.dtype(), DType::f32);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1}));
  const Tensor z = one_hot(idx32({1, 3}, {2}), 4, DType::i64);
  EXPECT_EQ(z.dtype(), DType::i64);
  EXPECT_EQ(z.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0, 0, 0, 0, 0, 1}));
  EXPECT_THROW(one_hot(idx64({3}, {1}), 3), Error);
}

// ---- dropout --------------------------------------------------------------------------------

TEST(IndexGrad, DropoutIdentityWhenNotTrainingOrZeroP) {
  Variable x(vec({1, 2, 3}, {3}), true, "x");
  kernels::Generator gen(5);
  EXPECT_EQ(dropout(x, 0.5, false, gen).impl(), x.impl());
  EXPECT_EQ(dropout(x, 0.0, true, gen).impl(), x.impl());
  EXPECT_EQ(gen.offset(), 0u);  // nothing drawn
  EXPECT_THROW(dropout(x, 1.5, true, gen), Error);
}

TEST(IndexGrad, DropoutMaskReproducibleKeepFractionAndGradient) {
  const int64_t n = 100000;
  const double p = 0.3;
  Variable x(Tensor::ones({n}), true, "x");
  kernels::Generator gen(1234, 8);
  Variable y = dropout(x, p, true, gen);
  EXPECT_EQ(gen.offset(), 8u + uint64_t(n + 3) / 4);  // advanced past the blocks it used
  EXPECT_STREQ(y.grad_fn()->name(), "Dropout");
  const std::vector<float> yv = y.data().to_vector<float>();
  const float kept = float(1.0 / (1.0 - p));
  int64_t count = 0;
  for (float v : yv) {
    ASSERT_TRUE(v == 0.0f || v == kept) << v;
    count += v != 0.0f;
  }
  // Binomial std of the fraction: sqrt(p (1 - p) / n) = 0.00145; allow ~7 sigma.
  EXPECT_NEAR(double(count) / double(n), 1 - p, 0.01);

  // The same generator state gives the same mask, with either CPU variant.
  for (const char* variant : {"cpu.ref", "cpu.omp"}) {
    kernels::ScopedVariant use("dropout_fwd", variant);
    kernels::Generator again(1234, 8);
    EXPECT_EQ(dropout(Variable(Tensor::ones({n})), p, true, again).data().to_vector<float>(), yv)
        << variant;
  }
  // A different offset gives a different mask.
  kernels::Generator other(1234, 8 + uint64_t(n));
  EXPECT_NE(dropout(Variable(Tensor::ones({n})), p, true, other).data().to_vector<float>(), yv);

  // dx = mask / (1 - p) * dy; with x = 1, y = mask / (1 - p).
  y.backward(Tensor::ones({n}));
  EXPECT_EQ(x.grad().to_vector<float>(), yv);
}

TEST(IndexGrad, DropoutGradcheckAndAllDropped) {
  kernels::Generator gen(77);
  // Every call of f draws from the same state: the same mask each time.
  expect_gradcheck(
      [&](const std::vector<Variable>& v) {
        gen.set_state(77, 3);
        return dropout(v[0], 0.4, true, gen);
      },
      {input({3, 5, 7}, 15)}, "dropout");
  expect_gradcheck(
      [&](const std::vector<Variable>& v) {
        gen.set_state(77, 3);
        return dropout(transpose(v[0], 0, 1), 0.6, true, gen);
      },
      {input({5, 3}, 16)}, "dropout transposed");
  Variable x(vec({1, 2, 3}, {3}), true, "x");
  Variable y = dropout(x, 1.0, true, gen);
  expect_near(y.data().to_vector<double>(), {0, 0, 0});
  y.backward(vec({1, 1, 1}, {3}));
  expect_near(x.grad().to_vector<double>(), {0, 0, 0});
}

}  // namespace
}  // namespace aim::autograd
