// The row math of the own CUDA layer-norm kernels (layernorm and add_layernorm cuda.warp_row) and
// their deterministic column reduction for dgamma/dbeta (and add_layernorm's dbias), once.
// Compiles as CUDA and, for the SIMT emulator, as C++. Math: kernels/norm/README.md. Internal to
// kernels/norm.
#pragma once
#include <algorithm>

#include "kernels/cuda_common.h"

namespace aim::kernels::AIM_CUDA_NS {

// ---- one row per warp -----------------------------------------------------------------------

// Lane `lane` of a warp handles columns lane, lane + 32, ... of one row: two passes for the
// statistics (mean, then squared deviations: no cancellation), a third writes y = xhat (* gamma +
// beta; gamma and beta both given or both null). Every lane gets the row's mean m and rstd r.
template <class T, class A>
__device__ __forceinline__ void ln_warp_row_fwd(const T* xr, const T* gamma, const T* beta, T* yr,
                                                int64_t C, float eps, int lane, A& m, A& r) {
  A s = 0;
  for (int64_t c = lane; c < C; c += kWarpSize) s += to_acc<A>(xr[c]);
  m = warp_sum(s) / A(C);
  A sq = 0;
  for (int64_t c = lane; c < C; c += kWarpSize) {
    const A d = to_acc<A>(xr[c]) - m;
    sq += d * d;
  }
  r = A(1) / sqrt(warp_sum(sq) / A(C) + A(eps));
  for (int64_t c = lane; c < C; c += kWarpSize) {
    A v = (to_acc<A>(xr[c]) - m) * r;
    if (gamma) v = v * to_acc<A>(gamma[c]) + to_acc<A>(beta[c]);
    yr[c] = from_acc<T>(v);
  }
}

// dx of one row (gamma may be null): one pass for the two row sums (dy·g and dy·g·xhat), one to
// write dx.
template <class T, class A>
__device__ __forceinline__ void ln_warp_row_dx(const T* dyr, const T* xr, const T* gamma, A m, A r,
                                               T* dxr, int64_t C, int lane) {
  A s1 = 0, s2 = 0;
  for (int64_t c = lane; c < C; c += kWarpSize) {
    const A d = to_acc<A>(dyr[c]) * (gamma ? to_acc<A>(gamma[c]) : A(1));
    s1 += d;
    s2 += d * (to_acc<A>(xr[c]) - m) * r;
  }
  s1 = warp_sum(s1) / A(C);
  s2 = warp_sum(s2) / A(C);
  for (int64_t c = lane; c < C; c += kWarpSize) {
    const A d = to_acc<A>(dyr[c]) * (gamma ? to_acc<A>(gamma[c]) : A(1));
    dxr[c] = from_acc<T>(r * (d - s1 - (to_acc<A>(xr[c]) - m) * r * s2));
  }
}

constexpr int kLnWarpsPerBlock = 8;

// dx of every row, one warp per row, kLnWarpsPerBlock rows per block (layernorm_bwd's dx and
// add_layernorm_bwd's dh).
template <class T>
__global__ void ln_dx_warp_row_kernel(const T* dy, const T* x, const T* gamma,
                                      const typename Acc<T>::type* mean,
                                      const typename Acc<T>::type* rstd, T* dx, int64_t N,
                                      int64_t C) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * kLnWarpsPerBlock + threadIdx.x / kWarpSize;
  if (row >= N) return;  // the whole warp leaves together: no divergence at the shuffles
  ln_warp_row_dx(dy + row * C, x + row * C, gamma, mean[row], rstd[row], dx + row * C, C, lane);
}

template <class T>
void ln_launch_dx_warp_row(const T* dy, const T* x, const T* gamma,
                           const typename Acc<T>::type* mean, const typename Acc<T>::type* rstd,
                           T* dx, int64_t N, int64_t C, Device dev) {
  if (N == 0) return;
  AIM_LAUNCH(unsigned(ceil_div(N, kLnWarpsPerBlock)), kLnWarpsPerBlock * kWarpSize, 0,
             stream_for(dev), ln_dx_warp_row_kernel<T>)
  (dy, x, gamma, mean, rstd, dx, N, C);
  AIM_CHECK_LAUNCH();
}

// ---- dgamma, dbeta (and the column sums of dx): a deterministic two-kernel reduction ---------

constexpr int kLnColTile = 32, kLnRowLanes = 8;

// part: [chunks, kSums, C]: per chunk of rows the column sums of dy·xhat, dy and, when kSums is 3,
// dx. Chunk k covers rows [k * rows_per_chunk, (k+1) * rows_per_chunk); 32x8-thread blocks, each
// owns 32 columns of one chunk and reduces its 8 row lanes in a fixed order.
template <class T, int kSums>
__global__ void ln_params_partial_kernel(const T* dy, const T* x, const T* dx,
                                         const typename Acc<T>::type* mean,
                                         const typename Acc<T>::type* rstd,
                                         typename Acc<T>::type* part, int64_t N, int64_t C,
                                         int64_t rows_per_chunk) {
  using A = typename Acc<T>::type;
  __shared__ A sg[kLnRowLanes][kLnColTile];
  __shared__ A sb[kLnRowLanes][kLnColTile];
  __shared__ A sd[kSums == 3 ? kLnRowLanes : 1][kLnColTile];
  const int64_t c = int64_t(blockIdx.x) * kLnColTile + threadIdx.x;
  const int64_t k = blockIdx.y;
  const int64_t n0 = k * rows_per_chunk;
  const int64_t n1 = n0 + rows_per_chunk < N ? n0 + rows_per_chunk : N;
  A g = 0, b = 0, d = 0;
  if (c < C) {
    for (int64_t n = n0 + threadIdx.y; n < n1; n += kLnRowLanes) {
      const A dyv = to_acc<A>(dy[n * C + c]);
      g += dyv * (to_acc<A>(x[n * C + c]) - mean[n]) * rstd[n];
      b += dyv;
      if constexpr (kSums == 3) d += to_acc<A>(dx[n * C + c]);
    }
  }
  sg[threadIdx.y][threadIdx.x] = g;
  sb[threadIdx.y][threadIdx.x] = b;
  if constexpr (kSums == 3) sd[threadIdx.y][threadIdx.x] = d;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    for (int j = 1; j < kLnRowLanes; ++j) {  // fixed order: deterministic
      g += sg[j][threadIdx.x];
      b += sb[j][threadIdx.x];
      if constexpr (kSums == 3) d += sd[j][threadIdx.x];
    }
    part[(k * kSums) * C + c] = g;
    part[(k * kSums + 1) * C + c] = b;
    if constexpr (kSums == 3) part[(k * kSums + 2) * C + c] = d;
  }
}

// One thread per column sums the chunks in order and adds into dgamma, dbeta, dsum (any null).
template <class T, int kSums>
__global__ void ln_params_final_kernel(const typename Acc<T>::type* part, T* dgamma, T* dbeta,
                                       T* dsum, int64_t chunks, int64_t C) {
  using A = typename Acc<T>::type;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  A g = 0, b = 0, d = 0;
  for (int64_t k = 0; k < chunks; ++k) {
    g += part[(k * kSums) * C + c];
    b += part[(k * kSums + 1) * C + c];
    if constexpr (kSums == 3) d += part[(k * kSums + 2) * C + c];
  }
  if (dgamma) dgamma[c] = from_acc<T>(to_acc<A>(dgamma[c]) + g);
  if (dbeta) dbeta[c] = from_acc<T>(to_acc<A>(dbeta[c]) + b);
  if constexpr (kSums == 3) {
    if (dsum) dsum[c] = from_acc<T>(to_acc<A>(dsum[c]) + d);
  }
}

template <class T, int kSums>
void ln_launch_params_k(const T* dy, const T* x, const T* dx, const typename Acc<T>::type* mean,
                        const typename Acc<T>::type* rstd, T* dgamma, T* dbeta, T* dsum, int64_t N,
                        int64_t C, Device dev) {
  using A = typename Acc<T>::type;
  const int64_t chunks = N == 0 ? 1 : std::min<int64_t>(ceil_div(N, 32), 256);
  const int64_t rows_per_chunk = N == 0 ? 1 : ceil_div(N, chunks);
  Tensor part = Tensor::empty({chunks, kSums, C}, dtype_of<A>(), dev);
  AIM_LAUNCH(dim3(unsigned(ceil_div(C, kLnColTile)), unsigned(chunks)),
             dim3(kLnColTile, kLnRowLanes), 0, stream_for(dev), ln_params_partial_kernel<T, kSums>)
  (dy, x, dx, mean, rstd, part.data<A>(), N, C, rows_per_chunk);
  AIM_CHECK_LAUNCH();
  constexpr int kThreads = 256;
  AIM_LAUNCH(unsigned(ceil_div(C, kThreads)), kThreads, 0, stream_for(dev),
             ln_params_final_kernel<T, kSums>)
  (part.data<A>(), dgamma, dbeta, dsum, chunks, C);
  AIM_CHECK_LAUNCH();
}

// dgamma += Σ_n dy·xhat, dbeta += Σ_n dy and, with dsum, dsum += Σ_n dx (dx: [N, C], read only
// then). Any of the three may be null; x, dy: [N, C]; mean, rstd: [N].
template <class T>
void ln_launch_params(const T* dy, const T* x, const T* dx, const typename Acc<T>::type* mean,
                      const typename Acc<T>::type* rstd, T* dgamma, T* dbeta, T* dsum, int64_t N,
                      int64_t C, Device dev) {
  if ((!dgamma && !dbeta && !dsum) || C == 0) return;
  if (dsum)
    ln_launch_params_k<T, 3>(dy, x, dx, mean, rstd, dgamma, dbeta, dsum, N, C, dev);
  else
    ln_launch_params_k<T, 2>(dy, x, dx, mean, rstd, dgamma, dbeta, dsum, N, C, dev);
}

}  // namespace aim::kernels::AIM_CUDA_NS
