// GEMM, the project-wide convention (written once, here):
//
//   C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C[M,N] (+ bias[N] added to every row)
//
// Row-major. op(A) = A when !trans_a, with a stored as [M,K]; op(A) = A^T when trans_a, with a
// stored as [K,M]. Likewise b is stored [K,N], or [N,K] when trans_b (so Linear's y = x W^T + b
// is trans_b with W [N,K]). Batched: a [Bt,M,K] and/or b [Bt,K,N] with c [Bt,M,N]; a 2-D
// operand is shared by every batch element. Every tensor must be contiguous in its stored
// layout (no strided views: transpose by the flags, not by strides). beta == 0 never reads c
// (it may hold NaN). The tensors share one dtype and one device; bias is optional.
// Math, gradients and the PyTorch functions this matches: kernels/matmul/README.md
#pragma once
#include "kernels/op.h"

namespace aim::kernels {

struct MatmulArgs {
  Tensor a;  // [M,K] or [K,M] (trans_a), optionally with a leading batch dim Bt
  Tensor b;  // [K,N] or [N,K] (trans_b), optionally with a leading batch dim Bt
  Tensor c;  // [M,N] or [Bt,M,N]: output (and input when beta != 0)
  bool trans_a = false, trans_b = false;
  float alpha = 1, beta = 0;
  Tensor bias;  // optional [N], added to every row of every batch element
  Device device() const { return c.device(); }
  DType dtype() const { return c.dtype(); }
  // a and b first and side by side: the trace's "a=[M, K] f32 b=[K, N] f32 ..." (the CLI test
  // looks for it).
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("a", s.a), f.in("b", s.b), f.in_opt("bias", s.bias), f.out("c", s.c);
    f.param("trans_a", s.trans_a), f.param("trans_b", s.trans_b);
    f.param("alpha", s.alpha), f.param("beta", s.beta);
  }
};

// Sizes of a validated call. a_batched / b_batched: the operand has its own matrix per batch
// element (else it is shared); batch == 1 for 2-D calls.
struct MatmulDims {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  bool a_batched = false, b_batched = false;
};

// Validates shapes, dtypes, devices and contiguity; throws "[matmul] ..." naming shapes and
// strides. Every variant calls it first.
MatmulDims matmul_check(const MatmulArgs& a);

// Compulsory work: 2*Bt*M*N*K flops; a, b (and bias) read once, c read only when beta != 0,
// c written once.
inline Cost matmul_cost(const MatmulArgs& a) {
  const MatmulDims d = matmul_check(a);
  const double e = double(dtype_size(a.c.dtype()));
  const double c_bytes = double(a.c.numel()) * e;
  return Cost{2.0 * double(d.batch) * double(d.M) * double(d.N) * double(d.K),
              double(a.a.numel() + a.b.numel() + (a.bias.defined() ? a.bias.numel() : 0)) * e +
                  (a.beta != 0 ? c_bytes : 0.0),
              c_bytes};
}

void matmul(const MatmulArgs& a);  // runs the selected variant

}  // namespace aim::kernels
