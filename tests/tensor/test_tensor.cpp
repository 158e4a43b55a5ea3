#include <gtest/gtest.h>

#include "tensor/tensor.h"

namespace aim {

TEST(Tensor, ViewsShareStorage) {
  Tensor t = Tensor::arange(24).view({2, 3, 4});
  Tensor p = t.permute({2, 0, 1});
  EXPECT_EQ(p.sizes(), (Shape{4, 2, 3}));
  EXPECT_FALSE(p.is_contiguous());
  Tensor c = p.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  // c[k, i, j] == t[i, j, k]
  const auto v = c.to_vector<float>();
  EXPECT_EQ(v[1 * 6 + 1 * 3 + 2], 1 * 12 + 2 * 4 + 1);
  Tensor s = t.slice(2, 1, 4, 2);  // columns 1 and 3
  EXPECT_EQ(s.sizes(), (Shape{2, 3, 2}));
  EXPECT_EQ(s.contiguous().to_vector<float>()[1], 3.0f);
}

TEST(Tensor, EmptyTensorsAreContiguous) {
  // No element to misplace: contiguous whatever the strides (as PyTorch), so views of them work.
  EXPECT_TRUE(Tensor::empty({4, 0}).is_contiguous());
  EXPECT_TRUE(Tensor::empty({0, 3}).is_contiguous());
  Tensor t = Tensor::arange(12).view({3, 4});
  const Tensor none = t.slice(1, 2, 2).permute({1, 0});  // [0, 3], transposed strides
  EXPECT_TRUE(none.is_contiguous());
  EXPECT_EQ(none.view({3, 0}).sizes(), (Shape{3, 0}));
  EXPECT_FALSE(t.permute({1, 0}).is_contiguous());
}

TEST(Tensor, CastRoundTrip) {
  Tensor t = Tensor::from_vector<float>({1.5f, -2.25f, 65504.f, 1e-8f}, {4});
  EXPECT_EQ(t.to(DType::f16).to(DType::f32).to_vector<float>()[2], 65504.f);
  EXPECT_EQ(t.to(DType::i32).to_vector<int32_t>()[1], -2);
  EXPECT_EQ(t.to(DType::bf16).to_vector<float>()[0], 1.5f);
}

TEST(Tensor, BadShapesNameThemselves) {
  Tensor t = Tensor::zeros({2, 3});
  try {
    t.view({4, 2});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[4, 2]"), std::string::npos) << e.what();
  }
}

}  // namespace aim
