// losses: PyTorch semantics that the registry-driven comparison (variant vs cpu.ref) cannot show.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/loss/loss.h"
#include "kernels/registry.h"

namespace aim::kernels {
namespace {

double ce(const std::vector<float>& x, const std::vector<int64_t>& t, int64_t V, Reduction r,
          float eps, const char* variant) {
  ScopedVariant sv("cross_entropy_fwd", variant);
  const int64_t N = int64_t(t.size());
  CrossEntropyFwdArgs a;
  a.logits = Tensor::from_vector(x, {N, V});
  a.target = Tensor::from_vector(t, {N});
  a.loss = Tensor::empty(r == Reduction::none ? Shape{N} : Shape{});
  a.lse = Tensor::empty({N});
  a.label_smoothing = eps;
  a.reduction = r;
  cross_entropy_fwd(a);
  return a.loss.to_vector<double>()[0];
}

TEST(CrossEntropy, SmoothingAndIgnoreMatchPyTorchFormula) {
  const std::vector<float> x = {1, 2, 3, 0.5f, -1, 0};
  for (const char* v : {"cpu.ref", "cpu.omp"}) {
    // Row 0: target 2; row 1 ignored. mean over the one non-ignored row.
    const double lse0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
    const double want = 0.9 * (lse0 - 3) + 0.1 * (lse0 - 2.0);
    EXPECT_NEAR(ce(x, {2, -100}, 3, Reduction::mean, 0.1f, v), want, 1e-5) << v;
    EXPECT_NEAR(ce(x, {2, -100}, 3, Reduction::sum, 0.1f, v), want, 1e-5) << v;
    // All ignored: mean is 0/0 = NaN (as PyTorch), sum is 0.
    EXPECT_TRUE(std::isnan(ce(x, {-100, -100}, 3, Reduction::mean, 0.f, v))) << v;
    EXPECT_EQ(ce(x, {-100, -100}, 3, Reduction::sum, 0.f, v), 0.0) << v;
  }
}

TEST(CrossEntropy, BadTargetIsAnError) {
  const std::vector<float> x = {1, 2, 3, 0.5f, -1, 0};
  for (const char* v : {"cpu.ref", "cpu.omp"}) {
    try {
      ce(x, {2, 3}, 3, Reduction::mean, 0.f, v);
      FAIL() << v << " accepted target 3 with V = 3";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("target 3 at position 1"), std::string::npos)
          << e.what();
    }
  }
}

TEST(BceWithLogits, PosWeightAndStability) {
  for (const char* v : {"cpu.ref", "cpu.omp"}) {
    ScopedVariant sv("bce_with_logits_fwd", v);
    BceWithLogitsFwdArgs a;
    a.logits = Tensor::from_vector<float>({0.5f, -200.f}, {1, 2});
    a.target = Tensor::from_vector<float>({1.f, 0.f}, {1, 2});
    a.pos_weight = Tensor::from_vector<float>({3.f, 2.f}, {2});
    a.loss = Tensor::empty({1, 2});
    a.reduction = Reduction::none;
    bce_with_logits_fwd(a);
    const std::vector<double> l = a.loss.to_vector<double>();
    EXPECT_NEAR(l[0], 3 * std::log1p(std::exp(-0.5)), 1e-6) << v;  // pw * -log sigmoid(0.5)
    EXPECT_NEAR(l[1], 0.0, 1e-6) << v;                             // no overflow at x = -200
  }
}

TEST(SmoothL1, BetaZeroIsL1) {
  for (const char* v : {"cpu.ref", "cpu.omp"}) {
    ScopedVariant sv("smooth_l1_bwd", v);
    SmoothL1BwdArgs a;
    a.dloss = Tensor::full({}, 1.0);
    a.input = Tensor::from_vector<float>({1.f, 0.f, -2.f}, {3});
    a.target = Tensor::zeros({3});
    a.dinput = Tensor::empty({3});
    a.reduction = Reduction::sum;
    a.beta = 0.f;
    smooth_l1_bwd(a);
    EXPECT_EQ(a.dinput.to_vector<float>(), (std::vector<float>{1, 0, -1})) << v;
  }
}

}  // namespace
}  // namespace aim::kernels
