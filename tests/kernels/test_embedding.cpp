// embedding: error paths and padding semantics beyond the registry-driven comparison.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/embedding/embedding.h"
#include "kernels/registry.h"
#include "kernels/testing.h"

namespace aim::kernels {
namespace {

TEST(Embedding, OutOfRangeIndexNamesIndexAndV) {
  for (const char* variant : {"cpu.ref", "cpu.omp"}) {
    ScopedVariant sv("embedding_fwd", variant);
    Tensor w = Tensor::ones({5, 3});
    Tensor idx = Tensor::from_vector<int64_t>({0, 4, 7, 9}, {4});
    Tensor out = Tensor::empty({4, 3});
    try {
      embedding_fwd({w, idx, out, -1});
      FAIL() << variant << " accepted index 7 with V = 5";
    } catch (const std::exception& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("[embedding_fwd] index 7 at position 2"), std::string::npos) << m;
      EXPECT_NE(m.find("V = 5"), std::string::npos) << m;
    }
  }
}

TEST(Embedding, PaddingRowGetsNoGradient) {
  for (const char* variant : {"cpu.ref", "cpu.omp"}) {
    ScopedVariant sv("embedding_bwd", variant);
    Tensor dw = Tensor::zeros({3, 2});
    Tensor idx = Tensor::from_vector<int32_t>({1, 2, 1, 1}, {4});
    Tensor dout = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2});
    embedding_bwd({dout, idx, dw, 2});
    EXPECT_EQ(dw.to_vector<float>(), (std::vector<float>{0, 0, 13, 16, 0, 0})) << variant;
  }
}

// out may be a column slice of a wider tensor (rows stride(0) apart: autograd::embedding_cat
// writes each table into its columns of one result). The registry test's outputs are fresh
// contiguous tensors, so the spaced rows are checked here, for every variant this binary runs:
// the slice holds the gathered rows, the columns around it keep their content.
TEST(Embedding, ForwardWritesIntoAColumnSlice) {
  std::vector<std::pair<std::string, Device>> variants;
  for (const VariantInfo& v : registry().find("embedding_fwd")->variant_infos()) {
    if (v.backend == Backend::CPU) variants.push_back({v.name, kCPU});
    if (v.backend == Backend::CUDA && cuda_device_count() > 0)
      variants.push_back({v.name, cuda_device(0)});
  }
  ASSERT_GE(variants.size(), 2u);
  const int64_t N = 300, V = 40, C = 24, W = 64, lead = 16;
  const Tensor w = random_tensor({V, C}, DType::f32, 5, -1.0, 1.0);
  const Tensor idx = random_indices({N}, V, DType::i64, 6);
  const Tensor around = random_tensor({N, W}, DType::f32, 7, -1.0, 1.0);
  const std::vector<float> wv = w.to_vector<float>(), av = around.to_vector<float>();
  const std::vector<int64_t> iv = idx.to_vector<int64_t>();
  for (const auto& [variant, dev] : variants) {
    SCOPED_TRACE(variant);
    ScopedVariant sv("embedding_fwd", variant);
    Tensor wide = around.to(dev).clone();
    embedding_fwd({w.to(dev), idx.to(dev), wide.slice(1, lead, lead + C), -1});
    const std::vector<float> got = wide.to(kCPU).to_vector<float>();
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < W; ++c) {
        const bool in = c >= lead && c < lead + C;
        const float want = in ? wv[size_t(iv[size_t(n)] * C + c - lead)] : av[size_t(n * W + c)];
        ASSERT_EQ(got[size_t(n * W + c)], want) << "row " << n << " column " << c;
      }
  }
}

// An output beyond the L3 (32 MiB) is written with non-temporal stores (cpu.omp): the same rows as
// cpu.ref, into a whole tensor and into a column slice (rows 1 KiB apart), the other columns kept.
TEST(Embedding, StreamedLargeOutputMatchesReference) {
  const int64_t N = 70000, V = 5000, C = 128, W = 256, lead = 128;  // 35.8 MB of out rows
  const Tensor w = random_tensor({V, C}, DType::f32, 9, -1.0, 1.0);
  const Tensor idx = random_indices({N}, V, DType::i64, 10);
  Tensor want = Tensor::empty({N, C});
  {
    ScopedVariant sv("embedding_fwd", "cpu.ref");
    embedding_fwd({w, idx, want, -1});
  }
  const std::vector<float> wv = want.to_vector<float>();
  ScopedVariant sv("embedding_fwd", "cpu.omp");
  Tensor got = Tensor::full({N, C}, std::nanf(""), DType::f32);
  embedding_fwd({w, idx, got, -1});
  EXPECT_TRUE(got.to_vector<float>() == wv) << "whole output";
  Tensor wide = Tensor::full({N, W}, 7.0, DType::f32);
  embedding_fwd({w, idx, wide.slice(1, lead, lead + C), -1});
  const std::vector<float> g = wide.to_vector<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < W; ++c) {
      const bool in = c >= lead && c < lead + C;
      ASSERT_EQ(g[size_t(n * W + c)], in ? wv[size_t(n * C + c - lead)] : 7.0f)
          << "row " << n << " column " << c;
    }
}

}  // namespace
}  // namespace aim::kernels
