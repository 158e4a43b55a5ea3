// cuda.implicit_gemm_tc (fwd, bwd_data, bwd_filter; f16 and bf16): the implicit GEMM of
//   cuda.implicit_gemm (same three GEMMs per group, operands gathered from x/w/dy on the fly, see
//   conv2d_cuda.cu and kernels/conv/README.md) with the inner product on tensor cores.
//     fwd         y  [K/G, N*P*Q]   = w [K/G, C/G*R*S] . im2col(x) [C/G*R*S, N*P*Q]   (+ bias)
//     bwd_data    dx [C/G, N*H*W]   = w^T [C/G, K/G*R*S] . gather(dy) [K/G*R*S, N*H*W]
//     bwd_filter  dw [K/G, C/G*R*S] += dy [K/G, N*P*Q] . im2col(x)^T [N*P*Q, C/G*R*S]
//   Thread mapping: 256 threads (8 warps, 2 x 4) per 128x128 output tile, reduction in steps of
//   32 through two shared tiles A [128][32] and B [128][32] (16-bit, k contiguous, rows padded to
//   40 elements: the fragment reads below hit 32 distinct banks). Each warp owns a 64x32 warp
//   tile = 4 x 4 m16n8 blocks; per 16-wide k slice it reads its A/B fragments from shared memory
//   with 32-bit loads and issues 16 `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}` (fp32
//   accumulators, 64 per thread). Gather: thread t loads A row t%128 and B column t%128 for the
//   16 consecutive k indices (t/128)*16 .. +15 of the step; the k index is decoded with divisions
//   once per step and then advanced with carries (no division per element), and the 32 values
//   are held in registers as packed pairs while the tensor cores work on the previous step
//   (register prefetch; one shared buffer, two barriers per step). Warp lanes take consecutive
//   B columns, so the x/dy loads of a warp are consecutive pixels (coalesced for stride 1).
//   Epilogue: each thread stores its accumulator fragment (rows g, g+8 of each m16 block, columns
//   2t, 2t+1 of each n8 block; g = lane/4, t = lane%4), rounded once to f16/bf16, bias added in
//   fp32 (fwd); no shared-memory staging, so the stores are 4-byte runs per lane.
//   bwd_filter: the N*P*Q reduction is split into chunks for parallelism, each split writing an
//   fp32 partial tile into a scratch [splits, K, C/G*R*S]; a second kernel adds the splits in
//   order into dw (+=, one rounding): deterministic, no atomics. dbias: one 256-thread block per
//   output channel, fixed-order block reduction, += into dbias.
//   Memory traffic: as cuda.implicit_gemm with 128-wide tiles (every operand element read once
//   per 128 columns/rows of the other operand, through L1/L2); y/dx written once.
//   Expected bound: the gather (address arithmetic, bounds tests, 2-byte loads) rather than the
//   tensor cores: no cp.async, no ldmatrix, no vector loads (the gathered rows are not aligned).
//   Large tensors: 32-bit offsets; the launchers run the batch in chunks of whole images whose
//   slices stay under 2^31 elements (conv2d.h: conv2d_images_per_chunk; bwd_filter's chunks
//   write their partials into one scratch, added into dw at once).
//   Limits: f16 and bf16 only (fp32 accumulation; f32/f64 take cuda.implicit_gemm); w and one
//   image of x and of y under 2^31 elements; groups <= 65535; small K/G or C/G (depthwise) waste
//   most of a 128-row tile; stride > 1 in bwd_data multiplies the gather by stride_h*stride_w
//   (zeros skipped by a test); the output stores are not coalesced.
//   Two paths, one decomposition: on sm_80+ (`__CUDA_ARCH__ >= 800`) the warp tile product is the
//   mma.sync above; otherwise (older GPUs and the SIMT emulator, where `__CUDA_ARCH__` is
//   undefined) each lane computes the same accumulator elements it would own after the mma, with
//   scalar fp32 FMAs from the same shared tiles. The emulator therefore checks the tiling, the
//   gathers, the boundaries, the split reduction and the epilogue; the mma instructions and their
//   fragment loads are checked only on a GPU (tools/gpu-check.sh runs aim_kernel_tests there, and
//   aim_unit_tests' Conv2d.ImplicitGemmTcSeveralTilesOnGpu with several 128-row tiles per group).
#include <algorithm>
#include <cstdint>

#include "kernels/conv/conv2d.h"
#include "kernels/conv/implicit_gemm_geometry.cuh"
#include "kernels/cuda_common.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kBM = 128, kBN = 128, kBK = 32, kThreads = 256;
constexpr int kLdw = (kBK + 8) / 2;      // 32-bit words per shared row: 32 elements + 8 of padding
constexpr int kWarpM = 64, kWarpN = 32;  // warp tile; the 8 warps are 2 (m) x 4 (n)
constexpr int kMI = kWarpM / 16, kNI = kWarpN / 8;
constexpr int kPerThread = kBK * kBM / kThreads;  // consecutive k values one thread gathers: 16
static_assert(kBM == kBN && kThreads == 2 * kBM && kPerThread == 16, "loader mapping");
static_assert((kBM / kWarpM) * (kBN / kWarpN) * kWarpSize == kThreads, "warp layout");

// 16-bit element bits -> float (f16 through the toolkit's conversion, bf16 is the high half).
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

// ---- problems: how each direction gathers its GEMM operands --------------------------------
// Loads work on the raw 16-bit patterns (0 is +0 in f16 and bf16). A problem gives the GEMM
// extents per group (m rows, cols columns, red reduction), a per-row context for A and a
// per-column context for B (decoded once per thread), a cursor over consecutive k indices
// (set() decodes with divisions, next() advances by one with carries), the loads at a cursor
// (0 outside the tensors) and the store of one finished fp32 output.

struct FwdProblem {   // A = w rows (output channels), B = im2col(x) columns (output pixels)
  const uint16_t* x;  // [N, C, H, W]
  const uint16_t* w;  // [K, C/G, R, S]
  Geo d;
  __host__ __device__ int m() const { return d.Kg; }
  __host__ __device__ int cols() const { return d.N * d.P * d.Q; }
  __host__ __device__ int red() const { return d.Cg * d.R * d.S; }
  struct Row {
    int base;
    bool ok;
  };
  __device__ Row a_row(int g, int k) const {
    return k < d.Kg ? Row{(g * d.Kg + k) * red(), true} : Row{0, false};
  }
  struct ACur {
    int off;
  };
  __device__ void a_set(const Row& r, int kk, ACur& c) const { c.off = r.base + kk; }
  __device__ void a_next(ACur& c) const { ++c.off; }
  __device__ uint16_t a_load(const Row&, const ACur& c) const { return w[c.off]; }
  using Col = FwdCol<int>;
  __device__ Col b_col(int g, int col) const { return fwd_col<int>(d, g, col); }
  struct BCur {
    int choff, r, s, roff, soff;  // kk = (ch, r, s); choff = ch*H*W, roff = r*dh, soff = s*dw
  };
  __device__ void b_set(const Col&, int kk, BCur& c) const {
    const int RS = d.R * d.S, ch = kk / RS, rs = kk - ch * RS;
    c.r = rs / d.S;
    c.s = rs - c.r * d.S;
    c.choff = ch * d.H * d.W;
    c.roff = c.r * d.dh;
    c.soff = c.s * d.dw;
  }
  __device__ void b_next(BCur& c) const {
    c.soff += d.dw;
    if (++c.s == d.S) {
      c.s = c.soff = 0;
      c.roff += d.dh;
      if (++c.r == d.R) {
        c.r = c.roff = 0;
        c.choff += d.H * d.W;
      }
    }
  }
  __device__ uint16_t b_load(const Col& col, const BCur& c) const {
    const int ih = col.ih0 + c.roff, iw = col.iw0 + c.soff;
    if (ih < 0 || ih >= d.H || iw < 0 || iw >= d.W) return 0;
    return x[col.base + c.choff + ih * d.W + iw];
  }
};

struct BwdDataProblem {  // A = w^T rows (input channels), B = gather(dy) columns (input pixels)
  const uint16_t* dy;    // [N, K, P, Q]
  const uint16_t* w;     // [K, C/G, R, S]
  Geo d;
  __host__ __device__ int m() const { return d.Cg; }
  __host__ __device__ int cols() const { return d.N * d.H * d.W; }
  __host__ __device__ int red() const { return d.Kg * d.R * d.S; }
  struct Row {
    int base;
    bool ok;
  };
  __device__ Row a_row(int g, int c) const {
    return c < d.Cg ? Row{(g * d.Kg * d.Cg + c) * d.R * d.S, true} : Row{0, false};
  }
  struct ACur {
    int off, rs;  // kk = (k, rs): w[g*Kg + k, c, rs] at base + k*Cg*RS + rs
  };
  __device__ void a_set(const Row& r, int kk, ACur& c) const {
    const int RS = d.R * d.S, k = kk / RS;
    c.rs = kk - k * RS;
    c.off = r.base + k * d.Cg * RS + c.rs;
  }
  __device__ void a_next(ACur& c) const {
    ++c.off;
    if (++c.rs == d.R * d.S) {
      c.rs = 0;
      c.off += (d.Cg - 1) * d.R * d.S;
    }
  }
  __device__ uint16_t a_load(const Row&, const ACur& c) const { return w[c.off]; }
  using Col = BwdDataCol<int>;
  __device__ Col b_col(int g, int col) const { return bwd_data_col<int>(d, g, col); }
  struct BCur {
    int koff, r, s, roff, soff;  // kk = (k, r, s); koff = k*P*Q, roff = r*dh, soff = s*dw
  };
  __device__ void b_set(const Col&, int kk, BCur& c) const {
    const int RS = d.R * d.S, k = kk / RS, rs = kk - k * RS;
    c.r = rs / d.S;
    c.s = rs - c.r * d.S;
    c.koff = k * d.P * d.Q;
    c.roff = c.r * d.dh;
    c.soff = c.s * d.dw;
  }
  __device__ void b_next(BCur& c) const {
    c.soff += d.dw;
    if (++c.s == d.S) {
      c.s = c.soff = 0;
      c.roff += d.dh;
      if (++c.r == d.R) {
        c.r = c.roff = 0;
        c.koff += d.P * d.Q;
      }
    }
  }
  // dx[h, w] takes dy[p, q] where h + pad - r*dil = p*stride (and w likewise).
  __device__ uint16_t b_load(const Col& col, const BCur& c) const {
    const int ph = col.ph0 - c.roff, pw = col.pw0 - c.soff;
    if (ph < 0 || pw < 0) return 0;
    int p = ph, q = pw;
    if (d.sh != 1) {
      p = ph / d.sh;
      if (p * d.sh != ph) return 0;
    }
    if (d.sw != 1) {
      q = pw / d.sw;
      if (q * d.sw != pw) return 0;
    }
    if (p >= d.P || q >= d.Q) return 0;
    return dy[col.base + c.koff + p * d.Q + q];
  }
};

struct BwdFilterProblem {  // A = dy rows (output channels), B = im2col(x)^T columns (taps)
  const uint16_t* dy;      // [N, K, P, Q]
  const uint16_t* x;       // [N, C, H, W]
  Geo d;
  __host__ __device__ int m() const { return d.Kg; }
  __host__ __device__ int cols() const { return d.Cg * d.R * d.S; }
  __host__ __device__ int red() const { return d.N * d.P * d.Q; }
  struct Row {
    int base;
    bool ok;
  };
  __device__ Row a_row(int g, int k) const {
    return k < d.Kg ? Row{(g * d.Kg + k) * d.P * d.Q, true} : Row{0, false};
  }
  struct ACur {
    int off, pq;  // kk = (n, pq): dy[n, g*Kg + k, pq] at n*K*PQ + base + pq
  };
  __device__ void a_set(const Row& r, int kk, ACur& c) const {
    const int PQ = d.P * d.Q, n = kk / PQ;
    c.pq = kk - n * PQ;
    c.off = n * d.K * PQ + r.base + c.pq;
  }
  __device__ void a_next(ACur& c) const {
    ++c.off;
    if (++c.pq == d.P * d.Q) {
      c.pq = 0;
      c.off += (d.K - 1) * d.P * d.Q;
    }
  }
  __device__ uint16_t a_load(const Row&, const ACur& c) const { return dy[c.off]; }
  using Col = BwdFilterCol<int>;
  __device__ Col b_col(int g, int col) const { return bwd_filter_col<int>(d, g, col); }
  struct BCur {
    int noff, p, q, ihp, iwq;  // kk = (n, p, q); noff = n*C*H*W, ihp = p*sh, iwq = q*sw
  };
  __device__ void b_set(const Col&, int kk, BCur& c) const {
    const int PQ = d.P * d.Q, n = kk / PQ, pq = kk - n * PQ;
    c.p = pq / d.Q;
    c.q = pq - c.p * d.Q;
    c.noff = n * d.C * d.H * d.W;
    c.ihp = c.p * d.sh;
    c.iwq = c.q * d.sw;
  }
  __device__ void b_next(BCur& c) const {
    c.iwq += d.sw;
    if (++c.q == d.Q) {
      c.q = c.iwq = 0;
      c.ihp += d.sh;
      if (++c.p == d.P) {
        c.p = c.ihp = 0;
        c.noff += d.C * d.H * d.W;
      }
    }
  }
  __device__ uint16_t b_load(const Col& col, const BCur& c) const {
    const int ih = c.ihp + col.roff, iw = c.iwq + col.soff;
    if (ih < 0 || ih >= d.H || iw < 0 || iw >= d.W) return 0;
    return x[c.noff + col.base + ih * d.W + iw];
  }
};

// ---- stores of the finished fp32 outputs --------------------------------------------------
// col_off(n): the part of an output's offset that depends on its column (decoded once per
// column); put(): adds the row's part and stores output (m, n) of group g, rounded once.

template <class T>
struct FwdStore {
  const T* bias;      // [K] or null
  T* y;               // [N, K, P, Q]
  const T* residual;  // like y, or null: added before relu
  bool relu;          // epilogue: y = relu(conv + bias + residual)
  __device__ int col_off(const Geo& d, int col) const {  // col = (n, pq): n*K*PQ + pq
    const int PQ = d.P * d.Q, n = col / PQ;
    return n * d.K * PQ + (col - n * PQ);
  }
  __device__ void put(const Geo& d, int g, int, int k, int co, float v) const {
    const int kg = g * d.Kg + k;
    if (bias) v += to_f32(bias[kg]);
    if (residual) v += to_f32(residual[co + kg * d.P * d.Q]);
    if (relu && v < 0.0f) v = 0.0f;  // NaN stays NaN
    y[co + kg * d.P * d.Q] = from_f32<T>(v);
  }
};

template <class T>
struct BwdDataStore {
  T* dx;                                                 // [N, C, H, W]
  __device__ int col_off(const Geo& d, int col) const {  // col = (n, hw): n*C*HW + hw
    const int HW = d.H * d.W, n = col / HW;
    return n * d.C * HW + (col - n * HW);
  }
  __device__ void put(const Geo& d, int g, int, int c, int co, float v) const {
    dx[co + (g * d.Cg + c) * d.H * d.W] = from_f32<T>(v);
  }
};

struct PartialStore {
  float* part;  // [splits, K, C/G*R*S]
  __device__ int col_off(const Geo&, int col) const { return col; }
  __device__ void put(const Geo& d, int g, int split, int k, int co, float v) const {
    part[(int64_t(split) * d.K + g * d.Kg + k) * (d.Cg * d.R * d.S) + co] = v;
  }
};

// ---- the kernels --------------------------------------------------------------------------

// The 16 values of A row `row` (or B column) at k indices kk0 .. kk0+15, packed in pairs (the
// lower k in the low half), 0 outside [kk0, k_end) and outside the tensors.
template <class Problem>
__device__ __forceinline__ void gather_a(const Problem& pr, const typename Problem::Row& row,
                                         int kk0, int k_end, uint32_t (&v)[kPerThread / 2]) {
  for (int i = 0; i < kPerThread / 2; ++i) v[i] = 0;
  if (!row.ok || kk0 >= k_end) return;
  typename Problem::ACur c;
  pr.a_set(row, kk0, c);
  AIM_UNROLL
  for (int i = 0; i < kPerThread; ++i) {
    if (kk0 + i < k_end) v[i / 2] |= uint32_t(pr.a_load(row, c)) << (16 * (i % 2));
    pr.a_next(c);
  }
}
template <class Problem>
__device__ __forceinline__ void gather_b(const Problem& pr, const typename Problem::Col& col,
                                         int kk0, int k_end, uint32_t (&v)[kPerThread / 2]) {
  for (int i = 0; i < kPerThread / 2; ++i) v[i] = 0;
  if (!col.ok || kk0 >= k_end) return;
  typename Problem::BCur c;
  pr.b_set(col, kk0, c);
  AIM_UNROLL
  for (int i = 0; i < kPerThread; ++i) {
    if (kk0 + i < k_end) v[i / 2] |= uint32_t(pr.b_load(col, c)) << (16 * (i % 2));
    pr.b_next(c);
  }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// d (16x8, fp32) += a (16x16, row-major) . b (16x8, column-major); fragments as in the PTX ISA
// ("Matrix Fragments for mma.m16n8k16 with floating point type").
template <class T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}
#endif

// acc += the warp tile's product over one 16-wide k slice (word offset kw = k/2 in each row).
// as/bs: the shared tiles [128][kLdw] of 32-bit words (k pairs); rows of the warp tile start at
// wm (A) and wn (B). Lane = 4g + t owns, of m16n8 block (mi, ni), the elements
// acc[mi][ni][2h + j] = C[wm + 16mi + g + 8h][wn + 8ni + 2t + j] (the mma accumulator layout).
template <class T>
__device__ __forceinline__ void warp_tile_product(const uint32_t* as, const uint32_t* bs, int wm,
                                                  int wn, int kw, int lane,
                                                  float (&acc)[kMI][kNI][4]) {
  const int g = lane / 4, t = lane % 4;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t af[kMI][4], bf[kNI][2];
  AIM_UNROLL
  for (int mi = 0; mi < kMI; ++mi) {
    const uint32_t* p = as + (wm + 16 * mi + g) * kLdw + kw + t;
    af[mi][0] = p[0];             // rows g,   k 2t, 2t+1
    af[mi][1] = p[8 * kLdw];      // rows g+8, k 2t, 2t+1
    af[mi][2] = p[4];             // rows g,   k 2t+8, 2t+9
    af[mi][3] = p[8 * kLdw + 4];  // rows g+8, k 2t+8, 2t+9
  }
  AIM_UNROLL
  for (int ni = 0; ni < kNI; ++ni) {
    const uint32_t* p = bs + (wn + 8 * ni + g) * kLdw + kw + t;
    bf[ni][0] = p[0];  // column g, k 2t, 2t+1
    bf[ni][1] = p[4];  // column g, k 2t+8, 2t+9
  }
  AIM_UNROLL
  for (int mi = 0; mi < kMI; ++mi) {
    AIM_UNROLL
    for (int ni = 0; ni < kNI; ++ni) mma_m16n8k16<T>(acc[mi][ni], af[mi], bf[ni]);
  }
#else
  // The same elements by scalar fp32 FMAs, k in increasing order (a tensor core's order within
  // the 16 is unspecified; the sums differ only by rounding).
  for (int kp = 0; kp < 8; ++kp) {
    float a[kMI][2][2], b[kNI][2][2];  // [block][h or j][k of the pair]
    for (int mi = 0; mi < kMI; ++mi)
      for (int h = 0; h < 2; ++h) {
        const uint32_t u = as[(wm + 16 * mi + g + 8 * h) * kLdw + kw + kp];
        a[mi][h][0] = bits_to_f32<T>(u & 0xffffu);
        a[mi][h][1] = bits_to_f32<T>(u >> 16);
      }
    for (int ni = 0; ni < kNI; ++ni)
      for (int j = 0; j < 2; ++j) {
        const uint32_t u = bs[(wn + 8 * ni + 2 * t + j) * kLdw + kw + kp];
        b[ni][j][0] = bits_to_f32<T>(u & 0xffffu);
        b[ni][j][1] = bits_to_f32<T>(u >> 16);
      }
    for (int e = 0; e < 2; ++e)
      for (int mi = 0; mi < kMI; ++mi)
        for (int ni = 0; ni < kNI; ++ni)
          for (int h = 0; h < 2; ++h)
            for (int j = 0; j < 2; ++j)
              acc[mi][ni][2 * h + j] = fmaf(a[mi][h][e], b[ni][j][e], acc[mi][ni][2 * h + j]);
  }
#endif
}

// One 128x128 tile of group blockIdx.z / splits, reduction chunk number blockIdx.z % splits.
template <class T, class Problem, class Store>
__global__ void __launch_bounds__(kThreads)
    implicit_gemm_tc_kernel(Problem pr, Store store, int splits, int chunk) {
  __shared__ uint4 as4[kBM * kLdw / 4];  // A [128][32 + 8 padding] 16-bit, k contiguous
  __shared__ uint4 bs4[kBN * kLdw / 4];  // B [128][32 + 8], stored column by column
  const uint32_t* as = reinterpret_cast<const uint32_t*>(as4);
  const uint32_t* bs = reinterpret_cast<const uint32_t*>(bs4);
  const int tid = threadIdx.x, lane = tid % kWarpSize, warp = tid / kWarpSize;
  const int g = int(blockIdx.z) / splits, split = int(blockIdx.z) % splits;
  const int m0 = int(blockIdx.y) * kBM, n0 = int(blockIdx.x) * kBN;
  const int k_begin = split * chunk, k_end = min(pr.red(), k_begin + chunk);
  // Loader: row/column t%128 of the tiles, k offsets (t/128)*16 .. +15 of each step.
  const int ld = tid % kBM, ld_k = (tid / kBM) * kPerThread;
  const typename Problem::Row row = pr.a_row(g, m0 + ld);
  const typename Problem::Col col = pr.b_col(g, n0 + ld);
  uint4* a_dst = as4 + (ld * kLdw + ld_k / 2) / 4;  // 16-byte aligned: kLdw = 20 words
  uint4* b_dst = bs4 + (ld * kLdw + ld_k / 2) / 4;
  const int wm = (warp / (kBN / kWarpN)) * kWarpM, wn = (warp % (kBN / kWarpN)) * kWarpN;
  // Every loop over acc is unrolled: with constant indices the 64 accumulators stay in registers.
  float acc[kMI][kNI][4];
  AIM_UNROLL
  for (int mi = 0; mi < kMI; ++mi) {
    AIM_UNROLL
    for (int ni = 0; ni < kNI; ++ni) {
      AIM_UNROLL
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.f;
    }
  }
  uint32_t va[kPerThread / 2], vb[kPerThread / 2];
  gather_a(pr, row, k_begin + ld_k, k_end, va);
  gather_b(pr, col, k_begin + ld_k, k_end, vb);
  for (int k0 = k_begin; k0 < k_end; k0 += kBK) {
    a_dst[0] = make_uint4(va[0], va[1], va[2], va[3]);
    a_dst[1] = make_uint4(va[4], va[5], va[6], va[7]);
    b_dst[0] = make_uint4(vb[0], vb[1], vb[2], vb[3]);
    b_dst[1] = make_uint4(vb[4], vb[5], vb[6], vb[7]);
    __syncthreads();
    if (k0 + kBK < k_end) {  // the next step's loads are in flight while the tensor cores work
      gather_a(pr, row, k0 + kBK + ld_k, k_end, va);
      gather_b(pr, col, k0 + kBK + ld_k, k_end, vb);
    }
    AIM_UNROLL
    for (int ks = 0; ks < kBK; ks += 16) warp_tile_product<T>(as, bs, wm, wn, ks / 2, lane, acc);
    __syncthreads();  // the next stores overwrite the tiles
  }
  // Epilogue: this lane's fragment, rows wm + 16mi + lane/4 + 8h, columns wn + 8ni + 2(lane%4) + j.
  const int gq = lane / 4, t = lane % 4;
  AIM_UNROLL
  for (int ni = 0; ni < kNI; ++ni) {
    AIM_UNROLL
    for (int j = 0; j < 2; ++j) {
      const int n = n0 + wn + 8 * ni + 2 * t + j;
      if (n >= pr.cols()) continue;
      const int co = store.col_off(pr.d, n);
      AIM_UNROLL
      for (int mi = 0; mi < kMI; ++mi) {
        AIM_UNROLL
        for (int h = 0; h < 2; ++h) {
          const int m = m0 + wm + 16 * mi + gq + 8 * h;
          if (m < pr.m()) store.put(pr.d, g, split, m, co, acc[mi][ni][2 * h + j]);
        }
      }
    }
  }
}

// dw [n] += the splits' partials [splits, n], summed in split order, rounded once.
template <class T>
__global__ void add_splits_kernel(const float* part, T* dw, int splits, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float s = 0.f;
    for (int sp = 0; sp < splits; ++sp) s += part[int64_t(sp) * n + i];
    dw[i] = from_f32<T>(to_f32(dw[i]) + s);
  }
}

// dbias [k] += sum over n, pq of dy [N, K, PQ]; one block per k.
template <class T>
__global__ void bias_grad_kernel(const T* dy, T* dbias, int N, int K, int64_t PQ) {
  __shared__ float scratch[kWarpSize];
  const int k = blockIdx.x;
  float s = 0.f;
  for (int n = 0; n < N; ++n) {
    const T* r = dy + (int64_t(n) * K + k) * PQ;
    for (int64_t i = threadIdx.x; i < PQ; i += blockDim.x) s += to_f32(r[i]);
  }
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) dbias[k] = from_f32<T>(to_f32(dbias[k]) + s);
}

template <class T, class Problem, class Store>
void launch_gemm(const Problem& pr, const Store& store, int G, int splits, int chunk, Device dev) {
  const dim3 grid(unsigned(ceil_div(pr.cols(), kBN)), unsigned(ceil_div(pr.m(), kBM)),
                  unsigned(G * splits));
  AIM_LAUNCH(grid, kThreads, 0, stream_for(dev), implicit_gemm_tc_kernel<T, Problem, Store>)
  (pr, store, splits, chunk);
  AIM_CHECK_LAUNCH();
}

// ---- entry points -------------------------------------------------------------------------

std::string tc_supports(DType t, int64_t groups, const Tensor& xs, const Tensor& w,
                        const Tensor& ys) {
  if (t != DType::f16 && t != DType::bf16)
    return str("needs f16 or bf16 (tensor-core inputs), got ", dtype_name(t));
  if (groups > 65535) return str("needs groups <= 65535 (grid z), got ", groups);
  return conv2d_chunk_reason(xs, w, ys);
}

std::string tc_supports_fwd(const Conv2dFwdArgs& a) {
  check_conv2d_fwd_args(a);
  if (std::string why = conv2d_fwd_plain_reason(a); !why.empty()) return why;
  return tc_supports(a.x.dtype(), a.p.groups, a.x, a.w, a.y);
}
std::string tc_supports_bwd_data(const Conv2dBwdDataArgs& a) {
  check_conv2d_bwd_data_args(a);
  return tc_supports(a.dy.dtype(), a.p.groups, a.dx, a.w, a.dy);
}
std::string tc_supports_bwd_filter(const Conv2dBwdFilterArgs& a) {
  check_conv2d_bwd_filter_args(a);
  return tc_supports(a.x.dtype(), a.p.groups, a.x, a.dw, a.dy);
}

const uint16_t* bits(const Tensor& t) { return static_cast<const uint16_t*>(t.raw_data()); }

// Binds T to __half or __nv_bfloat16 (the supports check has excluded every other dtype).
#define AIM_DISPATCH_TC_TYPES(dtype, T, ...)                                 \
  do {                                                                       \
    switch (dtype) {                                                         \
      AIM_CUDA_TYPE_CASE_(::aim::DType::f16, __half, T, __VA_ARGS__)         \
      AIM_CUDA_TYPE_CASE_(::aim::DType::bf16, __nv_bfloat16, T, __VA_ARGS__) \
      default:                                                               \
        AIM_FAIL("cuda.implicit_gemm_tc: dtype ", ::aim::dtype_name(dtype),  \
                 " is not "                                                  \
                 "f16 or bf16");                                             \
    }                                                                        \
  } while (0)

void conv2d_fwd_cuda_implicit_gemm_tc(const Conv2dFwdArgs& a) {
  const std::string why = tc_supports_fwd(a);
  AIM_CHECK(why.empty(), "[conv2d_fwd] cuda.implicit_gemm_tc ", why);
  if (a.y.numel() == 0) return;
  const Geo d = make_geo(a.x, a.w, a.y, a.p);
  const int64_t nb = conv2d_images_per_chunk(a.x, a.y), xs = per_image(a.x), ys = per_image(a.y);
  AIM_DISPATCH_TC_TYPES(a.x.dtype(), T, {
    for (int64_t n0 = 0; n0 < d.N; n0 += nb) {  // chunks of images (conv2d.h)
      FwdProblem pr{bits(a.x) + n0 * xs, bits(a.w), d};
      pr.d.N = int(std::min<int64_t>(nb, d.N - n0));
      FwdStore<T> st{
          a.bias.defined() ? static_cast<const T*>(a.bias.raw_data()) : nullptr,
          static_cast<T*>(a.y.raw_data()) + n0 * ys,
          a.residual.defined() ? static_cast<const T*>(a.residual.raw_data()) + n0 * ys : nullptr,
          a.relu};
      launch_gemm<T>(pr, st, d.G, 1, pr.red(), a.x.device());
    }
  });
}

void conv2d_bwd_data_cuda_implicit_gemm_tc(const Conv2dBwdDataArgs& a) {
  const std::string why = tc_supports_bwd_data(a);
  AIM_CHECK(why.empty(), "[conv2d_bwd_data] cuda.implicit_gemm_tc ", why);
  if (a.dx.numel() == 0) return;
  const Geo d = make_geo(a.dx, a.w, a.dy, a.p);
  const int64_t nb = conv2d_images_per_chunk(a.dx, a.dy), xs = per_image(a.dx),
                ys = per_image(a.dy);
  AIM_DISPATCH_TC_TYPES(a.dy.dtype(), T, {
    for (int64_t n0 = 0; n0 < d.N; n0 += nb) {  // chunks of images (conv2d.h)
      BwdDataProblem pr{bits(a.dy) + n0 * ys, bits(a.w), d};
      pr.d.N = int(std::min<int64_t>(nb, d.N - n0));
      BwdDataStore<T> st{static_cast<T*>(a.dx.raw_data()) + n0 * xs};
      launch_gemm<T>(pr, st, d.G, 1, pr.red(), a.dy.device());
    }
  });
}

// How one chunk's N*P*Q reduction of bwd_filter is split for parallelism: `splits` chunks of
// `chunk` (a multiple of kBK), until the grid has ~512 blocks (a few per SM), each split at least
// 512 long.
struct Splits {
  int splits, chunk;
};
Splits split_reduction(int64_t red, int64_t tiles, int G) {
  int64_t splits = std::min<int64_t>(ceil_div(red, 512), std::max<int64_t>(1, 512 / tiles));
  splits = std::max<int64_t>(1, std::min<int64_t>(splits, 65535 / G));
  const int64_t chunk = ceil_div(ceil_div(red, splits), kBK) * kBK;
  return Splits{int(ceil_div(red, chunk)), int(chunk)};
}

void conv2d_bwd_filter_cuda_implicit_gemm_tc(const Conv2dBwdFilterArgs& a) {
  const std::string why = tc_supports_bwd_filter(a);
  AIM_CHECK(why.empty(), "[conv2d_bwd_filter] cuda.implicit_gemm_tc ", why);
  const Geo d = make_geo(a.x, a.dw, a.dy, a.p);
  const Device dev = a.x.device();
  const int64_t nb = conv2d_images_per_chunk(a.x, a.dy), xs = per_image(a.x), ys = per_image(a.dy);
  const int64_t PQ = int64_t(d.P) * d.Q;
  const BwdFilterProblem pr{bits(a.dy), bits(a.x), d};
  AIM_DISPATCH_TC_TYPES(a.x.dtype(), T, {
    if (a.dw.numel() > 0 && d.N > 0 && PQ > 0) {
      // Every chunk of images writes its splits' partials into its own rows of one scratch
      // [all splits, K, C/G*R*S]; one add_splits pass adds them all in order (one rounding).
      const int64_t tiles = ceil_div(pr.cols(), kBN) * ceil_div(pr.m(), kBM) * d.G;
      int64_t total = 0;
      for (int64_t n0 = 0; n0 < d.N; n0 += nb)
        total += split_reduction(std::min<int64_t>(nb, d.N - n0) * PQ, tiles, d.G).splits;
      Tensor part = Tensor::empty({total, a.dw.numel()}, DType::f32, dev);
      int64_t s0 = 0;
      for (int64_t n0 = 0; n0 < d.N; n0 += nb) {
        BwdFilterProblem c = pr;
        c.d.N = int(std::min<int64_t>(nb, d.N - n0));
        c.dy += n0 * ys;
        c.x += n0 * xs;
        const Splits sp = split_reduction(c.red(), tiles, d.G);
        launch_gemm<T>(c, PartialStore{part.data<float>() + s0 * a.dw.numel()}, d.G, sp.splits,
                       sp.chunk, dev);
        s0 += sp.splits;
      }
      constexpr int kAddThreads = 256;
      AIM_LAUNCH(grid_for(a.dw.numel(), kAddThreads), kAddThreads, 0, stream_for(dev),
                 add_splits_kernel<T>)
      (part.data<float>(), static_cast<T*>(a.dw.raw_data()), int(total), a.dw.numel());
      AIM_CHECK_LAUNCH();
    }
    if (a.dbias.defined() && a.dy.size(1) > 0) {
      const int N = int(a.dy.size(0)), K = int(a.dy.size(1));
      const int64_t PQ = a.dy.size(2) * a.dy.size(3);
      AIM_LAUNCH(unsigned(K), 256, 0, stream_for(dev), bias_grad_kernel<T>)
      (static_cast<const T*>(a.dy.raw_data()), static_cast<T*>(a.dbias.raw_data()), N, K, PQ);
      AIM_CHECK_LAUNCH();
    }
  });
}

#undef AIM_DISPATCH_TC_TYPES

}  // namespace

// Called from register_conv2d_cuda (conv2d_cuda.cu): not the default, cuda.implicit_gemm stays
// the CUDA default until a GPU measurement says otherwise.
void register_conv2d_tc_cuda(Registry& r) {
  const std::vector<DType> types = {DType::f16, DType::bf16};
  r.op<Conv2dFwdArgs>("conv2d_fwd")
      .add({"cuda.implicit_gemm_tc", AIM_CUDA_BACKEND, Provider::Own,
            conv2d_fwd_cuda_implicit_gemm_tc, types, tc_supports_fwd});
  r.op<Conv2dBwdDataArgs>("conv2d_bwd_data")
      .add({"cuda.implicit_gemm_tc", AIM_CUDA_BACKEND, Provider::Own,
            conv2d_bwd_data_cuda_implicit_gemm_tc, types, tc_supports_bwd_data});
  r.op<Conv2dBwdFilterArgs>("conv2d_bwd_filter")
      .add({"cuda.implicit_gemm_tc", AIM_CUDA_BACKEND, Provider::Own,
            conv2d_bwd_filter_cuda_implicit_gemm_tc, types, tc_supports_bwd_filter});
}

}  // namespace aim::kernels::AIM_CUDA_NS
