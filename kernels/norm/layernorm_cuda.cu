// cuda.warp_row (forward and backward dx): one warp per row, 8 rows per 256-thread block. Two
// passes over the row for the statistics (mean, then squared deviations: no cancellation), a
// third to write y; the row stays in L1 for C up to a few thousand. Traffic: x read once from
// DRAM, y written once -> bandwidth bound. Any C. Backward: one pass for the two row sums
// (dy*g and dy*g*xhat), one to write dx. Limit: with C >> 4K a warp per row leaves most of the
// SM's bandwidth unused when N is small; cuda.block_row is meant for that.
// cuda.block_row: one 256-thread block per row, block reductions through shared memory. For
// large C (e.g. C > 1024) with few rows. Same traffic as warp_row.
// dgamma/dbeta (both variants): a separate deterministic column reduction, no atomics. Kernel 1:
// 32x8-thread blocks, each owns 32 columns x one chunk of rows, sums dy*xhat and dy down its
// rows and reduces the 8 row lanes in fixed order into a [chunks, 2, C] scratch (float; double
// for f64). Kernel 2: one thread per column sums the chunks in order and adds into dgamma/dbeta.
// Statistics and accumulation in float (double for f64); 16-bit types rounded at the output.
#include <algorithm>

#include "kernels/cuda_common.h"
#include "kernels/norm/layernorm.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kBlockRowThreads = 256;

// ---- forward --------------------------------------------------------------------------------

template <class T>
__global__ void fwd_warp_row_kernel(const T* x, const T* gamma, const T* beta, T* y,
                                    typename Acc<T>::type* mean, typename Acc<T>::type* rstd,
                                    int64_t N, int64_t C, float eps) {
  using A = typename Acc<T>::type;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (row >= N) return;  // the whole warp leaves together: no divergence at the shuffles
  const T* xr = x + row * C;
  A s = 0;
  for (int64_t c = lane; c < C; c += kWarpSize) s += to_acc<A>(xr[c]);
  const A m = warp_sum(s) / A(C);
  A sq = 0;
  for (int64_t c = lane; c < C; c += kWarpSize) {
    const A d = to_acc<A>(xr[c]) - m;
    sq += d * d;
  }
  const A r = A(1) / sqrt(warp_sum(sq) / A(C) + A(eps));
  T* yr = y + row * C;
  for (int64_t c = lane; c < C; c += kWarpSize) {
    A v = (to_acc<A>(xr[c]) - m) * r;
    if (gamma) v = v * to_acc<A>(gamma[c]) + to_acc<A>(beta[c]);
    yr[c] = from_acc<T>(v);
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

template <class T>
__global__ void fwd_block_row_kernel(const T* x, const T* gamma, const T* beta, T* y,
                                     typename Acc<T>::type* mean, typename Acc<T>::type* rstd,
                                     int64_t C, float eps) {
  using A = typename Acc<T>::type;
  __shared__ A scratch[kWarpSize];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * C;
  A s = 0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += to_acc<A>(xr[c]);
  const A m = block_sum(s, scratch) / A(C);
  A sq = 0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const A d = to_acc<A>(xr[c]) - m;
    sq += d * d;
  }
  const A r = A(1) / sqrt(block_sum(sq, scratch) / A(C) + A(eps));
  T* yr = y + row * C;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    A v = (to_acc<A>(xr[c]) - m) * r;
    if (gamma) v = v * to_acc<A>(gamma[c]) + to_acc<A>(beta[c]);
    yr[c] = from_acc<T>(v);
  }
  if (threadIdx.x == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

// ---- backward: dx ---------------------------------------------------------------------------

template <class T>
__global__ void bwd_dx_warp_row_kernel(const T* dy, const T* x, const T* gamma,
                                       const typename Acc<T>::type* mean,
                                       const typename Acc<T>::type* rstd, T* dx, int64_t N,
                                       int64_t C) {
  using A = typename Acc<T>::type;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (row >= N) return;
  const T* xr = x + row * C;
  const T* dyr = dy + row * C;
  const A m = mean[row], r = rstd[row];
  A s1 = 0, s2 = 0;
  for (int64_t c = lane; c < C; c += kWarpSize) {
    const A d = to_acc<A>(dyr[c]) * (gamma ? to_acc<A>(gamma[c]) : A(1));
    s1 += d;
    s2 += d * (to_acc<A>(xr[c]) - m) * r;
  }
  s1 = warp_sum(s1) / A(C);
  s2 = warp_sum(s2) / A(C);
  T* dxr = dx + row * C;
  for (int64_t c = lane; c < C; c += kWarpSize) {
    const A d = to_acc<A>(dyr[c]) * (gamma ? to_acc<A>(gamma[c]) : A(1));
    dxr[c] = from_acc<T>(r * (d - s1 - (to_acc<A>(xr[c]) - m) * r * s2));
  }
}

template <class T>
__global__ void bwd_dx_block_row_kernel(const T* dy, const T* x, const T* gamma,
                                        const typename Acc<T>::type* mean,
                                        const typename Acc<T>::type* rstd, T* dx, int64_t C) {
  using A = typename Acc<T>::type;
  __shared__ A scratch[kWarpSize];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * C;
  const T* dyr = dy + row * C;
  const A m = mean[row], r = rstd[row];
  A s1 = 0, s2 = 0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const A d = to_acc<A>(dyr[c]) * (gamma ? to_acc<A>(gamma[c]) : A(1));
    s1 += d;
    s2 += d * (to_acc<A>(xr[c]) - m) * r;
  }
  s1 = block_sum(s1, scratch) / A(C);
  s2 = block_sum(s2, scratch) / A(C);
  T* dxr = dx + row * C;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const A d = to_acc<A>(dyr[c]) * (gamma ? to_acc<A>(gamma[c]) : A(1));
    dxr[c] = from_acc<T>(r * (d - s1 - (to_acc<A>(xr[c]) - m) * r * s2));
  }
}

// ---- backward: dgamma, dbeta (deterministic two-kernel column reduction) --------------------

constexpr int kColTile = 32, kRowLanes = 8;

// part: [chunks, 2, C]; chunk k covers rows [k * rows_per_chunk, (k+1) * rows_per_chunk).
template <class T>
__global__ void bwd_params_partial_kernel(const T* dy, const T* x,
                                          const typename Acc<T>::type* mean,
                                          const typename Acc<T>::type* rstd,
                                          typename Acc<T>::type* part, int64_t N, int64_t C,
                                          int64_t rows_per_chunk) {
  using A = typename Acc<T>::type;
  __shared__ A sg[kRowLanes][kColTile];
  __shared__ A sb[kRowLanes][kColTile];
  const int64_t c = int64_t(blockIdx.x) * kColTile + threadIdx.x;
  const int64_t k = blockIdx.y;
  const int64_t n0 = k * rows_per_chunk;
  const int64_t n1 = n0 + rows_per_chunk < N ? n0 + rows_per_chunk : N;
  A g = 0, b = 0;
  if (c < C) {
    for (int64_t n = n0 + threadIdx.y; n < n1; n += kRowLanes) {
      const A d = to_acc<A>(dy[n * C + c]);
      g += d * (to_acc<A>(x[n * C + c]) - mean[n]) * rstd[n];
      b += d;
    }
  }
  sg[threadIdx.y][threadIdx.x] = g;
  sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    for (int j = 1; j < kRowLanes; ++j) {  // fixed order: deterministic
      g += sg[j][threadIdx.x];
      b += sb[j][threadIdx.x];
    }
    part[(k * 2) * C + c] = g;
    part[(k * 2 + 1) * C + c] = b;
  }
}

template <class T>
__global__ void bwd_params_final_kernel(const typename Acc<T>::type* part, T* dgamma, T* dbeta,
                                        int64_t chunks, int64_t C) {
  using A = typename Acc<T>::type;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  A g = 0, b = 0;
  for (int64_t k = 0; k < chunks; ++k) {
    g += part[(k * 2) * C + c];
    b += part[(k * 2 + 1) * C + c];
  }
  if (dgamma) dgamma[c] = from_acc<T>(to_acc<A>(dgamma[c]) + g);
  if (dbeta) dbeta[c] = from_acc<T>(to_acc<A>(dbeta[c]) + b);
}

template <class T>
void launch_params(const LayerNormBwdArgs& a) {
  using A = typename Acc<T>::type;
  if (!a.dgamma.defined() && !a.dbeta.defined()) return;
  const int64_t N = a.x.size(0), C = a.x.size(1);
  if (C == 0) return;
  const Device dev = a.x.device();
  const int64_t chunks = N == 0 ? 1 : std::min<int64_t>(ceil_div(N, 32), 256);
  const int64_t rows_per_chunk = N == 0 ? 1 : ceil_div(N, chunks);
  Tensor part = Tensor::empty({chunks, 2, C}, dtype_of<A>(), dev);
  AIM_LAUNCH(dim3(unsigned(ceil_div(C, kColTile)), unsigned(chunks)), dim3(kColTile, kRowLanes), 0,
             stream_for(dev), bwd_params_partial_kernel<T>)
  (static_cast<const T*>(a.dy.raw_data()), static_cast<const T*>(a.x.raw_data()), a.mean.data<A>(),
   a.rstd.data<A>(), part.data<A>(), N, C, rows_per_chunk);
  AIM_CHECK_LAUNCH();
  constexpr int kThreads = 256;
  AIM_LAUNCH(unsigned(ceil_div(C, kThreads)), kThreads, 0, stream_for(dev),
             bwd_params_final_kernel<T>)
  (part.data<A>(), a.dgamma.defined() ? static_cast<T*>(a.dgamma.raw_data()) : nullptr,
   a.dbeta.defined() ? static_cast<T*>(a.dbeta.raw_data()) : nullptr, chunks, C);
  AIM_CHECK_LAUNCH();
}

template <class T>
const T* opt_ptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.raw_data()) : nullptr;
}

void layernorm_fwd_cuda_warp_row(const LayerNormFwdArgs& a) {
  check_layernorm_fwd_args(a);
  const int64_t N = a.x.size(0), C = a.x.size(1);
  if (N == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, {
    using A = typename Acc<T>::type;
    AIM_LAUNCH(unsigned(ceil_div(N, kWarpsPerBlock)), kWarpsPerBlock * kWarpSize, 0,
               stream_for(a.x.device()), fwd_warp_row_kernel<T>)
    (static_cast<const T*>(a.x.raw_data()), opt_ptr<T>(a.gamma), opt_ptr<T>(a.beta),
     static_cast<T*>(a.y.raw_data()), a.mean.data<A>(), a.rstd.data<A>(), N, C, a.eps);
  });
  AIM_CHECK_LAUNCH();
}

void layernorm_fwd_cuda_block_row(const LayerNormFwdArgs& a) {
  check_layernorm_fwd_args(a);
  const int64_t N = a.x.size(0), C = a.x.size(1);
  if (N == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, {
    using A = typename Acc<T>::type;
    AIM_LAUNCH(unsigned(N), kBlockRowThreads, 0, stream_for(a.x.device()), fwd_block_row_kernel<T>)
    (static_cast<const T*>(a.x.raw_data()), opt_ptr<T>(a.gamma), opt_ptr<T>(a.beta),
     static_cast<T*>(a.y.raw_data()), a.mean.data<A>(), a.rstd.data<A>(), C, a.eps);
  });
  AIM_CHECK_LAUNCH();
}

void layernorm_bwd_cuda_warp_row(const LayerNormBwdArgs& a) {
  check_layernorm_bwd_args(a);
  const int64_t N = a.x.size(0), C = a.x.size(1);
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, {
    using A = typename Acc<T>::type;
    if (N > 0) {
      AIM_LAUNCH(unsigned(ceil_div(N, kWarpsPerBlock)), kWarpsPerBlock * kWarpSize, 0,
                 stream_for(a.x.device()), bwd_dx_warp_row_kernel<T>)
      (static_cast<const T*>(a.dy.raw_data()), static_cast<const T*>(a.x.raw_data()),
       opt_ptr<T>(a.gamma), a.mean.data<A>(), a.rstd.data<A>(), static_cast<T*>(a.dx.raw_data()), N,
       C);
      AIM_CHECK_LAUNCH();
    }
    launch_params<T>(a);
  });
}

void layernorm_bwd_cuda_block_row(const LayerNormBwdArgs& a) {
  check_layernorm_bwd_args(a);
  const int64_t N = a.x.size(0), C = a.x.size(1);
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, {
    using A = typename Acc<T>::type;
    if (N > 0) {
      AIM_LAUNCH(unsigned(N), kBlockRowThreads, 0, stream_for(a.x.device()),
                 bwd_dx_block_row_kernel<T>)
      (static_cast<const T*>(a.dy.raw_data()), static_cast<const T*>(a.x.raw_data()),
       opt_ptr<T>(a.gamma), a.mean.data<A>(), a.rstd.data<A>(), static_cast<T*>(a.dx.raw_data()),
       C);
      AIM_CHECK_LAUNCH();
    }
    launch_params<T>(a);
  });
}

std::string grid_fits(int64_t N) {
  return N <= int64_t(0x7fffffff) ? "" : str("needs N <= 2^31-1 rows, got ", N);
}

const std::vector<DType> kFloatTypes = {DType::f32, DType::f64, DType::f16, DType::bf16};

}  // namespace

void register_layernorm_cuda(Registry& r) {
  auto& f = r.op<LayerNormFwdArgs>("layernorm_fwd");
  f.add(
      {"cuda.warp_row", AIM_CUDA_BACKEND, Provider::Own, layernorm_fwd_cuda_warp_row, kFloatTypes});
  f.add({"cuda.block_row", AIM_CUDA_BACKEND, Provider::Own, layernorm_fwd_cuda_block_row,
         kFloatTypes, [](const LayerNormFwdArgs& a) { return grid_fits(a.x.size(0)); }});
  f.set_default(AIM_CUDA_BACKEND, "cuda.warp_row");
  auto& b = r.op<LayerNormBwdArgs>("layernorm_bwd");
  b.add(
      {"cuda.warp_row", AIM_CUDA_BACKEND, Provider::Own, layernorm_bwd_cuda_warp_row, kFloatTypes});
  b.add({"cuda.block_row", AIM_CUDA_BACKEND, Provider::Own, layernorm_bwd_cuda_block_row,
         kFloatTypes, [](const LayerNormBwdArgs& a) { return grid_fits(a.x.size(0)); }});
  b.set_default(AIM_CUDA_BACKEND, "cuda.warp_row");
}

}  // namespace aim::kernels::AIM_CUDA_NS
