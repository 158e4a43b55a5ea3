// bias_gelu beyond the registry-driven comparison (test_variants.cpp runs every variant, dtype and
// registered shape against cpu.ref): more shapes through the same check (no rows, chunked and
// OpenMP paths), cpu.ref against the unfused ops (binary add, unary gelu, a column sum) and against
// values from PyTorch, the backward against finite differences of the forward in f64, dbias
// accumulating, cpu.avx512's accuracy on a dense grid, and argument errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/elementwise/bias_gelu.h"
#include "kernels/elementwise/binary.h"
#include "kernels/elementwise/unary.h"
#include "kernels/matmul/gemm_avx512.h"
#include "kernels/registry.h"
#include "kernels/testing.h"
#include "tests/support/common.h"
#include "tests/support/variants.h"

namespace aim::kernels {
namespace {

std::vector<std::string> cpu_variants(const std::string& op, DType t) {
  std::vector<std::string> r;
  for (const VariantInfo& v : aim::testing::runnable_variants(op))
    if (v.backend == Backend::CPU && std::count(v.dtypes.begin(), v.dtypes.end(), t) &&
        (v.name != "cpu.avx512" || cpu_has_avx512()))
      r.push_back(v.name);
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

// Every runnable variant, every dtype it takes, on shapes beside the registered ones: no rows,
// one column of many rows, rows that split into many chunks (OpenMP, per-chunk dbias sums).
TEST(BiasGelu, EveryVariantMatchesReferenceOnMoreShapes) {
  const std::vector<TestShape> shapes = {{0, 5, 0, 1},    {300, 1, 1, 1},   {2, 16, 0, 1},
                                         {3, 47, 1, 1},   {130, 257, 0, 1}, {130, 257, 1, 1},
                                         {1000, 40, 1, 0}};
  for (const char* op : {"bias_gelu_fwd", "bias_gelu_bwd"})
    aim::testing::expect_variants_match_reference(op, shapes, 99);
}

// cpu.ref in f64 is gelu(add(x, bias)) of the unfused kernels, and its gradient is unary_bwd's
// dx with dbias the column sum of dx.
TEST(BiasGelu, ReferenceEqualsTheUnfusedOps) {
  const int64_t N = 5, C = 7;
  const Tensor x = random_tensor({N, C}, DType::f64, 1, -4, 3);
  const Tensor b = random_tensor({C}, DType::f64, 2, -1, 1);
  const Tensor dy = random_tensor({N, C}, DType::f64, 3, -1, 1);
  for (bool tanh : {false, true}) {
    SCOPED_TRACE(tanh ? "tanh" : "erf");
    const UnaryKind k = bias_gelu_kind(tanh);
    const Tensor h = Tensor::empty({N, C}, DType::f64);
    const Tensor y = Tensor::empty({N, C}, DType::f64);
    const Tensor dx = Tensor::empty({N, C}, DType::f64);
    {
      ScopedVariant s1("binary", "cpu.ref"), s2("unary", "cpu.ref"), s3("unary_bwd", "cpu.ref");
      binary(BinaryArgs{x, b, h, BinaryKind::add});
      unary(UnaryArgs{h, y, k});
      unary_bwd(UnaryBwdArgs{dy, h, y, dx, k});
    }
    ScopedVariant f("bias_gelu_fwd", "cpu.ref"), bw("bias_gelu_bwd", "cpu.ref");
    BiasGeluFwdArgs a{x, b, Tensor::empty({N, C}, DType::f64), tanh};
    bias_gelu_fwd(a);
    expect_near_all(a.y, y.to_vector<double>(), 1e-15, "y");
    BiasGeluBwdArgs g{dy,  x, b, Tensor::empty({N, C}, DType::f64), Tensor::zeros({C}, DType::f64),
                      tanh};
    bias_gelu_bwd(g);
    expect_near_all(g.dx, dx.to_vector<double>(), 1e-15, "dx");
    std::vector<double> db(size_t(C), 0.0);
    const std::vector<double> dxv = dx.to_vector<double>();
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c) db[size_t(c)] += dxv[size_t(n * C + c)];
    expect_near_all(g.dbias, db, 1e-14, "dbias");
  }
}

// torch 1.13, float64: y = F.gelu(x + b, approximate=...), backward of y with dy.
TEST(BiasGelu, MatchesPyTorch) {
  const Tensor x = t64({-3, -1, -0.5, 0, 0.5, 1, 2, 3}, {2, 4});
  const Tensor b = t64({0.25, -0.5, 0.125, 1.0}, {4});
  const Tensor dy = t64({1, -2, 0.5, 1.5, -1, 0.25, 2, -0.5}, {2, 4});
  struct Want {
    bool tanh;
    std::vector<double> y, dx, db;
  };
  const Want want[] = {
      {false,
       {-0.0081943488964000277, -0.10021080190328704, -0.13268633749772857, 0.84134474606854304,
        0.58002948571734891, 0.34573123063700656, 2.0893142237970461, 3.9998733150326675},
       {-0.022027533644320842, 0.2549383844599592, 0.10719228656305642, 1.6249732058815296,
        -0.99922572173923518, 0.21687378116404071, 2.1437275744425417, -0.50025182483061326},
       {-1.021253255383556, 0.47181216562399991, 2.250919861005598, 1.1247213810509162}},
      {true,
       {-0.0077231440736179879, -0.10042842301976707, -0.13269223310848838, 0.84119199060827676,
        0.57996055516562028, 0.34571400982514394, 2.0895195995171316, 3.9999297540518075},
       {-0.021948921593498271, 0.25542158630286615, 0.10722215397600027, 1.624446125768674,
        -0.99893825613741427, 0.2168424758836606, 2.1454009575135995, -0.50016756159856102},
       {-1.0208871777309125, 0.47226406218652672, 2.2526231114895996, 1.124278564170113}}};
  for (const Want& w : want)
    for (DType t : {DType::f64, DType::f32})
      for (const std::string& v : cpu_variants("bias_gelu_fwd", t)) {
        SCOPED_TRACE(v + " " + dtype_name(t) + (w.tanh ? " tanh" : " erf"));
        const double tol = t == DType::f64 ? 1e-14 : 2e-6;
        ScopedVariant f("bias_gelu_fwd", v), bw("bias_gelu_bwd", v);
        BiasGeluFwdArgs a{x.to(t), b.to(t), Tensor::empty({2, 4}, t), w.tanh};
        bias_gelu_fwd(a);
        expect_near_all(a.y, w.y, tol, "y");
        BiasGeluBwdArgs g{
            dy.to(t), x.to(t), b.to(t), Tensor::empty({2, 4}, t), Tensor::zeros({4}, t), w.tanh};
        bias_gelu_bwd(g);
        expect_near_all(g.dx, w.dx, tol, "dx");
        expect_near_all(g.dbias, w.db, tol, "dbias");
      }
}

// loss = sum(y * w); dx and dbias of every f64 CPU variant against central differences of the
// forward's cpu.ref.
TEST(BiasGelu, BackwardMatchesFiniteDifferences) {
  const int64_t N = 3, C = 5;
  const Tensor x = random_tensor({N, C}, DType::f64, 11, -3, 3);
  const Tensor b = random_tensor({C}, DType::f64, 12, -1, 1);
  const Tensor w = random_tensor({N, C}, DType::f64, 13, -1, 1);
  for (bool tanh : {false, true}) {
    auto loss = [&](const Tensor& xv, const Tensor& bv) {
      ScopedVariant f("bias_gelu_fwd", "cpu.ref");
      BiasGeluFwdArgs a{xv, bv, Tensor::empty({N, C}, DType::f64), tanh};
      bias_gelu_fwd(a);
      const std::vector<double> y = a.y.to_vector<double>(), wv = w.to_vector<double>();
      double s = 0;
      for (size_t i = 0; i < y.size(); ++i) s += y[i] * wv[i];
      return s;
    };
    auto numeric = [&](const Tensor& t, bool is_x) {
      std::vector<double> g(size_t(t.numel()));
      for (int64_t i = 0; i < t.numel(); ++i) {
        Tensor p = t.clone(), m = t.clone();
        p.data<double>()[i] += 1e-6;
        m.data<double>()[i] -= 1e-6;
        g[size_t(i)] = ((is_x ? loss(p, b) : loss(x, p)) - (is_x ? loss(m, b) : loss(x, m))) / 2e-6;
      }
      return g;
    };
    const std::vector<double> gx = numeric(x, true), gb = numeric(b, false);
    for (const std::string& v : cpu_variants("bias_gelu_bwd", DType::f64)) {
      SCOPED_TRACE(v + (tanh ? " tanh" : " erf"));
      ScopedVariant s("bias_gelu_bwd", v);
      BiasGeluBwdArgs a{
          w, x, b, Tensor::empty({N, C}, DType::f64), Tensor::zeros({C}, DType::f64), tanh};
      bias_gelu_bwd(a);
      expect_near_all(a.dx, gx, 1e-7, "dx");
      expect_near_all(a.dbias, gb, 1e-7, "dbias");
    }
  }
}

// dbias is a parameter gradient: added to what it holds; without it dx is the same.
TEST(BiasGelu, DbiasAccumulatesAndIsOptional) {
  const int64_t N = 40, C = 19;
  const Tensor x = random_tensor({N, C}, DType::f32, 21, -3, 3);
  const Tensor b = random_tensor({C}, DType::f32, 22, -1, 1);
  const Tensor dy = random_tensor({N, C}, DType::f32, 23, -1, 1);
  for (const std::string& v : cpu_variants("bias_gelu_bwd", DType::f32)) {
    SCOPED_TRACE(v);
    ScopedVariant s("bias_gelu_bwd", v);
    BiasGeluBwdArgs once{dy, x, b, Tensor::empty({N, C}), Tensor::zeros({C})};
    bias_gelu_bwd(once);
    BiasGeluBwdArgs twice{dy, x, b, Tensor::empty({N, C}), Tensor::full({C}, 0.5)};
    bias_gelu_bwd(twice);
    bias_gelu_bwd(twice);
    const std::vector<double> d1 = once.dbias.to_vector<double>();
    std::vector<double> want(d1.size());
    for (size_t c = 0; c < d1.size(); ++c) want[c] = 0.5 + 2 * d1[c];
    expect_near_all(twice.dbias, want, 1e-6, "dbias after two calls");
    BiasGeluBwdArgs no_db{dy, x, b, Tensor::empty({N, C}), Tensor()};
    bias_gelu_bwd(no_db);
    expect_near_all(no_db.dx, once.dx.to_vector<double>(), 0, "dx without dbias");
  }
}

// cpu.avx512's erf / exp approximations against cpu.ref on h = x in [-10, 10] step 2^-12 (f32):
// gelu and gelu' within 1e-6 (1 + |h|), i.e. a few f32 ulps.
TEST(BiasGelu, Avx512AccuracyOnADenseGrid) {
  if (!cpu_has_avx512()) GTEST_SKIP() << "CPU lacks AVX-512";
  const int64_t C = 4096, N = 20;  // 81920 points in [-10, 10)
  std::vector<double> xv(size_t(N * C));
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = -10.0 + double(i) / 4096.0;
  const Tensor x = Tensor::from_vector(xv, Shape{N, C}).to(DType::f32);
  const Tensor b = Tensor::zeros({C});
  const Tensor dy = Tensor::ones({N, C});
  for (bool tanh : {false, true}) {
    SCOPED_TRACE(tanh ? "tanh" : "erf");
    std::vector<double> y[2], dx[2];
    int k = 0;
    for (const char* v : {"cpu.ref", "cpu.avx512"}) {
      ScopedVariant f("bias_gelu_fwd", v), bw("bias_gelu_bwd", v);
      BiasGeluFwdArgs a{x, b, Tensor::empty({N, C}), tanh};
      bias_gelu_fwd(a);
      BiasGeluBwdArgs g{dy, x, b, Tensor::empty({N, C}), Tensor(), tanh};
      bias_gelu_bwd(g);
      y[k] = a.y.to_vector<double>();
      dx[k] = g.dx.to_vector<double>();
      ++k;
    }
    double worst_y = 0, worst_d = 0;
    for (size_t i = 0; i < xv.size(); ++i) {
      const double s = 1 + std::fabs(xv[i]);
      worst_y = std::max(worst_y, std::fabs(y[1][i] - y[0][i]) / s);
      worst_d = std::max(worst_d, std::fabs(dx[1][i] - dx[0][i]) / s);
    }
    EXPECT_LT(worst_y, 1e-6);
    EXPECT_LT(worst_d, 1e-6);
  }
}

TEST(BiasGelu, ArgumentErrors) {
  const Tensor x = Tensor::zeros({3, 4}), b = Tensor::zeros({4}), y = Tensor::zeros({3, 4});
  AIM_EXPECT_ERROR(bias_gelu_fwd({Tensor::zeros({12}), b, Tensor::zeros({12})}),
                   "[bias_gelu_fwd] x must be [N, C], got [12]");
  AIM_EXPECT_ERROR(bias_gelu_fwd({x.transpose(0, 1), b, y}),
                   "[bias_gelu_fwd] x must be contiguous");
  AIM_EXPECT_ERROR(bias_gelu_fwd({x, Tensor(), y}), "[bias_gelu_fwd] bias must be defined");
  AIM_EXPECT_ERROR(bias_gelu_fwd({x, Tensor::zeros({3}), y}),
                   "[bias_gelu_fwd] bias must be contiguous [4] f32, got [3] f32");
  AIM_EXPECT_ERROR(bias_gelu_fwd({x, b.to(DType::f64), y}),
                   "[bias_gelu_fwd] bias must be contiguous [4] f32, got [4] f64");
  AIM_EXPECT_ERROR(bias_gelu_fwd({x, b, Tensor::zeros({4, 3})}),
                   "[bias_gelu_fwd] y must be contiguous [3, 4] f32, got [4, 3] f32");
  AIM_EXPECT_ERROR(bias_gelu_bwd({Tensor::zeros({3, 5}), x, b, y, Tensor()}),
                   "[bias_gelu_bwd] dy must be contiguous [3, 4] f32, got [3, 5] f32");
  AIM_EXPECT_ERROR(bias_gelu_bwd({x, x, b, Tensor(), Tensor()}),
                   "[bias_gelu_bwd] dx must be contiguous [3, 4] f32, got undefined");
  AIM_EXPECT_ERROR(bias_gelu_bwd({x, x, b, y, Tensor::zeros({5})}),
                   "[bias_gelu_bwd] dbias must be contiguous [4] f32, got [5] f32");
}

}  // namespace
}  // namespace aim::kernels
