// conv2d, conv_transpose2d, pooling, batch_norm and local_response_norm (autograd/functions/
// conv.h, pool.h, batch_norm.h): gradcheck in f64 on cpu.ref over strides, asymmetric padding,
// dilation, groups, ceil mode and both batch-norm modes; conv_transpose2d against the adjoint
// identity <conv(x), y> = <x, conv_transpose(y)>.
#include <gtest/gtest.h>

#include "autograd/functions/batch_norm.h"
#include "autograd/functions/conv.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/lrn.h"
#include "autograd/functions/pool.h"
#include "autograd/functions/reduce.h"
#include "autograd/gradcheck.h"
#include "kernels/testing.h"

namespace aim::autograd {
namespace {

using Fn = std::function<Variable(const std::vector<Variable>&)>;

Variable param(const Shape& s, uint64_t seed, const char* name, double lo = -1, double hi = 1) {
  return Variable(kernels::random_tensor(s, DType::f64, seed, lo, hi), true, name);
}

void expect_gradcheck(const Fn& f, const std::vector<Variable>& in, const std::string& what) {
  const GradcheckResult r = gradcheck(f, in);
  EXPECT_TRUE(r.ok) << what << ": " << r.message;
}

kernels::Conv2dParams conv_params(int64_t stride, int64_t pt, int64_t pb, int64_t pl, int64_t pr,
                                  int64_t dil = 1, int64_t groups = 1) {
  kernels::Conv2dParams p;
  p.stride_h = p.stride_w = stride;
  p.pad_top = pt;
  p.pad_bottom = pb;
  p.pad_left = pl;
  p.pad_right = pr;
  p.dil_h = p.dil_w = dil;
  p.groups = groups;
  return p;
}

TEST(ConvGrad, Conv2dStridesPaddingDilationGroups) {
  struct Case {
    const char* what;
    Shape x, w;
    kernels::Conv2dParams p;
    bool bias;
  };
  const Case cases[] = {
      {"3x3 pad 1", {2, 3, 5, 6}, {4, 3, 3, 3}, conv_params(1, 1, 1, 1, 1), true},
      {"stride 2, no bias", {1, 2, 7, 7}, {3, 2, 3, 3}, conv_params(2, 1, 1, 1, 1), false},
      {"TF SAME 4x4/2 asymmetric", {1, 2, 7, 6}, {2, 2, 4, 4}, conv_params(2, 1, 2, 1, 1), true},
      {"dilation 2", {1, 2, 7, 7}, {2, 2, 3, 3}, conv_params(1, 2, 2, 2, 2, 2), true},
      {"groups 2", {2, 4, 5, 5}, {6, 2, 3, 3}, conv_params(1, 1, 1, 1, 1, 1, 2), true},
      {"depthwise", {1, 3, 5, 4}, {3, 1, 3, 3}, conv_params(1, 1, 1, 1, 1, 1, 3), false},
      {"1x1 stride 2", {2, 3, 5, 5}, {2, 3, 1, 1}, conv_params(2, 0, 0, 0, 0), true},
  };
  uint64_t seed = 10;
  for (const Case& c : cases) {
    Variable x = param(c.x, seed++, "x"), w = param(c.w, seed++, "weight");
    std::vector<Variable> in = {x, w};
    if (c.bias) in.push_back(param({c.w[0]}, seed++, "bias"));
    const kernels::Conv2dParams p = c.p;
    expect_gradcheck(
        [p](const std::vector<Variable>& v) {
          return conv2d(v[0], v[1], v.size() > 2 ? v[2] : Variable(), p);
        },
        in, c.what);
  }
}

TEST(ConvGrad, ConvTranspose2d) {
  const kernels::Conv2dParams p = conv_params(2, 1, 1, 1, 1, 1, 2);
  Variable x = param({2, 4, 3, 4}, 1, "x"), w = param({4, 3, 3, 3}, 2, "weight"),
           b = param({6}, 3, "bias");
  expect_gradcheck(
      [p](const std::vector<Variable>& v) { return conv_transpose2d(v[0], v[1], v[2], p, 1, 0); },
      {x, w, b}, "transposed, stride 2, groups 2, output padding");
}

// conv_transpose2d is the adjoint of conv2d: <conv(x, w), y> == <x, conv_transpose(y, w)>.
TEST(ConvGrad, TransposeIsAdjointOfConv) {
  const kernels::Conv2dParams p = conv_params(2, 1, 1, 1, 1, 1, 1);
  const Variable x = param({2, 3, 7, 6}, 4, "x"), w = param({5, 3, 3, 3}, 5, "w");
  const Variable y = conv2d(x, w, Variable(), p);
  const Variable ys = param(y.sizes(), 6, "ys");
  const Variable xt =
      conv_transpose2d(ys, w, Variable(), p, 0, 1);  // 7 = (4-1)*2-2+3+0; 6 needs +1
  ASSERT_EQ(xt.sizes(), x.sizes());
  const double lhs = sum(mul(y, ys)).data().item();
  const double rhs = sum(mul(x, xt)).data().item();
  EXPECT_NEAR(lhs, rhs, 1e-10 * (1 + std::abs(lhs)));
}

kernels::Pool2dParams pool_params(int64_t k, int64_t s, int64_t pt, int64_t pb, int64_t pl,
                                  int64_t pr, bool include_pad = true) {
  kernels::Pool2dParams p;
  p.kernel_h = p.kernel_w = k;
  p.stride_h = p.stride_w = s;
  p.pad_top = pt;
  p.pad_bottom = pb;
  p.pad_left = pl;
  p.pad_right = pr;
  p.count_include_pad = include_pad;
  return p;
}

TEST(ConvGrad, Pooling) {
  Variable x = param({2, 3, 7, 6}, 20, "x", -2, 2);
  const auto max = [](kernels::Pool2dParams p, bool ceil) {
    return [p, ceil](const std::vector<Variable>& v) { return max_pool2d(v[0], p, ceil); };
  };
  const auto avg = [](kernels::Pool2dParams p, bool ceil) {
    return [p, ceil](const std::vector<Variable>& v) { return avg_pool2d(v[0], p, ceil); };
  };
  expect_gradcheck(max(pool_params(3, 2, 1, 1, 1, 1), false), {x}, "max 3/2 pad 1");
  expect_gradcheck(max(pool_params(3, 2, 0, 1, 0, 1), false), {x}, "max 3/2 TF SAME");
  expect_gradcheck(max(pool_params(2, 2, 0, 0, 0, 0), true), {x}, "max 2/2 ceil mode");
  expect_gradcheck(avg(pool_params(3, 2, 1, 1, 1, 1), true), {x}, "avg ceil, include pad");
  expect_gradcheck(avg(pool_params(3, 1, 1, 1, 1, 1, false), false), {x}, "avg exclude pad");
  expect_gradcheck([](const std::vector<Variable>& v) { return adaptive_avg_pool2d(v[0], 3, 4); },
                   {x}, "adaptive 3x4");
  expect_gradcheck([](const std::vector<Variable>& v) { return adaptive_avg_pool2d(v[0], 1, 1); },
                   {x}, "global average");
}

TEST(ConvGrad, BatchNormTrainingAndFrozen) {
  Variable x = param({3, 4, 3, 2}, 30, "x", -2, 2);
  Variable w = param({4}, 31, "weight", 0.5, 1.5), b = param({4}, 32, "bias");
  expect_gradcheck(
      [](const std::vector<Variable>& v) {
        return batch_norm(v[0], v[1], v[2], Tensor(), Tensor(), true, 0.1, 1e-5);
      },
      {x, w, b}, "training, affine");
  expect_gradcheck(
      [](const std::vector<Variable>& v) {
        return batch_norm(v[0], Variable(), Variable(), Tensor(), Tensor(), true, 0.1, 1e-5);
      },
      {x}, "training, no affine");
  const Tensor rm = kernels::random_tensor({4}, DType::f64, 33, -0.5, 0.5);
  const Tensor rv = kernels::random_tensor({4}, DType::f64, 34, 0.5, 2.0);
  expect_gradcheck(
      [rm, rv](const std::vector<Variable>& v) {
        return batch_norm(v[0], v[1], v[2], rm, rv, false, 0.1, 1e-3);
      },
      {x, w, b}, "frozen (eval statistics)");
  Variable x2 = param({5, 3}, 35, "x2", -2, 2);
  expect_gradcheck(
      [](const std::vector<Variable>& v) {
        return batch_norm(v[0], Variable(), Variable(), Tensor(), Tensor(), true, 0.1, 1e-5);
      },
      {x2}, "training [N, C]");
}

// relu fused into batch_norm (one forward pass; the backward masks dy by the saved output):
// gradcheck in f64, and the same values and gradient bits as batch_norm followed by relu in every
// dtype, through both of cpu.omp's schedules (planes of >= 16 values channel by channel, smaller
// planes plane by plane). A 1-ulp difference in bf16 once sent mixed-precision training on another
// trajectory (the kernel's sums were vectorised differently with the mask).
TEST(ConvGrad, BatchNormFusedReluMatchesBatchNormThenRelu) {
  Variable x = param({3, 4, 3, 2}, 36, "x", -2, 2);
  Variable w = param({4}, 37, "weight", 0.5, 1.5), b = param({4}, 38, "bias");
  expect_gradcheck(
      [](const std::vector<Variable>& v) {
        return batch_norm(v[0], v[1], v[2], Tensor(), Tensor(), true, 0.1, 1e-5, true);
      },
      {x, w, b}, "training, affine, fused relu");
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (const Shape& s : {Shape{4, 8, 5, 7}, Shape{6, 5, 3, 3}, Shape{2, 3, 300}}) {
      const std::string what = std::string(dtype_name(t)) + " " + to_string(s);
      const Tensor xt = kernels::random_tensor(s, DType::f32, 40, -2, 3).to(t);
      const Tensor g = kernels::random_tensor(s, DType::f32, 41, -1, 1).to(t);
      const Tensor wt = kernels::random_tensor({s[1]}, DType::f32, 42, 0.5, 1.5);
      const Tensor bt = kernels::random_tensor({s[1]}, DType::f32, 43, -0.5, 0.5);
      std::vector<std::vector<float>> got[2];
      for (int fused = 0; fused < 2; ++fused) {
        Variable xv(xt.clone(), true, "x"), wv(wt.clone(), true, "w"), bv(bt.clone(), true, "b");
        Variable y = fused ? batch_norm(xv, wv, bv, Tensor(), Tensor(), true, 0.1, 1e-5, true)
                           : relu(batch_norm(xv, wv, bv, Tensor(), Tensor(), true, 0.1, 1e-5));
        y.backward(g);
        for (const Tensor& r : {y.data(), xv.grad(), wv.grad(), bv.grad()})
          got[fused].push_back(r.to(DType::f32).to_vector<float>());
      }
      const char* names[] = {"y", "dx", "dgamma", "dbeta"};
      for (size_t i = 0; i < 4; ++i) EXPECT_EQ(got[0][i], got[1][i]) << what << " " << names[i];
    }
}

TEST(ConvGrad, LocalResponseNorm) {
  Variable x = param({2, 7, 3, 2}, 40, "x", -2, 2);
  for (int64_t size : {1, 3, 4, 5}) {
    kernels::LrnParams p{size, 0.3, 0.75, 2.0};
    expect_gradcheck([p](const std::vector<Variable>& v) { return local_response_norm(v[0], p); },
                     {x}, "lrn size " + std::to_string(size));
  }
}

}  // namespace
}  // namespace aim::autograd
