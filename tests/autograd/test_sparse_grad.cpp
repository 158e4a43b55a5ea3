// spmm (autograd/functions/sparse.h) and GraphConvolution: finite-difference gradcheck in f64
// on a non-symmetric A with an empty row and a repeated column, so that A^T (not A) must be used
// in the backward.
#include <gtest/gtest.h>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/matmul.h"
#include "autograd/functions/sparse.h"
#include "autograd/gradcheck.h"
#include "kernels/testing.h"
#include "layers/graph_conv.h"
#include "tests/support/common.h"

namespace aim::autograd {
namespace {

// A [4, 5], row 1 empty, column 3 used by three rows.
kernels::Csr sample(DType t) {
  return kernels::csr_from_coo(4, 5, {0, 0, 2, 2, 2, 3, 3}, {3, 1, 0, 3, 4, 3, 2},
                               {0.5, -1.0, 2.0, 0.25, -0.75, 1.5, 0.3}, t);
}

TEST(SparseGrad, SpmmGradcheckF64) {
  const kernels::Csr a = sample(DType::f64), at = kernels::csr_transpose(a);
  const Variable x(kernels::random_tensor({5, 3}, DType::f64, 3, -1, 1), true, "x");
  const GradcheckResult r =
      gradcheck([&](const std::vector<Variable>& v) { return spmm(a, at, v[0]); }, {x});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(SparseGrad, WrongTransposeIsCaught) {
  // Passing A itself as its transpose: shapes differ for a non-square A and it is refused.
  const kernels::Csr a = sample(DType::f64);
  const Variable x(kernels::random_tensor({5, 3}, DType::f64, 3, -1, 1), true, "x");
  AIM_EXPECT_ERROR(spmm(a, a, x), "spmm: a_t must be A's transpose (5 x 4, 7 entries)");
  AIM_EXPECT_ERROR(spmm(a, kernels::csr_transpose(a), Variable(Tensor::zeros({4, 3}, DType::f64))),
                   "x has 4 rows (expected 5)");
}

TEST(SparseGrad, GraphConvolutionGradcheckF64) {
  // A square, non-symmetric: y = A (x W) + b, gradients to x, W and b.
  const kernels::Csr a = kernels::csr_from_coo(4, 4, {0, 0, 2, 3, 3}, {1, 3, 0, 3, 2},
                                               {0.5, -1.0, 2.0, 0.25, 1.5}, DType::f64);
  const kernels::Csr at = kernels::csr_transpose(a);
  layers::GraphConvolution gc(3, 2, 5);
  gc.to(DType::f64);
  const Variable x(kernels::random_tensor({4, 3}, DType::f64, 4, -1, 1), true, "x");
  const Variable w(kernels::random_tensor({3, 2}, DType::f64, 5, -1, 1), true, "w");
  const Variable b(kernels::random_tensor({2}, DType::f64, 6, -1, 1), true, "b");
  const GradcheckResult r = gradcheck(
      [&](const std::vector<Variable>& v) { return add(spmm(a, at, matmul(v[0], v[1])), v[2]); },
      {x, w, b});
  EXPECT_TRUE(r.ok) << r.message;
  // The layer computes the same function.
  gc.weight.data().copy_(w.data());
  gc.bias.data().copy_(b.data());
  const Tensor want = add(spmm(a, at, matmul(x, w)), b).data();
  EXPECT_LT(testing::rel_diff(gc.forward(x, a, at).data(), want), 1e-15);
}

}  // namespace
}  // namespace aim::autograd
