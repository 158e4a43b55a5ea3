// layer_norm, embedding and the losses (autograd/functions/nn.h): gradcheck of every function
// (affine and not, repeated indices and padding_idx, ignored targets and label smoothing, every
// reduction, pos_weight); forward values by hand; parameter gradients accumulate (+=).
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/engine.h"
#include "autograd/functions/embedding.h"
#include "autograd/functions/index.h"
#include "autograd/functions/layer_norm.h"
#include "autograd/functions/loss.h"
#include "autograd/functions/shape.h"
#include "autograd/gradcheck.h"
#include "kernels/testing.h"

namespace aim::autograd {
namespace {

using Fn = std::function<Variable(const std::vector<Variable>&)>;
using kernels::Reduction;
const Reduction kReductions[] = {Reduction::none, Reduction::mean, Reduction::sum};

Variable param(const Shape& s, uint64_t seed, const char* name, bool requires_grad = true,
               double lo = -1, double hi = 1) {
  return Variable(kernels::random_tensor(s, DType::f64, seed, lo, hi), requires_grad, name);
}

Tensor vec(const std::vector<double>& v, const Shape& s) {
  return Tensor::from_vector<double>(v, s);
}

Tensor idx(const std::vector<int64_t>& v, const Shape& s, DType t = DType::i64) {
  return Tensor::from_vector<int64_t>(v, s).to(t);
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want,
                 double tol = 1e-12) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

void expect_gradcheck(const Fn& f, const std::vector<Variable>& in, const std::string& what) {
  const GradcheckResult r = gradcheck(f, in);
  EXPECT_TRUE(r.ok) << what << ": " << r.message;
}

// ---- layer_norm ------------------------------------------------------------------------------

TEST(NnGrad, LayerNormAffineAndNot) {
  Variable x = param({2, 3, 5}, 1, "x", true, -2, 2);
  Variable w = param({5}, 2, "weight", true, 0.5, 1.5), b = param({5}, 3, "bias");
  expect_gradcheck(
      [](const std::vector<Variable>& v) { return layer_norm(v[0], v[1], v[2], 1e-5); }, {x, w, b},
      "affine");
  expect_gradcheck(
      [](const std::vector<Variable>& v) { return layer_norm(v[0], Variable(), Variable()); }, {x},
      "no affine");
  expect_gradcheck(
      [](const std::vector<Variable>& v) { return layer_norm(v[0], v[1], Variable()); }, {x, w},
      "weight only");
  expect_gradcheck(
      [](const std::vector<Variable>& v) { return layer_norm(v[0], Variable(), v[1]); }, {x, b},
      "bias only");
  // Parameters only (x constant) and x only (parameters constant).
  Variable xc = param({3, 7}, 4, "x", false, -2, 2);
  Variable w7 = param({7}, 5, "weight", true, 0.5, 1.5), b7 = param({7}, 6, "bias");
  expect_gradcheck([](const std::vector<Variable>& v) { return layer_norm(v[0], v[1], v[2]); },
                   {xc, w7, b7}, "constant x");
  Variable x7 = param({3, 7}, 7, "x", true, -2, 2);
  Variable wc = param({7}, 8, "weight", false, 0.5, 1.5), bc = param({7}, 9, "bias", false);
  expect_gradcheck([](const std::vector<Variable>& v) { return layer_norm(v[0], v[1], v[2]); },
                   {x7, wc, bc}, "constant parameters");
  // A transposed (strided) input.
  Variable xt = param({5, 3}, 10, "x", true, -2, 2);
  expect_gradcheck(
      [](const std::vector<Variable>& v) { return layer_norm(transpose(v[0], 0, 1), v[1], v[2]); },
      {xt, w, b}, "transposed x");
}

TEST(NnGrad, LayerNormValues) {
  const double r = 1 / std::sqrt(2.0 / 3.0 + 1e-5);
  Variable x(vec({1, 2, 3, 4, 4, 4}, {2, 3}));
  expect_near(layer_norm(x, Variable(), Variable()).data().to_vector<double>(), {-r, 0, r, 0, 0, 0},
              1e-9);
  Variable w(vec({2, 2, 2}, {3})), b(vec({1, 1, 1}, {3}));
  expect_near(layer_norm(x, w, b).data().to_vector<double>(), {1 - 2 * r, 1, 1 + 2 * r, 1, 1, 1},
              1e-9);
}

// ---- embedding -------------------------------------------------------------------------------

TEST(NnGrad, EmbeddingRepeatedIndices) {
  Variable w = param({5, 3}, 11, "weight");
  const Tensor i = idx({1, 3, 1, 0, 1, 4}, {2, 3});
  expect_gradcheck([&](const std::vector<Variable>& v) { return embedding(v[0], i); }, {w},
                   "repeated i64 indices");
  expect_gradcheck(
      [&](const std::vector<Variable>& v) { return embedding(v[0], i.to(DType::i32)); }, {w},
      "i32 indices");
  // padding_idx not among the indices: the gradient is the plain one.
  expect_gradcheck([&](const std::vector<Variable>& v) { return embedding(v[0], i, 2); }, {w},
                   "absent padding_idx");
}

TEST(NnGrad, EmbeddingPaddingIdxGetsNoGradient) {
  // The padding row is read by the forward but receives no gradient (F.embedding), so it is
  // checked against the plain gradient with that row zeroed rather than by finite differences.
  Variable w(vec({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2}), true, "weight");
  const Tensor i = idx({1, 3, 1, 2}, {4});
  const Variable y = embedding(w, i, 1);
  expect_near(y.data().to_vector<double>(), {10, 11, 30, 31, 10, 11, 20, 21});
  y.backward(vec({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}));
  expect_near(w.grad().to_vector<double>(), {0, 0, 0, 0, 7, 8, 3, 4});
  // Without padding row 1 collects two rows of dy.
  w.zero_grad();
  embedding(w, i).backward(vec({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}));
  expect_near(w.grad().to_vector<double>(), {0, 0, 6, 8, 7, 8, 3, 4});
}

// embedding_cat: the tables' rows gathered into their column slices of one result equal the
// concatenation of the separate lookups; gradcheck through both tables (one with a padding row,
// one table used twice, which accumulates both slices' gradients).
TEST(NnGrad, EmbeddingCatEqualsConcatOfLookups) {
  Variable a = param({5, 3}, 21, "a"), b = param({4, 2}, 22, "b");
  const Tensor ia = idx({1, 3, 1, 0, 4, 4}, {2, 3}), ib = idx({3, 0, 2, 2, 1, 0}, {2, 3});
  const Variable y = embedding_cat({a, b}, {ia, ib}, {-1, -1});
  ASSERT_EQ(y.sizes(), (Shape{2, 3, 5}));
  const Variable want = concat({embedding(a, ia), embedding(b, ib)}, -1);
  expect_near(y.data().to_vector<double>(), want.data().to_vector<double>(), 0);
  expect_gradcheck(
      [&](const std::vector<Variable>& v) {
        return embedding_cat({v[0], v[1]}, {ia, ib.to(DType::i32)}, {-1, -1});
      },
      {a, b}, "two tables");
  expect_gradcheck(
      [&](const std::vector<Variable>& v) {
        return embedding_cat({v[0], v[1], v[0]}, {ia, ib, ib}, {-1, -1, -1});
      },
      {a, b}, "a table used twice");
  // The padding row (b's row 2) gets no gradient, as embedding's.
  Variable c(vec({0, 1, 10, 11, 20, 21}, {3, 2}), true, "c");
  const Tensor ic = idx({2, 0, 2}, {3});
  embedding_cat({c, c}, {ic, ic}, {2, -1})
      .backward(vec({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4}));
  expect_near(c.grad().to_vector<double>(), {5 + 7, 6 + 8, 0, 0, 3 + 11, 4 + 12});
}

TEST(NnGrad, ParameterGradientsAccumulateAcrossBackwards) {
  Variable w(vec({0, 1, 10, 11, 20, 21}, {3, 2}), true, "weight");
  const Tensor i = idx({2, 0, 2}, {1, 3});
  embedding(w, i).backward(Tensor::ones({1, 3, 2}, DType::f64));
  expect_near(w.grad().to_vector<double>(), {1, 1, 0, 0, 2, 2});
  embedding(w, i).backward(Tensor::ones({1, 3, 2}, DType::f64));
  expect_near(w.grad().to_vector<double>(), {2, 2, 0, 0, 4, 4});

  Variable x = param({3, 4}, 12, "x", false, -2, 2);
  Variable g = param({4}, 13, "weight", true, 0.5, 1.5), b = param({4}, 14, "bias");
  const Tensor dy = kernels::random_tensor({3, 4}, DType::f64, 15);
  layer_norm(x, g, b).backward(dy);
  const std::vector<double> g1 = g.grad().to_vector<double>(), b1 = b.grad().to_vector<double>();
  layer_norm(x, g, b).backward(dy);
  for (size_t k = 0; k < g1.size(); ++k) {
    EXPECT_NEAR(g.grad().to_vector<double>()[k], 2 * g1[k], 1e-12);
    EXPECT_NEAR(b.grad().to_vector<double>()[k], 2 * b1[k], 1e-12);
  }
}

// ---- cross entropy ---------------------------------------------------------------------------

TEST(NnGrad, CrossEntropyEveryReductionIgnoreAndSmoothing) {
  Variable logits = param({5, 7}, 16, "logits", true, -2, 2);
  const Tensor t = idx({3, -100, 0, 6, 3}, {5});
  const Tensor t2 = idx({3, 2, 0, 2, 6}, {5}, DType::i32);  // ignore_index = 2
  for (Reduction r : kReductions)
    for (double ls : {0.0, 0.2}) {
      expect_gradcheck(
          [&](const std::vector<Variable>& v) { return cross_entropy(v[0], t, r, -100, ls); },
          {logits}, str(kernels::reduction_name(r), " smoothing ", ls, " ignore -100"));
      expect_gradcheck(
          [&](const std::vector<Variable>& v) { return cross_entropy(v[0], t2, r, 2, ls); },
          {logits}, str(kernels::reduction_name(r), " smoothing ", ls, " ignore 2"));
    }
}

TEST(NnGrad, CrossEntropyValues) {
  Variable logits(vec({0, 0, 1, 2}, {2, 2}));
  const double lse = std::log(std::exp(1.0) + std::exp(2.0));
  const Tensor t = idx({0, 1}, {2});
  expect_near(cross_entropy(logits, t, Reduction::none).data().to_vector<double>(),
              {std::log(2.0), lse - 2}, 1e-12);
  EXPECT_NEAR(cross_entropy(logits, t, Reduction::sum).data().item(), std::log(2.0) + lse - 2,
              1e-12);
  // Mean over the non-ignored targets only.
  EXPECT_NEAR(cross_entropy(logits, idx({0, -100}, {2})).data().item(), std::log(2.0), 1e-12);
  // Label smoothing: (1 - e) nll + e mean_v(-log p_v).
  const double e = 0.25;  // exact in the kernel's float label_smoothing
  const double smoothed = (1 - e) * (lse - 2) + e * ((lse - 1) + (lse - 2)) / 2;
  expect_near(cross_entropy(logits, t, Reduction::none, -100, e).data().to_vector<double>(),
              {std::log(2.0), smoothed}, 1e-12);
}

// ---- pointwise losses ------------------------------------------------------------------------

TEST(NnGrad, BceWithLogitsEveryReductionAndPosWeight) {
  Variable x = param({3, 5}, 17, "logits", true, -3, 3);
  const Tensor t = kernels::random_tensor({3, 5}, DType::f64, 18, 0, 1);
  const Tensor pw = kernels::random_tensor({5}, DType::f64, 19, 0.5, 3);
  for (Reduction r : kReductions) {
    expect_gradcheck([&](const std::vector<Variable>& v) { return bce_with_logits(v[0], t, r); },
                     {x}, str("bce ", kernels::reduction_name(r)));
    expect_gradcheck(
        [&](const std::vector<Variable>& v) { return bce_with_logits(v[0], t, r, pw); }, {x},
        str("bce pos_weight ", kernels::reduction_name(r)));
  }
}

TEST(NnGrad, MseAndSmoothL1EveryReduction) {
  Variable x = param({3, 5}, 20, "input", true, -3, 3);
  const Tensor t = kernels::random_tensor({3, 5}, DType::f64, 21, -3, 3);
  for (Reduction r : kReductions) {
    expect_gradcheck([&](const std::vector<Variable>& v) { return mse_loss(v[0], t, r); }, {x},
                     str("mse ", kernels::reduction_name(r)));
    for (double beta : {1.0, 0.5, 0.0})  // random |x - t| never sits on beta (or 0)
      expect_gradcheck(
          [&](const std::vector<Variable>& v) { return smooth_l1_loss(v[0], t, beta, r); }, {x},
          str("smooth_l1 beta ", beta, " ", kernels::reduction_name(r)));
  }
}

TEST(NnGrad, PointwiseLossValues) {
  Variable x(vec({1, 2, 3}, {3}));
  const Tensor t = vec({0, 0, 1}, {3});
  EXPECT_NEAR(mse_loss(x, t).data().item(), 3, 1e-12);
  EXPECT_NEAR(mse_loss(x, t, Reduction::sum).data().item(), 9, 1e-12);
  expect_near(mse_loss(x, t, Reduction::none).data().to_vector<double>(), {1, 4, 4});

  Variable s(vec({0.5, -2, 7}, {3}));
  const Tensor st = vec({0, 0, 7}, {3});
  expect_near(smooth_l1_loss(s, st, 1.0, Reduction::none).data().to_vector<double>(),
              {0.125, 1.5, 0});
  EXPECT_NEAR(smooth_l1_loss(s, st).data().item(), 1.625 / 3, 1e-12);
  EXPECT_NEAR(smooth_l1_loss(s, st, 0.0, Reduction::sum).data().item(), 2.5, 1e-12);

  Variable z(vec({0, 0}, {1, 2}));
  const Tensor bt = vec({1, 0}, {1, 2});
  const double l2 = std::log(2.0);
  expect_near(bce_with_logits(z, bt, Reduction::none).data().to_vector<double>(), {l2, l2});
  expect_near(bce_with_logits(z, bt, Reduction::none, vec({3, 3}, {2})).data().to_vector<double>(),
              {3 * l2, l2});
  // f32 target with f64 input is cast to the input's dtype.
  EXPECT_NEAR(mse_loss(x, t.to(DType::f32)).data().item(), 3, 1e-12);
}

TEST(NnGrad, LossGradientValues) {
  // d mse(mean)/dx = 2 (x - t) / n; d ce(mean)/dlogits = (softmax - onehot) / n.
  Variable x(vec({1, 2, 3}, {3}), true, "x");
  mse_loss(x, vec({0, 0, 1}, {3})).backward();
  expect_near(x.grad().to_vector<double>(), {2.0 / 3, 4.0 / 3, 4.0 / 3});
  Variable l(vec({0, 0, 0, 0}, {2, 2}), true, "logits");
  cross_entropy(l, idx({0, 1}, {2})).backward();
  expect_near(l.grad().to_vector<double>(), {-0.25, 0.25, 0.25, -0.25});
}

// The default f32 variants agree with f64 (forward and gradient): loss outputs are f32, the
// gradients have the input's dtype.
TEST(NnGrad, F32MatchesF64) {
  const Tensor i = idx({1, 3, 1, 0, 1, 4}, {2, 3});
  const Tensor ct = idx({3, -100, 0, 6, 3}, {5});
  const Tensor pt = kernels::random_tensor({5, 7}, DType::f64, 30, 0, 1);
  const std::vector<std::pair<std::string, std::function<Variable(const Variable&)>>> cases = {
      {"layer_norm", [](const Variable& x) { return layer_norm(x, Variable(), Variable()); }},
      {"embedding", [&](const Variable& w) { return embedding(w, i, 3); }},
      {"cross_entropy",
       [&](const Variable& x) { return cross_entropy(x, ct, Reduction::mean, -100, 0.1); }},
      {"bce", [&](const Variable& x) { return bce_with_logits(x, pt, Reduction::sum); }},
      {"mse", [&](const Variable& x) { return mse_loss(x, pt, Reduction::none); }},
      {"smooth_l1", [&](const Variable& x) { return smooth_l1_loss(x, pt, 0.5); }},
  };
  for (const auto& [what, f] : cases) {
    const Tensor x64 = kernels::random_tensor({5, 7}, DType::f64, 31, -2, 2);
    Variable a(x64, true), b(x64.to(DType::f32), true);
    const Variable ya = f(a), yb = f(b);
    EXPECT_EQ(yb.dtype(), DType::f32) << what;
    const Tensor dy = kernels::random_tensor(ya.sizes(), DType::f64, 32);
    ya.backward(dy);
    yb.backward(dy.to(DType::f32));
    EXPECT_EQ(b.grad().dtype(), DType::f32) << what;
    const auto va = ya.data().to_vector<double>(), vb = yb.data().to_vector<double>();
    for (size_t k = 0; k < va.size(); ++k) EXPECT_NEAR(va[k], vb[k], 1e-4) << what << " y " << k;
    const auto ga = a.grad().to_vector<double>(), gb = b.grad().to_vector<double>();
    for (size_t k = 0; k < ga.size(); ++k) EXPECT_NEAR(ga[k], gb[k], 1e-4) << what << " dx " << k;
  }
}

}  // namespace
}  // namespace aim::autograd
