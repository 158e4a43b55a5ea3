#pragma once
#include <cstdint>
namespace aim::kernels {
// Row-major SGEMM: C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, with leading dimensions
// (lda, ldb, ldc in elements; op(X) = X or X^T as stored row-major). beta == 0 must not read C
// (C may hold NaN garbage). Uses the calling OpenMP team size (omp_get_max_threads()).
//
// The implementation lives in gemm_avx512.cpp, which is compiled with AVX-512 flags; this header
// needs none. Only call sgemm_avx512() when cpu_has_avx512() returns true.
//
// stream_c: the caller knows C is part of an output larger than the caches that nobody reads
// before it leaves them (a convolution's whole output, written image by image): C is then written
// with non-temporal stores wherever it would be for a C of 32 MiB or more (beta 0, K within one
// KC block; no read for ownership, ~54 instead of ~20 GB/s here).
//
// blocks: several matrices side by side read and written in place, without first copying them
// into one (a batch of images' [C, H*W] planes as one [C, N*H*W] operand of a convolution):
// column j of op(B) (when b_stride > 0; op(B) = B only) and of C (when c_stride > 0) lives in
// block j / width at its column j % width, the blocks b_stride / c_stride floats apart; ldb and
// ldc are the row strides inside a block. The bits are those of the same product on one matrix.
struct GemmColumnBlocks {
  int64_t width = 0;     // columns per block (0: no blocks)
  int64_t b_stride = 0;  // floats from one block of B to the next (0: op(B) is one matrix)
  int64_t c_stride = 0;  // floats from one block of C to the next (0: C is one matrix)
  bool blocks_b() const { return width > 0 && b_stride > 0; }
  bool blocks_c() const { return width > 0 && c_stride > 0; }
};
//
// packed_b (optional): op(B) also laid out by sgemm_avx512_pack_b. The path for few rows of op(A)
// and a B beyond the caches (a fully connected layer at a small batch) then reads its panels from
// there instead of copying B block by block, with the same bits; the other paths read B (packed_b
// is ignored there: sgemm_avx512_uses_packed_b says whether it would be read).
//
// epilogue (optional): once an element of C is complete (alpha * op(A) op(B) + beta * C), add
// row_bias[i] to row i (when given), then relu (x < 0 ? 0 : x, NaN stays NaN): a convolution's
// bias and activation. The packed path applies it in the micro-tile's registers before its one
// store of C (a pass over C afterwards read a convolution's output back from beyond the L2, and a
// C streamed past the caches can take it too); the other paths in a pass over C after the
// product, with the same bits.
struct GemmEpilogue {
  const float* row_bias = nullptr;
  bool relu = false;
  bool any() const { return row_bias || relu; }
};
void sgemm_avx512(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                  const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                  int64_t ldc, bool stream_c = false, const GemmColumnBlocks& blocks = {},
                  const float* packed_b = nullptr, const GemmEpilogue& epilogue = {});
// Floats of op(B) [K, N] packed: N rounded up to whole 48-column panels, times K.
int64_t sgemm_avx512_packed_b_floats(int64_t N, int64_t K);
// Packs op(B) (B [K,N], or [N,K] when trans_b, rows ldb apart) into dst
// (sgemm_avx512_packed_b_floats(N, K) floats): a weight packed once for every later product.
void sgemm_avx512_pack_b(bool trans_b, int64_t N, int64_t K, const float* B, int64_t ldb,
                         float* dst);
// Whether sgemm_avx512 with these sizes reads packed_b (the skinny path: M up to 32, op(B) of
// 1 MiB or more when trans_b, 16 MiB otherwise).
bool sgemm_avx512_uses_packed_b(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K);
bool cpu_has_avx512();  // runtime check (__builtin_cpu_supports("avx512f"))
}  // namespace aim::kernels
