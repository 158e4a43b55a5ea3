// batchnorm and LRN: PyTorch semantics that the registry-driven comparison (variant vs cpu.ref)
// cannot show. Expected values come from torch 1.13 (F.batch_norm, F.local_response_norm and
// autograd, float64) on the fixed inputs below, or from the formulas in kernels/norm/README.md.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "kernels/norm/batchnorm.h"
#include "kernels/norm/lrn.h"
#include "kernels/registry.h"
#include "kernels/testing.h"

namespace aim::kernels {
namespace {

const char* const kCpuVariants[] = {"cpu.ref", "cpu.omp"};

// x[i] = c * sin(a * i + b) + 0.05 * i: the inputs given to torch.
std::vector<double> wave(int64_t n, double a, double b, double c) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = c * std::sin(a * double(i) + b) + 0.05 * double(i);
  return v;
}
std::vector<double> cosines(int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = std::cos(0.5 * double(i));
  return v;
}

Tensor t64(const std::vector<double>& v, const Shape& s) { return Tensor::from_vector(v, s); }

void expect_near_all(const Tensor& got, const std::vector<double>& want, double tol,
                     const std::string& what) {
  const std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(g[i], want[i], tol * (1.0 + std::fabs(want[i]))) << what << " at " << i;
}

// Runs `f` and expects an aim::Error whose message contains `part`.
void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << part;
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << part;
  }
}

// ---- batchnorm ------------------------------------------------------------------------------

// torch: x = wave(12, 0.7, 0.3, 2) as [2, 3, 2]; gamma, beta, running stats as below; training,
// momentum 0.1, eps 1e-5; backward of y with dy = cos(0.5 i).
const std::vector<double> kBnGamma = {1.5, 0.5, -2.0}, kBnBeta = {0.25, -1.0, 0.5};
const std::vector<double> kBnRunMean = {0.1, -0.2, 0.3}, kBnRunVar = {1.0, 2.0, 0.5};
const std::vector<double> kTorchY = {1.07733293444,   2.29158433555,  -0.439623197338,
                                     -0.764063480163, 1.51569010273,  3.27264308885,
                                     -1.31107860999,  -1.05783866,    -1.79391032876,
                                     -1.00240299373,  -1.16502518751, -1.62330800408};
const std::vector<double> kTorchRunMean = {0.0713003209042, -0.0722603655157, 0.370975881937};
const std::vector<double> kTorchRunVar = {1.16531339401, 1.90741165442, 0.72293671313};
const std::vector<double> kTorchDx = {0.549556035115,   -0.353776832293, 0.0743970816801,
                                      -0.0355638665146, 0.0930476881446, -0.0780967587889,
                                      -0.0457298338158, -0.150049369006, 0.0421816669672,
                                      -0.0810148821326, 0.197068157472,  -0.212019086827};
const std::vector<double> kTorchDgamma = {3.59278807699, 1.67780666148, 2.31049520977};
const std::vector<double> kTorchDbeta = {-0.0488666220009, -0.253399912759, -0.22495849234};

TEST(BatchNorm, TrainingMatchesPyTorch) {
  for (DType t : {DType::f64, DType::f32}) {
    const double tol = t == DType::f64 ? 1e-9 : 2e-6;
    for (const char* v : kCpuVariants) {
      SCOPED_TRACE(std::string(v) + " " + dtype_name(t));
      const Shape xs = {2, 3, 2};
      BatchNormFwdArgs a;
      a.x = t64(wave(12, 0.7, 0.3, 2.0), xs).to(t);
      a.gamma = t64(kBnGamma, {3}).to(t);
      a.beta = t64(kBnBeta, {3}).to(t);
      a.running_mean = t64(kBnRunMean, {3}).to(t);
      a.running_var = t64(kBnRunVar, {3}).to(t);
      a.y = Tensor::empty(xs, t);
      a.save_mean = Tensor::empty({3}, t);
      a.save_rstd = Tensor::empty({3}, t);
      {
        ScopedVariant sv("batchnorm_fwd", v);
        batchnorm_fwd(a);
      }
      expect_near_all(a.y, kTorchY, tol, "y");
      expect_near_all(a.running_mean, kTorchRunMean, tol, "running_mean");
      expect_near_all(a.running_var, kTorchRunVar, tol, "running_var");

      BatchNormBwdArgs b;
      b.dy = t64(cosines(12), xs).to(t);
      b.x = a.x;
      b.gamma = a.gamma;
      b.save_mean = a.save_mean;
      b.save_rstd = a.save_rstd;
      b.dx = Tensor::empty(xs, t);
      b.dgamma = Tensor::zeros({3}, t);
      b.dbeta = Tensor::full({3}, 1.0, t);  // accumulates: torch's value + 1
      {
        ScopedVariant sv("batchnorm_bwd", v);
        batchnorm_bwd(b);
      }
      expect_near_all(b.dx, kTorchDx, tol, "dx");
      expect_near_all(b.dgamma, kTorchDgamma, tol, "dgamma");
      std::vector<double> db1 = kTorchDbeta;
      for (double& d : db1) d += 1.0;
      expect_near_all(b.dbeta, db1, tol, "dbeta (+= 1)");
    }
  }
}

// Hand-computed: channel 0 holds 1, 2, 3, 4 (mean 2.5, biased var 1.25, unbiased 5/3), channel 1
// holds 10, 20, 30, 40 (mean 25, biased var 125, unbiased 500/3). x is [N=2, C=2, S=2].
TEST(BatchNorm, HandComputedStatisticsAndRunningUpdate) {
  const std::vector<double> x = {1, 2, 10, 20, 3, 4, 30, 40};
  for (const char* v : kCpuVariants) {
    SCOPED_TRACE(v);
    ScopedVariant sv("batchnorm_fwd", v);
    BatchNormFwdArgs a;
    a.x = t64(x, {2, 2, 2});
    a.running_mean = t64({0.0, 1.0}, {2});
    a.running_var = t64({1.0, 2.0}, {2});
    a.y = Tensor::empty({2, 2, 2}, DType::f64);
    a.save_mean = Tensor::empty({2}, DType::f64);
    a.save_rstd = Tensor::empty({2}, DType::f64);
    a.momentum = 0.25;
    a.eps = 0.0;
    batchnorm_fwd(a);  // no affine
    expect_near_all(a.save_mean, {2.5, 25.0}, 1e-14, "save_mean");
    expect_near_all(a.save_rstd, {1 / std::sqrt(1.25), 1 / std::sqrt(125.0)}, 1e-14, "save_rstd");
    expect_near_all(a.running_mean, {0.75 * 0 + 0.25 * 2.5, 0.75 * 1 + 0.25 * 25}, 1e-14,
                    "running_mean");
    expect_near_all(a.running_var, {0.75 * 1 + 0.25 * 5.0 / 3, 0.75 * 2 + 0.25 * 500.0 / 3}, 1e-14,
                    "running_var (unbiased)");
    const double r0 = 1 / std::sqrt(1.25), r1 = 1 / std::sqrt(125.0);
    expect_near_all(a.y,
                    {-1.5 * r0, -0.5 * r0, -15 * r1, -5 * r1, 0.5 * r0, 1.5 * r0, 5 * r1, 15 * r1},
                    1e-14, "y");
  }
}

TEST(BatchNorm, TrainingWithoutRunningStatisticsAcceptsOneValuePerChannel) {
  for (const char* v : kCpuVariants) {
    SCOPED_TRACE(v);
    ScopedVariant sv("batchnorm_fwd", v);
    BatchNormFwdArgs a;
    a.x = t64({3.0, -7.0}, {1, 2});  // N*S = 1: variance 0
    a.y = Tensor::empty({1, 2}, DType::f64);
    a.save_mean = Tensor::empty({2}, DType::f64);
    a.save_rstd = Tensor::empty({2}, DType::f64);
    a.eps = 0.25;
    batchnorm_fwd(a);
    expect_near_all(a.y, {0.0, 0.0}, 0, "y");
    expect_near_all(a.save_mean, {3.0, -7.0}, 0, "save_mean");
    expect_near_all(a.save_rstd, {2.0, 2.0}, 1e-15, "save_rstd = 1/sqrt(0 + 0.25)");
  }
}

// Eval: the running statistics normalise, save_* receive them (rstd form), running stats are
// not touched. Checked for the [N, C] and the [N, C, H, W] layouts.
TEST(BatchNorm, EvalUsesRunningStatistics) {
  for (const Shape& xs : {Shape{3, 2}, Shape{2, 2, 3, 2}}) {
    const int64_t n = shape_numel(xs);
    const int64_t S = n / (xs[0] * 2);
    const std::vector<double> x = wave(n, 0.9, 0.1, 1.5);
    const std::vector<double> g = {2.0, -0.5}, b = {0.5, 1.0}, rm = {0.3, -0.4}, rv = {0.8, 2.5};
    const double eps = 1e-3;
    std::vector<double> want(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const size_t c = size_t((i / S) % 2);
      want[size_t(i)] = (x[size_t(i)] - rm[c]) / std::sqrt(rv[c] + eps) * g[c] + b[c];
    }
    for (const char* v : kCpuVariants) {
      SCOPED_TRACE(std::string(v) + " " + to_string(xs));
      ScopedVariant sv("batchnorm_fwd", v);
      BatchNormFwdArgs a;
      a.x = t64(x, xs);
      a.gamma = t64(g, {2});
      a.beta = t64(b, {2});
      a.running_mean = t64(rm, {2});
      a.running_var = t64(rv, {2});
      a.y = Tensor::empty(xs, DType::f64);
      a.training = false;
      a.eps = eps;
      batchnorm_fwd(a);  // without save_*
      expect_near_all(a.y, want, 1e-14, "y");
      a.save_mean = Tensor::empty({2}, DType::f64);
      a.save_rstd = Tensor::empty({2}, DType::f64);
      a.y.fill_(0.0);
      batchnorm_fwd(a);
      expect_near_all(a.y, want, 1e-14, "y (with save_*)");
      expect_near_all(a.save_mean, rm, 0, "save_mean");
      expect_near_all(a.save_rstd, {1 / std::sqrt(rv[0] + eps), 1 / std::sqrt(rv[1] + eps)}, 1e-15,
                      "save_rstd");
      expect_near_all(a.running_mean, rm, 0, "running_mean untouched");
      expect_near_all(a.running_var, rv, 0, "running_var untouched");
    }
  }
}

// Frozen BN (training = false): dx = dy * gamma * rstd, dgamma += sum dy * xhat, dbeta += sum dy.
TEST(BatchNorm, FrozenBackward) {
  const Shape xs = {2, 2, 3};
  const std::vector<double> x = wave(12, 0.4, 0.7, 2.0), dy = cosines(12);
  const std::vector<double> g = {1.5, -0.75}, m = {0.2, -0.1}, r = {0.9, 1.7};
  std::vector<double> dx(12), dg = {0.5, -0.5}, db = {1.0, 2.0};
  for (int64_t i = 0; i < 12; ++i) {
    const size_t c = size_t((i / 3) % 2);
    dx[size_t(i)] = dy[size_t(i)] * g[c] * r[c];
    dg[c] += dy[size_t(i)] * (x[size_t(i)] - m[c]) * r[c];
    db[c] += dy[size_t(i)];
  }
  for (const char* v : kCpuVariants) {
    SCOPED_TRACE(v);
    ScopedVariant sv("batchnorm_bwd", v);
    BatchNormBwdArgs a;
    a.dy = t64(dy, xs);
    a.x = t64(x, xs);
    a.gamma = t64(g, {2});
    a.save_mean = t64(m, {2});
    a.save_rstd = t64(r, {2});
    a.dx = Tensor::empty(xs, DType::f64);
    a.dgamma = t64({0.5, -0.5}, {2});
    a.dbeta = t64({1.0, 2.0}, {2});
    a.training = false;
    batchnorm_bwd(a);
    expect_near_all(a.dx, dx, 1e-14, "dx");
    expect_near_all(a.dgamma, dg, 1e-14, "dgamma");
    expect_near_all(a.dbeta, db, 1e-14, "dbeta");

    // No affine, only dx wanted: dx = dy * rstd.
    BatchNormBwdArgs b = a;
    b.gamma = Tensor();
    b.dgamma = b.dbeta = Tensor();
    b.dx = Tensor::empty(xs, DType::f64);
    batchnorm_bwd(b);
    std::vector<double> dx1(12);
    for (int64_t i = 0; i < 12; ++i) dx1[size_t(i)] = dy[size_t(i)] * r[size_t((i / 3) % 2)];
    expect_near_all(b.dx, dx1, 1e-14, "dx without affine");
  }
}

// Float64 central differences of L = sum(dy * y) through the training forward (no running
// statistics) against batchnorm_bwd's dx, dgamma and dbeta; with and without affine, [N, C, S]
// and [N, C].
TEST(BatchNorm, BackwardMatchesFiniteDifferences) {
  for (const Shape& xs : {Shape{3, 2, 5}, Shape{4, 3}}) {
    const int64_t n = shape_numel(xs), C = xs[1];
    for (bool affine : {true, false}) {
      for (const char* v : kCpuVariants) {
        SCOPED_TRACE(std::string(v) + " " + to_string(xs) + (affine ? " affine" : " no affine"));
        ScopedVariant sf("batchnorm_fwd", v);
        ScopedVariant sb("batchnorm_bwd", v);
        std::vector<double> x = wave(n, 1.3, 0.2, 1.0), g(static_cast<size_t>(C)),
                            b(static_cast<size_t>(C));
        for (int64_t c = 0; c < C; ++c) {
          g[size_t(c)] = 0.7 + 0.3 * double(c);
          b[size_t(c)] = 0.1 * double(c) - 0.2;
        }
        const std::vector<double> dy = cosines(n);
        auto loss = [&](const std::vector<double>& xv, const std::vector<double>& gv,
                        const std::vector<double>& bv, Tensor* sm, Tensor* sr) {
          BatchNormFwdArgs a;
          a.x = t64(xv, xs);
          if (affine) {
            a.gamma = t64(gv, {C});
            a.beta = t64(bv, {C});
          }
          a.y = Tensor::empty(xs, DType::f64);
          a.save_mean = Tensor::empty({C}, DType::f64);
          a.save_rstd = Tensor::empty({C}, DType::f64);
          a.eps = 1e-3;
          batchnorm_fwd(a);
          if (sm) *sm = a.save_mean;
          if (sr) *sr = a.save_rstd;
          const std::vector<double> y = a.y.to_vector<double>();
          double l = 0;
          for (size_t i = 0; i < y.size(); ++i) l += dy[i] * y[i];
          return l;
        };
        Tensor sm, sr;
        loss(x, g, b, &sm, &sr);
        BatchNormBwdArgs a;
        a.dy = t64(dy, xs);
        a.x = t64(x, xs);
        if (affine) a.gamma = t64(g, {C});
        a.save_mean = sm;
        a.save_rstd = sr;
        a.dx = Tensor::empty(xs, DType::f64);
        a.dgamma = Tensor::zeros({C}, DType::f64);
        a.dbeta = Tensor::zeros({C}, DType::f64);
        batchnorm_bwd(a);

        const double h = 1e-6;
        auto numeric = [&](std::vector<double>& p, size_t i) {
          const double keep = p[i];
          p[i] = keep + h;
          const double lp = loss(x, g, b, nullptr, nullptr);
          p[i] = keep - h;
          const double lm = loss(x, g, b, nullptr, nullptr);
          p[i] = keep;
          return (lp - lm) / (2 * h);
        };
        const std::vector<double> dx = a.dx.to_vector<double>();
        for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(dx[i], numeric(x, i), 1e-6) << "dx " << i;
        const std::vector<double> dg = a.dgamma.to_vector<double>();
        const std::vector<double> db = a.dbeta.to_vector<double>();
        for (size_t c = 0; c < size_t(C); ++c) {
          if (affine) {
            EXPECT_NEAR(dg[c], numeric(g, c), 1e-6) << "dgamma " << c;
            EXPECT_NEAR(db[c], numeric(b, c), 1e-6) << "dbeta " << c;
          } else {  // the gradient a gamma of 1 and a beta of 0 would get
            double sg = 0, sb = 0;
            const std::vector<double> yv = [&] {
              BatchNormFwdArgs f;
              f.x = t64(x, xs);
              f.y = Tensor::empty(xs, DType::f64);
              f.save_mean = Tensor::empty({C}, DType::f64);
              f.save_rstd = Tensor::empty({C}, DType::f64);
              f.eps = 1e-3;
              batchnorm_fwd(f);
              return f.y.to_vector<double>();
            }();
            const int64_t S = n / (xs[0] * C);
            for (int64_t i = 0; i < n; ++i)
              if (size_t((i / S) % C) == c) {
                sg += dy[size_t(i)] * yv[size_t(i)];
                sb += dy[size_t(i)];
              }
            EXPECT_NEAR(dg[c], sg, 1e-12) << "dgamma " << c;
            EXPECT_NEAR(db[c], sb, 1e-12) << "dbeta " << c;
          }
        }
      }
    }
  }
}

// 16-bit activations keep f32 parameters and statistics.
TEST(BatchNorm, HalfActivationsWithFloatStatistics) {
  const Shape xs = {4, 3, 5};
  const std::vector<double> x = wave(60, 0.3, 0.1, 1.0);
  for (DType t : {DType::f16, DType::bf16}) {
    for (const char* v : kCpuVariants) {
      SCOPED_TRACE(std::string(v) + " " + dtype_name(t));
      ScopedVariant sv("batchnorm_fwd", v);
      BatchNormFwdArgs a, r;
      a.x = t64(x, xs).to(t);
      a.gamma = Tensor::full({3}, 1.5, DType::f32);
      a.beta = Tensor::full({3}, 0.25, DType::f32);
      a.y = Tensor::empty(xs, t);
      a.save_mean = Tensor::empty({3}, DType::f32);
      a.save_rstd = Tensor::empty({3}, DType::f32);
      batchnorm_fwd(a);
      r = a;  // the same numbers in f64
      r.x = a.x.to(DType::f64);
      r.gamma = a.gamma.to(DType::f64);
      r.beta = a.beta.to(DType::f64);
      r.y = Tensor::empty(xs, DType::f64);
      r.save_mean = Tensor::empty({3}, DType::f64);
      r.save_rstd = Tensor::empty({3}, DType::f64);
      batchnorm_fwd(r);
      const double tol = t == DType::f16 ? 2e-3 : 1.6e-2;
      expect_near_all(a.y, r.y.to_vector<double>(), tol, "y");
      expect_near_all(a.save_mean, r.save_mean.to_vector<double>(), 1e-6, "save_mean");
      expect_near_all(a.save_rstd, r.save_rstd.to_vector<double>(), 1e-6, "save_rstd");
    }
  }
}

TEST(BatchNorm, ArgumentErrors) {
  auto fwd = [] {
    BatchNormFwdArgs a;
    a.x = Tensor::zeros({4, 3, 2});
    a.gamma = Tensor::ones({3});
    a.beta = Tensor::zeros({3});
    a.running_mean = Tensor::zeros({3});
    a.running_var = Tensor::ones({3});
    a.y = Tensor::empty({4, 3, 2});
    a.save_mean = Tensor::empty({3});
    a.save_rstd = Tensor::empty({3});
    return a;
  };
  for (const char* v : kCpuVariants) {
    SCOPED_TRACE(v);
    ScopedVariant sf("batchnorm_fwd", v);
    ScopedVariant sb("batchnorm_bwd", v);
    EXPECT_NO_THROW(batchnorm_fwd(fwd()));
    {
      BatchNormBwdArgs b;
      b.x = Tensor::zeros({4, 3, 2});
      b.dy = Tensor::zeros({4, 3, 2});
      b.save_mean = Tensor::zeros({3});
      b.save_rstd = Tensor::ones({3});
      b.dx = Tensor::empty({4, 3, 2});
      b.y_relu = Tensor::zeros({4, 3, 3});
      expect_error([&] { batchnorm_bwd(b); }, "[batchnorm_bwd] y_relu");
    }
    {
      BatchNormFwdArgs a = fwd();
      a.x = Tensor::zeros({4});
      expect_error([&] { batchnorm_fwd(a); }, "[batchnorm_fwd] x must be [N, C, ...], got [4] f32");
    }
    {
      BatchNormFwdArgs a = fwd();
      a.gamma = Tensor::ones({4});
      expect_error([&] { batchnorm_fwd(a); },
                   "[batchnorm_fwd] gamma must be contiguous [3] f32 (x is [4, 3, 2] f32), got [4] "
                   "f32");
    }
    {
      BatchNormFwdArgs a = fwd();
      a.x = Tensor::zeros({4, 3, 2}, DType::f16);
      a.y = Tensor::empty({4, 3, 2}, DType::f16);
      a.gamma = Tensor::ones({3}, DType::f16);
      expect_error([&] { batchnorm_fwd(a); },
                   "gamma must be contiguous [3] f32 (x is [4, 3, 2] f16)");
    }
    {
      BatchNormFwdArgs a = fwd();
      a.beta = Tensor();
      expect_error([&] { batchnorm_fwd(a); },
                   "gamma and beta must both be given or both be undefined");
    }
    {
      BatchNormFwdArgs a = fwd();
      a.y = Tensor::empty({4, 3});
      expect_error([&] { batchnorm_fwd(a); },
                   "[batchnorm_fwd] y must be contiguous [4, 3, 2] f32 like x, got [4, 3] f32");
    }
    {
      BatchNormFwdArgs a = fwd();
      a.save_rstd = Tensor();
      expect_error([&] { batchnorm_fwd(a); }, "training needs save_mean and save_rstd");
    }
    {
      BatchNormFwdArgs a = fwd();
      a.training = false;
      a.running_mean = a.running_var = Tensor();
      expect_error([&] { batchnorm_fwd(a); },
                   "eval mode normalises with running_mean and running_var");
    }
    {
      BatchNormFwdArgs a = fwd();
      a.running_var = Tensor();
      expect_error([&] { batchnorm_fwd(a); }, "running_mean and running_var must both be given");
    }
    {
      BatchNormFwdArgs a = fwd();
      a.x = Tensor::zeros({1, 3});
      a.y = Tensor::empty({1, 3});
      expect_error([&] { batchnorm_fwd(a); },
                   "needs more than one value per channel, got x [1, 3]");
    }
    {
      BatchNormFwdArgs a = fwd();
      a.x = Tensor::zeros({4, 2, 3}).transpose(1, 2);
      a.y = Tensor::empty({4, 3, 2});
      expect_error([&] { batchnorm_fwd(a); }, "x [4, 3, 2] must be contiguous");
    }
    {
      BatchNormFwdArgs a = fwd();
      a.eps = -1;
      expect_error([&] { batchnorm_fwd(a); }, "eps must be finite and >= 0, got -1");
    }
    {
      BatchNormBwdArgs b;
      b.dy = Tensor::zeros({4, 3, 2});
      b.x = Tensor::zeros({4, 3, 2});
      b.dx = Tensor::empty({4, 3, 2});
      expect_error([&] { batchnorm_bwd(b); },
                   "[batchnorm_bwd] save_mean and save_rstd (from the forward) are required");
      b.save_mean = Tensor::zeros({3});
      b.save_rstd = Tensor::ones({3});
      EXPECT_NO_THROW(batchnorm_bwd(b));
      b.dgamma = Tensor::zeros({3}, DType::f64);
      expect_error(
          [&] { batchnorm_bwd(b); },
          "[batchnorm_bwd] dgamma must be contiguous [3] f32 (x is [4, 3, 2] f32), got [3] f64");
      b.dgamma = Tensor();
      b.dy = Tensor::zeros({4, 3, 2}, DType::f64);
      expect_error([&] { batchnorm_bwd(b); },
                   "[batchnorm_bwd] dy must be contiguous [4, 3, 2] f32 like x, got [4, 3, 2] f64");
    }
  }
}

// Not a correctness test: cpu.omp against cpu.ref on a ResNet-50 stage-1 activation.
// Run with --gtest_also_run_disabled_tests --gtest_filter='*Timing*'.
// The training backward of forward `a`: gradient dy, dx written into `dx`, dgamma and dbeta from 0.
BatchNormBwdArgs training_bwd_args(const BatchNormFwdArgs& a, const Tensor& dy, const Tensor& dx) {
  const Shape c = {a.x.size(1)};
  BatchNormBwdArgs b;
  b.dy = dy;
  b.x = a.x;
  b.gamma = a.gamma;
  b.save_mean = a.save_mean;
  b.save_rstd = a.save_rstd;
  b.dx = dx;
  b.dgamma = Tensor::zeros(c);
  b.dbeta = Tensor::zeros(c);
  return b;
}

// Outputs of 32 MiB and more are written with non-temporal stores through an L1 buffer (a head
// up to 32-byte alignment, whole buffers, the rest): 47x47 planes start at every alignment, so
// each part is exercised; cpu.omp's training forward (fused relu) and backward (masked by it)
// must still match cpu.ref everywhere.
TEST(BatchNorm, StreamedLargeOutputsMatchReference) {
  const int64_t C = 240;
  const Shape xs = {16, C, 47, 47};  // 32.4 MiB of f32
  const Tensor x = random_tensor(xs, DType::f32, 3, -2.0, 3.0);
  const Tensor dy = random_tensor(xs, DType::f32, 4, -1.0, 1.0);
  std::vector<double> out[2][4];  // per variant: y, dx, dgamma, dbeta
  for (int v = 0; v < 2; ++v) {
    ScopedVariant sf("batchnorm_fwd", kCpuVariants[v]);
    ScopedVariant sb("batchnorm_bwd", kCpuVariants[v]);
    BatchNormFwdArgs a;
    a.x = x;
    a.gamma = random_tensor({C}, DType::f32, 5, 0.5, 1.5);
    a.beta = random_tensor({C}, DType::f32, 6, -0.5, 0.5);
    const double nan = std::nan("");  // every output value must be written
    a.y = Tensor::full(xs, nan);
    a.save_mean = Tensor::empty({C});
    a.save_rstd = Tensor::empty({C});
    a.training = true;
    a.relu = true;
    batchnorm_fwd(a);
    BatchNormBwdArgs b = training_bwd_args(a, dy, Tensor::full(xs, nan));
    b.y_relu = a.y;
    batchnorm_bwd(b);
    out[v][0] = a.y.to_vector<double>();
    out[v][1] = b.dx.to_vector<double>();
    out[v][2] = b.dgamma.to_vector<double>();
    out[v][3] = b.dbeta.to_vector<double>();
  }
  const char* names[4] = {"y", "dx", "dgamma", "dbeta"};
  const double tol[4] = {1e-5, 1e-4, 1e-3, 1e-3};  // dgamma, dbeta: sums of 35k values
  for (int k = 0; k < 4; ++k) {
    const std::vector<double>&want = out[0][k], &got = out[1][k];
    ASSERT_EQ(got.size(), want.size());
    int64_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (!(std::fabs(got[i] - want[i]) <= tol[k] * (1.0 + std::fabs(want[i]))) && bad++ < 5)
        ADD_FAILURE() << names[k] << "[" << i << "]: cpu.omp " << got[i] << ", cpu.ref " << want[i];
    EXPECT_EQ(bad, 0) << names[k];
  }
}

TEST(BatchNorm, DISABLED_TimingOmpVsRef) {
  const Shape xs = {16, 64, 56, 56};
  const int64_t C = 64;
  const Tensor x = random_tensor(xs, DType::f32, 1, -2.0, 3.0);
  const Tensor dy = random_tensor(xs, DType::f32, 2, -1.0, 1.0);
  for (const char* v : kCpuVariants) {
    ScopedVariant sf("batchnorm_fwd", v);
    ScopedVariant sb("batchnorm_bwd", v);
    BatchNormFwdArgs a;
    a.x = x;
    a.gamma = Tensor::ones({C});
    a.beta = Tensor::zeros({C});
    a.running_mean = Tensor::zeros({C});
    a.running_var = Tensor::ones({C});
    a.y = Tensor::empty(xs);
    a.save_mean = Tensor::empty({C});
    a.save_rstd = Tensor::empty({C});
    const BatchNormBwdArgs b = training_bwd_args(a, dy, Tensor::empty(xs));
    double best_f = 1e30, best_b = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      batchnorm_fwd(a);
      auto t1 = std::chrono::steady_clock::now();
      batchnorm_bwd(b);
      auto t2 = std::chrono::steady_clock::now();
      best_f = std::min(best_f, std::chrono::duration<double, std::milli>(t1 - t0).count());
      best_b = std::min(best_b, std::chrono::duration<double, std::milli>(t2 - t1).count());
    }
    std::printf("batchnorm %s x [16, 64, 56, 56] f32: fwd %.2f ms, bwd %.2f ms (best of 5)\n", v,
                best_f, best_b);
  }
}

// ---- LRN ------------------------------------------------------------------------------------

// torch: x = wave(30, 0.37, 0.2, 2) as [2, 5, 3], alpha 0.3, k 1.5, dy = cos(0.5 i).
struct LrnCase {
  int64_t size;
  double beta;
  std::vector<double> y, dx;
};
const LrnCase kLrnCases[] = {
    {3,
     0.75,
     {0.24084227644,   0.645886156334,  0.948130462809,   1.14798185444,   1.20545576043,
      1.1142870273,    0.895649256663,  0.582349272078,   0.209597237919,  -0.185107938361,
      -0.553322521649, -0.827476265472, -0.93519107284,   -0.834517895219, -0.5761697023,
      -0.164491906274, 0.264377652854,  0.63015478,       0.913463543389,  1.12671071766,
      1.24865815816,   1.27807692169,   1.21929979905,    1.08076296128,   0.872736604471,
      0.606306569303,  0.297092288662,  -0.0222942731627, -0.282453550233, -0.391342996637},
     {0.596587317565,  0.494728873759,   0.342467730795,  0.114495532376,  -0.160489974703,
      -0.369221415516, -0.462948408219,  -0.437137162044, -0.333416269258, -0.168845350179,
      0.0733282674411, 0.343364031916,   0.537698212632,  0.540751434679,  0.422387480031,
      0.200931602867,  -0.0530933637501, -0.209087001511, -0.263933331093, -0.286318487072,
      -0.219810255777, -0.0995821563437, 0.0570772705583, 0.225592469587,  0.373833061523,
      0.46437401812,   0.477840289995,   0.376101789793,  0.10711491769,   -0.237031180649}},
    {4,
     0.6,
     {0.275858724136,  0.755343550285,  1.1221265874,     1.35995680733,   1.42837499523,
      1.32082811404,   1.05654331789,   0.666878843486,   0.229019652743,  -0.192855327355,
      -0.558269571398, -0.831414929773, -0.964234307936,  -0.899688756362, -0.636517813815,
      -0.187180089419, 0.312170925142,  0.771779372274,   1.15043083647,   1.44022072311,
      1.61066950014,   1.65203883601,   1.5672283598,     1.34387107565,   1.02178927512,
      0.656005222167,  0.295728881828,  -0.0206461920805, -0.254873804138, -0.360288049941},
     {0.705529074098,  0.612533224679,   0.398214054472,  0.101722140544,  -0.207451313606,
      -0.415958209344, -0.507047190069,  -0.492269882968, -0.373964024358, -0.159742079949,
      0.112083731808,  0.395020856273,   0.603318850804,  0.630902456402,  0.505716461173,
      0.225631866385,  -0.0714085379521, -0.315785639405, -0.449879619796, -0.482504137155,
      -0.364286993173, -0.150249954403,  0.0849255566228, 0.284839197876,  0.455675514455,
      0.521230989805,  0.487164221385,   0.348010636896,  0.0926562304694, -0.226202623915}},
    {2,
     0.75,
     {0.289727777872,  0.761434947176,  1.04287806282,    1.16304104173,   1.1314278113,
      1.00155240701,   0.804643648336,  0.542114489661,   0.205648829589,  -0.189340481123,
      -0.568898742486, -0.823990844299, -0.89529309012,   -0.7943651632,   -0.548641627925,
      -0.195621849332, 0.34468701538,   0.832712425818,   1.13908037486,   1.28382654409,
      1.27794903231,   1.19241367392,   1.06928660499,    0.922210786638,  0.747423219676,
      0.532912602696,  0.270588113598,  -0.0208266587962, -0.272605085822, -0.385979001686},
     {0.708788246585,  0.540996035804,   0.337654067237,  0.168449730719,  -0.0139636980042,
      -0.224605862783, -0.384812681543,  -0.417628968503, -0.33781006525,  -0.161303929719,
      0.0839929274203, 0.307117131135,   0.466953332136,  0.495847658732,  0.431321426964,
      0.222127766495,  -0.0479187850995, -0.215504246559, -0.227483438841, -0.204960887185,
      -0.211117236703, -0.201665391617,  -0.115501534247, 0.0589580904747, 0.260737516452,
      0.400405384629,  0.441071089145,   0.350013503714,  0.088208755203,  -0.240440501492}},
};

TEST(Lrn, MatchesPyTorchOddAndEvenSizes) {
  const Shape xs = {2, 5, 3};
  for (const LrnCase& k : kLrnCases) {
    for (DType t : {DType::f64, DType::f32}) {
      const double tol = t == DType::f64 ? 1e-10 : 2e-6;
      for (const char* v : kCpuVariants) {
        SCOPED_TRACE(std::string(v) + " " + dtype_name(t) + " size " + std::to_string(k.size) +
                     " beta " + std::to_string(k.beta));
        LrnParams p;
        p.size = k.size;
        p.alpha = 0.3;
        p.beta = k.beta;
        p.k = 1.5;
        LrnFwdArgs a;
        a.x = t64(wave(30, 0.37, 0.2, 2.0), xs).to(t);
        a.y = Tensor::empty(xs, t);
        a.p = p;
        {
          ScopedVariant sv("lrn_fwd", v);
          lrn_fwd(a);
        }
        expect_near_all(a.y, k.y, tol, "y");
        LrnBwdArgs b;
        b.dy = t64(cosines(30), xs).to(t);
        b.x = a.x;
        b.dx = Tensor::empty(xs, t);
        b.p = p;
        {
          ScopedVariant sv("lrn_bwd", v);
          lrn_bwd(b);
        }
        expect_near_all(b.dx, k.dx, tol, "dx");
      }
    }
  }
}

// Size 1 with alpha = size: y = x * (k + x^2)^-beta elementwise; [N, C] input.
TEST(Lrn, SizeOneIsElementwise) {
  const std::vector<double> x = wave(8, 0.8, 0.0, 1.7);
  std::vector<double> want(8);
  for (size_t i = 0; i < 8; ++i) want[i] = x[i] * std::pow(2.0 + x[i] * x[i], -0.75);
  for (const char* v : kCpuVariants) {
    SCOPED_TRACE(v);
    ScopedVariant sv("lrn_fwd", v);
    LrnFwdArgs a;
    a.x = t64(x, {2, 4});
    a.y = Tensor::empty({2, 4}, DType::f64);
    a.p.size = 1;
    a.p.alpha = 1.0;
    a.p.beta = 0.75;
    a.p.k = 2.0;
    lrn_fwd(a);
    expect_near_all(a.y, want, 1e-14, "y");
  }
}

TEST(Lrn, ArgumentErrors) {
  for (const char* v : kCpuVariants) {
    SCOPED_TRACE(v);
    ScopedVariant sf("lrn_fwd", v);
    ScopedVariant sb("lrn_bwd", v);
    LrnFwdArgs a;
    a.x = Tensor::zeros({2, 3, 4});
    a.y = Tensor::empty({2, 3, 4});
    EXPECT_NO_THROW(lrn_fwd(a));
    a.p.size = 0;
    expect_error([&] { lrn_fwd(a); }, "[lrn_fwd] size must be >= 1, got 0");
    a.p.size = 5;
    a.y = Tensor::empty({2, 3, 4}, DType::f64);
    expect_error([&] { lrn_fwd(a); },
                 "[lrn_fwd] y must be contiguous [2, 3, 4] f32 like x, got [2, 3, 4] f64");
    a.x = Tensor::zeros({6});
    expect_error([&] { lrn_fwd(a); }, "[lrn_fwd] x must be [N, C, ...], got [6] f32");
    LrnBwdArgs b;
    b.x = Tensor::zeros({2, 3});
    b.dy = Tensor::zeros({2, 3});
    expect_error([&] { lrn_bwd(b); },
                 "[lrn_bwd] dx must be contiguous [2, 3] f32 like x, got undefined");
    b.dx = Tensor::empty({2, 3});
    b.p.beta = std::nan("");
    expect_error([&] { lrn_bwd(b); }, "[lrn_bwd] alpha, beta and k must be finite");
  }
}

}  // namespace
}  // namespace aim::kernels
