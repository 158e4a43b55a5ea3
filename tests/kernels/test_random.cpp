// random ops beyond the registry-driven comparison: the Generator's offsets, the stream layout
// (element i <-> block offset + i / 4), distributions, dropout's edge cases, and bad p.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kernels/random/random.h"
#include "kernels/registry.h"

namespace aim::kernels {
namespace {

std::vector<std::string> cpu_variants(const std::string& op) {
  std::vector<std::string> r;
  for (const VariantInfo& v : registry().find(op)->variant_infos())
    if (v.backend == Backend::CPU) r.push_back(v.name);
  return r;
}

TEST(Random, GeneratorAdvancesByBlocks) {
  Generator g(7, 10);
  EXPECT_EQ(g.next(5), 10u);  // 5 elements use 2 blocks
  EXPECT_EQ(g.offset(), 12u);
  EXPECT_EQ(g.next(0), 12u);
  EXPECT_EQ(g.next(4), 12u);
  EXPECT_EQ(g.offset(), 13u);
  EXPECT_EQ(g.seed(), 7u);
}

TEST(Random, StreamContinuesAcrossOffsets) {
  for (const std::string& v : cpu_variants("uniform")) {
    SCOPED_TRACE(v);
    ScopedVariant sv("uniform", v);
    Tensor a = Tensor::empty({12}), b = Tensor::empty({4});
    uniform({a, 0.0f, 1.0f, 99, 0});
    uniform({b, 0.0f, 1.0f, 99, 2});  // block 2 = elements 8..11 of the first fill
    const auto av = a.to_vector<float>(), bv = b.to_vector<float>();
    for (int i = 0; i < 4; ++i) EXPECT_EQ(bv[size_t(i)], av[size_t(8 + i)]);
    for (int i = 0; i < 12; ++i) EXPECT_EQ(av[size_t(i)], philox::uniform(99, 0, uint64_t(i)));
  }
}

TEST(Random, Distributions) {
  const int64_t n = 1 << 16;
  for (const std::string& v : cpu_variants("uniform")) {
    ScopedVariant sv("uniform", v);
    Tensor y = Tensor::empty({n});
    uniform({y, -2.0f, 3.0f, 1, 0});
    double sum = 0, lo = 1e9, hi = -1e9;
    for (float e : y.to_vector<float>())
      sum += e, lo = std::min(lo, double(e)), hi = std::max(hi, double(e));
    EXPECT_NEAR(sum / n, 0.5, 0.05) << v;
    EXPECT_GE(lo, -2.0) << v;
    EXPECT_LT(hi, 3.0) << v;
  }
  for (const std::string& v : cpu_variants("normal")) {
    ScopedVariant sv("normal", v);
    Tensor y = Tensor::empty({n});
    normal({y, 0.5f, 2.0f, 2, 0});
    double sum = 0, sq = 0;
    for (float e : y.to_vector<float>()) sum += e, sq += double(e) * e;
    const double mean = sum / n, var = sq / n - mean * mean;
    EXPECT_NEAR(mean, 0.5, 0.05) << v;
    EXPECT_NEAR(std::sqrt(var), 2.0, 0.05) << v;
  }
  for (const std::string& v : cpu_variants("bernoulli")) {
    ScopedVariant sv("bernoulli", v);
    Tensor y = Tensor::empty({n}, DType::u8);
    bernoulli({y, 0.3f, 3, 0});
    double ones = 0;
    for (uint8_t e : y.to_vector<uint8_t>()) {
      ASSERT_LE(e, 1);
      ones += e;
    }
    EXPECT_NEAR(ones / n, 0.3, 0.02) << v;
  }
}

TEST(Random, DropoutEdgeCasesAndMaskFromTheUniformStream) {
  const int64_t n = 1001;
  Tensor x = Tensor::empty({n});
  uniform({x, -1.0f, 1.0f, 5, 0});
  Tensor u = Tensor::empty({n});
  uniform({u, 0.0f, 1.0f, 11, 3});
  const auto xv = x.to_vector<float>(), uv = u.to_vector<float>();
  for (const std::string& v : cpu_variants("dropout_fwd")) {
    SCOPED_TRACE(v);
    ScopedVariant sv("dropout_fwd", v);
    Tensor y = Tensor::empty({n}), mask = Tensor::empty({n}, DType::u8);
    dropout_fwd({x, y, mask, 0.0f, 11, 3});
    EXPECT_EQ(y.to_vector<float>(), xv);
    dropout_fwd({x, y, mask, 1.0f, 11, 3});
    for (float e : y.to_vector<float>()) ASSERT_EQ(e, 0.0f);
    for (uint8_t e : mask.to_vector<uint8_t>()) ASSERT_EQ(e, 0);
    dropout_fwd({x, y, mask, 0.25f, 11, 3});
    const auto yv = y.to_vector<float>();
    const auto mv = mask.to_vector<uint8_t>();
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = size_t(i);
      ASSERT_EQ(mv[k], uv[k] >= 0.25f ? 1 : 0) << i;
      ASSERT_EQ(yv[k], mv[k] ? xv[k] * (1.0f / 0.75f) : 0.0f) << i;
    }
    Tensor dx = Tensor::empty({n});
    // The backward's variant of the same name, else its CPU default (cpu.avx512 is forward-only).
    const std::vector<std::string> bwd = cpu_variants("dropout_bwd");
    ScopedVariant sb("dropout_bwd", std::find(bwd.begin(), bwd.end(), v) != bwd.end()
                                        ? v
                                        : std::string("cpu.omp"));
    dropout_bwd({x, mask, dx, 0.25f});
    EXPECT_EQ(dx.to_vector<float>(), yv);
    try {
      dropout_fwd({x, y, mask, 1.5f, 0, 0});
      ADD_FAILURE() << "p = 1.5 accepted";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("[dropout_fwd] p must be in [0, 1], got 1.5"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace aim::kernels
