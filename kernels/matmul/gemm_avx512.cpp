// Packed AVX-512 SGEMM (BLIS / GotoBLAS structure). See README_gemm_avx512.md for the design and
// the measured numbers. Compiled with -O3 -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma.
#include "kernels/matmul/gemm_avx512.h"

#include <immintrin.h>
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

namespace aim::kernels {
namespace {

// ---------------------------------------------------------------------------------------------
// Blocking parameters (measured on the 2-core Zen 5 VM; see README_gemm_avx512.md).
//   Micro-tile MR x NR = 14 x 32: 28 zmm accumulators + 2 zmm holding a row of B; A is
//   broadcast (vbroadcastss) per row: 28 FMAs per 16 loads per k step.
//   KC = 512: B micro-panel KC x NR = 64 KiB (L1 48 KiB + L2; Zen 5's L2 feeds it fast enough),
//   fewer passes over C (K / KC read-modify-writes of C).
//   MC = 448 (rebalanced per thread, e.g. 420 for M = 4096 on 2 threads): A block MC x KC ~ 840
//   KiB, most of the 1 MiB L2.
//   NC = 4096: packed B block KC x NC = 8 MiB in the shared 32 MiB L3, shared by the threads.
// The AIM_GEMM_* macros exist only to re-measure other choices (-DAIM_GEMM_MR=6 -DAIM_GEMM_NV=4
// etc.; with -DAIM_GEMM_TUNING, KC/MC/NC are read from the environment).
// ---------------------------------------------------------------------------------------------
#ifndef AIM_GEMM_MR
#define AIM_GEMM_MR 14
#endif
#ifndef AIM_GEMM_NV
#define AIM_GEMM_NV 2
#endif
#ifndef AIM_GEMM_KC
#define AIM_GEMM_KC 512
#endif
#ifndef AIM_GEMM_MC
#define AIM_GEMM_MC 448
#endif
#ifndef AIM_GEMM_NC
#define AIM_GEMM_NC 4096
#endif
#ifndef AIM_GEMM_PFA
#define AIM_GEMM_PFA 0  // software prefetch distance for A in k steps (0 = none)
#endif

constexpr int kMR = AIM_GEMM_MR;
constexpr int kNV = AIM_GEMM_NV;
constexpr int kNR = 16 * kNV;
constexpr int64_t kSmallN = 4;  // N <= kSmallN with op(A) = A: dot-product path
constexpr int64_t kSmallM = 4;  // M <= kSmallM with op(B) = B: unpacked GEMV-like path
// Panels packed together (row by row) and then used, in the one-MC-block path: 256 columns, at
// most 512 KiB packed (KC 512), which stays in L2 until its micro-tiles have run.
constexpr int64_t kFusedPanels = 8;
// C from this size up is streamed when written once (the shared L3 is 32 MiB).
constexpr int64_t kStreamMinBytes = int64_t(32) << 20;
static_assert(kMR >= 1 && kMR <= 16, "MR must fit one AVX-512 mask");
static_assert(kMR * kNV + kNV <= 32, "micro-tile does not fit the register file");

struct Blocking {
  int64_t kc, mc, nc;
};

Blocking blocking() {
  static const Blocking b = [] {
    Blocking r{AIM_GEMM_KC, AIM_GEMM_MC, AIM_GEMM_NC};
#ifdef AIM_GEMM_TUNING
    if (const char* s = std::getenv("AIM_GEMM_KC")) r.kc = std::atoll(s);
    if (const char* s = std::getenv("AIM_GEMM_MC")) r.mc = std::atoll(s);
    if (const char* s = std::getenv("AIM_GEMM_NC")) r.nc = std::atoll(s);
#endif
    r.kc = std::max<int64_t>(r.kc, 1);
    r.mc = std::max<int64_t>((r.mc + kMR - 1) / kMR * kMR, kMR);
    r.nc = std::max<int64_t>((r.nc + kNR - 1) / kNR * kNR, kNR);
    return r;
  }();
  return b;
}

// Grow-only, 64-byte aligned scratch buffer. Fresh memory costs a page fault per 4 KiB page on
// these machines, so packing buffers are kept (per thread) and reused across calls.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { std::free(p_); }
  float* get(size_t nfloats) {
    if (nfloats > cap_) {
      std::free(p_);
      constexpr size_t kHuge = size_t(2) << 20;
      size_t bytes = nfloats * sizeof(float);
      size_t align = 64;
      if (bytes >= kHuge / 2) {
        bytes = (bytes + kHuge - 1) / kHuge * kHuge;
        align = kHuge;
      } else {
        bytes = (bytes + 4095) / 4096 * 4096;
      }
      p_ = static_cast<float*>(std::aligned_alloc(align, bytes));
      if (!p_) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
      if (align == kHuge) madvise(p_, bytes, MADV_HUGEPAGE);
#endif
      cap_ = bytes / sizeof(float);
    }
    return p_;
  }

 private:
  float* p_ = nullptr;
  size_t cap_ = 0;
};

thread_local Buffer tl_pack_a;  // per worker thread: its MC x KC block of A
thread_local Buffer tl_pack_b;  // per calling thread: the KC x NC block of B shared by the team
thread_local Buffer tl_blocks_b, tl_blocks_c;  // column blocks copied into one matrix

inline __mmask16 mask_first(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

// In-register 16 x 16 transpose: four butterfly stages (block sizes 8, 4, 2, 1) that swap the
// off-diagonal blocks, each stage 16 two-source permutes (vpermt2ps). The permute indices are a
// static table (building them per call, as a loop, doubled the cost of packing A).
struct TransposeIdx {
  alignas(64) int32_t lo[4][16], hi[4][16];
  TransposeIdx() {
    for (int s = 0, b = 8; b >= 1; b >>= 1, ++s)
      for (int j = 0; j < 16; ++j) {
        lo[s][j] = (j & b) ? 16 + j - b : j;
        hi[s][j] = (j & b) ? 16 + j : j + b;
      }
  }
};
const TransposeIdx kTransposeIdx;

template <int B>
inline void transpose_stage(__m512 r[16], int s) {
  const __m512i lo = _mm512_load_si512(kTransposeIdx.lo[s]);
  const __m512i hi = _mm512_load_si512(kTransposeIdx.hi[s]);
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) {
    if (i & B) continue;
    const __m512 x = r[i], y = r[i + B];
    r[i] = _mm512_permutex2var_ps(x, lo, y);
    r[i + B] = _mm512_permutex2var_ps(x, hi, y);
  }
}

inline void transpose16(__m512 r[16]) {
  transpose_stage<8>(r, 0);
  transpose_stage<4>(r, 1);
  transpose_stage<2>(r, 2);
  transpose_stage<1>(r, 3);
}

// ---------------------------------------------------------------------------------------------
// Packing.
// A block (rows [0, mc) of op(A) starting at `a`, k in [0, kc)) -> panels of MR rows, each panel
// stored k-major: dst[panel * MR * kc + k * MR + r]. Rows beyond mc are zero.
// ---------------------------------------------------------------------------------------------
void pack_a(bool trans, const float* a, int64_t lda, int64_t mc, int64_t kc, float* dst) {
  for (int64_t ir = 0; ir < mc; ir += kMR) {
    const int64_t mr = std::min<int64_t>(kMR, mc - ir);
    float* d = dst + ir * kc;
    if (trans) {
      // op(A)[i][k] = a[k * lda + i]: MR contiguous floats per k.
      const float* s = a + ir;
      const __mmask16 lm = mask_first(mr);
      const __mmask16 sm = mask_first(kMR);
      int64_t k = 0;
      for (; k < kc; ++k) {
        __m512 v = _mm512_maskz_loadu_ps(lm, s + k * lda);
        _mm512_mask_storeu_ps(d + k * kMR, sm, v);
      }
    } else {
      // op(A)[i][k] = a[i * lda + k]: read rows contiguously, scatter into the panel.
      const float* s = a + ir * lda;
      int64_t k0 = 0;
      if (mr == kMR) {
        // Full panel: 16 k at a time, transposed in registers, one masked store per k.
        const __mmask16 sm = mask_first(kMR);
        for (; k0 + 16 <= kc; k0 += 16) {
          __m512 v[16];
#pragma GCC unroll 16
          for (int r = 0; r < 16; ++r)
            v[r] = r < kMR ? _mm512_loadu_ps(s + r * lda + k0) : _mm512_setzero_ps();
          transpose16(v);
#pragma GCC unroll 16
          for (int kk = 0; kk < 16; ++kk) _mm512_mask_storeu_ps(d + (k0 + kk) * kMR, sm, v[kk]);
        }
      }
      int64_t r = 0;
      for (; r < mr; ++r) {
        const float* sr = s + r * lda;
        float* dr = d + r;
        for (int64_t k = k0; k < kc; ++k) dr[k * kMR] = sr[k];
      }
      for (; r < kMR; ++r) {
        float* dr = d + r;
        for (int64_t k = 0; k < kc; ++k) dr[k * kMR] = 0.0f;
      }
    }
  }
}

// One panel of op(B) = B^T (columns [j, j + nr) of op(B) = rows of b, k in [0, kc), starting at
// `b`) -> dst[k * NR + j] (dst already points at the panel). Columns beyond nr are zero.
void pack_bt_panel(const float* b, int64_t ldb, int64_t nr, int64_t kc, float* dst) {
  // op(B)[k][j] = b[j * ldb + k]: rows of b are columns of the panel. 16 k at a time, 16
  // columns per register block read as rows and transposed in registers (as pack_a), one
  // aligned store per k; columns beyond nr are zero. The last kc % 16 k are copied one by one.
  int64_t k0 = 0;
  for (; k0 + 16 <= kc; k0 += 16)
    for (int v = 0; v < kNV; ++v) {
      __m512 r[16];
#pragma GCC unroll 16
      for (int jj = 0; jj < 16; ++jj) {
        const int64_t j = 16 * v + jj;
        r[jj] = j < nr ? _mm512_loadu_ps(b + j * ldb + k0) : _mm512_setzero_ps();
      }
      transpose16(r);
#pragma GCC unroll 16
      for (int kk = 0; kk < 16; ++kk) _mm512_store_ps(dst + (k0 + kk) * kNR + 16 * v, r[kk]);
    }
  for (int64_t j = 0; j < kNR; ++j) {
    const float* s = b + j * ldb;
    float* d = dst + j;
    for (int64_t k = k0; k < kc; ++k) d[k * kNR] = j < nr ? s[k] : 0.0f;
  }
}

// The panels of op(B) = B over columns [0, n) of `b` (the last one zero-padded) -> panel p at
// dst + p * pstride, laid out as pack_bt_panel's. Row by row across all the panels: each row of
// B is read as one contiguous run of n floats, which the hardware prefetchers follow; packing one
// panel at a time walked a 128-byte strip down kc rows (a new cache line, often a new page, per
// row) and ran latency-bound when B came from L3.
void pack_b_rows(const float* b, int64_t ldb, int64_t n, int64_t kc, float* dst, int64_t pstride) {
  const int64_t npan = (n + kNR - 1) / kNR, full = n / kNR;
  for (int64_t k = 0; k < kc; ++k) {
    const float* s = b + k * ldb;
    float* d = dst + k * kNR;
    for (int64_t p = 0; p < full; ++p)
      for (int v = 0; v < kNV; ++v)
        _mm512_store_ps(d + p * pstride + 16 * v, _mm512_loadu_ps(s + p * kNR + 16 * v));
    if (full < npan)
      for (int v = 0; v < kNV; ++v) {
        const int64_t rem = std::clamp<int64_t>(n - full * kNR - 16 * v, 0, 16);
        _mm512_store_ps(d + full * pstride + 16 * v,
                        _mm512_maskz_loadu_ps(mask_first(rem), s + full * kNR + 16 * v));
      }
  }
}

// As pack_b_rows over columns [j0, j0 + n) of an op(B) = B in column blocks (GemmColumnBlocks:
// column c at b + (c / width) * bstride + c % width, `b` already at the block's first k row):
// each destination vector of 16 columns is one load from its block, or for a vector across a
// block boundary one expanding load per block it touches; the padding is zero.
void pack_b_rows_blocked(const float* b, int64_t ldb, int64_t j0, int64_t n, int64_t kc, float* dst,
                         int64_t pstride, int64_t width, int64_t bstride) {
  const int64_t nvec = (n + kNR - 1) / kNR * kNV;
  const int64_t blk0 = j0 / width, off0 = j0 - blk0 * width;
  for (int64_t k = 0; k < kc; ++k) {
    const float* row = b + k * ldb;
    float* d = dst + k * kNR;
    int64_t blk = blk0, off = off0;  // block and column of the vector's first lane
    for (int64_t v = 0; v < nvec; ++v) {
      const int64_t len = std::clamp<int64_t>(n - 16 * v, 0, 16);
      __m512 x;
      if (off + len <= width) {
        x = _mm512_maskz_loadu_ps(mask_first(len), row + blk * bstride + off);
      } else {
        x = _mm512_setzero_ps();
        for (int64_t l = 0, bk = blk, o = off; l < len; ++bk, o = 0) {
          const int64_t take = std::min(len - l, width - o);
          x = _mm512_mask_expandloadu_ps(x, __mmask16(mask_first(take) << l),
                                         row + bk * bstride + o);
          l += take;
        }
      }
      _mm512_store_ps(d + (v / kNV) * pstride + 16 * (v % kNV), x);
      for (off += 16; off >= width; off -= width) ++blk;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// GemmEpilogue for one tile of C: the bias of the tile's first row (nullptr: none), relu.
struct TileEpilogue {
  const float* bias;
  bool relu;
};
// + bias[r], then relu: GemmEpilogue's order. max(0, t) returns t when t is NaN (vmaxps returns
// its second operand then): x < 0 ? 0 : x. (The maskz form: GCC 12's _mm512_max_ps trips a
// -Wmaybe-uninitialized false positive.)
__attribute__((always_inline)) inline __m512 finish(const TileEpilogue& e, __m512 t, int64_t r) {
  if (e.bias) t = _mm512_add_ps(t, _mm512_set1_ps(e.bias[r]));
  if (e.relu) t = _mm512_maskz_max_ps(0xffff, _mm512_setzero_ps(), t);
  return t;
}

// ---------------------------------------------------------------------------------------------
// Micro-kernel: acc[MR][NR] = sum_k a[k][r] * b[k][:], then
//   C = alpha * acc + beta * C  (beta == 0: C is not read), then the epilogue (ep, when given).
// a: packed A panel (k-major, MR per k), b: packed B panel (k-major, NR per k, 64-byte aligned).
// ---------------------------------------------------------------------------------------------
// BS: floats per k step of the packed B panel (16 * NV, or NR when a narrower kernel runs over
// the first 16 * NV columns of a full-width panel: the edge panel of N = 80 or 40).
// AS: floats per k step of the packed A panel (MR, or kMR when fewer rows of a full panel run).
// stream (beta == 0, C 64-byte aligned with ldc a multiple of 16): C is written with
// non-temporal stores and not prefetched (see kStreamMinBytes).
template <int MR, int NV, int BS = 16 * NV, int AS = MR>
__attribute__((always_inline)) inline void micro_kernel(
    int64_t kc, const float* __restrict a, const float* __restrict b, float* __restrict c,
    int64_t ldc, float alpha, float beta, bool stream = false, const TileEpilogue* ep = nullptr) {
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();

  // Prefetch the C tile: it is needed after the k loop (not when it is streamed: reading it in
  // would cost the very traffic the non-temporal stores save).
  if (!stream) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + 16 * NV - 1), _MM_HINT_T0);
    }
  }

#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k) {
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_load_ps(b + 16 * v);
#if AIM_GEMM_PFA > 0
    _mm_prefetch(reinterpret_cast<const char*>(a + AIM_GEMM_PFA * MR), _MM_HINT_T0);
#endif
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(a[r]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
    a += AS;
    b += BS;
  }

  const __m512 va = _mm512_set1_ps(alpha);
  if (beta == 0.0f) {  // (stream implies beta == 0)
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        __m512 t = _mm512_mul_ps(acc[r][v], va);
        if (ep) t = finish(*ep, t, r);
        if (stream)
          _mm512_stream_ps(c + r * ldc + 16 * v, t);
        else
          _mm512_storeu_ps(c + r * ldc + 16 * v, t);
      }
  } else if (beta == 1.0f) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        float* cp = c + r * ldc + 16 * v;
        __m512 t = _mm512_fmadd_ps(acc[r][v], va, _mm512_loadu_ps(cp));
        if (ep) t = finish(*ep, t, r);
        _mm512_storeu_ps(cp, t);
      }
  } else {
    const __m512 vb = _mm512_set1_ps(beta);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        float* cp = c + r * ldc + 16 * v;
        __m512 t = _mm512_fmadd_ps(acc[r][v], va, _mm512_mul_ps(vb, _mm512_loadu_ps(cp)));
        if (ep) t = finish(*ep, t, r);
        _mm512_storeu_ps(cp, t);
      }
  }
}

__attribute__((noinline)) void kernel_full(int64_t kc, const float* a, const float* b, float* c,
                                           int64_t ldc, float alpha, float beta, bool stream,
                                           const TileEpilogue* ep) {
  micro_kernel<kMR, kNV>(kc, a, b, c, ldc, alpha, beta, stream, ep);
}

// Partial tile (mr < MR or nr < NR): the full tile is computed into a scratch tile (edge_tile),
// then the valid part of C is updated with masked vector operations (merge_tile).
void edge_tile(int64_t kc, const float* a, const float* b, int64_t mr, int64_t nr, float* tile) {
  // A panel at most 16 wide needs only one vector of columns: half the FMAs of the full tile.
  // At most 8 rows (M = 64 = 4 x 14 + 8: a 64-channel convolution) take an 8-row kernel reading
  // the same MR-strided A panel: 8/14 of the FMAs. Each output's sum runs over k in the same
  // order whichever kernel computes it, so the bits do not depend on the choice.
  constexpr int kHalf = kMR > 8 ? 8 : kMR;
  if (kNV > 1 && nr <= 16) {
    if (mr <= kHalf)
      micro_kernel<kHalf, 1, kNR, kMR>(kc, a, b, tile, kNR, 1.0f, 0.0f);
    else
      micro_kernel<kMR, 1, kNR>(kc, a, b, tile, kNR, 1.0f, 0.0f);
  } else if (mr <= kHalf) {
    micro_kernel<kHalf, kNV, kNR, kMR>(kc, a, b, tile, kNR, 1.0f, 0.0f);
  } else {
    micro_kernel<kMR, kNV>(kc, a, b, tile, kNR, 1.0f, 0.0f);
  }
}

// C[mr, nr] = alpha * tile + beta * C (beta 0: C not read), then the epilogue (ep, when given);
// the tile's rows are kNR apart.
void merge_tile(const float* tile, float* c, int64_t ldc, int64_t mr, int64_t nr, float alpha,
                float beta, const TileEpilogue* ep) {
  const __m512 va = _mm512_set1_ps(alpha);
  const __m512 vb = _mm512_set1_ps(beta);
  for (int64_t r = 0; r < mr; ++r) {
    for (int64_t j = 0; j < nr; j += 16) {
      const __mmask16 m = mask_first(std::min<int64_t>(nr - j, 16));
      float* cp = c + r * ldc + j;
      __m512 t = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, tile + r * kNR + j), va);
      if (beta != 0.0f) t = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, cp), t);
      if (ep) t = finish(*ep, t, r);
      _mm512_mask_storeu_ps(cp, m, t);
    }
  }
}

__attribute__((noinline)) void kernel_edge(int64_t kc, const float* a, const float* b, float* c,
                                           int64_t ldc, int64_t mr, int64_t nr, float alpha,
                                           float beta, const TileEpilogue* ep) {
  alignas(64) float tile[kMR * kNR];
  edge_tile(kc, a, b, mr, nr, tile);
  merge_tile(tile, c, ldc, mr, nr, alpha, beta, ep);
}

// A tile whose nr columns, from column j of a C in column blocks, cross a block boundary: the
// tile is computed once and each block's part merged into it. `c` is the tile's first row with
// no block offset (C + row * ldc).
__attribute__((noinline)) void kernel_split(int64_t kc, const float* a, const float* b, float* c,
                                            int64_t ldc, int64_t j, int64_t mr, int64_t nr,
                                            float alpha, float beta, int64_t width, int64_t cstride,
                                            const TileEpilogue* ep) {
  alignas(64) float tile[kMR * kNR];
  edge_tile(kc, a, b, mr, nr, tile);
  for (int64_t t = 0; t < nr;) {
    const int64_t blk = (j + t) / width, off = j + t - blk * width;
    const int64_t take = std::min(nr - t, width - off);
    merge_tile(tile + t, c + blk * cstride + off, ldc, mr, take, alpha, beta, ep);
    t += take;
  }
}

// GemmEpilogue as a pass over C [M, N] (in column blocks when blocks.blocks_c()), for the paths
// that do not apply it in their stores: the same operations in the same order as finish().
void epilogue_pass(int64_t M, int64_t N, float* C, int64_t ldc, const GemmColumnBlocks& blocks,
                   const GemmEpilogue& e) {
  const int64_t w = blocks.blocks_c() ? blocks.width : N;
  for (int64_t j0 = 0; j0 < N; j0 += w) {
    const int64_t n = std::min(w, N - j0);
    float* cb = blocks.blocks_c() ? C + j0 / w * blocks.c_stride : C + j0;
    for (int64_t i = 0; i < M; ++i) {
      float* c = cb + i * ldc;
      for (int64_t j = 0; j < n; ++j) {
        float v = c[j];
        if (e.row_bias) v += e.row_bias[i];
        c[j] = e.relu && v < 0.0f ? 0.0f : v;
      }
    }
  }
}

// C = beta * C (used when K == 0 or alpha == 0).
void scale_c(int64_t M, int64_t N, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    float* c = C + i * ldc;
    if (beta == 0.0f) {
      for (int64_t j = 0; j < N; ++j) c[j] = 0.0f;
    } else if (beta != 1.0f) {
      for (int64_t j = 0; j < N; ++j) c[j] *= beta;
    }
  }
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ---------------------------------------------------------------------------------------------
// Small-M path (M <= 4, op(B) = B): a GEMV-like, bandwidth-bound case. Packing B would read and
// write all of B once more and a 14-row micro-tile would be mostly padding, so B is streamed
// straight from memory: each strip of NV*16 columns keeps MR x NV accumulators while k runs over
// rows of B (NV*64 contiguous bytes per row).
// ---------------------------------------------------------------------------------------------
template <int MR, int NV, int PF = 4>
void small_m_strip(int64_t j0, int64_t j1, int64_t K, float alpha, const float* A, int64_t a_rs,
                   int64_t a_cs, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  constexpr int64_t W = 16 * NV;
  const __m512 va = _mm512_set1_ps(alpha);
  const __m512 vb = _mm512_set1_ps(beta);
  for (int64_t j = j0; j < j1; j += W) {
    const int64_t nr = std::min(W, j1 - j);
    __mmask16 m[NV];
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) m[v] = mask_first(std::clamp<int64_t>(nr - 16 * v, 0, 16));
    __m512 acc[MR][NV];
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
    const float* b = B + j;
    if (nr == W) {
      for (int64_t k = 0; k < K; ++k, b += ldb) {
        // Rows are ldb apart: the hardware prefetchers do not follow, so every line of the row
        // PF rows ahead is fetched here.
        if constexpr (PF > 0) {
#pragma GCC unroll 16
          for (int v = 0; v < NV; ++v)
            _mm_prefetch(reinterpret_cast<const char*>(b + PF * ldb + 16 * v), _MM_HINT_T0);
        }
#pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) {
          const __m512 av = _mm512_set1_ps(A[r * a_rs + k * a_cs]);
#pragma GCC unroll 16
          for (int v = 0; v < NV; ++v)
            acc[r][v] = _mm512_fmadd_ps(av, _mm512_loadu_ps(b + 16 * v), acc[r][v]);
        }
      }
    } else {
      for (int64_t k = 0; k < K; ++k, b += ldb) {
#pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) {
          const __m512 av = _mm512_set1_ps(A[r * a_rs + k * a_cs]);
#pragma GCC unroll 16
          for (int v = 0; v < NV; ++v)
            acc[r][v] = _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m[v], b + 16 * v), acc[r][v]);
        }
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) {
        if (!m[v]) break;
        float* cp = C + r * ldc + j + 16 * v;
        __m512 t = _mm512_mul_ps(acc[r][v], va);
        if (beta != 0.0f) t = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m[v], cp), t);
        _mm512_mask_storeu_ps(cp, m[v], t);
      }
  }
}

// Horizontal sum through memory: once per output element, so its cost does not matter (GCC 12's
// shuffle/extract intrinsics trip -Wmaybe-uninitialized false positives inside its headers).
inline float hsum(__m512 v) {
  alignas(64) float t[16];
  _mm512_store_ps(t, v);
  float s0 = 0.0f, s1 = 0.0f;
  for (int i = 0; i < 16; i += 2) {
    s0 += t[i];
    s1 += t[i + 1];
  }
  return s0 + s1;
}

// Small-N path (N <= 4, op(A) = A): C[i][j] = alpha * dot(A row i, column j of op(B)) + beta*C.
// The (at most 4) columns of op(B) are first copied into a contiguous K-vector each (`bt`), then
// 4 rows of A at a time are dotted against them with 16-wide FMAs and reduced horizontally.
template <int NN>
void small_n_rows(int64_t i0, int64_t i1, int64_t K, float alpha, const float* A, int64_t lda,
                  const float* bt, float beta, float* C, int64_t ldc) {
  constexpr int RB = 4;
  const int64_t k16 = K / 16 * 16;
  const __mmask16 tail = mask_first(K - k16);
  int64_t i = i0;
  for (; i < i1; i += RB) {
    const int rows = int(std::min<int64_t>(RB, i1 - i));
    __m512 acc[RB][NN];
#pragma GCC unroll 4
    for (int r = 0; r < RB; ++r)
#pragma GCC unroll 4
      for (int j = 0; j < NN; ++j) acc[r][j] = _mm512_setzero_ps();
    const float* a[RB];
#pragma GCC unroll 4
    for (int r = 0; r < RB; ++r) a[r] = A + (i + std::min(r, rows - 1)) * lda;
    for (int64_t k = 0; k < k16; k += 16) {
      __m512 bv[NN];
#pragma GCC unroll 4
      for (int j = 0; j < NN; ++j) bv[j] = _mm512_loadu_ps(bt + j * K + k);
#pragma GCC unroll 4
      for (int r = 0; r < RB; ++r) {
        const __m512 av = _mm512_loadu_ps(a[r] + k);
#pragma GCC unroll 4
        for (int j = 0; j < NN; ++j) acc[r][j] = _mm512_fmadd_ps(av, bv[j], acc[r][j]);
      }
    }
    if (tail) {
#pragma GCC unroll 4
      for (int r = 0; r < RB; ++r) {
        const __m512 av = _mm512_maskz_loadu_ps(tail, a[r] + k16);
#pragma GCC unroll 4
        for (int j = 0; j < NN; ++j)
          acc[r][j] = _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(tail, bt + j * K + k16), acc[r][j]);
      }
    }
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < NN; ++j) {
        float* cp = C + (i + r) * ldc + j;
        const float v = alpha * hsum(acc[r][j]);
        *cp = beta == 0.0f ? v : v + beta * *cp;
      }
  }
}

void small_n(int64_t N, int64_t i0, int64_t i1, int64_t K, float alpha, const float* A, int64_t lda,
             const float* bt, float beta, float* C, int64_t ldc) {
  switch (N) {
    case 1:
      small_n_rows<1>(i0, i1, K, alpha, A, lda, bt, beta, C, ldc);
      break;
    case 2:
      small_n_rows<2>(i0, i1, K, alpha, A, lda, bt, beta, C, ldc);
      break;
    case 3:
      small_n_rows<3>(i0, i1, K, alpha, A, lda, bt, beta, C, ldc);
      break;
    default:
      small_n_rows<4>(i0, i1, K, alpha, A, lda, bt, beta, C, ldc);
      break;
  }
}

void small_m(int64_t M, int64_t j0, int64_t j1, int64_t K, float alpha, const float* A,
             int64_t a_rs, int64_t a_cs, const float* B, int64_t ldb, float beta, float* C,
             int64_t ldc) {
  switch (M) {
    case 1:
      small_m_strip<1, 16>(j0, j1, K, alpha, A, a_rs, a_cs, B, ldb, beta, C, ldc);
      break;
    case 2:
      small_m_strip<2, 12>(j0, j1, K, alpha, A, a_rs, a_cs, B, ldb, beta, C, ldc);
      break;
    case 3:
      small_m_strip<3, 8>(j0, j1, K, alpha, A, a_rs, a_cs, B, ldb, beta, C, ldc);
      break;
    default:
      small_m_strip<4, 6>(j0, j1, K, alpha, A, a_rs, a_cs, B, ldb, beta, C, ldc);
      break;
  }
}

// ---------------------------------------------------------------------------------------------
// Skinny-M paths (kSmallM < M <= kSkinnyM, e.g. a fully connected layer at batch 16 whose weight
// matrix is 9216 x 4096): B is read once from memory and never packed. The packed path copies all
// of B (read, write, read) and pads 16 rows to two 14-row micro-panels, which made AlexNet's and
// VGG's classifier GEMMs 4x slower than OpenBLAS; streaming B keeps them bandwidth-bound.
// ---------------------------------------------------------------------------------------------
constexpr int64_t kSkinnyM = 32;
// Only when B is large (>= 4M floats, 16 MiB: beyond the caches, where streaming it once is what
// counts): a cache-resident B is served well by the packed path, and keeping the small GEMMs
// (the tiny models' convolutions) on one algorithm keeps their results comparable across
// configurations (the emulated device's step-1 checks of badly conditioned tiny ResNets).
constexpr int64_t kSkinnyMinB = int64_t(1) << 22;
// op(B) = B^T (a Linear layer's weight [N, K]): from 1 MiB. The packed path pads 16 rows to two
// 14-row micro-panels and copies B for them; the skinny path was faster from 16 x 256 x 1024 to
// 16 x 4096 x 9216 with B in the caches or not (2 threads: 59 -> 115, 72 -> 125, 66 -> 119
// GFLOP/s at 16 x 1000 x 4096, AlexNet's fc8), and twice that again with B pre-packed.
constexpr int64_t kSkinnyMinBT = int64_t(1) << 18;
// Blocks of op(B) copied into an L2-resident buffer. op(B) = B: kSkinnyKC rows x kSkinnyNC
// columns of B (~1 MiB). op(B) = B^T: kSkinnyTNC rows of B x kSkinnyTKC of their k (384 KiB): few
// rows, long runs of each (measured at 2 threads, 16 x 4096 x 9216: KC x NC = 256 x 512 -> 1024 x
// 96: ~135 -> ~175 GFLOP/s; the dot-product path before it ran at ~105).
#ifndef AIM_SKINNY_KC
#define AIM_SKINNY_KC 128
#endif
#ifndef AIM_SKINNY_NC
#define AIM_SKINNY_NC 2016
#endif
#ifndef AIM_SKINNY_TKC
#define AIM_SKINNY_TKC 1024
#endif
#ifndef AIM_SKINNY_TNC
#define AIM_SKINNY_TNC 96
#endif
constexpr int64_t kSkinnyKC = AIM_SKINNY_KC, kSkinnyNC = AIM_SKINNY_NC;
constexpr int64_t kSkinnyTKC = AIM_SKINNY_TKC, kSkinnyTNC = AIM_SKINNY_TNC;
constexpr int64_t kSkinnyW = 48;  // columns of op(B) per panel (3 vectors)
// Whole panels per block (2016 = 42 x 48 columns, 1008 KiB at KC 128): the blocks of a team's
// share then start at whole panels of a pre-packed op(B) too.
static_assert(kSkinnyNC % kSkinnyW == 0 && kSkinnyTNC % kSkinnyW == 0,
              "skinny blocks must be whole panels");

// Row groups of up to 8 rows of op(A) (24 accumulators, MR x NV = 8 x 3) over one 48-column
// panel, updating C.
template <int MR>
void skinny_rows(int64_t rows, int64_t nr, int64_t K, float alpha, const float* A, int64_t a_rs,
                 int64_t a_cs, const float* panel, float beta, float* C, int64_t ldc) {
  if constexpr (MR > 1) {
    if (rows < MR)
      return skinny_rows<MR - 1>(rows, nr, K, alpha, A, a_rs, a_cs, panel, beta, C, ldc);
  }
  small_m_strip<MR, 3, 0>(0, nr, K, alpha, A, a_rs, a_cs, panel, kSkinnyW, beta, C, ldc);
}

// op(B) = B: kc rows of nc floats at b (row by row: long contiguous reads the hardware
// prefetchers follow; reading a 48-column strip down the rows of B touched a new page per row
// and ran latency-bound) -> W-column panels (W a multiple of 16, zero-padded), panel p at
// dst + p * kc * W.
void pack_skinny_rows(const float* b, int64_t ldb, int64_t kc, int64_t nc, float* dst,
                      int64_t W = kSkinnyW) {
  const int64_t npan = ceil_div(nc, W);
  for (int64_t k = 0; k < kc; ++k) {
    const float* src = b + k * ldb;
    for (int64_t p = 0; p < npan; ++p) {
      const int64_t w = std::min(W, nc - p * W);
      float* d = dst + (p * kc + k) * W;
      if (w == W) {
        for (int64_t q = 0; q < W; q += 16)
          _mm512_storeu_ps(d + q, _mm512_loadu_ps(src + p * W + q));
      } else {
        for (int64_t q = 0; q < W; q += 16) {
          const __mmask16 m = mask_first(std::clamp<int64_t>(w - q, 0, 16));
          _mm512_storeu_ps(d + q, _mm512_maskz_loadu_ps(m, src + p * W + q));
        }
      }
    }
  }
}

// op(B) = B^T: nc rows of B (the columns of op(B)), kc floats of each from b -> the same panels,
// 16 rows x 16 k transposed in registers at a time (rows past nc and k past kc read as zero).
void pack_skinny_t(const float* b, int64_t ldb, int64_t kc, int64_t nc, float* dst,
                   int64_t W = kSkinnyW) {
  const int64_t npan = ceil_div(nc, W);
  for (int64_t p = 0; p < npan; ++p)
    for (int64_t q = 0; q < W; q += 16) {
      const int64_t j = p * W + q, nrow = std::clamp<int64_t>(nc - j, 0, 16);
      for (int64_t k = 0; k < kc; k += 16) {
        const int64_t nk = std::min<int64_t>(16, kc - k);
        const __mmask16 km = mask_first(nk);
        __m512 r[16];
#pragma GCC unroll 16
        for (int jj = 0; jj < 16; ++jj)
          r[jj] =
              jj < nrow ? _mm512_maskz_loadu_ps(km, b + (j + jj) * ldb + k) : _mm512_setzero_ps();
        transpose16(r);
        float* d = dst + (p * kc + k) * W + q;
        for (int kk = 0; kk < nk; ++kk) _mm512_storeu_ps(d + kk * W, r[kk]);
      }
    }
}

// Skinny-M GEMM over columns [j0, j1) of C: op(B) block by block through the L2 buffer (each
// element of B read from memory once), row groups of op(A) against each 48-column panel.
// (Software prefetch of the next block into L2 while computing was tried: slower, ~140 -> ~112
// GFLOP/s; the hardware prefetchers following the copy's long runs do better.)
//
// packed: op(B) already in panels (sgemm_avx512_pack_b: panel q of all K rows at packed + q * K *
// W): each block's panels are read from there instead of packed, in the same order with the same
// k blocks, so the bits are those of the copying path. The FMAs then run while the hardware
// prefetchers stream the panels in (the copy and the FMAs no longer take turns).
void skinny_m(bool trans_b, int64_t M, int64_t j0, int64_t j1, int64_t K, float alpha,
              const float* A, int64_t a_rs, int64_t a_cs, const float* B, int64_t ldb, float beta,
              float* C, int64_t ldc, const float* packed = nullptr) {
  constexpr int64_t W = kSkinnyW, RG = 8;
  const int64_t KCb = trans_b ? kSkinnyTKC : kSkinnyKC, NCb = trans_b ? kSkinnyTNC : kSkinnyNC;
  float* buf = packed ? nullptr : tl_pack_b.get(size_t(KCb) * size_t(ceil_div(NCb, W) * W));
  for (int64_t jc = j0; jc < j1; jc += NCb) {
    const int64_t nc = std::min(NCb, j1 - jc), npan = ceil_div(nc, W);
    for (int64_t k0 = 0; k0 < K; k0 += KCb) {
      const int64_t kc = std::min(KCb, K - k0);
      const float beta_eff = k0 == 0 ? beta : 1.0f;
      if (packed)
        ;  // jc is a multiple of W (the team splits N in whole panels)
      else if (trans_b)
        pack_skinny_t(B + jc * ldb + k0, ldb, kc, nc, buf);
      else
        pack_skinny_rows(B + k0 * ldb + jc, ldb, kc, nc, buf);
      for (int64_t p = 0; p < npan; ++p) {
        const int64_t w = std::min(W, nc - p * W);
        const float* panel = packed ? packed + (jc / W + p) * K * W + k0 * W : buf + p * kc * W;
        for (int64_t r = 0; r < M; r += RG)
          skinny_rows<RG>(std::min(RG, M - r), w, kc, alpha, A + r * a_rs + k0 * a_cs, a_rs, a_cs,
                          panel, beta_eff, C + r * ldc + jc + p * W, ldc);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Narrow-N path (kSmallN < N <= kNarrowN, or any N <= kNarrowN with op(A) = A^T): few columns and
// many rows, e.g. DIN's attention (per row of the batch 100 x 80 x 128 NT, then 102400 x 40 x
// 80) or a 7 x 7 feature map's per-image GEMM (N = 49). The packed path padded N to 32-column
// panels (80 -> 96, 40 -> 64) and packed each MC x KC block of A only to use it against one to
// three panels. Here op(B) is packed once, all N columns of a row (rounded up to whole vectors,
// zero-padded) per k (or op(B) = B read in place when N is a multiple of 16), and A is not packed:
// each micro-tile of MR rows x all N columns broadcasts its A elements straight from A's rows (or
// columns). The k order of every output and the epilogue are the packed path's (same KC blocks, one
// FMA chain per block), so the bits are the same as there.
// ---------------------------------------------------------------------------------------------
constexpr int64_t kNarrowN = 96;

// Rows per micro-tile for NV vectors of columns: MR x NV accumulators + NV registers of B <= 31.
template <int NV>
constexpr int narrow_mr() {
  return NV <= 2 ? 14 : NV == 3 ? 9 : NV == 4 ? 6 : NV == 5 ? 5 : 4;
}

// MR rows x the N (<= 16 * NV) columns of C over kc rows of op(B) (16 * NV readable floats
// each, ldbp apart), then C = alpha * acc + beta * C as micro_kernel (beta == 0: C not read).
template <int MR, int NV>
void narrow_tile(int64_t kc, const float* __restrict A, int64_t a_rs, int64_t a_cs,
                 const float* __restrict b, int64_t ldbp, int64_t N, float alpha, float beta,
                 float* __restrict C, int64_t ldc) {
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int64_t k = 0; k < kc; ++k) {
    __m512 bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_ps(b + k * ldbp + 16 * v);
    const float* a = A + k * a_cs;
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * a_rs]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  const __mmask16 last = mask_first(N - 16 * (NV - 1));
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      const __mmask16 m = v == NV - 1 ? last : __mmask16(0xFFFF);
      float* cp = C + r * ldc + 16 * v;
      __m512 t;
      if (beta == 0.0f)
        t = _mm512_mul_ps(acc[r][v], va);
      else if (beta == 1.0f)
        t = _mm512_fmadd_ps(acc[r][v], va, _mm512_maskz_loadu_ps(m, cp));
      else
        t = _mm512_fmadd_ps(acc[r][v], va, _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(m, cp)));
      _mm512_mask_storeu_ps(cp, m, t);
    }
}

// rows (<= MR) rows from A and C: a tile of that many rows.
template <int MR, int NV>
void narrow_rows(int rows, int64_t kc, const float* A, int64_t a_rs, int64_t a_cs, const float* b,
                 int64_t ldbp, int64_t N, float alpha, float beta, float* C, int64_t ldc) {
  if constexpr (MR > 1) {
    if (rows < MR)
      return narrow_rows<MR - 1, NV>(rows, kc, A, a_rs, a_cs, b, ldbp, N, alpha, beta, C, ldc);
  }
  narrow_tile<MR, NV>(kc, A, a_rs, a_cs, b, ldbp, N, alpha, beta, C, ldc);
}

// Rows [i0, i1) of C against op(B) (K rows of 16 * NV readable floats, ldbp apart), K in KC
// blocks.
template <int NV>
void narrow_n(int64_t i0, int64_t i1, int64_t K, int64_t KC, float alpha, const float* A,
              int64_t a_rs, int64_t a_cs, const float* pb, int64_t ldbp, int64_t N, float beta,
              float* C, int64_t ldc) {
  constexpr int MR = narrow_mr<NV>();
  for (int64_t pc = 0; pc < K; pc += KC) {
    const int64_t kc = std::min(KC, K - pc);
    const float beta_eff = pc == 0 ? beta : 1.0f;
    for (int64_t i = i0; i < i1; i += MR)
      narrow_rows<MR, NV>(int(std::min<int64_t>(MR, i1 - i)), kc, A + i * a_rs + pc * a_cs, a_rs,
                          a_cs, pb + pc * ldbp, ldbp, N, alpha, beta_eff, C + i * ldc, ldc);
  }
}

// f(std::integral_constant<int, NV>) for the NV = ceil(N / 16) of N <= kNarrowN.
template <class F>
decltype(auto) with_narrow_nv(int64_t N, F&& f) {
  switch (ceil_div(N, 16)) {
    case 1:
      return f(std::integral_constant<int, 1>());
    case 2:
      return f(std::integral_constant<int, 2>());
    case 3:
      return f(std::integral_constant<int, 3>());
    case 4:
      return f(std::integral_constant<int, 4>());
    case 5:
      return f(std::integral_constant<int, 5>());
    default:
      return f(std::integral_constant<int, 6>());
  }
}

// part(t, n) for each thread t of a team of n = nt (called inline when nt == 1).
template <class F>
void on_team(int nt, F&& part) {
  if (nt == 1) return part(0, 1);
#pragma omp parallel num_threads(nt)
  part(omp_get_thread_num(), omp_get_num_threads());
}

// The algorithm a product takes (sgemm_avx512 below; each path's comment says why).
enum class Path { small_m, skinny, small_n, narrow, packed };
Path choose_path(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K) {
  if (M <= kSmallM && !trans_b) return Path::small_m;
  if (M <= kSkinnyM && N * K >= (trans_b ? kSkinnyMinBT : kSkinnyMinB)) return Path::skinny;
  if (N <= kSmallN && !trans_a) return Path::small_n;
  if (N <= kNarrowN && (N > kSmallN || trans_a)) return Path::narrow;
  return Path::packed;
}

// Copies `rows` rows of N columns between a matrix in column blocks (`blocked`, rows ld apart
// inside a block, blocks `stride` apart, `width` columns each) and one matrix [rows, N].
void copy_blocks(float* blocked, int64_t ld, int64_t stride, int64_t width, float* one,
                 int64_t rows, int64_t N, bool to_one) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0, blk = 0; j < N; j += width, ++blk) {
      float* b = blocked + blk * stride + r * ld;
      float* o = one + r * N + j;
      const size_t bytes = size_t(std::min(width, N - j)) * sizeof(float);
      std::memcpy(to_one ? o : b, to_one ? b : o, bytes);
    }
}

}  // namespace

int64_t sgemm_avx512_packed_b_floats(int64_t N, int64_t K) {
  return ceil_div(N, kSkinnyW) * kSkinnyW * K;
}

bool sgemm_avx512_uses_packed_b(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K) {
  return M > 0 && N > 0 && K > 0 && choose_path(trans_a, trans_b, M, N, K) == Path::skinny;
}

void sgemm_avx512_pack_b(bool trans_b, int64_t N, int64_t K, const float* B, int64_t ldb,
                         float* dst) {
  // Panels of W columns, each over all K (zero-padded past N), in parallel over panels.
  const int64_t npan = ceil_div(N, kSkinnyW);
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < npan; ++p) {
    const int64_t j = p * kSkinnyW, n = std::min(kSkinnyW, N - j);
    float* d = dst + p * K * kSkinnyW;
    if (trans_b)
      pack_skinny_t(B + j * ldb, ldb, K, n, d);
    else
      pack_skinny_rows(B + j, ldb, K, n, d);
  }
}

bool cpu_has_avx512() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                         __builtin_cpu_supports("fma");
  return ok;
}

void sgemm_avx512(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                  const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                  int64_t ldc, bool stream_c, const GemmColumnBlocks& blocks, const float* packed_b,
                  const GemmEpilogue& epilogue) {
  if (M <= 0 || N <= 0) return;
  const bool blocks_b = blocks.blocks_b(), blocks_c = blocks.blocks_c();
  const int64_t bw = blocks.width;
  if (K <= 0 || alpha == 0.0f) {
    for (int64_t j = 0; j < N; j += blocks_c ? bw : N)
      scale_c(M, blocks_c ? std::min(bw, N - j) : N, beta,
              blocks_c ? C + j / bw * blocks.c_stride : C, ldc);
    if (epilogue.any()) epilogue_pass(M, N, C, ldc, blocks, epilogue);
    return;
  }
  const Path path = choose_path(trans_a, trans_b, M, N, K);
  if (path != Path::skinny) packed_b = nullptr;  // only the skinny path reads panels
  if ((blocks_b || blocks_c) && (path != Path::packed || (blocks_b && trans_b))) {
    // The other paths read op(B) and write C in place: the blocks are copied into one matrix
    // (and C back), and the same path runs on it, with the one matrix's bits.
    const float* b = B;
    int64_t ldb1 = ldb;
    if (blocks_b) {
      float* buf = tl_blocks_b.get(size_t(K) * size_t(N));
      if (trans_b)  // the rows of B are the columns of op(B)
        for (int64_t j = 0; j < N; ++j)
          std::memcpy(buf + j * K, B + j / bw * blocks.b_stride + j % bw * ldb,
                      size_t(K) * sizeof(float));
      else
        copy_blocks(const_cast<float*>(B), ldb, blocks.b_stride, bw, buf, K, N, true);
      b = buf;
      ldb1 = trans_b ? K : N;
    }
    float* c = blocks_c ? tl_blocks_c.get(size_t(M) * size_t(N)) : C;
    if (blocks_c && beta != 0.0f) copy_blocks(C, ldc, blocks.c_stride, bw, c, M, N, true);
    sgemm_avx512(trans_a, trans_b, M, N, K, alpha, A, lda, b, ldb1, beta, c, blocks_c ? N : ldc,
                 stream_c && !blocks_c && !epilogue.any());
    if (blocks_c) copy_blocks(C, ldc, blocks.c_stride, bw, c, M, N, false);
    if (epilogue.any()) epilogue_pass(M, N, C, ldc, blocks, epilogue);
    return;
  }
  // The paths other than the packed one take the epilogue as a pass over C after the product (which
  // reads C back: not streamed).
  if (epilogue.any() && path != Path::packed) {
    sgemm_avx512(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, false, blocks,
                 packed_b);
    epilogue_pass(M, N, C, ldc, blocks, epilogue);
    return;
  }
  // Team size: the caller's OpenMP setting, fewer threads for small problems (a fork/join costs a
  // few microseconds), one thread when called from inside a parallel region.
  int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
  const double flops = 2.0 * double(M) * double(N) * double(K);
  if (flops < 4.0e6) nt = 1;
  nt = std::max(nt, 1);

  if (path == Path::small_m) {
    const int64_t a_rs = trans_a ? 1 : lda, a_cs = trans_a ? lda : 1;
    const int64_t chunks = ceil_div(N, 16);  // split columns in whole vectors
    int nt_s = std::max(1, int(std::min<int64_t>(nt, chunks)));
    if (nt_s == 1) {
      small_m(M, 0, N, K, alpha, A, a_rs, a_cs, B, ldb, beta, C, ldc);
    } else {
#pragma omp parallel num_threads(nt_s)
      {
        const int t = omp_get_thread_num(), n = omp_get_num_threads();
        const int64_t j0 = std::min(N, chunks * t / n * 16);
        const int64_t j1 = std::min(N, chunks * (t + 1) / n * 16);
        if (j0 < j1) small_m(M, j0, j1, K, alpha, A, a_rs, a_cs, B, ldb, beta, C, ldc);
      }
    }
    return;
  }

  if (path == Path::skinny) {
    const int64_t a_rs = trans_a ? 1 : lda, a_cs = trans_a ? lda : 1;
    const int64_t strips = ceil_div(N, kSkinnyW);
    const int nt_s = std::max(1, int(std::min<int64_t>(nt, strips)));
    on_team(nt_s, [&](int t, int n) {
      const int64_t j0 = std::min(N, strips * t / n * kSkinnyW),
                    j1 = std::min(N, strips * (t + 1) / n * kSkinnyW);
      if (j0 < j1)
        skinny_m(trans_b, M, j0, j1, K, alpha, A, a_rs, a_cs, B, ldb, beta, C, ldc, packed_b);
    });
    return;
  }

  if (path == Path::small_n) {
    // Columns of op(B) as contiguous K-vectors (op(B)[k][j] = B[j*ldb+k] or B[k*ldb+j]).
    float* bt = tl_pack_b.get(size_t(N) * size_t(K));
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 0; k < K; ++k) bt[j * K + k] = trans_b ? B[j * ldb + k] : B[k * ldb + j];
    const int64_t blocks = ceil_div(M, 4);
    const int nt_s = std::max(1, int(std::min<int64_t>(nt, blocks)));
    if (nt_s == 1) {
      small_n(N, 0, M, K, alpha, A, lda, bt, beta, C, ldc);
    } else {
#pragma omp parallel num_threads(nt_s)
      {
        const int t = omp_get_thread_num(), n = omp_get_num_threads();
        const int64_t i0 = std::min(M, blocks * t / n * 4);
        const int64_t i1 = std::min(M, blocks * (t + 1) / n * 4);
        if (i0 < i1) small_n(N, i0, i1, K, alpha, A, lda, bt, beta, C, ldc);
      }
    }
    return;
  }

  if (path == Path::narrow) {
    // op(B) packed whole: K rows of W floats (zero-padded), shared read-only by the team; read
    // in place when its rows are already whole vectors (op(B) = B, N a multiple of 16).
    const int64_t W = ceil_div(N, 16) * 16, KCn = blocking().kc;
    const float* pb = B;
    int64_t ldbp = ldb;
    if (trans_b || N != W) {
      float* buf = tl_pack_b.get(size_t(K) * size_t(W));
      if (trans_b)
        pack_skinny_t(B, ldb, K, N, buf, W);
      else
        pack_skinny_rows(B, ldb, K, N, buf, W);
      pb = buf;
      ldbp = W;
    }
    const int64_t a_rs = trans_a ? 1 : lda, a_cs = trans_a ? lda : 1;
    const int64_t mr = with_narrow_nv(N, [](auto nv) { return narrow_mr<decltype(nv)::value>(); });
    const int64_t groups = ceil_div(M, mr);
    const int nt_s = std::max(1, int(std::min<int64_t>(nt, groups)));
    on_team(nt_s, [&](int t, int n) {
      const int64_t i0 = std::min(M, groups * t / n * mr),
                    i1 = std::min(M, groups * (t + 1) / n * mr);
      if (i0 < i1)
        with_narrow_nv(N, [&](auto nv) {
          narrow_n<decltype(nv)::value>(i0, i1, K, KCn, alpha, A, a_rs, a_cs, pb, ldbp, N, beta, C,
                                        ldc);
        });
    });
    return;
  }

  const Blocking bl = blocking();
  const int64_t KC = bl.kc, NC = bl.nc;

  // Split the team into pm (rows of C) x pn (columns of C) groups, minimising the largest
  // per-thread share of micro-tiles; ties prefer splitting M (the packed B block is shared).
  const int64_t mp_total = ceil_div(M, kMR), np_total = ceil_div(N, kNR);
  int pm = 1, pn = nt;
  {
    int64_t best = -1;
    for (int cand = nt; cand >= 1; --cand) {
      if (nt % cand) continue;
      const int64_t cost = ceil_div(mp_total, cand) * kMR * ceil_div(np_total, nt / cand) * kNR;
      if (best < 0 || cost < best) {
        best = cost;
        pm = cand;
        pn = nt / cand;
      }
    }
  }

  // Non-temporal stores for a C written once (beta 0, one KC pass) and larger than the L3: its
  // lines then go to memory without being read first (this machine writes ~20 GB/s with plain
  // stores, ~54 GB/s streamed). A fully connected layer's weight gradient at batch 16, 4096 x 9216
  // x 16 (AlexNet's fc6): 8.1 -> 3.8 ms.
  const bool stream =
      beta == 0.0f && K <= KC && ldc % 16 == 0 &&
      (stream_c || double(M) * double(ldc) * sizeof(float) >= double(kStreamMinBytes));
  const int64_t nc_max = std::min<int64_t>(NC, ceil_div(N, kNR) * kNR);
  const int64_t kc_max = std::min<int64_t>(KC, K);
  // Packed B: with pm > 1 row groups the KC x NC block is shared by the whole team (the calling
  // thread's buffer, packed cooperatively between barriers). With pm == 1 every thread packs only
  // the panels it uses into its own buffer and no barriers are needed. (B panels are always laid
  // out with a stride of NR * kc_max so that blocks of different kc never overlap.)
  float* const packed_b_shared = pm > 1 ? tl_pack_b.get(size_t(nc_max) * size_t(kc_max)) : nullptr;

  // Columns [j, j + n) of op(B) = B, rows [pc, pc + kc), into panels pstride apart.
  auto pack_rows = [&](int64_t pc, int64_t j, int64_t n, int64_t kc, float* dst, int64_t pstride) {
    if (blocks_b)
      pack_b_rows_blocked(B + pc * ldb, ldb, j, n, kc, dst, pstride, bw, blocks.b_stride);
    else
      pack_b_rows(B + pc * ldb + j, ldb, n, kc, dst, pstride);
  };

  // Row range of each row group (in whole micro-panels) and its MC blocking.
  auto run = [&](int tid) {
    const int tm = tid / pn, tn = tid % pn;
    const int64_t row_lo = std::min(M, (mp_total * tm / pm) * kMR);
    const int64_t row_hi = std::min(M, (mp_total * (tm + 1) / pm) * kMR);
    const int64_t my_rows = row_hi - row_lo;
    int64_t mc_blk = 0;
    float* packed_a = nullptr;
    if (my_rows > 0) {
      const int64_t nblk = ceil_div(my_rows, bl.mc);
      mc_blk = ceil_div(ceil_div(my_rows, nblk), kMR) * kMR;
      packed_a = tl_pack_a.get(size_t(mc_blk) * size_t(kc_max));
    }
    const bool shared_b = pm > 1;  // (re-read: the fallback below may reset pm)
    // A thread's rows in one MC block with its own B panels: no B panel is used again after the
    // block's pass over it, so B is packed 8 panels at a time (pack_b_rows) right before their
    // micro-tiles, and the packed KC x NC block is never written out to L3 and read back.
    // Single-threaded 64x3136x256 (a 1x1 convolution 256 -> 64 at 56x56): ~130 -> ~160 GFLOP/s.
    const bool fused = !shared_b && my_rows > 0 && my_rows <= mc_blk;
    float* packed_b = packed_b_shared;
    if (fused) {
      packed_b = tl_pack_b.get(size_t(kFusedPanels) * size_t(kNR) * size_t(kc_max));
    } else if (!shared_b) {
      const int64_t my_pan = ceil_div(ceil_div(nc_max, kNR), pn) + 1;
      packed_b = tl_pack_b.get(size_t(my_pan) * size_t(kNR) * size_t(kc_max));
    }

    for (int64_t jc = 0; jc < N; jc += NC) {
      const int64_t nc = std::min(NC, N - jc);
      const int64_t npan = ceil_div(nc, kNR);
      const int64_t pan_lo = npan * tn / pn, pan_hi = npan * (tn + 1) / pn;
      // Panel p lives at packed_b + (p - pan_base) * NR * kc_max.
      const int64_t pan_base = shared_b ? 0 : pan_lo;
      for (int64_t pc = 0; pc < K; pc += KC) {
        const int64_t kc = std::min(KC, K - pc);
        const float beta_eff = pc == 0 ? beta : 1.0f;
        const bool epi = epilogue.any() && pc + kc >= K;  // on the last KC block's stores
        // The micro-tiles of one MC block against panel p of the packed B block.
        auto tiles = [&](int64_t ic, int64_t mc, int64_t p, const float* bp) {
          const int64_t j = jc + p * kNR;
          const int64_t nr = std::min<int64_t>(kNR, N - j);
          // Column j of C in its block (C in column blocks); a tile across blocks is split.
          const int64_t cblk = blocks_c ? j / bw : 0, coff = j - cblk * bw;
          const bool split = blocks_c && coff + nr > bw;
          for (int64_t ir = 0; ir < mc; ir += kMR) {
            const int64_t mr = std::min<int64_t>(kMR, mc - ir);
            const float* ap = packed_a + ir * kc;
            // The tile's epilogue: its rows' bias.
            const TileEpilogue te{epilogue.row_bias ? epilogue.row_bias + ic + ir : nullptr,
                                  epilogue.relu};
            if (split) {
              kernel_split(kc, ap, bp, C + (ic + ir) * ldc, ldc, j, mr, nr, alpha, beta_eff, bw,
                           blocks.c_stride, epi ? &te : nullptr);
              continue;
            }
            float* cp = blocks_c ? C + cblk * blocks.c_stride + (ic + ir) * ldc + coff
                                 : C + (ic + ir) * ldc + j;
            if (mr == kMR && nr == kNR)
              kernel_full(kc, ap, bp, cp, ldc, alpha, beta_eff,
                          stream && reinterpret_cast<uintptr_t>(cp) % 64 == 0, epi ? &te : nullptr);
            else
              kernel_edge(kc, ap, bp, cp, ldc, mr, nr, alpha, beta_eff, epi ? &te : nullptr);
          }
        };
        if (fused) {
          // One MC block: each group of B panels is used once, right after it is packed (in L2).
          pack_a(trans_a, trans_a ? A + pc * lda + row_lo : A + row_lo * lda + pc, lda, my_rows, kc,
                 packed_a);
          for (int64_t g = pan_lo; g < pan_hi; g += kFusedPanels) {
            const int64_t g1 = std::min(pan_hi, g + kFusedPanels), j = jc + g * kNR;
            const int64_t pstride = kNR * kc_max;
            if (trans_b)
              for (int64_t p = g; p < g1; ++p)
                pack_bt_panel(B + (j + (p - g) * kNR) * ldb + pc, ldb,
                              std::min<int64_t>(kNR, N - j - (p - g) * kNR), kc,
                              packed_b + (p - g) * pstride);
            else
              pack_rows(pc, j, std::min(N, jc + g1 * kNR) - j, kc, packed_b, pstride);
            for (int64_t p = g; p < g1; ++p)
              tiles(row_lo, my_rows, p, packed_b + (p - g) * pstride);
          }
          continue;
        }
        // Pack B: shared block -> the whole team packs it together; otherwise each thread packs
        // exactly the panels it will use.
        {
          int64_t lo = pan_lo, hi = pan_hi;
          if (shared_b) {
            lo = npan * tid / nt;
            hi = npan * (tid + 1) / nt;
          }
          if (!trans_b && lo < hi) {
            const int64_t j = jc + lo * kNR;
            pack_rows(pc, j, std::min(N, jc + hi * kNR) - j, kc,
                      packed_b + (lo - pan_base) * kNR * kc_max, kNR * kc_max);
          }
          for (int64_t p = lo; trans_b && p < hi; ++p) {
            const int64_t j = jc + p * kNR;
            pack_bt_panel(B + j * ldb + pc, ldb, std::min<int64_t>(kNR, N - j), kc,
                          packed_b + (p - pan_base) * kNR * kc_max);
          }
        }
        if (shared_b && nt > 1) {
#pragma omp barrier
        }
        for (int64_t ic = row_lo; ic < row_hi; ic += mc_blk) {
          const int64_t mc = std::min(mc_blk, row_hi - ic);
          const float* src = trans_a ? A + pc * lda + ic : A + ic * lda + pc;
          pack_a(trans_a, src, lda, mc, kc, packed_a);
          for (int64_t p = pan_lo; p < pan_hi; ++p)
            tiles(ic, mc, p, packed_b + (p - pan_base) * kNR * kc_max);
        }
        if (shared_b && nt > 1) {
#pragma omp barrier
        }
      }
    }
    if (stream) _mm_sfence();  // the non-temporal stores ordered before the caller reads C
  };

  if (nt == 1) {
    run(0);
  } else {
#pragma omp parallel num_threads(nt)
    {
      // The runtime may give fewer threads than requested; the partition assumes exactly nt.
      if (omp_get_num_threads() == nt) {
        run(omp_get_thread_num());
      } else {
#pragma omp single
        {
          pm = 1;
          pn = 1;
          nt = 1;
          run(0);
        }
      }
    }
  }
}

}  // namespace aim::kernels
