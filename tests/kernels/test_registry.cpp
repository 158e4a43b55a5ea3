// Variant selection (DESIGN §4): override > --kernels > default; unsupported choices are errors
// naming the reason unless fallback is allowed, and then the substitution is recorded.
#include <gtest/gtest.h>

#include "kernels/conv/conv2d.h"
#include "kernels/math_mode.h"
#include "kernels/matmul/gemm_avx512.h"
#include "kernels/matmul/matmul.h"
#include "kernels/registry.h"
#include "kernels/softmax/softmax.h"
#include "kernels/testing.h"

namespace aim::kernels {
namespace {

MatmulArgs small_matmul(DType t) {
  MatmulArgs a;
  a.a = random_tensor({3, 4}, t, 1);
  a.b = random_tensor({4, 5}, t, 2);
  a.c = Tensor::empty({3, 5}, t);
  return a;
}

TEST(Registry, OverrideSelectsAndCounts) {
  auto& op = registry().op<MatmulArgs>("matmul");
  const MatmulArgs a = small_matmul(DType::f32);
  {
    ScopedVariant use("matmul", "cpu.ref");
    EXPECT_EQ(op.select(a).name, "cpu.ref");
  }
  {
    ScopedVariant all("*", "cpu.ref");
    EXPECT_EQ(op.select(a).name, "cpu.ref");
  }
  // Per-dtype defaults: f16 on the CPU widens to the f32 GEMM (AVX-512 or OpenBLAS), else the
  // reference.
  bool fast = cpu_has_avx512();
#ifdef AIM_HAVE_OPENBLAS
  fast = true;
#endif
  EXPECT_EQ(op.select(small_matmul(DType::f16)).name, fast ? "cpu.widen" : "cpu.ref");
}

Conv2dFwdArgs conv(int64_t C, int64_t K, int64_t R, int64_t H = 6, int64_t W = 7, int64_t N = 2) {
  Conv2dFwdArgs a;
  a.x = random_tensor({N, C, H, W}, DType::f32, 1);
  a.w = random_tensor({K, C, R, R}, DType::f32, 2);
  a.p.pad_top = a.p.pad_bottom = a.p.pad_left = a.p.pad_right = R / 2;
  a.y = Tensor::empty({N, K, H, W}, DType::f32);
  return a;
}

// A batch of H x W outputs with at least 192 F(4x4) tiles.
Conv2dFwdArgs conv_batch(int64_t H, int64_t W) {
  const int64_t tiles = ((H + 3) / 4) * ((W + 3) / 4), want = 192;
  return conv(16, 32, 3, H, W, (want + tiles - 1) / tiles);
}

// A default rule picks the variant per call (conv2d: Winograd for 3x3 stride-1 convolutions with
// >= 16 channels each way, F(4x4) where its padded tiles need <= 0.7x F(2x2)'s products and the
// batch has >= 192 of them); --kernels own keeps that choice, an override still wins.
TEST(Registry, DefaultRuleChoosesPerCall) {
  if (!cpu_has_avx512()) GTEST_SKIP() << "cpu.winograd needs AVX-512";
  auto& op = registry().op<Conv2dFwdArgs>("conv2d_fwd");
  EXPECT_EQ(op.select(conv(16, 32, 3)).name, "cpu.winograd");
  EXPECT_EQ(op.select(conv_batch(16, 16)).name, "cpu.winograd4");
  EXPECT_EQ(op.select(conv_batch(4, 25)).name, "cpu.winograd4");   // CRNN's 4x25: 7 tiles of 16
  EXPECT_EQ(op.select(conv_batch(14, 14)).name, "cpu.winograd");   // 16 tiles of 16 for 196
  EXPECT_EQ(op.select(conv_batch(15, 40)).name, "cpu.winograd4");  // 16 rows either way
  EXPECT_EQ(op.select(conv_batch(6, 7)).name, "cpu.winograd");     // 8x8 for 6x7: F(2x2) 6x8
  EXPECT_EQ(op.select(conv(16, 32, 3, 16, 16, 1)).name, "cpu.winograd");  // 16 tiles: too few
  EXPECT_EQ(op.select(conv(16, 32, 5, 16, 16)).name, "cpu.winograd_5x5");
  EXPECT_EQ(op.select(conv(16, 32, 5, 15, 16)).name, "cpu.im2col");  // below 256 outputs
  EXPECT_EQ(op.select(conv(15, 32, 5, 16, 16)).name, "cpu.im2col");  // too few input channels
  {  // --winograd 2 | off caps the tile (5x5: F(2x2, 5x5) rounds as F(4x4, 3x3), off at 2)
    const ScopedWinogradTile f2(2);
    EXPECT_EQ(op.select(conv_batch(16, 16)).name, "cpu.winograd");
    EXPECT_EQ(op.select(conv(16, 32, 5, 16, 16)).name, "cpu.im2col");
    const ScopedWinogradTile off(0);
    EXPECT_EQ(op.select(conv_batch(16, 16)).name, "cpu.im2col");
    EXPECT_EQ(op.select(conv(16, 32, 3)).name, "cpu.im2col");
  }
  EXPECT_EQ(op.select(conv_batch(16, 16)).name, "cpu.winograd4");
  EXPECT_EQ(op.select(conv(3, 32, 3)).name, "cpu.im2col");   // too few input channels
  EXPECT_EQ(op.select(conv(16, 32, 1)).name, "cpu.im2col");  // 1x1
  set_kernel_selection("own", false);
  EXPECT_EQ(op.select(conv(16, 32, 3)).name, "cpu.winograd");
  EXPECT_EQ(op.select(conv(3, 32, 3)).name, "cpu.im2col");
  set_kernel_selection("", false);
  ScopedVariant use("conv2d_fwd", "cpu.im2col");
  EXPECT_EQ(op.select(conv(16, 32, 3)).name, "cpu.im2col");
}

TEST(Registry, UnsupportedChoiceNamesTheReason) {
  const MatmulArgs a = small_matmul(DType::f64);
  ScopedVariant use("matmul", "cpu.avx512");  // f32 only
  try {
    matmul(a);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("takes dtypes {f32}, got f64"), std::string::npos)
        << e.what();
  }
}

TEST(Registry, UnknownVariantListsTheRegisteredOnes) {
  ScopedVariant use("matmul", "cuda.nonexistent");
  try {
    matmul(small_matmul(DType::f32));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cpu.ref"), std::string::npos) << e.what();
  }
}

TEST(Registry, FallbackIsLoggedAndRecorded) {
  set_kernel_selection("matmul=cpu.avx512", /*fallback=*/true);
  matmul(small_matmul(DType::f64));  // cpu.avx512 cannot take f64: substituted
  bool found = false;
  for (const Substitution& s : substitutions())
    found |= s.op == "matmul" && s.wanted == "cpu.avx512";
  EXPECT_TRUE(found);
  set_kernel_selection("", false);
}

TEST(Registry, BadKernelSpecIsAnError) {
  EXPECT_THROW(set_kernel_selection("nosuchop=cpu.ref", false), Error);
  EXPECT_THROW(set_kernel_selection("fastest", false), Error);
}

TEST(Registry, EveryOpHasAReferenceAndTestShapes) {
  for (OpBase* op : registry().ops()) {
    bool has_ref = false;
    for (const VariantInfo& v : op->variant_infos()) has_ref |= v.name == "cpu.ref";
    EXPECT_TRUE(has_ref) << op->name();
    EXPECT_FALSE(op->test_shapes.empty()) << op->name();
    EXPECT_TRUE(bool(op->make_case)) << op->name();
    // Every test shape's numbers are named (checked against each shape when registered).
    EXPECT_FALSE(op->shape_fields.empty()) << op->name() << " declares no shape fields";
  }
}

// The case makers' names are the declaration's: a case the declaration does not know is an error.
TEST(Registry, ACaseNameOutsideTheDeclarationIsAnError) {
  OpBase* op = registry().find("softmax");
  ASSERT_NE(op, nullptr);
  TestCase c = op->make_case(op->test_shapes.front(), DType::f32, 1);
  c.add_in("not_a_field", c.inputs.front().tensor);
  try {
    op->run_case("cpu.ref", Backend::CPU, c);
    FAIL() << "no error for an undeclared input";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'not_a_field' is not a field"), std::string::npos)
        << e.what();
  }
}

// The trace's description lists every declared field in order (tensors and parameters).
TEST(Registry, DescribeArgsListsEveryDeclaredField) {
  SoftmaxArgs a;
  a.x = Tensor::zeros({2, 3}, DType::f32);
  a.y = Tensor::zeros({2, 3}, DType::f32);
  a.dim = 1;
  a.log = true;
  EXPECT_EQ(describe_args(a), "x=[2, 3] f32 y=[2, 3] f32 dim=1 log=1");
}

}  // namespace
}  // namespace aim::kernels
