// embedding: error paths and padding semantics beyond the registry-driven comparison.
#include <gtest/gtest.h>

#include "kernels/embedding/embedding.h"
#include "kernels/registry.h"

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

}  // namespace
}  // namespace aim::kernels
