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
  // Optional: the same op(b) packed once by matmul_pack_b (a frozen weight at inference). Only
  // cpu.avx512's path for few rows and a b beyond the caches reads it (same bits as from b);
  // every other variant and path reads b.
  Tensor b_packed;
  Device device() const { return c.device(); }
  DType dtype() const { return c.dtype(); }
  // a and b first and side by side: the trace's "a=[M, K] f32 b=[K, N] f32 ..." (the CLI test
  // looks for it).
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("a", s.a), f.in("b", s.b), f.in_opt("bias", s.bias), f.in_opt("b_packed", s.b_packed);
    f.out("c", s.c);
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

// op(b) of a weight that products will read many times, packed for cpu.avx512 (MatmulArgs::
// b_packed): a 1-D f32 CPU tensor, about b's size again.
Tensor matmul_pack_b(const Tensor& b, bool trans_b);
// Whether a product of M rows with this op(b) would read b_packed (f32 on an AVX-512 CPU, the
// GEMM's path for few rows: M up to 32 and op(b) of 1 MiB or more when trans_b).
bool matmul_reads_packed_b(const Tensor& b, bool trans_b, int64_t M);

}  // namespace aim::kernels
