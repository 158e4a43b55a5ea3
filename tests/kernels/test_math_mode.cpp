// kernels/math_mode.h: the process-wide TF32 setting (--tf32) and the CUDA defaults it goes with.
#include <gtest/gtest.h>

#include "kernels/conv/conv2d.h"
#include "kernels/math_mode.h"
#include "kernels/registry.h"
#include "kernels/testing.h"

namespace aim::kernels {
namespace {

TEST(MathMode, DefaultsArePyTorchs) {
  const Tf32 d;  // torch.backends.cudnn.allow_tf32 = True, cuda.matmul.allow_tf32 = False
  EXPECT_TRUE(d.conv);
  EXPECT_FALSE(d.matmul);
  EXPECT_EQ(tf32_name(d), "conv");
}

TEST(MathMode, ParseAndNameRoundTrip) {
  for (const char* s : {"on", "off", "conv", "matmul"}) {
    Tf32 t;
    ASSERT_TRUE(parse_tf32(s, t)) << s;
    EXPECT_EQ(tf32_name(t), s);
  }
  Tf32 t{true, false};
  EXPECT_TRUE(parse_tf32("on", t));
  EXPECT_TRUE(t.conv && t.matmul);
  EXPECT_TRUE(parse_tf32("matmul", t));
  EXPECT_TRUE(!t.conv && t.matmul);
  for (const char* bad : {"", "ON", "true", "1", "conv,matmul"}) {
    Tf32 u{true, false};
    EXPECT_FALSE(parse_tf32(bad, u)) << bad;
    EXPECT_TRUE(u == (Tf32{true, false})) << "a bad value must leave the output alone";
  }
}

TEST(MathMode, SetAndScopedRestore) {
  const Tf32 before = tf32();
  set_tf32(Tf32{true, true});
  EXPECT_EQ(tf32_name(tf32()), "on");
  {
    ScopedTf32 off(Tf32{false, false});
    EXPECT_EQ(tf32_name(tf32()), "off");
  }
  EXPECT_EQ(tf32_name(tf32()), "on");
  set_tf32(before);
}

#ifdef AIM_CUDA
// With cuDNN built, cuda.cudnn is the CUDA default of the three conv2d directions for every dtype
// (as PyTorch); matmul stays cuda.cublas.
TEST(MathMode, CudaConvDefaultIsCudnn) {
  for (const char* name : {"conv2d_fwd", "conv2d_bwd_data", "conv2d_bwd_filter"}) {
    OpBase* op = registry().find(name);
    ASSERT_NE(op, nullptr) << name;
    for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16})
      EXPECT_EQ(op->default_variant(Backend::CUDA, t), "cuda.cudnn")
          << name << " " << dtype_name(t);
  }
  EXPECT_EQ(registry().find("matmul")->default_variant(Backend::CUDA, DType::f32), "cuda.cublas");
}

// The per-call rule: what the legacy cuDNN API cannot take (asymmetric padding) runs the own
// implicit GEMM by default, and that is the variant selected (and recorded).
TEST(MathMode, CudaConvDefaultRuleOnGpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  const Device dev = parse_device("cuda");
  auto& op = registry().op<Conv2dFwdArgs>("conv2d_fwd");
  Conv2dFwdArgs a;
  a.x = Tensor::zeros({2, 3, 9, 9}, DType::f32, dev);
  a.w = Tensor::zeros({4, 3, 3, 3}, DType::f32, dev);
  a.y = Tensor::zeros({2, 4, 9, 9}, DType::f32, dev);
  a.p.pad_top = a.p.pad_bottom = a.p.pad_left = a.p.pad_right = 1;
  EXPECT_EQ(op.select(a).name, "cuda.cudnn");
  a.x = Tensor::zeros({2, 3, 8, 8}, DType::f32, dev);  // TF SAME 3x3 stride 2 on 8: pads 0 / 1
  a.y = Tensor::zeros({2, 4, 4, 4}, DType::f32, dev);
  a.p.stride_h = a.p.stride_w = 2;
  a.p.pad_top = a.p.pad_left = 0;
  EXPECT_EQ(op.select(a).name, "cuda.implicit_gemm");
}
#endif

}  // namespace
}  // namespace aim::kernels
