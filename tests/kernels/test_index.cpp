// index ops beyond the registry-driven comparison: PyTorch's semantics on hand-computed examples
// (every CPU variant), and errors naming the bad index or shape.
#include <gtest/gtest.h>

#include "kernels/index/index.h"
#include "kernels/registry.h"

namespace aim::kernels {
namespace {

std::vector<std::string> cpu_variants(const std::string& op) {
  std::vector<std::string> r;
  for (const VariantInfo& v : registry().find(op)->variant_infos())
    if (v.backend == Backend::CPU) r.push_back(v.name);
  return r;
}

using V = std::vector<float>;

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(Index, ConcatLikeTorchCat) {
  const Tensor x0 = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  const Tensor x1 = Tensor::from_vector<float>({5, 6}, {2, 1});
  const Tensor x2 = Tensor::from_vector<float>({7, 8}, {1, 2});
  for (const std::string& v : cpu_variants("concat")) {
    SCOPED_TRACE(v);
    ScopedVariant sv("concat", v);
    Tensor y = Tensor::empty({2, 3});
    concat({{x0, x1}, y, -1});
    EXPECT_EQ(y.to_vector<float>(), (V{1, 2, 5, 3, 4, 6}));
    concat({{x0.transpose(0, 1), x1}, y, 1});  // a non-contiguous input
    EXPECT_EQ(y.to_vector<float>(), (V{1, 3, 5, 2, 4, 6}));
    Tensor z = Tensor::empty({3, 2});
    concat({{x0, x2}, z, 0});
    EXPECT_EQ(z.to_vector<float>(), (V{1, 2, 3, 4, 7, 8}));
    EXPECT_NE(error_of([&] {
                concat({{x0, x2}, y, 1});
              }).find("[concat] xs[1] [1, 2]"),
              std::string::npos);
  }
}

TEST(Index, IndexSelectAndIndexAdd) {
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  for (const std::string& v : cpu_variants("index_select")) {
    SCOPED_TRACE(v);
    ScopedVariant sv("index_select", v);
    Tensor y = Tensor::empty({2, 3});
    index_select({x, Tensor::from_vector<int64_t>({2, 0, 2}, {3}), y, 1});
    EXPECT_EQ(y.to_vector<float>(), (V{3, 1, 3, 6, 4, 6}));
    Tensor z = Tensor::empty({2, 3});
    index_select({x, Tensor::from_vector<int32_t>({1, 1}, {2}), z, 0});
    EXPECT_EQ(z.to_vector<float>(), (V{4, 5, 6, 4, 5, 6}));
    const std::string e = error_of([&] {
      index_select({x, Tensor::from_vector<int32_t>({1, 2}, {2}), z, 0});
    });
    EXPECT_NE(e.find("[index_select] index 2 at position 1 out of range [0, 2)"), std::string::npos)
        << e;
  }
  for (const std::string& v : cpu_variants("index_add")) {
    SCOPED_TRACE(v);
    ScopedVariant sv("index_add", v);
    Tensor y = Tensor::zeros({3, 2});
    const Tensor src = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
    index_add({src, Tensor::from_vector<int64_t>({0, 2, 0}, {3}), y, 0});
    EXPECT_EQ(y.to_vector<float>(), (V{6, 8, 0, 0, 3, 4}));
  }
}

TEST(Index, GatherAndScatterAddLikeTorch) {
  // torch.gather(torch.tensor([[1, 2], [3, 4]]), 1, torch.tensor([[0, 0], [1, 0]]))
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  const Tensor index = Tensor::from_vector<int64_t>({0, 0, 1, 0}, {2, 2});
  for (const std::string& v : cpu_variants("gather")) {
    SCOPED_TRACE(v);
    ScopedVariant sv("gather", v);
    Tensor y = Tensor::empty({2, 2});
    gather({x, index, y, 1});
    EXPECT_EQ(y.to_vector<float>(), (V{1, 1, 4, 3}));
    gather({x, index, y, 0});  // y[i][j] = x[index[i][j]][j]
    EXPECT_EQ(y.to_vector<float>(), (V{1, 2, 3, 2}));
  }
  for (const std::string& v : cpu_variants("scatter_add")) {
    SCOPED_TRACE(v);
    ScopedVariant sv("scatter_add", v);
    Tensor y = Tensor::zeros({2, 2});
    scatter_add({Tensor::ones({2, 2}), index, y, 1});
    EXPECT_EQ(y.to_vector<float>(), (V{2, 0, 1, 1}));
  }
}

TEST(Index, OneHotNamesTheBadIndex) {
  for (const std::string& v : cpu_variants("one_hot")) {
    SCOPED_TRACE(v);
    ScopedVariant sv("one_hot", v);
    Tensor y = Tensor::empty({3, 3}, DType::i64);
    one_hot({Tensor::from_vector<int64_t>({0, 2, 1}, {3}), y});
    EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 0, 0, 1, 0, 1, 0}));
    const std::string e = error_of([&] {
      one_hot({Tensor::from_vector<int32_t>({0, 3, 1}, {3}), y});
    });
    EXPECT_NE(e.find("[one_hot] index 3 at position 1 out of range [0, 3)"), std::string::npos)
        << e;
  }
}

TEST(Index, PadCropsWithNegativePadsAndPadBwdZerosCroppedGradients) {
  const Tensor x = Tensor::from_vector<float>({1, 2, 3}, {1, 3});
  for (const std::string& v : cpu_variants("pad")) {
    SCOPED_TRACE(v);
    ScopedVariant sv("pad", v);
    Tensor y = Tensor::empty({1, 3});
    pad({x, y, {1, -1}, 9.0});  // F.pad(x, (1, -1), value=9)
    EXPECT_EQ(y.to_vector<float>(), (V{9, 1, 2}));
    Tensor z = Tensor::empty({2, 3});
    pad({x, z, {0, 0, 1, 0}, 9.0});  // the pair for dim 0 comes second
    EXPECT_EQ(z.to_vector<float>(), (V{9, 9, 9, 1, 2, 3}));
    const std::string e = error_of([&] { pad({x, z, {1, 1}, 0.0}); });
    EXPECT_NE(e.find("[pad]"), std::string::npos) << e;
  }
  for (const std::string& v : cpu_variants("pad_bwd")) {
    SCOPED_TRACE(v);
    ScopedVariant sv("pad_bwd", v);
    Tensor dx = Tensor::empty({1, 3});
    pad_bwd({Tensor::from_vector<float>({9, 1, 2}, {1, 3}), dx, {1, -1}});
    EXPECT_EQ(dx.to_vector<float>(), (V{1, 2, 0}));
  }
}

}  // namespace
}  // namespace aim::kernels
