// cuda.flash_tc (attention_fwd, attention_bwd; f16 and bf16): flash attention (FlashAttention-2's
//   decomposition) with every product on tensor cores, `mma.sync.aligned.m16n8k16.row.col.f32.
//   {f16,bf16}.{f16,bf16}.f32` (16-bit operands, fp32 accumulators). The math, masks, causal
//   alignment, dropout numbering and fully-masked-row conventions are attention.h's; cuda.flash
//   (attention_cuda.cu) is the scalar variant of the same tiling ideas.
//   Shared tiles hold 16-bit values with the head dimension padded with zeros to HSP = 32, 64 or
//   128 (any HS <= 128 runs; HS = 40 computes as 64), rows padded by 8 elements so that the 32-bit
//   fragment reads of a warp hit 32 distinct banks. A lane = 4 g + t of a warp owns, of every
//   16 x 8 accumulator block, rows g and g + 8 and columns 2t, 2t + 1 (the mma's C layout); the
//   accumulator blocks of 16 consecutive columns are, packed to 16 bits, exactly the A fragment
//   of a 16 x 16 operand, so probabilities and dS go from one product into the next in registers.
// forward: one 128-thread block (4 warps) per (b, h, tile of 64 queries), warp w owning queries
//   16w .. 16w + 15. The Q tile is staged once; per tile of 64 keys K ([key][d]) and V transposed
//   ([d][key], the B operand of P V needs keys contiguous) are staged, then each warp computes
//   S = Q K^T (16 x 64, 32 fp32 per lane), scale + mask + causal, the online softmax in registers
//   (row max and sum over the 4 lanes of a quad by __shfl_xor_sync 1 and 2; O rescaled by
//   exp(m_old - m_new)), the Philox dropout factor of each element (attention.h's numbering; the
//   row sum l takes p before dropout), P rounded to 16 bits into A fragments and O += P V
//   (16 x HSP, up to 64 fp32 per lane). Epilogue: o = O / l rounded once, lse = m + log l (f32).
//   Causal blocks stop at the last key their last query sees.
// backward: D = rowsum(do o) first (one warp per row, f32 scratch [B NH Tq]); then two passes,
//   deterministic (no atomics), as cuda.flash:
//   dk/dv: one block per (b, h, tile of 64 keys), warp w owning keys 16w .. 16w + 15; K and V
//     staged once ([key][d]: the A operands of S^T = K Q^T and dP^T = V dO^T); per step of 32
//     queries Q, dO ([query][d]) and Q^T, dO^T ([d][query], the B operands of the updates) are
//     staged with that step's lse and D; S^T and dP^T by mma (16 x 32 each), p = exp(s - lse),
//     z = the dropout factor, ds = z p dp - p D, then dV += (z p)^T dO and dK += ds^T Q by mma
//     from the 16-bit packed accumulators; dk = scale dK, dv = dV rounded once. Causal blocks
//     start at the first query that sees the block's first key.
//   dq: one block per (b, h, tile of 64 queries); Q and dO staged once; per step of 32 keys K, V
//     ([key][d]) and K^T ([d][key]) staged; S = Q K^T and dP = dO V^T by mma, ds = p (z dp - D),
//     dQ += ds K by mma; dq = scale dQ rounded once. s and dp are computed twice (in both passes):
//     7 products of 2 HS FLOPs per visible pair instead of the cost model's 5, the price of no
//     atomics and no fp32 dq scratch.
// Traffic: as cuda.flash with 64-row tiles: q, o once per query tile, k, v once per query tile
//   (L2 after the first); no [Tq, Tk] matrix. Staging is plain 2-byte loads and stores (no
//   cp.async, no ldmatrix, no double buffering; V^T, Q^T, dO^T, K^T transposed through 2-byte
//   shared stores), so the expected bound is the staging and the softmax's exp and shuffles
//   rather than the tensor cores; to be measured.
// Shared memory (HS <= 32 / 64 / 128): forward 15 / 28 / 53 KB, dk/dv 12 / 38 / 73 KB, dq 13 / 33
//   / 63 KB; above 48 KB the launcher opts in (cudaFuncSetAttribute). Registers: up to 64 + 64
//   fp32 accumulators per lane in dk/dv at HS > 64 (ptxas figures: kernels/attention/README.md).
// Limits: f16 and bf16 only; HS <= 128; Tq / 64 and Tk / 64 <= 65535 blocks and B NH < 2^31.
// Two paths, one decomposition (as cuda.implicit_gemm_tc): on sm_80+ (`__CUDA_ARCH__ >= 800`)
//   mma16816 is the mma.sync instruction; otherwise (older GPUs and the SIMT emulator) it is
//   emulated at fragment level: the 32 lanes exchange their A and B fragment registers through a
//   per-warp shared buffer and each lane computes exactly its own four accumulator elements with
//   scalar fp32 FMAs, k in increasing order. Everything around the instruction (staging, fragment
//   loads, the accumulator -> A fragment packing, softmax, dropout, epilogues) is the same code on
//   both paths, so the emulator's registry test checks it; the instruction itself only a GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/attention/attention.h"
#include "kernels/cuda_common.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kThreads = 128;  // 4 warps of 16 rows
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kRows = 16 * kWarps;  // queries (forward, dq) or keys (dk/dv) a block owns: 64
constexpr int kFwdKeys = 64;        // keys per step of the forward
constexpr int kBwdStep = 32;        // queries (dk/dv) or keys (dq) per step of the backward
constexpr int kMaxHS = 128;
constexpr size_t kSmemDefault = 48 * 1024;  // above: opt in per kernel

// Elements per shared row holding n values: +8 keeps the fragment reads conflict free.
constexpr int padded(int n) { return n + 8; }

// ---- 16-bit values ------------------------------------------------------------------------------

template <class T>
__device__ __forceinline__ float bits_to_f32(uint32_t u) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __uint_as_float(u << 16);
  } else {
    __half_raw r;
    r.x = static_cast<unsigned short>(u);
    return __half2float(__half(r));
  }
}

// Two floats rounded to T, packed: lo in bits 0..15 (the lower k of a fragment pair).
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  const T a = from_f32<T>(lo), b = from_f32<T>(hi);
  uint16_t ua, ub;
  memcpy(&ua, &a, sizeof(ua));
  memcpy(&ub, &b, sizeof(ub));
  return uint32_t(ua) | (uint32_t(ub) << 16);
}

// ---- the warp's matrix product ------------------------------------------------------------------

// d (16 x 8, fp32) += a (16 x 16, row-major) . b (16 x 8, column-major); fragments as in the PTX
// ISA ("Matrix Fragments for mma.m16n8k16 with floating point type"): lane = 4 g + t holds
// a[0] = A[g][2t, 2t+1], a[1] = A[g+8][2t, 2t+1], a[2] = A[g][2t+8, 2t+9], a[3] = A[g+8][2t+8,
// 2t+9], b0 = B[2t, 2t+1][g], b1 = B[2t+8, 2t+9][g], d[2h + e] = D[g + 8h][2t + e].
template <class T>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#else
  // The instruction emulated: the warp's fragments through a per-warp buffer, then each lane
  // computes its own four elements by fp32 FMAs, k in increasing order (a tensor core's order
  // within the 16 is unspecified; the sums differ only by rounding).
  __shared__ uint32_t xch[kWarps][kWarpSize][6];
  const int lane = int(threadIdx.x) % kWarpSize, w = int(threadIdx.x) / kWarpSize;
  const int g = lane / 4, t = lane % 4;
  __syncwarp();  // every lane has read the previous product's fragments
  uint32_t* mine = xch[w][lane];
  for (int r = 0; r < 4; ++r) mine[r] = a[r];
  mine[4] = b0;
  mine[5] = b1;
  __syncwarp();
  for (int h = 0; h < 2; ++h)
    for (int e = 0; e < 2; ++e) {
      float acc = d[2 * h + e];
      for (int k = 0; k < 16; ++k) {
        const int src = (k % 8) / 2, half = 16 * (k % 2);
        const uint32_t ua = xch[w][4 * g + src][h + 2 * (k / 8)];      // A[g + 8h][k]
        const uint32_t ub = xch[w][4 * (2 * t + e) + src][4 + k / 8];  // B[k][2t + e]
        acc = fmaf(bits_to_f32<T>((ua >> half) & 0xffffu), bits_to_f32<T>((ub >> half) & 0xffffu),
                   acc);
      }
      d[2 * h + e] = acc;
    }
#endif
}

// acc[ni] (16 x 8 blocks, NB of them) += A . B^T over k = 16 KS: A's rows r0 .. r0 + 15 of the
// shared tile `as`, B's rows (the output columns) 0 .. 8 NB - 1 of `bs`, both k contiguous; ld*:
// row strides in 32-bit words.
template <class T, int KS, int NB>
__device__ __forceinline__ void mma_smem(float (&acc)[NB][4], const uint32_t* as, int lda, int r0,
                                         const uint32_t* bs, int ldb, int g, int t) {
  AIM_UNROLL
  for (int ks = 0; ks < KS; ++ks) {
    const uint32_t* p = as + (r0 + g) * lda + 8 * ks + t;
    const uint32_t a[4] = {p[0], p[8 * lda], p[4], p[8 * lda + 4]};
    AIM_UNROLL
    for (int ni = 0; ni < NB; ++ni) {
      const uint32_t* q = bs + (8 * ni + g) * ldb + 8 * ks + t;
      mma16816<T>(acc[ni], a, q[0], q[4]);
    }
  }
}

// acc[ni] += P . B^T over k = 16 KS, P held as accumulators p[2 KS] (16 x 8 blocks along k):
// blocks 2 ks and 2 ks + 1, rounded to T, are the A fragment of k slice ks.
template <class T, int KS, int NB>
__device__ __forceinline__ void mma_regs(float (&acc)[NB][4], const float (&p)[2 * KS][4],
                                         const uint32_t* bs, int ldb, int g, int t) {
  AIM_UNROLL
  for (int ks = 0; ks < KS; ++ks) {
    const uint32_t a[4] = {
        pack2<T>(p[2 * ks][0], p[2 * ks][1]), pack2<T>(p[2 * ks][2], p[2 * ks][3]),
        pack2<T>(p[2 * ks + 1][0], p[2 * ks + 1][1]), pack2<T>(p[2 * ks + 1][2], p[2 * ks + 1][3])};
    AIM_UNROLL
    for (int ni = 0; ni < NB; ++ni) {
      const uint32_t* q = bs + (8 * ni + g) * ldb + 8 * ks + t;
      mma16816<T>(acc[ni], a, q[0], q[4]);
    }
  }
}

// ---- staging ------------------------------------------------------------------------------------

// dst[r][c] (row stride ld) = src[r][c] (row stride HS) for r < n, c < HS; 0 elsewhere in
// [R][C]. Consecutive threads read consecutive elements of a row.
template <int R, int C>
__device__ __forceinline__ void stage_rows(uint16_t* dst, int ld, const uint16_t* src, int64_t n,
                                           int64_t HS) {
  for (int e = int(threadIdx.x); e < R * C; e += kThreads) {
    const int r = e / C, c = e % C;
    dst[r * ld + c] = r < n && c < HS ? src[r * HS + c] : uint16_t(0);
  }
}
// The transpose: dst[c][r] (row stride ld) = src[r][c], zeros as above.
template <int R, int C>
__device__ __forceinline__ void stage_cols(uint16_t* dst, int ld, const uint16_t* src, int64_t n,
                                           int64_t HS) {
  for (int e = int(threadIdx.x); e < R * C; e += kThreads) {
    const int r = e / C, c = e % C;
    dst[c * ld + r] = r < n && c < HS ? src[r * HS + c] : uint16_t(0);
  }
}

__device__ __forceinline__ const uint32_t* words(const uint16_t* p) {
  return reinterpret_cast<const uint32_t*>(p);
}

// The additive mask at (b, h, i, j).
template <class T>
__device__ __forceinline__ float mask_at(const float* mask32, const T* maskt,
                                         const AttentionGeometry& g, int64_t b, int64_t h,
                                         int64_t i, int64_t j) {
  if (!g.has_mask) return 0.f;
  const int64_t e = g.mask_row(b, h, i) + j;
  return mask32 ? mask32[e] : to_f32(maskt[e]);
}

// ---- forward ------------------------------------------------------------------------------------

template <class T, int HSP>
__global__ void __launch_bounds__(kThreads)
    attention_fwd_tc_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                            const float* mask32, const T* maskt, T* o, float* lse,
                            AttentionGeometry g) {
  constexpr int KS = HSP / 16, DN = HSP / 8, NB = kFwdKeys / 8;
  constexpr int LQ = padded(HSP), LV = padded(kFwdKeys);
  AIM_DYNAMIC_SHARED(uint16_t, qs);   // [kRows][LQ] Q
  uint16_t* ks = qs + kRows * LQ;     // [kFwdKeys][LQ] K
  uint16_t* vt = ks + kFwdKeys * LQ;  // [HSP][LV] V transposed
  const int lane = int(threadIdx.x) % kWarpSize, warp = int(threadIdx.x) / kWarpSize;
  const int gq = lane / 4, tq = lane % 4;
  const int64_t bh = blockIdx.x, b = bh / g.NH, h = bh % g.NH;
  const int64_t HS = g.HS, Tq = g.Tq, Tk = g.Tk;
  const int64_t q0 = int64_t(blockIdx.y) * kRows;
  const float scale = float(g.scale), keep = attention_dropout_scale<float>(g.dropout_p);
  stage_rows<kRows, HSP>(qs, LQ, q + (bh * Tq + q0) * HS, min(int64_t(kRows), Tq - q0), HS);
  const int64_t row[2] = {q0 + 16 * warp + gq, q0 + 16 * warp + gq + 8};  // this lane's queries
  float m[2] = {neg_inf<float>(), neg_inf<float>()}, l[2] = {0.f, 0.f};
  float acc[DN][4];
  AIM_UNROLL
  for (int dn = 0; dn < DN; ++dn) {
    AIM_UNROLL
    for (int e = 0; e < 4; ++e) acc[dn][e] = 0.f;
  }
  const int64_t kend = g.visible_keys(min(Tq - 1, q0 + kRows - 1));
  for (int64_t j0 = 0; j0 < kend; j0 += kFwdKeys) {
    const int64_t nk = min(int64_t(kFwdKeys), Tk - j0);
    stage_rows<kFwdKeys, HSP>(ks, LQ, k + (bh * Tk + j0) * HS, nk, HS);
    stage_cols<kFwdKeys, HSP>(vt, LV, v + (bh * Tk + j0) * HS, nk, HS);
    __syncthreads();
    float s[NB][4];
    AIM_UNROLL
    for (int ni = 0; ni < NB; ++ni) {
      AIM_UNROLL
      for (int e = 0; e < 4; ++e) s[ni][e] = 0.f;
    }
    mma_smem<T, KS, NB>(s, words(qs), LQ / 2, 16 * warp, words(ks), LQ / 2, gq, tq);
    AIM_UNROLL
    for (int hh = 0; hh < 2; ++hh) {  // online softmax of rows g (hh = 0) and g + 8
      const int64_t i = row[hh];
      float mx = neg_inf<float>();
      AIM_UNROLL
      for (int ni = 0; ni < NB; ++ni) {
        AIM_UNROLL
        for (int e = 0; e < 2; ++e) {
          const int64_t j = j0 + 8 * ni + 2 * tq + e;
          float& x = s[ni][2 * hh + e];
          x = i < Tq && j < Tk && g.visible(i, j)
                  ? x * scale + mask_at(mask32, maskt, g, b, h, i, j)
                  : neg_inf<float>();
          mx = max(mx, x);
        }
      }
      mx = max(mx, __shfl_xor_sync(kFullMask, mx, 1));  // the quad holds the row's 64 keys
      mx = max(mx, __shfl_xor_sync(kFullMask, mx, 2));
      const float mnew = max(m[hh], mx);
      float alpha = 1.f, sum = 0.f;
      AIM_UNROLL
      for (int ni = 0; ni < NB; ++ni) {
        AIM_UNROLL
        for (int e = 0; e < 2; ++e) {
          float& x = s[ni][2 * hh + e];
          x = x == neg_inf<float>() ? 0.f : expf(x - mnew);  // mnew is finite when x is
          sum += x;
        }
      }
      if (mnew != neg_inf<float>()) alpha = expf(m[hh] - mnew);  // 0 while nothing was visible
      sum += __shfl_xor_sync(kFullMask, sum, 1);
      sum += __shfl_xor_sync(kFullMask, sum, 2);
      l[hh] = l[hh] * alpha + sum;
      m[hh] = mnew;
      AIM_UNROLL
      for (int dn = 0; dn < DN; ++dn) {
        acc[dn][2 * hh] *= alpha;
        acc[dn][2 * hh + 1] *= alpha;
      }
      if (g.dropout()) {
        AIM_UNROLL
        for (int ni = 0; ni < NB; ++ni) {
          AIM_UNROLL
          for (int e = 0; e < 2; ++e) {
            float& x = s[ni][2 * hh + e];
            if (x != 0.f) x *= g.kept(bh, i, j0 + 8 * ni + 2 * tq + e) ? keep : 0.f;
          }
        }
      }
    }
    mma_regs<T, NB / 2, DN>(acc, s, words(vt), LV / 2, gq, tq);  // O += P V
    __syncthreads();  // before the next tiles overwrite K and V
  }
  AIM_UNROLL
  for (int hh = 0; hh < 2; ++hh) {
    const int64_t i = row[hh];
    if (i >= Tq) continue;
    const float inv = l[hh] > 0.f ? 1.f / l[hh] : 0.f;
    T* orow = o + (bh * Tq + i) * HS;
    AIM_UNROLL
    for (int dn = 0; dn < DN; ++dn) {
      AIM_UNROLL
      for (int e = 0; e < 2; ++e) {
        const int64_t d = 8 * dn + 2 * tq + e;
        if (d < HS) orow[d] = from_f32<T>(acc[dn][2 * hh + e] * inv);
      }
    }
    if (tq == 0) lse[bh * Tq + i] = l[hh] > 0.f ? m[hh] + logf(l[hh]) : neg_inf<float>();
  }
}

// ---- backward -----------------------------------------------------------------------------------

// D[row] = sum_d do[row][d] o[row][d] (fp32): one warp per row.
template <class T>
__global__ void __launch_bounds__(kThreads)
    attention_bwd_tc_dot_kernel(const T* dout, const T* o, float* D, int64_t rows, int64_t HS) {
  const int lane = int(threadIdx.x) % kWarpSize;
  const int64_t r = int64_t(blockIdx.x) * kWarps + int64_t(threadIdx.x) / kWarpSize;
  if (r >= rows) return;  // the whole warp leaves together
  float s = 0.f;
  for (int64_t d = lane; d < HS; d += kWarpSize)
    s += to_f32(dout[r * HS + d]) * to_f32(o[r * HS + d]);
  s = warp_sum(s);
  if (lane == 0) D[r] = s;
}

struct BwdIn {
  const uint16_t *dout, *q, *k, *v;
  const float* mask32;
  const float* lse;
  const float* D;
};

template <int HSP>
struct DkdvSmem {  // element offsets of the dk/dv kernel's tiles (16-bit), then lse and D (f32)
  static constexpr int LK = padded(HSP), LT = padded(kBwdStep);
  static constexpr int ks = 0, vs = ks + kRows * LK, qs = vs + kRows * LK, dos = qs + kBwdStep * LK;
  static constexpr int qt = dos + kBwdStep * LK, dot = qt + HSP * LT, end = dot + HSP * LT;
  static constexpr size_t bytes = size_t(end) * 2 + 2 * kBwdStep * sizeof(float);
};

template <class T, int HSP>
__global__ void __launch_bounds__(kThreads)
    attention_bwd_tc_dkdv_kernel(BwdIn in, const T* maskt, T* dk, T* dv, AttentionGeometry g) {
  using L = DkdvSmem<HSP>;
  constexpr int KS = HSP / 16, DN = HSP / 8, NB = kBwdStep / 8;
  AIM_DYNAMIC_SHARED(uint16_t, sm);
  float* lse_s = reinterpret_cast<float*>(sm + L::end);  // [kBwdStep] (L::end is even)
  float* d_s = lse_s + kBwdStep;                         // [kBwdStep]
  const int lane = int(threadIdx.x) % kWarpSize, warp = int(threadIdx.x) / kWarpSize;
  const int gq = lane / 4, tq = lane % 4;
  const int64_t bh = blockIdx.x, b = bh / g.NH, h = bh % g.NH;
  const int64_t HS = g.HS, Tq = g.Tq, Tk = g.Tk;
  const int64_t j0 = int64_t(blockIdx.y) * kRows;  // the block's first key
  const float scale = float(g.scale), keep = attention_dropout_scale<float>(g.dropout_p);
  const int64_t nk = min(int64_t(kRows), Tk - j0);
  stage_rows<kRows, HSP>(sm + L::ks, L::LK, in.k + (bh * Tk + j0) * HS, nk, HS);
  stage_rows<kRows, HSP>(sm + L::vs, L::LK, in.v + (bh * Tk + j0) * HS, nk, HS);
  const int64_t col[2] = {j0 + 16 * warp + gq, j0 + 16 * warp + gq + 8};  // this lane's keys
  float dka[DN][4], dva[DN][4];
  AIM_UNROLL
  for (int dn = 0; dn < DN; ++dn) {
    AIM_UNROLL
    for (int e = 0; e < 4; ++e) dka[dn][e] = dva[dn][e] = 0.f;
  }
  const int64_t ifirst = g.causal ? max(int64_t(0), j0 - (Tk - Tq)) : int64_t(0);
  for (int64_t i0 = ifirst; i0 < Tq; i0 += kBwdStep) {
    const int64_t nq = min(int64_t(kBwdStep), Tq - i0);
    const int64_t off = (bh * Tq + i0) * HS;
    stage_rows<kBwdStep, HSP>(sm + L::qs, L::LK, in.q + off, nq, HS);
    stage_rows<kBwdStep, HSP>(sm + L::dos, L::LK, in.dout + off, nq, HS);
    stage_cols<kBwdStep, HSP>(sm + L::qt, L::LT, in.q + off, nq, HS);
    stage_cols<kBwdStep, HSP>(sm + L::dot, L::LT, in.dout + off, nq, HS);
    for (int e = int(threadIdx.x); e < kBwdStep; e += kThreads) {
      lse_s[e] = e < nq ? in.lse[bh * Tq + i0 + e] : neg_inf<float>();
      d_s[e] = e < nq ? in.D[bh * Tq + i0 + e] : 0.f;
    }
    __syncthreads();
    float st[NB][4], dpt[NB][4];  // S^T, dP^T: rows = the warp's keys, columns = queries
    AIM_UNROLL
    for (int ni = 0; ni < NB; ++ni) {
      AIM_UNROLL
      for (int e = 0; e < 4; ++e) st[ni][e] = dpt[ni][e] = 0.f;
    }
    mma_smem<T, KS, NB>(st, words(sm + L::ks), L::LK / 2, 16 * warp, words(sm + L::qs), L::LK / 2,
                        gq, tq);
    mma_smem<T, KS, NB>(dpt, words(sm + L::vs), L::LK / 2, 16 * warp, words(sm + L::dos), L::LK / 2,
                        gq, tq);
    AIM_UNROLL
    for (int ni = 0; ni < NB; ++ni) {
      AIM_UNROLL
      for (int c = 0; c < 4; ++c) {
        const int hh = c / 2, il = 8 * ni + 2 * tq + c % 2;
        const int64_t j = col[hh], i = i0 + il;
        const float Li = lse_s[il];
        float p = 0.f;
        if (i < Tq && j < Tk && g.visible(i, j) && Li != neg_inf<float>()) {
          const float x = st[ni][c] * scale + mask_at(in.mask32, maskt, g, b, h, i, j);
          p = x == neg_inf<float>() ? 0.f : expf(x - Li);
        }
        const float z = g.dropout() && p != 0.f ? (g.kept(bh, i, j) ? keep : 0.f) : 1.f;
        st[ni][c] = p * z;                              // z p
        dpt[ni][c] = p * z * dpt[ni][c] - p * d_s[il];  // ds = p (z dp - D)
      }
    }
    mma_regs<T, kBwdStep / 16, DN>(dva, st, words(sm + L::dot), L::LT / 2, gq, tq);  // (z p)^T dO
    mma_regs<T, kBwdStep / 16, DN>(dka, dpt, words(sm + L::qt), L::LT / 2, gq, tq);  // ds^T Q
    __syncthreads();  // before the next step overwrites the query tiles
  }
  AIM_UNROLL
  for (int hh = 0; hh < 2; ++hh) {
    const int64_t j = col[hh];
    if (j >= Tk) continue;
    AIM_UNROLL
    for (int dn = 0; dn < DN; ++dn) {
      AIM_UNROLL
      for (int e = 0; e < 2; ++e) {
        const int64_t d = 8 * dn + 2 * tq + e;
        if (d >= HS) continue;
        dk[(bh * Tk + j) * HS + d] = from_f32<T>(dka[dn][2 * hh + e] * scale);
        dv[(bh * Tk + j) * HS + d] = from_f32<T>(dva[dn][2 * hh + e]);
      }
    }
  }
}

template <int HSP>
struct DqSmem {  // element offsets of the dq kernel's tiles (16-bit)
  static constexpr int LK = padded(HSP), LT = padded(kBwdStep);
  static constexpr int qs = 0, dos = qs + kRows * LK, ks = dos + kRows * LK,
                       vs = ks + kBwdStep * LK;
  static constexpr int kt = vs + kBwdStep * LK, end = kt + HSP * LT;
  static constexpr size_t bytes = size_t(end) * 2;
};

// At HSP = 32 ptxas, left to itself, picked 96 registers and spilled 8 bytes; asking for 4 blocks
// per SM (a cap of 128) made it take 113 and no spill.
template <class T, int HSP>
__global__ void __launch_bounds__(kThreads, HSP == 32 ? 4 : 1)
    attention_bwd_tc_dq_kernel(BwdIn in, const T* maskt, T* dq, AttentionGeometry g) {
  using L = DqSmem<HSP>;
  constexpr int KS = HSP / 16, DN = HSP / 8, NB = kBwdStep / 8;
  AIM_DYNAMIC_SHARED(uint16_t, sm);
  const int lane = int(threadIdx.x) % kWarpSize, warp = int(threadIdx.x) / kWarpSize;
  const int gq = lane / 4, tq = lane % 4;
  const int64_t bh = blockIdx.x, b = bh / g.NH, h = bh % g.NH;
  const int64_t HS = g.HS, Tq = g.Tq, Tk = g.Tk;
  const int64_t q0 = int64_t(blockIdx.y) * kRows;
  const float scale = float(g.scale), keep = attention_dropout_scale<float>(g.dropout_p);
  const int64_t nq = min(int64_t(kRows), Tq - q0);
  stage_rows<kRows, HSP>(sm + L::qs, L::LK, in.q + (bh * Tq + q0) * HS, nq, HS);
  stage_rows<kRows, HSP>(sm + L::dos, L::LK, in.dout + (bh * Tq + q0) * HS, nq, HS);
  const int64_t row[2] = {q0 + 16 * warp + gq, q0 + 16 * warp + gq + 8};
  float Li[2], Di[2];
  AIM_UNROLL
  for (int hh = 0; hh < 2; ++hh) {
    Li[hh] = row[hh] < Tq ? in.lse[bh * Tq + row[hh]] : neg_inf<float>();
    Di[hh] = row[hh] < Tq ? in.D[bh * Tq + row[hh]] : 0.f;
  }
  float dqa[DN][4];
  AIM_UNROLL
  for (int dn = 0; dn < DN; ++dn) {
    AIM_UNROLL
    for (int e = 0; e < 4; ++e) dqa[dn][e] = 0.f;
  }
  const int64_t kend = g.visible_keys(min(Tq - 1, q0 + kRows - 1));
  for (int64_t j0 = 0; j0 < kend; j0 += kBwdStep) {
    const int64_t nk = min(int64_t(kBwdStep), Tk - j0);
    const int64_t off = (bh * Tk + j0) * HS;
    stage_rows<kBwdStep, HSP>(sm + L::ks, L::LK, in.k + off, nk, HS);
    stage_rows<kBwdStep, HSP>(sm + L::vs, L::LK, in.v + off, nk, HS);
    stage_cols<kBwdStep, HSP>(sm + L::kt, L::LT, in.k + off, nk, HS);
    __syncthreads();
    float s[NB][4], dp[NB][4];
    AIM_UNROLL
    for (int ni = 0; ni < NB; ++ni) {
      AIM_UNROLL
      for (int e = 0; e < 4; ++e) s[ni][e] = dp[ni][e] = 0.f;
    }
    mma_smem<T, KS, NB>(s, words(sm + L::qs), L::LK / 2, 16 * warp, words(sm + L::ks), L::LK / 2,
                        gq, tq);
    mma_smem<T, KS, NB>(dp, words(sm + L::dos), L::LK / 2, 16 * warp, words(sm + L::vs), L::LK / 2,
                        gq, tq);
    AIM_UNROLL
    for (int ni = 0; ni < NB; ++ni) {
      AIM_UNROLL
      for (int c = 0; c < 4; ++c) {
        const int hh = c / 2;
        const int64_t i = row[hh], j = j0 + 8 * ni + 2 * tq + c % 2;
        float p = 0.f;
        if (i < Tq && j < Tk && g.visible(i, j) && Li[hh] != neg_inf<float>()) {
          const float x = s[ni][c] * scale + mask_at(in.mask32, maskt, g, b, h, i, j);
          p = x == neg_inf<float>() ? 0.f : expf(x - Li[hh]);
        }
        const float z = g.dropout() && p != 0.f ? (g.kept(bh, i, j) ? keep : 0.f) : 1.f;
        s[ni][c] = p * (dp[ni][c] * z - Di[hh]);  // ds
      }
    }
    mma_regs<T, kBwdStep / 16, DN>(dqa, s, words(sm + L::kt), L::LT / 2, gq, tq);  // dQ += ds K
    __syncthreads();  // before the next step overwrites the key tiles
  }
  AIM_UNROLL
  for (int hh = 0; hh < 2; ++hh) {
    const int64_t i = row[hh];
    if (i >= Tq) continue;
    AIM_UNROLL
    for (int dn = 0; dn < DN; ++dn) {
      AIM_UNROLL
      for (int e = 0; e < 2; ++e) {
        const int64_t d = 8 * dn + 2 * tq + e;
        if (d < HS) dq[(bh * Tq + i) * HS + d] = from_f32<T>(dqa[dn][2 * hh + e] * scale);
      }
    }
  }
}

// ---- launchers ----------------------------------------------------------------------------------

constexpr size_t fwd_smem(int HSP) {
  return (size_t(kRows + kFwdKeys) * padded(HSP) + size_t(HSP) * padded(kFwdKeys)) * 2;
}

// Calls f(std::integral_constant<int, HSP>) for the padded head size 32, 64 or 128.
template <class F>
void with_hsp(int64_t HS, F&& f) {
  if (HS <= 32)
    f(std::integral_constant<int, 32>());
  else if (HS <= 64)
    f(std::integral_constant<int, 64>());
  else
    f(std::integral_constant<int, 128>());
}

// Lets `kernel` use `bytes` of dynamic shared memory (an opt-in above 48 KB on the GPU; the
// emulator allows up to 227 KB without one).
template <class K>
void allow_smem(K kernel, size_t bytes) {
#ifndef AIM_SIMT
  if (bytes > kSmemDefault)
    AIM_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
#else
  (void)kernel;
  (void)bytes;
#endif
}

std::string tc_supports(const Tensor& q) {
  if (q.dtype() != DType::f16 && q.dtype() != DType::bf16)
    return str("needs f16 or bf16 (tensor-core inputs), got ", dtype_name(q.dtype()));
  if (q.dim() == 4 && q.size(3) > kMaxHS)
    return str(
        "needs HS <= ", kMaxHS, " (any HS up to ", kMaxHS,
        ", padded to 32, 64 or 128; a 16 x 128 fp32 accumulator per warp), got HS = ", q.size(3));
  return "";
}

void check_grid(const AttentionGeometry& g, int64_t tiles, const char* who) {
  AIM_CHECK(g.B * g.NH < (int64_t(1) << 31), who, " B NH = ", g.B * g.NH, " exceeds the grid");
  AIM_CHECK(tiles <= 65535, who, " ", tiles, " tiles exceed the grid's y dimension");
}

const uint16_t* bits(const Tensor& t) { return static_cast<const uint16_t*>(t.raw_data()); }

template <class T>
void fwd_launch(const AttentionFwdArgs& a, const AttentionGeometry& g, const char* who) {
  const int64_t tiles = ceil_div(g.Tq, kRows);
  check_grid(g, tiles, who);
  const float* m32 = g.has_mask && g.mask_f32 ? a.mask.data<float>() : nullptr;
  const T* mt = g.has_mask && !g.mask_f32 ? static_cast<const T*>(a.mask.raw_data()) : nullptr;
  const dim3 grid(unsigned(g.B * g.NH), unsigned(tiles));
  with_hsp(g.HS, [&](auto hsp) {
    constexpr int HSP = decltype(hsp)::value;
    constexpr size_t smem = fwd_smem(HSP);
    allow_smem(attention_fwd_tc_kernel<T, HSP>, smem);
    AIM_LAUNCH(grid, kThreads, smem, stream_for(a.q.device()), attention_fwd_tc_kernel<T, HSP>)
    (bits(a.q), bits(a.k), bits(a.v), m32, mt, static_cast<T*>(a.o.raw_data()), a.lse.data<float>(),
     g);
  });
  AIM_CHECK_LAUNCH();
}

template <class T>
void bwd_launch(const AttentionBwdArgs& a, const AttentionGeometry& g, const char* who) {
  const int64_t qtiles = ceil_div(g.Tq, kRows), ktiles = ceil_div(g.Tk, kRows);
  check_grid(g, std::max(qtiles, ktiles), who);
  const Device dev = a.q.device();
  const auto stream = stream_for(dev);
  const int64_t rows = g.B * g.NH * g.Tq;
  const Tensor Dt = Tensor::empty({rows}, DType::f32, dev);
  AIM_LAUNCH(unsigned(ceil_div(rows, kWarps)), kThreads, 0, stream, attention_bwd_tc_dot_kernel<T>)
  (static_cast<const T*>(a.dout.raw_data()), static_cast<const T*>(a.o.raw_data()),
   Dt.data<float>(), rows, g.HS);
  AIM_CHECK_LAUNCH();
  const BwdIn in{bits(a.dout),
                 bits(a.q),
                 bits(a.k),
                 bits(a.v),
                 g.has_mask && g.mask_f32 ? a.mask.data<float>() : nullptr,
                 a.lse.data<float>(),
                 Dt.data<float>()};
  const T* mt = g.has_mask && !g.mask_f32 ? static_cast<const T*>(a.mask.raw_data()) : nullptr;
  with_hsp(g.HS, [&](auto hsp) {
    constexpr int HSP = decltype(hsp)::value;
    if (ktiles > 0) {
      constexpr size_t smem = DkdvSmem<HSP>::bytes;
      allow_smem(attention_bwd_tc_dkdv_kernel<T, HSP>, smem);
      AIM_LAUNCH(dim3(unsigned(g.B * g.NH), unsigned(ktiles)), kThreads, smem, stream,
                 attention_bwd_tc_dkdv_kernel<T, HSP>)
      (in, mt, static_cast<T*>(a.dk.raw_data()), static_cast<T*>(a.dv.raw_data()), g);
      AIM_CHECK_LAUNCH();
    }
    constexpr size_t smem = DqSmem<HSP>::bytes;
    allow_smem(attention_bwd_tc_dq_kernel<T, HSP>, smem);
    AIM_LAUNCH(dim3(unsigned(g.B * g.NH), unsigned(qtiles)), kThreads, smem, stream,
               attention_bwd_tc_dq_kernel<T, HSP>)
    (in, mt, static_cast<T*>(a.dq.raw_data()), g);
    AIM_CHECK_LAUNCH();
  });
}

// Binds T to __half or __nv_bfloat16 (tc_supports has excluded every other dtype).
#define AIM_DISPATCH_TC_TYPES(dtype, T, ...)                                                \
  do {                                                                                      \
    switch (dtype) {                                                                        \
      AIM_CUDA_TYPE_CASE_(::aim::DType::f16, __half, T, __VA_ARGS__)                        \
      AIM_CUDA_TYPE_CASE_(::aim::DType::bf16, __nv_bfloat16, T, __VA_ARGS__)                \
      default:                                                                              \
        AIM_FAIL("cuda.flash_tc: dtype ", ::aim::dtype_name(dtype), " is not f16 or bf16"); \
    }                                                                                       \
  } while (0)

void fwd_flash_tc(const AttentionFwdArgs& a) {
  const char* who = "[attention_fwd] cuda.flash_tc";
  const AttentionGeometry g = attention_geometry(a, who);
  const std::string why = tc_supports(a.q);
  AIM_CHECK(why.empty(), who, " ", why);
  if (g.B * g.NH * g.Tq == 0) return;
  AIM_DISPATCH_TC_TYPES(a.q.dtype(), T, fwd_launch<T>(a, g, who));
}

void bwd_flash_tc(const AttentionBwdArgs& a) {
  const char* who = "[attention_bwd] cuda.flash_tc";
  const AttentionGeometry g = attention_bwd_geometry(a, who);
  const std::string why = tc_supports(a.q);
  AIM_CHECK(why.empty(), who, " ", why);
  if (g.B * g.NH == 0) return;
  if (g.Tq == 0) {  // no query: no gradient reaches k and v
    memset_zero(a.dk.raw_data(), size_t(a.dk.nbytes()), a.dk.device());
    memset_zero(a.dv.raw_data(), size_t(a.dv.nbytes()), a.dv.device());
    return;
  }
  AIM_DISPATCH_TC_TYPES(a.q.dtype(), T, bwd_launch<T>(a, g, who));
}

#undef AIM_DISPATCH_TC_TYPES

}  // namespace

// Called from register_attention_cuda (attention_cuda.cu): not the default (never run on a GPU
// yet); selected with --kernels attention_fwd=cuda.flash_tc,attention_bwd=cuda.flash_tc.
void register_attention_tc_cuda(Registry& r) {
  const std::vector<DType> types{DType::f16, DType::bf16};
  r.op<AttentionFwdArgs>("attention_fwd")
      .add({"cuda.flash_tc", AIM_CUDA_BACKEND, Provider::Own, fwd_flash_tc, types,
            [](const AttentionFwdArgs& a) { return tc_supports(a.q); }});
  r.op<AttentionBwdArgs>("attention_bwd")
      .add({"cuda.flash_tc", AIM_CUDA_BACKEND, Provider::Own, bwd_flash_tc, types,
            [](const AttentionBwdArgs& a) { return tc_supports(a.q); }});
}

}  // namespace aim::kernels::AIM_CUDA_NS
