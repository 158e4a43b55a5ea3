// cuda.implicit_gemm (fwd, bwd_data, bwd_filter): one tiled GEMM kernel whose operand tiles are
//   gathered straight from the tensors (im2col is never materialised). Per group g:
//     fwd         y  [K/G,  N*P*Q]   = w [K/G, C/G*R*S] . im2col(x) [C/G*R*S, N*P*Q]
//     bwd_data    dx [C/G,  N*H*W]   = w^T [C/G, K/G*R*S] . gather(dy) [K/G*R*S, N*H*W]
//                 (dx[h,w] takes dy[p,q] where h + pad - r*dil = p*stride: the direct gather
//                 formulation of the transposed convolution; no col2im, no atomics)
//     bwd_filter dw [K/G, C/G*R*S] += dy [K/G, N*P*Q] . im2col(x)^T [N*P*Q, C/G*R*S]
//   Thread mapping: 256 threads per 64x64 output tile, 4x4 outputs per thread (rows ty+16i,
//   columns tx+16j), reduction in steps of 16 through two shared tiles (A 16x65, B 16x64; f32, or
//   f64 for double data). Each thread decodes its B column (an output pixel, or a filter tap for
//   bwd_filter) once and each k index with two 32-bit divisions. Grid: (column tiles, row tiles,
//   groups x k-splits).
//   Memory traffic: every A/B element is read once per 64-wide tile of the other operand through
//   L1/L2 (x is re-read R*S times across taps, mostly from L2); y/dx written once.
//   Expected bound: FP32 FMA issue and the gather's integer work; about 30-50% of the SM's FP32
//   peak for C/G*R*S >= 64 (no tensor cores, no double buffering: a first, readable version).
//   bwd_filter: the reduction over N*P*Q is split into chunks (k-splits) for parallelism; each
//   split writes its own partial tile into a scratch [splits, K, C/G*R*S] (f32; f64 for double),
//   a second kernel adds the splits in order into dw (+=): deterministic, no float atomics.
//   dbias: one 256-thread block per output channel, fixed-order block reduction, += into dbias.
//   Large tensors: the index decode is 32-bit; the launchers run the batch in chunks of whole
//   images whose slices stay under 2^31 elements (conv2d.h: conv2d_images_per_chunk), so only w
//   and one image of x and of y must be under 2^31 elements; bwd_filter's chunks write their
//   partials into one scratch and add_splits adds them all at once (dw rounded once).
//   Limits: small K/G or C/G (depthwise) waste most of a 64-row tile; stride > 1 in bwd_data
//   multiplies the gather by stride_h*stride_w (zeros skipped by a test, not by the loop).
//   f32 f64 f16 bf16; accumulation in float (double for f64), 16-bit outputs rounded once.
// Helpers of the cuBLAS variant (im2col_cuda.h), CUDA builds only:
//   im2col: one thread per col element [nb, C, R, S, P, Q] (grid-stride), consecutive threads on
//   consecutive q: coalesced writes, reads strided by stride_w. col2im: one thread per dx element,
//   gathers its at most R*S contributions from col. Bandwidth bound. add_bias: one thread per y
//   element. bias_grad: the dbias kernel above.
#include <algorithm>

#include "kernels/conv/conv2d.h"
#include "kernels/conv/implicit_gemm_geometry.cuh"
#include "kernels/cuda_common.h"
#ifndef AIM_SIMT
#include "kernels/conv/im2col_cuda.h"
#endif

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kBM = 64, kBN = 64, kBK = 16, kThreads = 256;

// ---- problems: how each direction gathers its GEMM operands --------------------------------
// A problem gives the GEMM extents per group (m rows, cols columns, red reduction), a per-row
// context for A and a per-column context for B (decoded once per thread), the element loads
// (0 outside the tensors), and the store of one finished output.

template <class T>
struct FwdProblem {
  using A = typename Acc<T>::type;
  const T* x;     // [N, C, H, W]
  const T* w;     // [K, C/G, R, S]
  const T* bias;  // [K] or null
  T* y;           // [N, K, P, Q]
  Geo d;
  const T* residual;  // like y, or null: added before the relu
  bool relu;          // epilogue: y = relu(conv + bias + residual)
  __host__ __device__ int m() const { return d.Kg; }
  __host__ __device__ int cols() const { return d.N * d.P * d.Q; }
  __host__ __device__ int red() const { return d.Cg * d.R * d.S; }
  struct Row {
    int64_t base;
    bool ok;
  };
  __device__ Row a_row(int g, int k) const { return Row{int64_t(g * d.Kg + k) * red(), k < d.Kg}; }
  __device__ A load_a(const Row& r, int kk) const {
    return r.ok ? to_acc<A>(w[r.base + kk]) : A(0);
  }
  using Col = FwdCol<int64_t>;
  __device__ Col b_col(int g, int col) const { return fwd_col<int64_t>(d, g, col); }
  __device__ A load_b(const Col& c, int kk) const {
    if (!c.ok) return A(0);
    const int RS = d.R * d.S, ch = kk / RS, rs = kk - ch * RS, r = rs / d.S, s = rs - r * d.S;
    const int ih = c.ih0 + r * d.dh, iw = c.iw0 + s * d.dw;
    if (ih < 0 || ih >= d.H || iw < 0 || iw >= d.W) return A(0);
    return to_acc<A>(x[c.base + (int64_t(ch) * d.H + ih) * d.W + iw]);
  }
  __device__ void store(int g, int, int k, int col, A v) const {
    const int PQ = d.P * d.Q, n = col / PQ, pq = col - n * PQ;
    const int kg = g * d.Kg + k;
    if (bias) v += to_acc<A>(bias[kg]);
    const int64_t yi = (int64_t(n) * d.K + kg) * PQ + pq;
    if (residual) v += to_acc<A>(residual[yi]);
    if (relu && v < A(0)) v = A(0);  // NaN stays NaN
    y[yi] = from_acc<T>(v);
  }
};

template <class T>
struct BwdDataProblem {
  using A = typename Acc<T>::type;
  const T* dy;  // [N, K, P, Q]
  const T* w;   // [K, C/G, R, S]
  T* dx;        // [N, C, H, W]
  Geo d;
  __host__ __device__ int m() const { return d.Cg; }
  __host__ __device__ int cols() const { return d.N * d.H * d.W; }
  __host__ __device__ int red() const { return d.Kg * d.R * d.S; }
  struct Row {
    int64_t base;
    bool ok;
  };
  __device__ Row a_row(int g, int c) const {
    return Row{int64_t(g) * d.Kg * d.Cg * d.R * d.S + int64_t(c) * d.R * d.S, c < d.Cg};
  }
  __device__ A load_a(const Row& r, int kk) const {  // kk = (k, r, s): w[g*Kg + k, c, r, s]
    if (!r.ok) return A(0);
    const int RS = d.R * d.S, k = kk / RS, rs = kk - k * RS;
    return to_acc<A>(w[r.base + int64_t(k) * d.Cg * RS + rs]);
  }
  using Col = BwdDataCol<int64_t>;
  __device__ Col b_col(int g, int col) const { return bwd_data_col<int64_t>(d, g, col); }
  __device__ A load_b(const Col& c, int kk) const {
    if (!c.ok) return A(0);
    const int RS = d.R * d.S, k = kk / RS, rs = kk - k * RS, r = rs / d.S, s = rs - r * d.S;
    const int ph = c.ph0 - r * d.dh, pw = c.pw0 - s * d.dw;
    if (ph < 0 || pw < 0) return A(0);
    const int p = ph / d.sh, q = pw / d.sw;
    if (p * d.sh != ph || q * d.sw != pw || p >= d.P || q >= d.Q) return A(0);
    return to_acc<A>(dy[c.base + (int64_t(k) * d.P + p) * d.Q + q]);
  }
  __device__ void store(int g, int, int c, int col, A v) const {
    const int HW = d.H * d.W, n = col / HW, hw = col - n * HW;
    dx[(int64_t(n) * d.C + int64_t(g) * d.Cg + c) * HW + hw] = from_acc<T>(v);
  }
};

template <class T>
struct BwdFilterProblem {
  using A = typename Acc<T>::type;
  const T* dy;  // [N, K, P, Q]
  const T* x;   // [N, C, H, W]
  A* part;      // [splits, K, C/G*R*S]
  Geo d;
  __host__ __device__ int m() const { return d.Kg; }
  __host__ __device__ int cols() const { return d.Cg * d.R * d.S; }
  __host__ __device__ int red() const { return d.N * d.P * d.Q; }
  struct Row {
    int64_t base;
    bool ok;
  };
  __device__ Row a_row(int g, int k) const {
    return Row{int64_t(g * d.Kg + k) * d.P * d.Q, k < d.Kg};
  }
  __device__ A load_a(const Row& r, int kk) const {  // kk = (n, p, q): dy[n, g*Kg + k, p, q]
    if (!r.ok) return A(0);
    const int PQ = d.P * d.Q, n = kk / PQ, pq = kk - n * PQ;
    return to_acc<A>(dy[int64_t(n) * d.K * PQ + r.base + pq]);
  }
  using Col = BwdFilterCol<int64_t>;
  __device__ Col b_col(int g, int col) const { return bwd_filter_col<int64_t>(d, g, col); }
  __device__ A load_b(const Col& c, int kk) const {
    if (!c.ok) return A(0);
    const int PQ = d.P * d.Q, n = kk / PQ, pq = kk - n * PQ, p = pq / d.Q, q = pq - p * d.Q;
    const int ih = p * d.sh + c.roff, iw = q * d.sw + c.soff;
    if (ih < 0 || ih >= d.H || iw < 0 || iw >= d.W) return A(0);
    return to_acc<A>(x[int64_t(n) * d.C * d.H * d.W + c.base + int64_t(ih) * d.W + iw]);
  }
  __device__ void store(int g, int split, int k, int col, A v) const {
    part[(int64_t(split) * d.K + g * d.Kg + k) * cols() + col] = v;
  }
};

// ---- the kernels --------------------------------------------------------------------------

// One 64x64 tile of group blockIdx.z / splits, reduction range chunk number blockIdx.z % splits.
template <class T, class Problem>
__global__ void __launch_bounds__(kThreads)
    implicit_gemm_kernel(Problem pr, int splits, int chunk) {
  using A = typename Acc<T>::type;
  __shared__ A as[kBK][kBM + 1];  // +1: the column-wise stores below hit distinct banks
  __shared__ A bs[kBK][kBN];
  const int tid = threadIdx.x;
  const int g = int(blockIdx.z) / splits, split = int(blockIdx.z) % splits;
  const int m0 = int(blockIdx.y) * kBM, n0 = int(blockIdx.x) * kBN;
  const int k_begin = split * chunk, k_end = min(pr.red(), k_begin + chunk);
  // Loads: A rows a_m + 16i at k offset a_k (16 consecutive threads read 16 consecutive k);
  // B column b_n at k offsets b_k + 4i (consecutive threads read consecutive columns).
  const int a_k = tid % kBK, a_m = tid / kBK;
  const int b_n = tid % kBN, b_k = tid / kBN;
  typename Problem::Row rows[4];
  for (int i = 0; i < 4; ++i) rows[i] = pr.a_row(g, m0 + a_m + 16 * i);
  const typename Problem::Col col = pr.b_col(g, n0 + b_n);
  const int tx = tid % 16, ty = tid / 16;
  A acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = A(0);
  for (int k0 = k_begin; k0 < k_end; k0 += kBK) {
    AIM_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int kk = k0 + a_k;
      as[a_k][a_m + 16 * i] = kk < k_end ? pr.load_a(rows[i], kk) : A(0);
    }
    AIM_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int kk = k0 + b_k + 4 * i;
      bs[b_k + 4 * i][b_n] = kk < k_end ? pr.load_b(col, kk) : A(0);
    }
    __syncthreads();
    AIM_UNROLL
    for (int kk = 0; kk < kBK; ++kk) {
      A a[4], b[4];
      for (int i = 0; i < 4; ++i) a[i] = as[kk][ty + 16 * i];
      for (int j = 0; j < 4; ++j) b[j] = bs[kk][tx + 16 * j];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();  // the next loads overwrite the tiles
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
      if (m < pr.m() && n < pr.cols()) pr.store(g, split, m, n, acc[i][j]);
    }
}

// dw [n] += the splits' partials [splits, n], summed in split order.
template <class T>
__global__ void add_splits_kernel(const typename Acc<T>::type* part, T* dw, int splits, int64_t n) {
  using A = typename Acc<T>::type;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    A s = 0;
    for (int sp = 0; sp < splits; ++sp) s += part[int64_t(sp) * n + i];
    dw[i] = from_acc<T>(to_acc<A>(dw[i]) + s);
  }
}

// dbias [k] += sum over n, pq of dy [N, K, PQ]; one block per k.
template <class T>
__global__ void bias_grad_kernel(const T* dy, T* dbias, int N, int K, int64_t PQ) {
  using A = typename Acc<T>::type;
  __shared__ A scratch[kWarpSize];
  const int k = blockIdx.x;
  A s = 0;
  for (int n = 0; n < N; ++n) {
    const T* row = dy + (int64_t(n) * K + k) * PQ;
    for (int64_t i = threadIdx.x; i < PQ; i += blockDim.x) s += to_acc<A>(row[i]);
  }
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) dbias[k] = from_acc<T>(to_acc<A>(dbias[k]) + s);
}

template <class T, class Problem>
void launch_gemm(const Problem& pr, int G, int splits, int chunk, Device dev) {
  const dim3 grid(unsigned(ceil_div(pr.cols(), kBN)), unsigned(ceil_div(pr.m(), kBM)),
                  unsigned(G * splits));
  AIM_LAUNCH(grid, kThreads, 0, stream_for(dev), implicit_gemm_kernel<T, Problem>)
  (pr, splits, chunk);
  AIM_CHECK_LAUNCH();
}

template <class T>
void launch_bias_grad(const Tensor& dy, const Tensor& dbias) {
  const int N = int(dy.size(0)), K = int(dy.size(1));
  if (K == 0) return;
  const int64_t PQ = dy.size(2) * dy.size(3);
  AIM_LAUNCH(unsigned(K), 256, 0, stream_for(dy.device()), bias_grad_kernel<T>)
  (static_cast<const T*>(dy.raw_data()), static_cast<T*>(dbias.raw_data()), N, K, PQ);
  AIM_CHECK_LAUNCH();
}

// ---- entry points -------------------------------------------------------------------------
// The batch runs in chunks of whole images (conv2d.h: conv2d_images_per_chunk), each a
// convolution of its own over pointers advanced by its first image, so every offset inside a
// kernel fits an int even when a tensor holds 2^31 elements or more.

std::string implicit_gemm_supports(int64_t groups, const Tensor& xs, const Tensor& w,
                                   const Tensor& ys) {
  if (groups > 65535) return str("needs groups <= 65535 (grid z), got ", groups);
  return conv2d_chunk_reason(xs, w, ys);
}
std::string implicit_gemm_supports_fwd(const Conv2dFwdArgs& a) {
  check_conv2d_fwd_args(a);
  if (std::string why = conv2d_fwd_plain_reason(a); !why.empty()) return why;
  return implicit_gemm_supports(a.p.groups, a.x, a.w, a.y);
}
std::string implicit_gemm_supports_bwd_data(const Conv2dBwdDataArgs& a) {
  check_conv2d_bwd_data_args(a);
  return implicit_gemm_supports(a.p.groups, a.dx, a.w, a.dy);
}
std::string implicit_gemm_supports_bwd_filter(const Conv2dBwdFilterArgs& a) {
  check_conv2d_bwd_filter_args(a);
  return implicit_gemm_supports(a.p.groups, a.x, a.dw, a.dy);
}

void conv2d_fwd_cuda_implicit_gemm(const Conv2dFwdArgs& a) {
  const std::string why = implicit_gemm_supports_fwd(a);
  AIM_CHECK(why.empty(), "[conv2d_fwd] cuda.implicit_gemm ", why);
  if (a.y.numel() == 0) return;
  const Geo d = make_geo(a.x, a.w, a.y, a.p);
  const int64_t nb = conv2d_images_per_chunk(a.x, a.y), xs = per_image(a.x), ys = per_image(a.y);
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, {
    for (int64_t n0 = 0; n0 < d.N; n0 += nb) {
      FwdProblem<T> pr{
          static_cast<const T*>(a.x.raw_data()) + n0 * xs,
          static_cast<const T*>(a.w.raw_data()),
          a.bias.defined() ? static_cast<const T*>(a.bias.raw_data()) : nullptr,
          static_cast<T*>(a.y.raw_data()) + n0 * ys,
          d,
          a.residual.defined() ? static_cast<const T*>(a.residual.raw_data()) + n0 * ys : nullptr,
          a.relu};
      pr.d.N = int(std::min<int64_t>(nb, d.N - n0));
      launch_gemm<T>(pr, d.G, 1, pr.red(), a.x.device());
    }
  });
}

void conv2d_bwd_data_cuda_implicit_gemm(const Conv2dBwdDataArgs& a) {
  const std::string why = implicit_gemm_supports_bwd_data(a);
  AIM_CHECK(why.empty(), "[conv2d_bwd_data] cuda.implicit_gemm ", why);
  if (a.dx.numel() == 0) return;
  const Geo d = make_geo(a.dx, a.w, a.dy, a.p);
  const int64_t nb = conv2d_images_per_chunk(a.dx, a.dy), xs = per_image(a.dx),
                ys = per_image(a.dy);
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.dy.dtype(), T, {
    for (int64_t n0 = 0; n0 < d.N; n0 += nb) {
      BwdDataProblem<T> pr{static_cast<const T*>(a.dy.raw_data()) + n0 * ys,
                           static_cast<const T*>(a.w.raw_data()),
                           static_cast<T*>(a.dx.raw_data()) + n0 * xs, d};
      pr.d.N = int(std::min<int64_t>(nb, d.N - n0));
      launch_gemm<T>(pr, d.G, 1, pr.red(), a.dy.device());
    }
  });
}

// How one chunk's N*P*Q reduction of bwd_filter is split for parallelism: `splits` chunks of
// `chunk` (a multiple of kBK), until the grid has ~256 blocks, each split >= 256 long.
struct Splits {
  int splits, chunk;
};
Splits split_reduction(int64_t red, int64_t tiles, int G) {
  int64_t splits = std::min<int64_t>(ceil_div(red, 256), std::max<int64_t>(1, 256 / tiles));
  splits = std::max<int64_t>(1, std::min<int64_t>(splits, 65535 / G));
  const int64_t chunk = ceil_div(ceil_div(red, splits), kBK) * kBK;
  return Splits{int(ceil_div(red, chunk)), int(chunk)};
}

void conv2d_bwd_filter_cuda_implicit_gemm(const Conv2dBwdFilterArgs& a) {
  const std::string why = implicit_gemm_supports_bwd_filter(a);
  AIM_CHECK(why.empty(), "[conv2d_bwd_filter] cuda.implicit_gemm ", why);
  const Geo d = make_geo(a.x, a.dw, a.dy, a.p);
  const Device dev = a.x.device();
  const int64_t nb = conv2d_images_per_chunk(a.x, a.dy), xs = per_image(a.x), ys = per_image(a.dy);
  const int64_t PQ = int64_t(d.P) * d.Q;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, {
    using A = typename Acc<T>::type;
    BwdFilterProblem<T> pr{static_cast<const T*>(a.dy.raw_data()),
                           static_cast<const T*>(a.x.raw_data()), nullptr, d};
    if (a.dw.numel() > 0 && d.N > 0 && PQ > 0) {
      const int64_t tiles = ceil_div(pr.cols(), kBN) * ceil_div(pr.m(), kBM) * d.G;
      // Every chunk writes its splits' partials into its own rows of one scratch
      // [all splits, K, C/G*R*S]; one add_splits pass then adds them all in order (one rounding).
      int64_t total = 0;
      for (int64_t n0 = 0; n0 < d.N; n0 += nb)
        total += split_reduction(std::min<int64_t>(nb, d.N - n0) * PQ, tiles, d.G).splits;
      Tensor part = Tensor::empty({total, a.dw.numel()}, dtype_of<A>(), dev);
      int64_t s0 = 0;
      for (int64_t n0 = 0; n0 < d.N; n0 += nb) {
        BwdFilterProblem<T> c = pr;
        c.d.N = int(std::min<int64_t>(nb, d.N - n0));
        c.dy += n0 * ys;
        c.x += n0 * xs;
        c.part = part.data<A>() + s0 * a.dw.numel();
        const Splits sp = split_reduction(c.red(), tiles, d.G);
        launch_gemm<T>(c, d.G, sp.splits, sp.chunk, dev);
        s0 += sp.splits;
      }
      constexpr int kAddThreads = 256;
      AIM_LAUNCH(grid_for(a.dw.numel(), kAddThreads), kAddThreads, 0, stream_for(dev),
                 add_splits_kernel<T>)
      (part.data<A>(), static_cast<T*>(a.dw.raw_data()), int(total), a.dw.numel());
      AIM_CHECK_LAUNCH();
    }
    if (a.dbias.defined()) launch_bias_grad<T>(a.dy, a.dbias);
  });
}

const std::vector<DType> kFloatTypes = {DType::f32, DType::f64, DType::f16, DType::bf16};

}  // namespace

#ifndef AIM_SIMT
// ---- helpers of the cuBLAS variant (im2col_cuda.h) ----------------------------------------
namespace {

template <class T>
__global__ void im2col_kernel(const T* x, T* col, Geo d, int n0, int64_t total) {
  const int64_t PQ = int64_t(d.P) * d.Q;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    // i = ((((img * C + c) * R + r) * S + s) * P + p) * Q + q
    const int64_t pq = i % PQ;
    int64_t rest = i / PQ;
    const int s = int(rest % d.S);
    rest /= d.S;
    const int r = int(rest % d.R);
    rest /= d.R;
    const int64_t img_c = rest;  // img * C + c
    const int p = int(pq / d.Q), q = int(pq - int64_t(p) * d.Q);
    const int ih = p * d.sh - d.pt + r * d.dh, iw = q * d.sw - d.pl + s * d.dw;
    T v = from_f32<T>(0.f);
    if (ih >= 0 && ih < d.H && iw >= 0 && iw < d.W)
      v = x[((int64_t(n0) * d.C + img_c) * d.H + ih) * d.W + iw];
    col[i] = v;
  }
}

template <class T>
__global__ void col2im_kernel(const T* col, T* dx, Geo d, int n0, int64_t total) {
  using A = typename Acc<T>::type;
  const int64_t PQ = int64_t(d.P) * d.Q;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    // i = ((img * C + c) * H + h) * W + w over the nb images
    const int w = int(i % d.W);
    const int h = int((i / d.W) % d.H);
    const int64_t img_c = i / (int64_t(d.W) * d.H);
    A acc = 0;
    for (int r = 0; r < d.R; ++r) {
      const int ph = h + d.pt - r * d.dh;
      if (ph < 0 || ph % d.sh) continue;
      const int p = ph / d.sh;
      if (p >= d.P) continue;
      for (int s = 0; s < d.S; ++s) {
        const int pw = w + d.pl - s * d.dw;
        if (pw < 0 || pw % d.sw) continue;
        const int q = pw / d.sw;
        if (q >= d.Q) continue;
        acc += to_acc<A>(col[((img_c * d.R + r) * d.S + s) * PQ + int64_t(p) * d.Q + q]);
      }
    }
    dx[int64_t(n0) * d.C * d.H * d.W + i] = from_acc<T>(acc);
  }
}

// bias, residual (each optional), then relu (optional), in place: the vendor variants' epilogue.
template <class T>
__global__ void add_bias_kernel(T* y, const T* bias, const T* residual, bool relu, int K,
                                int64_t PQ, int64_t total) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    float v = to_f32(y[i]);
    if (bias) v += to_f32(bias[int((i / PQ) % K)]);
    if (residual) v += to_f32(residual[i]);
    if (relu && v < 0.0f) v = 0.0f;  // NaN stays NaN
    y[i] = from_f32<T>(v);
  }
}

// The geometry from x-side [N, C, H, W], the kernel extent and the parameters.
Geo geo_of(const Tensor& xside, int64_t R, int64_t S, const Conv2dParams& p) {
  Geo d;
  d.N = int(xside.size(0));
  d.C = int(xside.size(1));
  d.H = int(xside.size(2));
  d.W = int(xside.size(3));
  d.R = int(R);
  d.S = int(S);
  d.P = int(conv2d_out_size(d.H, R, p.stride_h, p.pad_top, p.pad_bottom, p.dil_h));
  d.Q = int(conv2d_out_size(d.W, S, p.stride_w, p.pad_left, p.pad_right, p.dil_w));
  d.K = 0;
  d.G = int(p.groups);
  d.Cg = d.C / d.G;
  d.Kg = 0;
  d.sh = int(p.stride_h);
  d.sw = int(p.stride_w);
  d.pt = int(p.pad_top);
  d.pl = int(p.pad_left);
  d.dh = int(p.dil_h);
  d.dw = int(p.dil_w);
  return d;
}

}  // namespace

void conv2d_im2col(const Tensor& x, int64_t n0, int64_t nb, int64_t R, int64_t S,
                   const Conv2dParams& p, const Tensor& col) {
  const Geo d = geo_of(x, R, S, p);
  const int64_t total = nb * d.C * R * S * int64_t(d.P) * d.Q;
  AIM_CHECK(col.numel() >= total && col.dtype() == x.dtype(), "[conv2d] im2col: col must hold ",
            total, " ", dtype_name(x.dtype()), " elements, got ", to_string(col.sizes()), " ",
            dtype_name(col.dtype()));
  if (total == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(x.dtype(), T, {
    AIM_LAUNCH(grid_for(total, 256), 256, 0, stream_for(x.device()), im2col_kernel<T>)
    (static_cast<const T*>(x.raw_data()), static_cast<T*>(col.raw_data()), d, int(n0), total);
  });
  AIM_CHECK_LAUNCH();
}

void conv2d_col2im(const Tensor& col, int64_t n0, int64_t nb, int64_t R, int64_t S,
                   const Conv2dParams& p, const Tensor& dx) {
  const Geo d = geo_of(dx, R, S, p);
  const int64_t total = nb * d.C * int64_t(d.H) * d.W;
  AIM_CHECK(col.numel() >= nb * d.C * R * S * int64_t(d.P) * d.Q && col.dtype() == dx.dtype(),
            "[conv2d] col2im: col too small or of another dtype: ", to_string(col.sizes()), " ",
            dtype_name(col.dtype()));
  if (total == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(dx.dtype(), T, {
    AIM_LAUNCH(grid_for(total, 256), 256, 0, stream_for(dx.device()), col2im_kernel<T>)
    (static_cast<const T*>(col.raw_data()), static_cast<T*>(dx.raw_data()), d, int(n0), total);
  });
  AIM_CHECK_LAUNCH();
}

void conv2d_add_bias(const Tensor& y, const Tensor& bias, bool relu, const Tensor& residual) {
  const int64_t total = y.numel();
  if (total == 0 || (!bias.defined() && !relu && !residual.defined())) return;
  const int K = int(y.size(1));
  const int64_t PQ = y.size(2) * y.size(3);
  AIM_DISPATCH_CUDA_FLOAT_TYPES(y.dtype(), T, {
    AIM_LAUNCH(grid_for(total, 256), 256, 0, stream_for(y.device()), add_bias_kernel<T>)
    (static_cast<T*>(y.raw_data()),
     bias.defined() ? static_cast<const T*>(bias.raw_data()) : nullptr,
     residual.defined() ? static_cast<const T*>(residual.raw_data()) : nullptr, relu, K, PQ, total);
  });
  AIM_CHECK_LAUNCH();
}

void conv2d_bias_grad(const Tensor& dy, const Tensor& dbias) {
  AIM_DISPATCH_CUDA_FLOAT_TYPES(dy.dtype(), T, { launch_bias_grad<T>(dy, dbias); });
}
#endif  // !AIM_SIMT

void register_conv2d_tc_cuda(Registry& r);  // conv2d_cuda_tc.cu: cuda.implicit_gemm_tc

void register_conv2d_cuda(Registry& r) {
  auto& f = r.op<Conv2dFwdArgs>("conv2d_fwd");
  f.add({"cuda.implicit_gemm", AIM_CUDA_BACKEND, Provider::Own, conv2d_fwd_cuda_implicit_gemm,
         kFloatTypes, implicit_gemm_supports_fwd});
  f.set_default(AIM_CUDA_BACKEND, "cuda.implicit_gemm");
  auto& bd = r.op<Conv2dBwdDataArgs>("conv2d_bwd_data");
  bd.add({"cuda.implicit_gemm", AIM_CUDA_BACKEND, Provider::Own, conv2d_bwd_data_cuda_implicit_gemm,
          kFloatTypes, implicit_gemm_supports_bwd_data});
  bd.set_default(AIM_CUDA_BACKEND, "cuda.implicit_gemm");
  auto& bf = r.op<Conv2dBwdFilterArgs>("conv2d_bwd_filter");
  bf.add({"cuda.implicit_gemm", AIM_CUDA_BACKEND, Provider::Own,
          conv2d_bwd_filter_cuda_implicit_gemm, kFloatTypes, implicit_gemm_supports_bwd_filter});
  bf.set_default(AIM_CUDA_BACKEND, "cuda.implicit_gemm");
  register_conv2d_tc_cuda(r);
}

}  // namespace aim::kernels::AIM_CUDA_NS
