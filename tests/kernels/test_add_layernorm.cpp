// add_layernorm beyond the registry-driven comparison (test_variants.cpp runs every variant, dtype
// and registered shape against cpu.ref): more shapes through the same check, cpu.ref against the
// unfused ops (binary add twice, layernorm_fwd / layernorm_bwd and a column sum) and against
// PyTorch, y being layernorm of h as stored (16-bit h rounded first), the backward against finite
// differences in f64, parameter gradients accumulating, and argument errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/elementwise/binary.h"
#include "kernels/norm/add_layernorm.h"
#include "kernels/norm/layernorm.h"
#include "kernels/registry.h"
#include "kernels/testing.h"
#include "tests/support/common.h"
#include "tests/support/variants.h"

namespace aim::kernels {
namespace {

std::vector<std::string> cpu_variants(const std::string& op) {
  std::vector<std::string> r;
  for (const VariantInfo& v : aim::testing::runnable_variants(op))
    if (v.backend == Backend::CPU) r.push_back(v.name);
  return r;
}

void expect_near_all(const Tensor& got, const std::vector<double>& want, double tol,
                     const std::string& what) {
  const std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(g[i], want[i], tol * (1 + std::fabs(want[i]))) << what << " at " << i;
}

Tensor t64(const std::vector<double>& v, const Shape& s) { return Tensor::from_vector(v, s); }

AddLayerNormFwdArgs fwd_args(const Tensor& x, const Tensor& bias, const Tensor& r,
                             const Tensor& gamma, const Tensor& beta, float eps = 1e-5f) {
  const DType t = x.dtype(), s = layernorm_stat_dtype(t);
  AddLayerNormFwdArgs a;
  a.x = x, a.bias = bias, a.residual = r, a.gamma = gamma, a.beta = beta;
  a.h = Tensor::empty(x.sizes(), t);
  a.y = Tensor::empty(x.sizes(), t);
  a.mean = Tensor::empty({x.size(0)}, s);
  a.rstd = Tensor::empty({x.size(0)}, s);
  a.eps = eps;
  return a;
}

// dh written; dgamma, dbeta, dbias zeroed (accumulated into).
AddLayerNormBwdArgs bwd_args(const Tensor& dy, const Tensor& h, const Tensor& gamma,
                             const Tensor& mean, const Tensor& rstd) {
  const DType t = h.dtype();
  const int64_t C = h.size(1);
  return AddLayerNormBwdArgs{dy,
                             h,
                             gamma,
                             mean,
                             rstd,
                             Tensor::empty(h.sizes(), t),
                             Tensor::zeros({C}, t),
                             Tensor::zeros({C}, t),
                             Tensor::zeros({C}, t)};
}

// Every runnable variant and dtype on shapes beside the registered ones: no rows, one column,
// many row chunks (OpenMP, per-chunk sums), C = 1024 + 1.
TEST(AddLayerNorm, EveryVariantMatchesReferenceOnMoreShapes) {
  const std::vector<TestShape> shapes = {{0, 5, 1, 1},    {300, 1, 1, 1},   {2, 16, 0, 0},
                                         {3, 47, 1, 2},   {130, 257, 1, 1}, {40, 1025, 0, 1},
                                         {1000, 40, 1, 2}};
  for (const char* op : {"add_layernorm_fwd", "add_layernorm_bwd"})
    aim::testing::expect_variants_match_reference(op, shapes, 77);
}

// cpu.ref in f64 is layernorm_fwd(add(add(x, bias), residual)) of the unfused reference kernels;
// its backward is layernorm_bwd's dx, dgamma, dbeta with dbias the column sum of dx.
TEST(AddLayerNorm, ReferenceEqualsTheUnfusedOps) {
  const int64_t N = 6, C = 9;
  const Tensor x = random_tensor({N, C}, DType::f64, 1, -2, 2);
  const Tensor bias = random_tensor({C}, DType::f64, 2, -1, 1);
  const Tensor r = random_tensor({N, C}, DType::f64, 3, -1, 2);
  const Tensor g = random_tensor({C}, DType::f64, 4, 0.5, 1.5);
  const Tensor be = random_tensor({C}, DType::f64, 5, -0.5, 0.5);
  const Tensor dy = random_tensor({N, C}, DType::f64, 6, -1, 1);
  ScopedVariant s1("binary", "cpu.ref"), s2("layernorm_fwd", "cpu.ref"),
      s3("layernorm_bwd", "cpu.ref"), s4("add_layernorm_fwd", "cpu.ref"),
      s5("add_layernorm_bwd", "cpu.ref");
  const Tensor t = Tensor::empty({N, C}, DType::f64), h = Tensor::empty({N, C}, DType::f64);
  binary(BinaryArgs{x, bias, t, BinaryKind::add});
  binary(BinaryArgs{t, r, h, BinaryKind::add});
  LayerNormFwdArgs l{h,
                     g,
                     be,
                     Tensor::empty({N, C}, DType::f64),
                     Tensor::empty({N}, DType::f64),
                     Tensor::empty({N}, DType::f64)};
  layernorm_fwd(l);
  const AddLayerNormFwdArgs a = fwd_args(x, bias, r, g, be);
  add_layernorm_fwd(a);
  expect_near_all(a.h, h.to_vector<double>(), 0, "h");
  expect_near_all(a.y, l.y.to_vector<double>(), 0, "y");
  expect_near_all(a.mean, l.mean.to_vector<double>(), 0, "mean");
  expect_near_all(a.rstd, l.rstd.to_vector<double>(), 0, "rstd");

  LayerNormBwdArgs lb{dy,
                      h,
                      g,
                      l.mean,
                      l.rstd,
                      Tensor::empty({N, C}, DType::f64),
                      Tensor::zeros({C}, DType::f64),
                      Tensor::zeros({C}, DType::f64)};
  layernorm_bwd(lb);
  AddLayerNormBwdArgs b = bwd_args(dy, a.h, g, a.mean, a.rstd);
  add_layernorm_bwd(b);
  expect_near_all(b.dh, lb.dx.to_vector<double>(), 0, "dh");
  expect_near_all(b.dgamma, lb.dgamma.to_vector<double>(), 0, "dgamma");
  expect_near_all(b.dbeta, lb.dbeta.to_vector<double>(), 0, "dbeta");
  std::vector<double> db(size_t(C), 0.0);
  const std::vector<double> dh = lb.dx.to_vector<double>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) db[size_t(c)] += dh[size_t(n * C + c)];
  expect_near_all(b.dbias, db, 1e-14, "dbias");
}

// torch 1.13, float64: y = F.layer_norm(x + bias + r, (4,), w, lb, 1e-5), backward with dy.
TEST(AddLayerNorm, MatchesPyTorch) {
  const Tensor x = t64({1, -2, 0.5, 3, 0, 0.25, -1, 2}, {2, 4});
  const Tensor bias = t64({0.5, 0, -0.25, 1}, {4});
  const Tensor r = t64({-1, 0.5, 2, 0, 1.5, -0.5, 0.25, -2}, {2, 4});
  const Tensor w = t64({1.5, 0.5, -1, 2}, {4}), lb = t64({0.1, -0.2, 0.3, 0}, {4});
  const Tensor dy = t64({1, -2, 0.5, 1.5, -1, 0.25, 2, -0.5}, {2, 4});
  const std::vector<double> y = {-0.49696913941081711, -0.88881054547401983, -0.15920703031601324,
                                 2.6327869738118093,   2.1367127344976264,   -0.4987178677263186,
                                 1.5491838104918778,   0.97762211255886078};
  const std::vector<double> dx = {0.58668272003282484,  -0.09801189427445739, -0.86533422785982883,
                                  0.37666340210146149,  -0.32299042332873007, 1.0458731169857212,
                                  -0.81516552527120589, 0.092282831614214134};
  const std::vector<double> dbias = {0.26369229670409478, 0.94786122271126372, -1.6804997531310346,
                                     0.46894623371567562};
  const std::vector<double> dw = {-1.7557879159389624, 2.6058832480329199, -2.2687641058257491,
                                  1.7301847022191417};
  const std::vector<double> dlb = {0, -1.75, 2.5, 1};
  for (DType t : {DType::f64, DType::f32})
    for (const std::string& v : cpu_variants("add_layernorm_fwd")) {
      SCOPED_TRACE(v + " " + dtype_name(t));
      const double tol = t == DType::f64 ? 1e-13 : 1e-5;
      ScopedVariant f("add_layernorm_fwd", v), b("add_layernorm_bwd", v);
      const AddLayerNormFwdArgs a = fwd_args(x.to(t), bias.to(t), r.to(t), w.to(t), lb.to(t));
      add_layernorm_fwd(a);
      expect_near_all(a.y, y, tol, "y");
      AddLayerNormBwdArgs g = bwd_args(dy.to(t), a.h, w.to(t), a.mean, a.rstd);
      add_layernorm_bwd(g);
      expect_near_all(g.dh, dx, tol, "dh");
      expect_near_all(g.dbias, dbias, tol, "dbias");
      expect_near_all(g.dgamma, dw, tol, "dgamma");
      expect_near_all(g.dbeta, dlb, tol, "dbeta");
    }
}

// A 16-bit h is rounded before it is normalised: mean, rstd and y are layernorm_fwd's of h as
// stored (to f32 rounding: add_layernorm sums rows as SIMD reductions, layernorm sequentially;
// the unrounded sum would move a bf16 row's mean by ~1e-4).
TEST(AddLayerNorm, NormalisesHAsStored) {
  const int64_t N = 37, C = 203;
  for (DType t : {DType::f16, DType::bf16, DType::f32}) {
    SCOPED_TRACE(dtype_name(t));
    const Tensor x = random_tensor({N, C}, t, 31, -2, 2), r = random_tensor({N, C}, t, 32, -1, 2);
    const Tensor bias = random_tensor({C}, t, 33, -1, 1), g = random_tensor({C}, t, 34, 0.5, 1.5),
                 be = random_tensor({C}, t, 35, -0.5, 0.5);
    ScopedVariant s1("add_layernorm_fwd", "cpu.omp"), s2("layernorm_fwd", "cpu.omp");
    const AddLayerNormFwdArgs a = fwd_args(x, bias, r, g, be);
    add_layernorm_fwd(a);
    const DType s = layernorm_stat_dtype(t);
    LayerNormFwdArgs l{
        a.h, g, be, Tensor::empty({N, C}, t), Tensor::empty({N}, s), Tensor::empty({N}, s)};
    layernorm_fwd(l);
    expect_near_all(a.mean, l.mean.to_vector<double>(), 1e-6, "mean");
    expect_near_all(a.rstd, l.rstd.to_vector<double>(), 1e-6, "rstd");
    const double ulp = t == DType::f16 ? 1e-3 : t == DType::bf16 ? 8e-3 : 1e-5;
    expect_near_all(a.y, l.y.to_vector<double>(), ulp, "y");
  }
}

// loss = sum(y * w): dh (= dx = dresidual), dbias, dgamma, dbeta of every f64 CPU variant against
// central differences of the forward's cpu.ref.
TEST(AddLayerNorm, BackwardMatchesFiniteDifferences) {
  const int64_t N = 3, C = 6;
  std::vector<Tensor> in = {random_tensor({N, C}, DType::f64, 41, -2, 2),    // x
                            random_tensor({C}, DType::f64, 42, -1, 1),       // bias
                            random_tensor({N, C}, DType::f64, 43, -1, 2),    // residual
                            random_tensor({C}, DType::f64, 44, 0.5, 1.5),    // gamma
                            random_tensor({C}, DType::f64, 45, -0.5, 0.5)};  // beta
  const Tensor w = random_tensor({N, C}, DType::f64, 46, -1, 1);
  auto loss = [&](const std::vector<Tensor>& v) {
    ScopedVariant f("add_layernorm_fwd", "cpu.ref");
    const AddLayerNormFwdArgs a = fwd_args(v[0], v[1], v[2], v[3], v[4]);
    add_layernorm_fwd(a);
    const std::vector<double> y = a.y.to_vector<double>(), wv = w.to_vector<double>();
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += y[i] * wv[i];
    return s;
  };
  std::vector<std::vector<double>> numeric;
  for (size_t j = 0; j < in.size(); ++j) {
    std::vector<double> gj(size_t(in[j].numel()));
    for (int64_t i = 0; i < in[j].numel(); ++i) {
      std::vector<Tensor> p = in, m = in;
      p[j] = in[j].clone(), m[j] = in[j].clone();
      p[j].data<double>()[i] += 1e-6;
      m[j].data<double>()[i] -= 1e-6;
      gj[size_t(i)] = (loss(p) - loss(m)) / 2e-6;
    }
    numeric.push_back(gj);
  }
  ScopedVariant f("add_layernorm_fwd", "cpu.ref");
  const AddLayerNormFwdArgs a = fwd_args(in[0], in[1], in[2], in[3], in[4]);
  add_layernorm_fwd(a);
  for (const std::string& v : cpu_variants("add_layernorm_bwd")) {
    SCOPED_TRACE(v);
    ScopedVariant s("add_layernorm_bwd", v);
    AddLayerNormBwdArgs b = bwd_args(w, a.h, in[3], a.mean, a.rstd);
    add_layernorm_bwd(b);
    expect_near_all(b.dh, numeric[0], 1e-7, "dh vs dx");
    expect_near_all(b.dh, numeric[2], 1e-7, "dh vs dresidual");
    expect_near_all(b.dbias, numeric[1], 1e-7, "dbias");
    expect_near_all(b.dgamma, numeric[3], 1e-7, "dgamma");
    expect_near_all(b.dbeta, numeric[4], 1e-7, "dbeta");
  }
}

// dgamma, dbeta, dbias are parameter gradients: added to what they hold; each is optional and
// leaving any out changes nothing else (to rounding: with the partial sums the row loop is
// compiled differently, so dh may differ in the last bit, as layernorm_bwd's dx does).
TEST(AddLayerNorm, ParameterGradientsAccumulateAndAreOptional) {
  const int64_t N = 50, C = 33;
  const Tensor h = random_tensor({N, C}, DType::f32, 51, -2, 3);
  const Tensor dy = random_tensor({N, C}, DType::f32, 52, -1, 1);
  const Tensor g = random_tensor({C}, DType::f32, 53, 0.5, 1.5);
  const AddLayerNormFwdArgs f = fwd_args(h, Tensor(), Tensor::zeros({N, C}), g, g);
  add_layernorm_fwd(f);
  const Tensor mean = f.mean, rstd = f.rstd;
  for (const std::string& v : cpu_variants("add_layernorm_bwd")) {
    SCOPED_TRACE(v);
    ScopedVariant s("add_layernorm_bwd", v);
    AddLayerNormBwdArgs once = bwd_args(dy, h, g, mean, rstd);
    add_layernorm_bwd(once);
    AddLayerNormBwdArgs twice{dy,
                              h,
                              g,
                              mean,
                              rstd,
                              Tensor::empty({N, C}),
                              Tensor::full({C}, 0.5),
                              Tensor::full({C}, 0.5),
                              Tensor::full({C}, 0.5)};
    add_layernorm_bwd(twice);
    add_layernorm_bwd(twice);
    for (auto [got, one] :
         {std::pair{twice.dgamma, once.dgamma}, std::pair{twice.dbeta, once.dbeta},
          std::pair{twice.dbias, once.dbias}}) {
      std::vector<double> want = one.to_vector<double>();
      for (double& e : want) e = 0.5 + 2 * e;
      expect_near_all(got, want, 1e-5, "after two calls");
    }
    AddLayerNormBwdArgs bias_only{
        dy, h, g, mean, rstd, Tensor::empty({N, C}), Tensor(), Tensor(), Tensor::zeros({C})};
    add_layernorm_bwd(bias_only);
    expect_near_all(bias_only.dbias, once.dbias.to_vector<double>(), 1e-6, "dbias alone");
    AddLayerNormBwdArgs none{dy,       h,        g,       mean, rstd, Tensor::empty({N, C}),
                             Tensor(), Tensor(), Tensor()};
    add_layernorm_bwd(none);
    expect_near_all(none.dh, once.dh.to_vector<double>(), 1e-6, "dh without parameters");
  }
}

TEST(AddLayerNorm, ArgumentErrors) {
  const Tensor x = Tensor::zeros({3, 4}), v = Tensor::zeros({4}), s = Tensor::zeros({3});
  AddLayerNormFwdArgs a = fwd_args(x, v, x, v, v);
  AIM_EXPECT_ERROR(add_layernorm_fwd(fwd_args(Tensor::zeros({12}), Tensor(), Tensor::zeros({12}),
                                              Tensor(), Tensor())),
                   "[add_layernorm_fwd] x must be [N, C], got [12]");
  AIM_EXPECT_ERROR(add_layernorm_fwd(fwd_args(x, v, Tensor::zeros({3, 5}), v, v)),
                   "[add_layernorm_fwd] residual must be contiguous [3, 4] f32, got [3, 5] f32");
  AIM_EXPECT_ERROR(add_layernorm_fwd(fwd_args(x, Tensor::zeros({5}), x, v, v)),
                   "[add_layernorm_fwd] bias must be contiguous [4] f32, got [5] f32");
  AIM_EXPECT_ERROR(add_layernorm_fwd(fwd_args(x, v, x, v, Tensor())),
                   "[add_layernorm_fwd] gamma and beta must both be given or both be undefined");
  a.mean = Tensor::zeros({3}, DType::f64);
  AIM_EXPECT_ERROR(add_layernorm_fwd(a),
                   "[add_layernorm_fwd] mean must be contiguous [3] f32, got [3] f64");
  AIM_EXPECT_ERROR(
      add_layernorm_bwd({x, x, v, s, s, Tensor::zeros({4, 3}), Tensor(), Tensor(), Tensor()}),
      "[add_layernorm_bwd] dh must be contiguous [3, 4] f32, got [4, 3] f32");
  AIM_EXPECT_ERROR(add_layernorm_bwd({x, x, v, s, s, x, Tensor(), Tensor(), Tensor::zeros({3})}),
                   "[add_layernorm_bwd] dbias must be contiguous [4] f32, got [3] f32");
  AIM_EXPECT_ERROR(
      add_layernorm_bwd({x, x, v, Tensor::zeros({4}), s, x, Tensor(), Tensor(), Tensor()}),
      "[add_layernorm_bwd] mean must be contiguous [3] f32, got [4] f32");
}

}  // namespace
}  // namespace aim::kernels
