// What the registry-driven test cannot check for the elementwise family: argument errors,
// PyTorch's conventions at kinks and special values (checked on every CPU variant), the
// streaming-store path of cpu.omp (outputs larger than the caches), in-place use and strided
// outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/elementwise/binary.h"
#include "kernels/elementwise/unary.h"
#include "kernels/fast_math.h"
#include "kernels/registry.h"

namespace aim::kernels {
namespace {

const char* const kCpuVariants[] = {"cpu.ref", "cpu.omp"};

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

std::vector<float> run_unary(const char* v, UnaryKind k, const std::vector<float>& x,
                             float alpha = 0, float beta = 0) {
  ScopedVariant sv("unary", v);
  const Tensor xt = Tensor::from_vector(x, {int64_t(x.size())});
  const Tensor y = Tensor::empty({int64_t(x.size())});
  unary(UnaryArgs{xt, y, k, alpha, beta});
  return y.to_vector<float>();
}

std::vector<float> run_unary_bwd(const char* v, UnaryKind k, const std::vector<float>& x,
                                 float alpha = 0, float beta = 0) {
  ScopedVariant sv("unary_bwd", v);
  const int64_t n = int64_t(x.size());
  const Tensor xt = Tensor::from_vector(x, {n});
  const Tensor dy = Tensor::full({n}, 1.0);
  const Tensor y = Tensor::empty({n});
  unary(UnaryArgs{xt, y, k, alpha, beta});
  const Tensor dx = Tensor::empty({n});
  unary_bwd(UnaryBwdArgs{dy, xt, y, dx, k, alpha, beta});
  return dx.to_vector<float>();
}

template <class T>
std::vector<T> run_binary(const char* v, BinaryKind k, const std::vector<T>& a,
                          const std::vector<T>& b, float alpha = 1) {
  ScopedVariant sv("binary", v);
  const int64_t n = int64_t(a.size());
  const Tensor at = Tensor::from_vector(a, {n}), bt = Tensor::from_vector(b, {n});
  const Tensor y = Tensor::empty({n}, dtype_of<T>());
  binary(BinaryArgs{at, bt, y, k, alpha});
  return y.to_vector<T>();
}

// NaN propagates without undefined behaviour (the UBSan build, tools/sanitize.sh, aborts on it).
TEST(Elementwise, FastExpOfNanIsNanAndClampsTheRange) {
  EXPECT_TRUE(std::isnan(fast_expf(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_NEAR(fast_expf(1.0f), std::exp(1.0f), 1e-6f);
  EXPECT_GT(fast_expf(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_TRUE(std::isfinite(fast_expf(std::numeric_limits<float>::infinity())));
}

TEST(Elementwise, BinaryArgumentErrors) {
  const Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4});
  std::string e = error_of([&] { binary(BinaryArgs{a, b, Tensor::empty({2, 3})}); });
  EXPECT_NE(e.find("[binary] add: a [2, 3] and b [4] do not broadcast"), std::string::npos) << e;

  e = error_of([&] {
    binary(BinaryArgs{a, Tensor::zeros({3}, DType::f16), Tensor::empty({2, 3})});
  });
  EXPECT_NE(e.find("same dtype, got a f32 and b f16"), std::string::npos) << e;

  e = error_of([&] { binary(BinaryArgs{a, Tensor::zeros({3}), Tensor::empty({3, 2})}); });
  EXPECT_NE(e.find("y has shape [3, 2], expected [2, 3]"), std::string::npos) << e;

  e = error_of([&] { binary(BinaryArgs{a, a, Tensor::empty({2, 3}), BinaryKind::lt}); });
  EXPECT_NE(e.find("lt of f32 tensors writes a bool y, got f32"), std::string::npos) << e;

  const Tensor i = Tensor::zeros({3}, DType::i32);
  e = error_of([&] {
    binary(BinaryArgs{i, i, Tensor::empty({3}, DType::i32), BinaryKind::add, 0.5f});
  });
  EXPECT_NE(e.find("alpha must be an integer for i32 tensors"), std::string::npos) << e;

  for (const char* v : kCpuVariants) {
    ScopedVariant sv("binary", v);
    e = error_of([&] {
      binary(BinaryArgs{Tensor::ones({3}, DType::i64), Tensor::zeros({3}, DType::i64),
                        Tensor::empty({3}, DType::i64), BinaryKind::div});
    });
    EXPECT_NE(e.find("integer division by zero"), std::string::npos) << v << ": " << e;
  }

  e = error_of([&] { where(WhereArgs{Tensor::zeros({3}), a, a, Tensor::empty({2, 3})}); });
  EXPECT_NE(e.find("[where] cond must be bool, got f32"), std::string::npos) << e;

  e = error_of([&] { unary(UnaryArgs{a, Tensor::empty({3, 2}), UnaryKind::exp}); });
  EXPECT_NE(e.find("[unary] exp: x [2, 3] and y [3, 2] differ in shape"), std::string::npos) << e;
  e = error_of([&] {
    unary_bwd(UnaryBwdArgs{a, Tensor(), Tensor(), Tensor::empty({2, 3}), UnaryKind::tanh});
  });
  EXPECT_NE(e.find("[unary_bwd] tanh needs y, got undefined"), std::string::npos) << e;
}

TEST(Elementwise, UnaryMatchesPyTorchConventions) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const char* v : kCpuVariants) {
    SCOPED_TRACE(v);
    // torch.nn.functional.gelu(torch.tensor([1., -1.]), approximate='none' / 'tanh')
    auto g = run_unary(v, UnaryKind::gelu_erf, {1.f, -1.f});
    EXPECT_NEAR(g[0], 0.8413447460685429, 1e-6);
    EXPECT_NEAR(g[1], -0.15865525393145707, 1e-6);
    g = run_unary(v, UnaryKind::gelu_tanh, {1.f, -1.f});
    EXPECT_NEAR(g[0], 0.8411919906082768, 1e-6);
    EXPECT_NEAR(g[1], -0.15880800939172324, 1e-6);
    // clamp with min > max gives max; NaN stays NaN (torch.clamp).
    auto c = run_unary(v, UnaryKind::clamp, {-1.f, 0.5f, 3.f, nan}, 2.f, 1.f);
    EXPECT_EQ(c[0], 1.f);
    EXPECT_EQ(c[1], 1.f);
    EXPECT_EQ(c[2], 1.f);
    EXPECT_TRUE(std::isnan(c[3]));
    EXPECT_TRUE(std::isnan(run_unary(v, UnaryKind::relu, {nan})[0]));
    EXPECT_EQ(run_unary(v, UnaryKind::sign, {nan, -2.f, 0.f, 3.f}),
              (std::vector<float>{0.f, -1.f, 0.f, 1.f}));
    // Gradients at the kinks: relu'(0) = 0, abs'(0) = 0, leaky_relu'(0) = slope, clamp passes
    // the gradient on its bounds.
    EXPECT_EQ(run_unary_bwd(v, UnaryKind::relu, {-1.f, 0.f, 2.f}),
              (std::vector<float>{0.f, 0.f, 1.f}));
    EXPECT_EQ(run_unary_bwd(v, UnaryKind::abs, {-1.f, 0.f, 2.f}),
              (std::vector<float>{-1.f, 0.f, 1.f}));
    EXPECT_EQ(run_unary_bwd(v, UnaryKind::leaky_relu, {-1.f, 0.f, 2.f}, 0.25f),
              (std::vector<float>{0.25f, 0.25f, 1.f}));
    EXPECT_EQ(run_unary_bwd(v, UnaryKind::clamp, {-1.f, -0.5f, 0.f, 0.5f, 1.f}, -0.5f, 0.5f),
              (std::vector<float>{0.f, 1.f, 1.f, 1.f, 0.f}));
  }
}

TEST(Elementwise, BinaryMatchesPyTorchConventions) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const char* v : kCpuVariants) {
    SCOPED_TRACE(v);
    // torch.pow on integer tensors: negative exponents give 0 unless the base is +-1.
    EXPECT_EQ(
        run_binary<int32_t>(v, BinaryKind::pow, {2, -1, -1, -2, 3, 1}, {3, -1, -2, -3, -2, -5}),
        (std::vector<int32_t>{8, -1, 1, 0, 0, 1}));
    // Integer division truncates toward zero (rounding_mode='trunc').
    EXPECT_EQ(run_binary<int64_t>(v, BinaryKind::div, {-7, 7, -8}, {2, -2, 3}),
              (std::vector<int64_t>{-3, -3, -2}));
    // torch.maximum / minimum propagate NaN from either side.
    auto m = run_binary<float>(v, BinaryKind::maximum, {nan, 1.f, 2.f}, {1.f, nan, 3.f});
    EXPECT_TRUE(std::isnan(m[0]) && std::isnan(m[1]));
    EXPECT_EQ(m[2], 3.f);
    m = run_binary<float>(v, BinaryKind::minimum, {nan, 1.f, 2.f}, {1.f, nan, 3.f});
    EXPECT_TRUE(std::isnan(m[0]) && std::isnan(m[1]));
    EXPECT_EQ(m[2], 2.f);
    EXPECT_EQ(run_binary<float>(v, BinaryKind::sub, {1.f, 2.f}, {4.f, 8.f}, 0.5f),
              (std::vector<float>{-1.f, -2.f}));
    EXPECT_EQ(run_binary<float>(v, BinaryKind::prelu, {-2.f, 3.f}, {0.25f, 0.25f}),
              (std::vector<float>{-0.5f, 3.f}));
  }
}

// Outputs of >= 8 MiB take cpu.omp's streaming stores; a start one element past alignment
// exercises the head, whole buffers and the tail of each thread's chunk.
TEST(Elementwise, LargeOutputsStreamCorrectly) {
  const int64_t n = (int64_t(3) << 20) + 37;
  const Tensor a = Tensor::arange(n + 1).slice(0, 1, n + 1);  // a[i] = i + 1
  const Tensor b = Tensor::full({n}, 0.5);
  const Tensor yb = Tensor::full({n + 1}, -1.0);
  const Tensor y = yb.slice(0, 1, n + 1);
  ScopedVariant sv("binary", "cpu.omp");
  binary(BinaryArgs{a, b, y, BinaryKind::mul});
  const std::vector<float> got = yb.to_vector<float>();
  EXPECT_EQ(got[0], -1.f);  // not written
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += got[size_t(i + 1)] != 0.5f * float(i + 1);
  EXPECT_EQ(bad, 0);

  // A bool output of >= 8 MiB (comparison), the second operand a row broadcast.
  const int64_t rows = 1025, cols = 8209;
  const Tensor x = Tensor::arange(rows * cols, DType::i32).view({rows, cols});
  const Tensor t = Tensor::full({cols}, 3000.0, DType::i32);
  const Tensor c = Tensor::empty({rows, cols}, DType::boolean);
  binary(BinaryArgs{x, t, c, BinaryKind::lt});
  const std::vector<bool> cv = c.to_vector<bool>();
  bad = 0;
  for (int64_t i = 0; i < rows * cols; ++i) bad += cv[size_t(i)] != (i < 3000);
  EXPECT_EQ(bad, 0);
}

TEST(Elementwise, InPlaceAndStridedOutputs) {
  for (const char* v : kCpuVariants) {
    SCOPED_TRACE(v);
    ScopedVariant sb("binary", v);
    const Tensor a = Tensor::arange(6).view({2, 3});
    binary(BinaryArgs{a, Tensor::full({3}, 1.0), a, BinaryKind::add});  // a += 1
    EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));

    ScopedVariant su("unary", v);
    const Tensor yt = Tensor::full({3, 2}, -1.0);
    unary(UnaryArgs{a, yt.transpose(0, 1), UnaryKind::square});  // a strided output
    EXPECT_EQ(yt.to_vector<float>(), (std::vector<float>{1, 16, 4, 25, 9, 36}));
  }
}

}  // namespace
}  // namespace aim::kernels
