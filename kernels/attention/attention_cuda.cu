// cuda.flash (attention_fwd): one 128-thread block (4 warps) per (b, h, tile of BQ queries); warp
//   w owns queries w RW .. w RW + RW - 1 of the tile (RW = 8 rows, 4 for f64: BQ = 32 or 16).
//   Key tiles of 32 keys (one per lane) are staged in shared memory ([32][HS + 1], the +1 keeps
//   the lanes' rows in different banks), K then V in the same buffer. Per tile: lane l computes
//   s = scale q_i.k_l + mask for its warp's RW queries (q read from global memory: every lane of
//   the warp reads the same element, one broadcast load through L1), the running row max and sum
//   by warp shuffles (online softmax: the accumulator is rescaled by exp(m_old - m_new)), the
//   dropout factor of its element, and p into a [BQ][32] shared tile; then lane l accumulates
//   o[i][l + 32 c] += p[i][j] v[j][l + 32 c] (c < ceil(HS / 32)) in registers. Causal blocks stop
//   at the last key their last query sees. The end writes o / l and lse = m + log l (lane 0).
//   Traffic: q, o once per query tile; k and v once per query tile (from L2 after the first
//   tile); no [Tq, Tk] matrix. Expected bound: FP32 (FP64) FMA issue of the scalar path, the
//   shuffles and the q broadcast loads: a readable first version (no tensor cores, no double
//   buffering, no split over keys), far below the tensor-core peak for 16-bit inputs.
//   Shared memory: BQ 32 sizeof(acc) + 32 (HS + 1) sizeof(T) bytes: 21 KB (f32, HS 128), 37 KB
//   (f64, HS 128).
// cuda.flash (attention_bwd), three kernels:
//   1. D = rowsum(do o) per query: one warp per row, lanes over HS, a shuffle sum (f32/f64 scratch
//      [B NH Tq]).
//   2. dk, dv: one block per (b, h, tile of BK = 4 RW keys); warp w owns RW keys, accumulates
//      dk[j][l + 32 c] and dv[j][l + 32 c] in registers. Query tiles of 32 (one per lane) walk
//      from the first query that sees the block's first key: Q and dO tiles staged in shared
//      memory (both at once when 2 tiles fit in 48 KB, else dO then Q again in one buffer, f64 at
//      HS > 64), s and dp = do.v recomputed per (key, lane's query), p = exp(s - lse),
//      ds = p (z dp - D); z p and ds go through [BK][32] shared tiles to the dv += (z p) do and
//      dk += ds q updates.
//   3. dq: one block per (b, h, query tile) as the forward; per key tile V then K staged: dp and s
//      recomputed, ds into a [BQ][32] tile, dq[i][l + 32 c] += ds k in registers.
//   dq is a separate pass (kernel 3) rather than atomics: deterministic, no f32 scratch for 16-bit
//   dq, at the price of computing s and dp twice (7 products of 2 HS FLOPs per visible pair
//   instead of the cost model's 5).
// Limits (both ops): HS <= 128 (supports() says so); Tq / BQ <= 65535 and B NH < 2^31 blocks.
// f32 f64 f16 bf16; accumulation in f32 (f64 for f64 inputs: the registry test's f64 tolerance),
// expf/exp (not the fast intrinsics); 16-bit outputs rounded once.
#include <algorithm>
#include <cmath>

#include "kernels/attention/attention.h"
#include "kernels/cuda_common.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kThreads = 128;  // 4 warps
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kTile = 32;    // keys (fwd, dq) or queries (dk/dv) per tile: one per lane
constexpr int kMaxHS = 128;  // 4 head dimensions per lane
constexpr size_t kSmemLimit = 48 * 1024;  // without opting in to more

// Loop unrolling of the loops over HS (2x) and over a tile's rows (none): nvcc's default 4x
// hoisted four iterations of loads and made a few instantiations spill.
#ifdef AIM_SIMT
#define AIM_ATTN_UNROLL_HS
#define AIM_ATTN_ROLLED
#else
#define AIM_ATTN_UNROLL_HS _Pragma("unroll 2")
#define AIM_ATTN_ROLLED _Pragma("unroll 1")
#endif

// Rows per warp: 8 (f32 accumulators), 4 for f64.
template <class T>
constexpr int rows_per_warp() {
  return std::is_same_v<T, double> ? 4 : 8;
}

// The mask's value at (b, h, i, j) in A (mask32 or maskt non-null when there is a mask).
template <class A, class T>
__device__ __forceinline__ A mask_value(const float* mask32, const T* maskt,
                                        const AttentionGeometry& g, int64_t b, int64_t h, int64_t i,
                                        int64_t j) {
  if (!g.has_mask) return A(0);
  const int64_t e = g.mask_row(b, h, i) + j;
  return mask32 ? A(mask32[e]) : to_acc<A>(maskt[e]);
}

template <class A>
__device__ __forceinline__ A load_lse(const float* lse32, const double* lse64, int64_t i) {
  return lse64 ? A(lse64[i]) : A(lse32[i]);
}

// rows [0, n) x HS of src (row stride HS) into dst (row stride HS + 1); zero rows n .. kTile - 1.
template <class T>
__device__ __forceinline__ void stage_tile(T* dst, const T* src, int64_t n, int64_t HS) {
  const int64_t ld = HS + 1;
  for (int64_t e = threadIdx.x; e < int64_t(kTile) * HS; e += kThreads) {
    const int64_t r = e / HS, d = e % HS;
    dst[r * ld + d] = r < n ? src[r * HS + d] : from_f32<T>(0.0f);
  }
}

// ---- forward ------------------------------------------------------------------------------------

template <class T, int kRW, int kDC>
__global__ void __launch_bounds__(kThreads)
    attention_fwd_kernel(const T* q, const T* k, const T* v, const float* mask32, const T* maskt,
                         T* o, float* lse32, double* lse64, AttentionGeometry g) {
  using A = typename Acc<T>::type;
  constexpr int BQ = kWarps * kRW;
  AIM_DYNAMIC_SHARED(A, ps);                      // [BQ][kTile] probabilities
  T* kv = reinterpret_cast<T*>(ps + BQ * kTile);  // [kTile][HS + 1] K, then V
  const int lane = int(threadIdx.x) % kWarpSize, warp = int(threadIdx.x) / kWarpSize;
  const int64_t bh = blockIdx.x, b = bh / g.NH, h = bh % g.NH;
  const int64_t HS = g.HS, Tq = g.Tq, Tk = g.Tk, ld = HS + 1;
  const int64_t i0 = int64_t(blockIdx.y) * BQ + warp * kRW;  // this warp's first query
  const A scale = A(g.scale), kept = attention_dropout_scale<A>(g.dropout_p);
  A m[kRW], l[kRW], acc[kRW][kDC];
  AIM_UNROLL
  for (int r = 0; r < kRW; ++r) {
    m[r] = neg_inf<A>();
    l[r] = A(0);
    AIM_UNROLL
    for (int c = 0; c < kDC; ++c) acc[r][c] = A(0);
  }
  // Row r's q (rows past Tq read the last row; their results are never written).
  const T* qr = q + bh * Tq * HS;
  const int64_t block_last = min(Tq - 1, int64_t(blockIdx.y) * BQ + BQ - 1);
  const int64_t kend = g.visible_keys(block_last);
  for (int64_t j0 = 0; j0 < kend; j0 += kTile) {
    const int64_t nk = min(int64_t(kTile), Tk - j0);
    stage_tile(kv, k + (bh * Tk + j0) * HS, nk, HS);
    __syncthreads();
    A dot[kRW];
    AIM_UNROLL
    for (int r = 0; r < kRW; ++r) dot[r] = A(0);
    const T* kl = kv + lane * ld;
    AIM_ATTN_UNROLL_HS
    for (int64_t d = 0; d < HS; ++d) {
      const A kd = to_acc<A>(kl[d]);
      AIM_UNROLL
      for (int r = 0; r < kRW; ++r) dot[r] += to_acc<A>(qr[min(i0 + r, Tq - 1) * HS + d]) * kd;
    }
    const int64_t j = j0 + lane;
    AIM_UNROLL
    for (int r = 0; r < kRW; ++r) {
      const int64_t i = i0 + r;
      const bool ok = i < Tq && j < Tk && g.visible(i, j);
      const A s = ok ? dot[r] * scale + mask_value<A>(mask32, maskt, g, b, h, i, j) : neg_inf<A>();
      const A mnew = max(m[r], warp_max(s));  // the same on every lane
      A p = A(0), alpha = A(1);
      if (mnew != neg_inf<A>()) {
        p = s == neg_inf<A>() ? A(0) : exp_a(s - mnew);
        alpha = exp_a(m[r] - mnew);  // 0 while nothing was visible (m = -inf)
      }
      l[r] = l[r] * alpha + warp_sum(p);
      m[r] = mnew;
      AIM_UNROLL
      for (int c = 0; c < kDC; ++c) acc[r][c] *= alpha;
      if (g.dropout() && p != A(0)) p *= g.kept(bh, i, j) ? kept : A(0);
      ps[(warp * kRW + r) * kTile + lane] = p;
    }
    __syncthreads();  // every warp is done with K
    stage_tile(kv, v + (bh * Tk + j0) * HS, nk, HS);
    __syncthreads();
    AIM_ATTN_ROLLED
    for (int jj = 0; jj < nk; ++jj) {
      A vd[kDC];
      AIM_UNROLL
      for (int c = 0; c < kDC; ++c) {
        const int64_t d = lane + c * kWarpSize;
        vd[c] = d < HS ? to_acc<A>(kv[jj * ld + d]) : A(0);
      }
      AIM_UNROLL
      for (int r = 0; r < kRW; ++r) {
        const A p = ps[(warp * kRW + r) * kTile + jj];
        AIM_UNROLL
        for (int c = 0; c < kDC; ++c) acc[r][c] += p * vd[c];
      }
    }
    __syncthreads();  // before the next K tile overwrites V
  }
  AIM_UNROLL
  for (int r = 0; r < kRW; ++r) {
    const int64_t i = i0 + r;
    if (i >= Tq) continue;
    const bool any = l[r] > A(0);
    const A inv = any ? A(1) / l[r] : A(0);
    T* orow = o + (bh * Tq + i) * HS;
    AIM_UNROLL
    for (int c = 0; c < kDC; ++c) {
      const int64_t d = lane + c * kWarpSize;
      if (d < HS) orow[d] = from_acc<T>(acc[r][c] * inv);
    }
    if (lane == 0) {
      const A lse = any ? m[r] + log_a(l[r]) : neg_inf<A>();
      if (lse64)
        lse64[bh * Tq + i] = double(lse);
      else
        lse32[bh * Tq + i] = float(lse);
    }
  }
}

// ---- backward -----------------------------------------------------------------------------------

// D[row] = sum_d do[row][d] o[row][d]: one warp per row.
template <class T>
__global__ void __launch_bounds__(kThreads)
    attention_bwd_dot_kernel(const T* dout, const T* o, typename Acc<T>::type* D, int64_t rows,
                             int64_t HS) {
  using A = typename Acc<T>::type;
  const int lane = int(threadIdx.x) % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * kWarps + int64_t(threadIdx.x) / kWarpSize;
  if (row >= rows) return;  // the whole warp leaves together
  A s = A(0);
  for (int64_t d = lane; d < HS; d += kWarpSize)
    s += to_acc<A>(dout[row * HS + d]) * to_acc<A>(o[row * HS + d]);
  s = warp_sum(s);
  if (lane == 0) D[row] = s;
}

struct BwdPtrs {
  const float* mask32;
  const float* lse32;
  const double* lse64;
};

// dk, dv for a tile of BK = kWarps kRW keys; lanes over the queries of a 32-query tile.
template <class T, int kRW, int kDC>
__global__ void __launch_bounds__(kThreads)
    attention_bwd_dkdv_kernel(const T* dout, const T* q, const T* k, const T* v, const T* maskt,
                              const typename Acc<T>::type* D, T* dk, T* dv, BwdPtrs p,
                              AttentionGeometry g, bool two_tiles) {
  using A = typename Acc<T>::type;
  constexpr int BK = kWarps * kRW;
  AIM_DYNAMIC_SHARED(A, pz);                       // [BK][kTile] z p
  A* dss = pz + BK * kTile;                        // [BK][kTile] ds
  T* xs = reinterpret_cast<T*>(dss + BK * kTile);  // [kTile][HS + 1] Q (and dO)
  const int lane = int(threadIdx.x) % kWarpSize, warp = int(threadIdx.x) / kWarpSize;
  const int64_t bh = blockIdx.x, b = bh / g.NH, h = bh % g.NH;
  const int64_t HS = g.HS, Tq = g.Tq, Tk = g.Tk, ld = HS + 1;
  T* ys = two_tiles ? xs + kTile * ld : xs;                  // dO
  const int64_t j0 = int64_t(blockIdx.y) * BK + warp * kRW;  // this warp's first key
  const A scale = A(g.scale), kept = attention_dropout_scale<A>(g.dropout_p);
  A dka[kRW][kDC], dva[kRW][kDC];
  AIM_UNROLL
  for (int r = 0; r < kRW; ++r) {
    AIM_UNROLL
    for (int c = 0; c < kDC; ++c) dka[r][c] = dva[r][c] = A(0);
  }
  const T* kr = k + bh * Tk * HS;
  const T* vr = v + bh * Tk * HS;
  const int64_t block_first = int64_t(blockIdx.y) * BK;
  const int64_t ifirst = g.causal ? max(int64_t(0), block_first - (Tk - Tq)) : int64_t(0);
  for (int64_t q0 = ifirst; q0 < Tq; q0 += kTile) {
    const int64_t nq = min(int64_t(kTile), Tq - q0);
    stage_tile(xs, q + (bh * Tq + q0) * HS, nq, HS);
    if (two_tiles) stage_tile(ys, dout + (bh * Tq + q0) * HS, nq, HS);
    __syncthreads();
    const int64_t i = q0 + lane;  // this lane's query
    A dot[kRW];
    AIM_UNROLL
    for (int r = 0; r < kRW; ++r) dot[r] = A(0);
    const T* ql = xs + lane * ld;
    AIM_ATTN_UNROLL_HS
    for (int64_t d = 0; d < HS; ++d) {
      const A qd = to_acc<A>(ql[d]);
      AIM_UNROLL
      for (int r = 0; r < kRW; ++r) dot[r] += to_acc<A>(kr[min(j0 + r, Tk - 1) * HS + d]) * qd;
    }
    const A Li = i < Tq ? load_lse<A>(p.lse32, p.lse64, bh * Tq + i) : neg_inf<A>();
    const A Di = i < Tq ? D[bh * Tq + i] : A(0);
    A pr[kRW];  // p; z p goes to shared memory at once (read back by the same lane)
    AIM_UNROLL
    for (int r = 0; r < kRW; ++r) {
      const int64_t j = j0 + r;
      const bool ok = i < Tq && j < Tk && g.visible(i, j) && Li != neg_inf<A>();
      A s = neg_inf<A>();
      if (ok) s = dot[r] * scale + mask_value<A>(p.mask32, maskt, g, b, h, i, j);
      pr[r] = s == neg_inf<A>() ? A(0) : exp_a(s - Li);
      const A z = g.dropout() && pr[r] != A(0) ? (g.kept(bh, i, j) ? kept : A(0)) : A(1);
      pz[(warp * kRW + r) * kTile + lane] = pr[r] * z;
    }
    if (!two_tiles) {
      __syncthreads();  // every warp is done with Q
      stage_tile(ys, dout + (bh * Tq + q0) * HS, nq, HS);
      __syncthreads();
    }
    AIM_UNROLL
    for (int r = 0; r < kRW; ++r) dot[r] = A(0);
    const T* dl = ys + lane * ld;
    AIM_ATTN_UNROLL_HS
    for (int64_t d = 0; d < HS; ++d) {
      const A dd = to_acc<A>(dl[d]);
      AIM_UNROLL
      for (int r = 0; r < kRW; ++r) dot[r] += to_acc<A>(vr[min(j0 + r, Tk - 1) * HS + d]) * dd;
    }
    AIM_UNROLL
    for (int r = 0; r < kRW; ++r) {  // ds = p (z dp - D) = (z p) dp - p D
      const int e = (warp * kRW + r) * kTile + lane;
      dss[e] = pz[e] * dot[r] - pr[r] * Di;
    }
    __syncthreads();
    AIM_ATTN_ROLLED
    for (int ii = 0; ii < nq; ++ii) {  // dv += (z p)^T do
      A od[kDC];
      AIM_UNROLL
      for (int c = 0; c < kDC; ++c) {
        const int64_t d = lane + c * kWarpSize;
        od[c] = d < HS ? to_acc<A>(ys[ii * ld + d]) : A(0);
      }
      AIM_UNROLL
      for (int r = 0; r < kRW; ++r) {
        const A w = pz[(warp * kRW + r) * kTile + ii];
        AIM_UNROLL
        for (int c = 0; c < kDC; ++c) dva[r][c] += w * od[c];
      }
    }
    if (!two_tiles) {
      __syncthreads();  // every warp is done with dO
      stage_tile(xs, q + (bh * Tq + q0) * HS, nq, HS);
      __syncthreads();
    }
    AIM_ATTN_ROLLED
    for (int ii = 0; ii < nq; ++ii) {  // dk += ds^T q
      A qd[kDC];
      AIM_UNROLL
      for (int c = 0; c < kDC; ++c) {
        const int64_t d = lane + c * kWarpSize;
        qd[c] = d < HS ? to_acc<A>(xs[ii * ld + d]) : A(0);
      }
      AIM_UNROLL
      for (int r = 0; r < kRW; ++r) {
        const A w = dss[(warp * kRW + r) * kTile + ii];
        AIM_UNROLL
        for (int c = 0; c < kDC; ++c) dka[r][c] += w * qd[c];
      }
    }
    __syncthreads();  // before the next tiles overwrite Q, dO, z p and ds
  }
  AIM_UNROLL
  for (int r = 0; r < kRW; ++r) {
    const int64_t j = j0 + r;
    if (j >= Tk) continue;
    AIM_UNROLL
    for (int c = 0; c < kDC; ++c) {
      const int64_t d = lane + c * kWarpSize;
      if (d >= HS) continue;
      dk[(bh * Tk + j) * HS + d] = from_acc<T>(dka[r][c] * scale);
      dv[(bh * Tk + j) * HS + d] = from_acc<T>(dva[r][c]);
    }
  }
}

// dq for a tile of BQ = kWarps kRW queries; lanes over the keys of a 32-key tile.
template <class T, int kRW, int kDC>
__global__ void __launch_bounds__(kThreads)
    attention_bwd_dq_kernel(const T* dout, const T* q, const T* k, const T* v, const T* maskt,
                            const typename Acc<T>::type* D, T* dq, BwdPtrs p, AttentionGeometry g) {
  using A = typename Acc<T>::type;
  constexpr int BQ = kWarps * kRW;
  AIM_DYNAMIC_SHARED(A, dss);                      // [BQ][kTile] ds
  T* kv = reinterpret_cast<T*>(dss + BQ * kTile);  // [kTile][HS + 1] V, then K
  const int lane = int(threadIdx.x) % kWarpSize, warp = int(threadIdx.x) / kWarpSize;
  const int64_t bh = blockIdx.x, b = bh / g.NH, h = bh % g.NH;
  const int64_t HS = g.HS, Tq = g.Tq, Tk = g.Tk, ld = HS + 1;
  const int64_t i0 = int64_t(blockIdx.y) * BQ + warp * kRW;
  const A scale = A(g.scale), kept = attention_dropout_scale<A>(g.dropout_p);
  A dqa[kRW][kDC], Li[kRW], Di[kRW];
  AIM_UNROLL
  for (int r = 0; r < kRW; ++r) {
    const int64_t i = i0 + r;
    Li[r] = i < Tq ? load_lse<A>(p.lse32, p.lse64, bh * Tq + i) : neg_inf<A>();
    Di[r] = i < Tq ? D[bh * Tq + i] : A(0);
    AIM_UNROLL
    for (int c = 0; c < kDC; ++c) dqa[r][c] = A(0);
  }
  const T* qr = q + bh * Tq * HS;
  const T* dr = dout + bh * Tq * HS;
  const int64_t block_last = min(Tq - 1, int64_t(blockIdx.y) * BQ + BQ - 1);
  const int64_t kend = g.visible_keys(block_last);
  for (int64_t j0 = 0; j0 < kend; j0 += kTile) {
    const int64_t nk = min(int64_t(kTile), Tk - j0);
    const int64_t j = j0 + lane;
    stage_tile(kv, v + (bh * Tk + j0) * HS, nk, HS);
    __syncthreads();
    A dp[kRW], dot[kRW];
    AIM_UNROLL
    for (int r = 0; r < kRW; ++r) dp[r] = dot[r] = A(0);
    const T* ll = kv + lane * ld;
    AIM_ATTN_UNROLL_HS
    for (int64_t d = 0; d < HS; ++d) {  // dp = do.v
      const A vd = to_acc<A>(ll[d]);
      AIM_UNROLL
      for (int r = 0; r < kRW; ++r) dp[r] += to_acc<A>(dr[min(i0 + r, Tq - 1) * HS + d]) * vd;
    }
    __syncthreads();  // every warp is done with V
    stage_tile(kv, k + (bh * Tk + j0) * HS, nk, HS);
    __syncthreads();
    AIM_ATTN_UNROLL_HS
    for (int64_t d = 0; d < HS; ++d) {  // s = q.k
      const A kd = to_acc<A>(ll[d]);
      AIM_UNROLL
      for (int r = 0; r < kRW; ++r) dot[r] += to_acc<A>(qr[min(i0 + r, Tq - 1) * HS + d]) * kd;
    }
    AIM_UNROLL
    for (int r = 0; r < kRW; ++r) {
      const int64_t i = i0 + r;
      const bool ok = i < Tq && j < Tk && g.visible(i, j) && Li[r] != neg_inf<A>();
      A s = neg_inf<A>();
      if (ok) s = dot[r] * scale + mask_value<A>(p.mask32, maskt, g, b, h, i, j);
      const A pv = s == neg_inf<A>() ? A(0) : exp_a(s - Li[r]);
      const A z = g.dropout() && pv != A(0) ? (g.kept(bh, i, j) ? kept : A(0)) : A(1);
      dss[(warp * kRW + r) * kTile + lane] = pv * (dp[r] * z - Di[r]);
    }
    __syncthreads();
    AIM_ATTN_ROLLED
    for (int jj = 0; jj < nk; ++jj) {  // dq += ds k
      A kd[kDC];
      AIM_UNROLL
      for (int c = 0; c < kDC; ++c) {
        const int64_t d = lane + c * kWarpSize;
        kd[c] = d < HS ? to_acc<A>(kv[jj * ld + d]) : A(0);
      }
      AIM_UNROLL
      for (int r = 0; r < kRW; ++r) {
        const A w = dss[(warp * kRW + r) * kTile + jj];
        AIM_UNROLL
        for (int c = 0; c < kDC; ++c) dqa[r][c] += w * kd[c];
      }
    }
    __syncthreads();  // before the next V tile overwrites K and ds
  }
  AIM_UNROLL
  for (int r = 0; r < kRW; ++r) {
    const int64_t i = i0 + r;
    if (i >= Tq) continue;
    AIM_UNROLL
    for (int c = 0; c < kDC; ++c) {
      const int64_t d = lane + c * kWarpSize;
      if (d < HS) dq[(bh * Tq + i) * HS + d] = from_acc<T>(dqa[r][c] * scale);
    }
  }
}

// ---- launchers ----------------------------------------------------------------------------------

// Calls f(std::integral_constant<int, kDC>) for kDC = ceil(HS / 32) in 1..4.
template <class F>
void with_dc(int64_t HS, F&& f) {
  switch (HS <= 32 ? 1 : HS <= 64 ? 2 : HS <= 96 ? 3 : 4) {
    case 1:
      f(std::integral_constant<int, 1>());
      break;
    case 2:
      f(std::integral_constant<int, 2>());
      break;
    case 3:
      f(std::integral_constant<int, 3>());
      break;
    default:
      f(std::integral_constant<int, 4>());
      break;
  }
}

std::string flash_supports(const Tensor& q) {
  if (q.dim() == 4 && q.size(3) > kMaxHS)
    return str("needs HS <= ", kMaxHS, " (", kMaxHS / kWarpSize,
               " head dimensions per lane), got HS = ", q.size(3));
  return "";
}

void check_grid(const AttentionGeometry& g, int64_t tiles, const char* who) {
  AIM_CHECK(g.B * g.NH < (int64_t(1) << 31), who, " B NH = ", g.B * g.NH, " exceeds the grid");
  AIM_CHECK(tiles <= 65535, who, " ", tiles, " tiles exceed the grid's y dimension");
}

template <class T>
void fwd_launch(const AttentionFwdArgs& a, const AttentionGeometry& g, const char* who) {
  using A = typename Acc<T>::type;
  constexpr int RW = rows_per_warp<T>(), BQ = kWarps * RW;
  const int64_t tiles = ceil_div(g.Tq, BQ);
  check_grid(g, tiles, who);
  const size_t smem = size_t(BQ) * kTile * sizeof(A) + size_t(kTile) * (g.HS + 1) * sizeof(T);
  AIM_CHECK(smem <= kSmemLimit, who, " internal: ", smem, " bytes of shared memory");
  const float* m32 = g.has_mask && g.mask_f32 ? a.mask.data<float>() : nullptr;
  const T* mt = g.has_mask && !g.mask_f32 ? a.mask.data<T>() : nullptr;
  float* l32 = g.lse_f64 ? nullptr : a.lse.data<float>();
  double* l64 = g.lse_f64 ? a.lse.data<double>() : nullptr;
  const dim3 grid(unsigned(g.B * g.NH), unsigned(tiles));
  with_dc(g.HS, [&](auto dc) {
    AIM_LAUNCH(grid, kThreads, smem, stream_for(a.q.device()),
               attention_fwd_kernel<T, RW, decltype(dc)::value>)
    (a.q.data<T>(), a.k.data<T>(), a.v.data<T>(), m32, mt, a.o.data<T>(), l32, l64, g);
  });
  AIM_CHECK_LAUNCH();
}

template <class T>
void bwd_launch(const AttentionBwdArgs& a, const AttentionGeometry& g, const char* who) {
  using A = typename Acc<T>::type;
  constexpr int RW = rows_per_warp<T>(), BT = kWarps * RW;
  const int64_t qtiles = ceil_div(g.Tq, BT), ktiles = ceil_div(g.Tk, BT);
  check_grid(g, std::max(qtiles, ktiles), who);
  const Device dev = a.q.device();
  const auto stream = stream_for(dev);
  const int64_t rows = g.B * g.NH * g.Tq;
  const Tensor Dt = Tensor::empty({rows}, dtype_of<A>(), dev);
  A* D = Dt.data<A>();
  AIM_LAUNCH(unsigned(ceil_div(rows, kWarps)), kThreads, 0, stream, attention_bwd_dot_kernel<T>)
  (a.dout.data<T>(), a.o.data<T>(), D, rows, g.HS);
  AIM_CHECK_LAUNCH();
  const BwdPtrs p{g.has_mask && g.mask_f32 ? a.mask.data<float>() : nullptr,
                  g.lse_f64 ? nullptr : a.lse.data<float>(),
                  g.lse_f64 ? a.lse.data<double>() : nullptr};
  const T* mt = g.has_mask && !g.mask_f32 ? a.mask.data<T>() : nullptr;
  const size_t tile_bytes = size_t(kTile) * (g.HS + 1) * sizeof(T);
  const size_t pair_bytes = 2 * size_t(BT) * kTile * sizeof(A);
  const bool two_tiles = pair_bytes + 2 * tile_bytes <= kSmemLimit;
  const size_t smem_kv = pair_bytes + (two_tiles ? 2 : 1) * tile_bytes;
  const size_t smem_q = size_t(BT) * kTile * sizeof(A) + tile_bytes;
  AIM_CHECK(smem_kv <= kSmemLimit && smem_q <= kSmemLimit, who, " internal: ", smem_kv, " / ",
            smem_q, " bytes of shared memory");
  with_dc(g.HS, [&](auto dc) {
    constexpr int DC = decltype(dc)::value;
    if (ktiles > 0) {
      AIM_LAUNCH(dim3(unsigned(g.B * g.NH), unsigned(ktiles)), kThreads, smem_kv, stream,
                 attention_bwd_dkdv_kernel<T, RW, DC>)
      (a.dout.data<T>(), a.q.data<T>(), a.k.data<T>(), a.v.data<T>(), mt, D, a.dk.data<T>(),
       a.dv.data<T>(), p, g, two_tiles);
      AIM_CHECK_LAUNCH();
    }
    AIM_LAUNCH(dim3(unsigned(g.B * g.NH), unsigned(qtiles)), kThreads, smem_q, stream,
               attention_bwd_dq_kernel<T, RW, DC>)
    (a.dout.data<T>(), a.q.data<T>(), a.k.data<T>(), a.v.data<T>(), mt, D, a.dq.data<T>(), p, g);
    AIM_CHECK_LAUNCH();
  });
}

void fwd_flash(const AttentionFwdArgs& a) {
  const char* who = "[attention_fwd] cuda.flash";
  const AttentionGeometry g = attention_geometry(a, who);
  const std::string why = flash_supports(a.q);
  AIM_CHECK(why.empty(), who, " ", why);
  if (g.B * g.NH * g.Tq == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.q.dtype(), T, fwd_launch<T>(a, g, who));
}

void bwd_flash(const AttentionBwdArgs& a) {
  const char* who = "[attention_bwd] cuda.flash";
  const AttentionGeometry g = attention_bwd_geometry(a, who);
  const std::string why = flash_supports(a.q);
  AIM_CHECK(why.empty(), who, " ", why);
  if (g.B * g.NH == 0) return;
  if (g.Tq == 0) {  // no query: no gradient reaches k and v
    memset_zero(a.dk.raw_data(), size_t(a.dk.nbytes()), a.dk.device());
    memset_zero(a.dv.raw_data(), size_t(a.dv.nbytes()), a.dv.device());
    return;
  }
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.q.dtype(), T, bwd_launch<T>(a, g, who));
}

}  // namespace

void register_attention_tc_cuda(Registry& r);  // attention_cuda_tc.cu: cuda.flash_tc

void register_attention_cuda(Registry& r) {
  const std::vector<DType> floats{DType::f32, DType::f64, DType::f16, DType::bf16};
  auto& f = r.op<AttentionFwdArgs>("attention_fwd");
  f.add({"cuda.flash", AIM_CUDA_BACKEND, Provider::Own, fwd_flash, floats,
         [](const AttentionFwdArgs& a) { return flash_supports(a.q); }});
  f.set_default(AIM_CUDA_BACKEND, "cuda.flash");
  auto& b = r.op<AttentionBwdArgs>("attention_bwd");
  b.add({"cuda.flash", AIM_CUDA_BACKEND, Provider::Own, bwd_flash, floats,
         [](const AttentionBwdArgs& a) { return flash_supports(a.q); }});
  b.set_default(AIM_CUDA_BACKEND, "cuda.flash");
  register_attention_tc_cuda(r);
}

}  // namespace aim::kernels::AIM_CUDA_NS
