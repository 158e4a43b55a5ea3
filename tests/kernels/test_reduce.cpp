// reduce and softmax: PyTorch semantics that the registry-driven comparison (variant vs cpu.ref)
// cannot show: values by hand, argmax ties, NaN, fully masked rows, argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/reduce/reduce.h"
#include "kernels/registry.h"
#include "kernels/softmax/softmax.h"

namespace aim::kernels {
namespace {

const char* const kCpuVariants[] = {"cpu.ref", "cpu.omp"};

std::vector<double> run_reduce(const Tensor& x, ReduceKind kind, std::vector<int64_t> dims,
                               const char* variant, Tensor* idx = nullptr, double p = 2,
                               double correction = 1) {
  ScopedVariant sv("reduce", variant);
  ReduceArgs a;
  a.x = x;
  a.y = Tensor::empty(reduced_shape(x.sizes(), dims), x.dtype());
  a.kind = kind;
  a.dims = std::move(dims);
  a.p = p;
  a.correction = correction;
  if (idx) {
    *idx = Tensor::empty(a.y.sizes(), DType::i64);
    a.indices = *idx;
  }
  reduce(a);
  return a.y.to_vector<double>();
}

TEST(Reduce, ReducedShapeKeepsDims) {
  EXPECT_EQ(reduced_shape({2, 3, 4}, {-1, 0}), (Shape{1, 3, 1}));
  EXPECT_EQ(reduced_shape({2, 3, 4}, {}), (Shape{1, 1, 1}));
  EXPECT_THROW(reduced_shape({2, 3}, {2}), Error);
  EXPECT_THROW(reduced_shape({2, 3}, {1, -1}), Error);
}

TEST(Reduce, ValuesByHand) {
  // x = [[1, 2, 3], [4, 5, 6]]
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  for (const char* v : kCpuVariants) {
    EXPECT_EQ(run_reduce(x, ReduceKind::sum, {0}, v), (std::vector<double>{5, 7, 9})) << v;
    EXPECT_EQ(run_reduce(x, ReduceKind::mean, {1}, v), (std::vector<double>{2, 5})) << v;
    EXPECT_EQ(run_reduce(x, ReduceKind::prod, {}, v), (std::vector<double>{720})) << v;
    EXPECT_NEAR(run_reduce(x, ReduceKind::var, {1}, v)[0], 1.0, 1e-6) << v;  // correction 1
    EXPECT_NEAR(run_reduce(x, ReduceKind::var, {1}, v, nullptr, 2, 0)[0], 2.0 / 3, 1e-6) << v;
    EXPECT_NEAR(run_reduce(x, ReduceKind::std, {0}, v)[0], std::sqrt(4.5), 1e-6) << v;
    EXPECT_NEAR(run_reduce(x, ReduceKind::norm, {}, v)[0], std::sqrt(91.0), 1e-5) << v;
    EXPECT_NEAR(run_reduce(x, ReduceKind::norm, {}, v, nullptr, 1)[0], 21, 1e-5) << v;
    EXPECT_EQ(run_reduce(x, ReduceKind::norm, {1}, v, nullptr, INFINITY),
              (std::vector<double>{3, 6}))
        << v;
    EXPECT_NEAR(run_reduce(x, ReduceKind::norm, {1}, v, nullptr, 3)[0], std::cbrt(36.0), 1e-5) << v;
    // Transposed (non-contiguous) input: sum over dim 0 of x^T = row sums of x.
    EXPECT_EQ(run_reduce(x.transpose(0, 1), ReduceKind::sum, {0}, v), (std::vector<double>{6, 15}))
        << v;
  }
}

TEST(Reduce, ArgMaxFirstOccurrenceAndNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 40 values per row (crosses the 16-lane blocks): ties at 3 and 35; a NaN in row 1 at 20.
  std::vector<float> v(80, 0.f);
  v[3] = v[35] = 7.f;
  v[40 + 5] = 9.f;
  v[40 + 20] = nan;
  v[40 + 30] = nan;
  const Tensor x = Tensor::from_vector(v, {2, 40});
  for (const char* var : kCpuVariants) {
    Tensor idx;
    const auto mx = run_reduce(x, ReduceKind::max, {1}, var, &idx);
    EXPECT_EQ(mx[0], 7.0) << var;
    EXPECT_TRUE(std::isnan(mx[1])) << var;
    EXPECT_EQ(idx.to_vector<int64_t>(), (std::vector<int64_t>{3, 20})) << var;
    const auto mn = run_reduce(x, ReduceKind::min, {1}, var, &idx);
    EXPECT_EQ(mn[0], 0.0) << var;
    EXPECT_EQ(idx.to_vector<int64_t>()[0], 0) << var;
    // Columns: the same data transposed to [40, 2], reduced over dim 0.
    const Tensor xt = x.transpose(0, 1).contiguous();
    run_reduce(xt, ReduceKind::max, {0}, var, &idx);
    EXPECT_EQ(idx.to_vector<int64_t>(), (std::vector<int64_t>{3, 20})) << var;
  }
}

TEST(Reduce, BadArgumentsNameTheProblem) {
  const Tensor x = Tensor::zeros({2, 3});
  ReduceArgs a;
  a.x = x;
  a.y = Tensor::empty({2, 3});
  a.dims = {1};
  try {
    reduce(a);
    FAIL() << "wrong y shape accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs y of shape [2, 1]"), std::string::npos) << e.what();
  }
  a.y = Tensor::empty({1, 1});
  a.dims = {};
  a.kind = ReduceKind::sum;
  a.indices = Tensor::empty({1, 1}, DType::i64);
  EXPECT_THROW(reduce(a), Error);  // indices with a sum
}

std::vector<double> run_softmax(const Tensor& x, const Tensor& mask, int64_t dim, bool log,
                                const char* variant) {
  ScopedVariant sv("softmax", variant);
  SoftmaxArgs a;
  a.x = x;
  a.y = Tensor::empty(x.sizes(), x.dtype());
  a.mask = mask;
  a.dim = dim;
  a.log = log;
  softmax(a);
  return a.y.to_vector<double>();
}

TEST(Softmax, ValuesMaskAndFullyMaskedRows) {
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 1000, 1001, 1002}, {2, 3});
  // Mask [3] broadcast to both rows: keep 0 and 2.
  const Tensor keep02 = Tensor::from_vector<bool>({true, false, true}, {3});
  const Tensor none = Tensor::from_vector<bool>({false, true}, {2, 1});  // row 0 fully masked
  const double e = std::exp(2.0);
  for (const char* v : kCpuVariants) {
    const auto y = run_softmax(x, Tensor(), -1, false, v);
    const double s = 1 + std::exp(1.0) + e;
    EXPECT_NEAR(y[0], 1 / s, 1e-6) << v;
    EXPECT_NEAR(y[5], e / s, 1e-6) << v;  // large values: stable
    const auto ym = run_softmax(x, keep02, -1, false, v);
    EXPECT_NEAR(ym[0], 1 / (1 + e), 1e-6) << v;
    EXPECT_EQ(ym[1], 0.0) << v;
    EXPECT_NEAR(ym[2], e / (1 + e), 1e-6) << v;
    const auto yl = run_softmax(x, keep02, -1, true, v);
    EXPECT_EQ(yl[1], -INFINITY) << v;
    EXPECT_NEAR(yl[0], -std::log(1 + e), 1e-5) << v;
    const auto yn = run_softmax(x, none.expand({2, 3}), -1, false, v);
    EXPECT_EQ(yn[0], 0.0) << v;
    EXPECT_EQ(yn[1], 0.0) << v;
    EXPECT_EQ(yn[2], 0.0) << v;
    EXPECT_NEAR(yn[3] + yn[4] + yn[5], 1.0, 1e-6) << v;
    const auto ynl = run_softmax(x, none, -1, true, v);
    EXPECT_EQ(ynl[0], -INFINITY) << v;
    // dim 0 (strided): columns [1, 1000] etc.
    const auto y0 = run_softmax(x, Tensor(), 0, false, v);
    EXPECT_NEAR(y0[3], 1.0, 1e-6) << v;
    EXPECT_NEAR(y0[0], 0.0, 1e-6) << v;
  }
}

TEST(Softmax, BackwardByHand) {
  // y = softmax([0, log 3]) = [0.25, 0.75]; dy = [1, 0]: dx = y * (dy - 0.25) = [0.1875, -0.1875].
  const Tensor y = Tensor::from_vector<float>({0.25f, 0.75f}, {1, 2});
  const Tensor dy = Tensor::from_vector<float>({1, 0}, {1, 2});
  for (const char* v : kCpuVariants) {
    ScopedVariant sv("softmax_bwd", v);
    SoftmaxBwdArgs a;
    a.dy = dy;
    a.y = y;
    a.dx = Tensor::empty({1, 2});
    softmax_bwd(a);
    const auto dx = a.dx.to_vector<double>();
    EXPECT_NEAR(dx[0], 0.1875, 1e-7) << v;
    EXPECT_NEAR(dx[1], -0.1875, 1e-7) << v;
    a.mask = Tensor::from_vector<bool>({true, false}, {2});
    softmax_bwd(a);
    EXPECT_EQ(a.dx.to_vector<double>()[1], 0.0) << v;
    EXPECT_NEAR(a.dx.to_vector<double>()[0], 0.25 * (1 - 0.25), 1e-7) << v;
  }
}

TEST(Softmax, BadMaskNamesShapes) {
  SoftmaxArgs a;
  a.x = Tensor::zeros({2, 3});
  a.y = Tensor::empty({2, 3});
  a.mask = Tensor::from_vector<bool>({true, false}, {2});
  try {
    softmax(a);
    FAIL() << "bad mask accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not broadcast to x [2, 3]"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace aim::kernels
