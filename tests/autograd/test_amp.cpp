// autograd/amp.h: the autocast classes (lowp, fp32, promote, native), the parameter cache (one
// cast per weight, fp32-declared parameters), gradients reaching the f32 masters.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/amp.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/matmul.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "autograd/functions/softmax.h"
#include "tests/support/common.h"

namespace aim::autograd {
namespace {

Tensor randn(Shape s, uint64_t seed) {
  std::vector<float> v(size_t(shape_numel(s)));
  uint64_t x = seed * 2654435761u + 1;
  for (float& f : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    f = float(int64_t(x >> 40) % 2001 - 1000) / 1000.0f;
  }
  return Tensor::from_vector(v, s);
}

TEST(Amp, ClassesDecideTheDtype) {
  const Variable x(randn({4, 8}, 1)), w(randn({3, 8}, 2), true), b(randn({3}, 3), true);
  {
    amp::Autocast ac(DType::f16);
    const Variable y = linear(x, w, b);
    EXPECT_EQ(y.dtype(), DType::f16);                                   // lowp
    EXPECT_EQ(softmax(y, 1).dtype(), DType::f32);                       // fp32
    EXPECT_EQ(add(y, Variable(randn({4, 3}, 9))).dtype(), DType::f32);  // promote (mixed)
    EXPECT_EQ(add(y, y).dtype(), DType::f16);                           // uniform: as is
    EXPECT_EQ(relu(y).dtype(), DType::f16);                             // native
    EXPECT_EQ(concat({y, Variable(randn({4, 2}, 4))}, 1).dtype(), DType::f32);
  }
  EXPECT_FALSE(amp::active());
  EXPECT_EQ(linear(x, w, b).dtype(), DType::f32);
  amp::Autocast ac(DType::bf16);
  EXPECT_EQ(matmul(x, w, false, true).dtype(), DType::bf16);
}

TEST(Amp, GradientsReachF32MastersCloseToF32) {
  const Variable x(randn({16, 32}, 5)), w(randn({8, 32}, 6), true), b(randn({8}, 7), true);
  sum(linear(x, w, b), {}, false).backward();
  const std::vector<float> g32 = w.grad().to_vector<float>(), gb32 = b.grad().to_vector<float>();
  w.zero_grad();
  b.zero_grad();
  for (DType t : {DType::f16, DType::bf16}) {
    w.zero_grad();
    b.zero_grad();
    Variable loss;
    {
      amp::Autocast ac(t);
      loss = sum(linear(x, w, b), {}, false);
    }
    EXPECT_EQ(loss.dtype(), DType::f32);
    loss.backward();
    ASSERT_EQ(w.grad().dtype(), DType::f32);
    const std::vector<float> g = w.grad().to_vector<float>();
    const double tol = t == DType::f16 ? 2e-2 : 1e-1;  // x rounded to 16 bits (|x| <= 1, 16 rows)
    for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], g32[i], tol) << dtype_name(t) << i;
    EXPECT_EQ(b.grad().to_vector<float>(), gb32);  // bias grad = column sums of ones
  }
}

TEST(Amp, ParamCacheCastsOnceAndKeepsDeclaredParametersInF32) {
  const Variable x(randn({4, 8}, 1)), w1(randn({8, 8}, 2), true), w2(randn({8, 8}, 3), true);
  amp::ParamCache cache({{"enc.weight", w1}, {"head.weight", w2}}, {"^head\\."});
  EXPECT_EQ(cache.fp32_names(), (std::vector<std::string>{"head.weight"}));
  {
    amp::Autocast ac(DType::f16, &cache);
    const Variable h = linear(linear(x, w1), w1);  // w1 used twice: one cast
    EXPECT_EQ(h.dtype(), DType::f16);
    EXPECT_EQ(cache.casts(), 1);
    EXPECT_EQ(linear(h, w2).dtype(), DType::f32);  // declared fp32: the op runs in f32
    cache.clear();
    linear(x, w1);
    EXPECT_EQ(cache.casts(), 2);
  }
  AIM_EXPECT_ERROR(amp::ParamCache({{"enc.weight", w1}}, {"^emb\\."}),
                   "declares '^emb\\.' as an fp32 parameter pattern, but no parameter");
  AIM_EXPECT_ERROR(amp::ParamCache({{"enc.weight", w1}}, {"(("}), "is not a valid regex");
  AIM_EXPECT_ERROR(amp::parse_precision("fp8", "--precision"),
                   "--precision 'fp8': allowed: fp32, fp16, bf16");
}

TEST(Amp, F64IsNeverCast) {
  const Variable x(randn({2, 3}, 1).to(DType::f64)), w(randn({4, 3}, 2).to(DType::f64));
  amp::Autocast ac(DType::f16);
  EXPECT_EQ(linear(x, w).dtype(), DType::f64);
}

}  // namespace
}  // namespace aim::autograd
