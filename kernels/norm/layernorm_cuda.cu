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
// The warp-row math and this reduction are shared with add_layernorm (layernorm_rows.cuh).
// Statistics and accumulation in float (double for f64); 16-bit types rounded at the output.
#include "kernels/cuda_common.h"
#include "kernels/norm/layernorm.h"
#include "kernels/norm/layernorm_rows.cuh"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kBlockRowThreads = 256;

// ---- forward --------------------------------------------------------------------------------

template <class T>
__global__ void fwd_warp_row_kernel(const T* x, const T* gamma, const T* beta, T* y,
                                    typename Acc<T>::type* mean, typename Acc<T>::type* rstd,
                                    int64_t N, int64_t C, float eps) {
  using A = typename Acc<T>::type;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * kLnWarpsPerBlock + threadIdx.x / kWarpSize;
  if (row >= N) return;  // the whole warp leaves together: no divergence at the shuffles
  A m, r;
  ln_warp_row_fwd(x + row * C, gamma, beta, y + row * C, C, eps, lane, m, r);
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

// ---- backward: dgamma, dbeta (the deterministic column reduction of layernorm_rows.cuh) ------

template <class T>
void launch_params(const LayerNormBwdArgs& a) {
  using A = typename Acc<T>::type;
  ln_launch_params<T>(static_cast<const T*>(a.dy.raw_data()), static_cast<const T*>(a.x.raw_data()),
                      nullptr, a.mean.data<A>(), a.rstd.data<A>(),
                      a.dgamma.defined() ? static_cast<T*>(a.dgamma.raw_data()) : nullptr,
                      a.dbeta.defined() ? static_cast<T*>(a.dbeta.raw_data()) : nullptr, nullptr,
                      a.x.size(0), a.x.size(1), a.x.device());
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
    AIM_LAUNCH(unsigned(ceil_div(N, kLnWarpsPerBlock)), kLnWarpsPerBlock * kWarpSize, 0,
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
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, {
    using A = typename Acc<T>::type;
    ln_launch_dx_warp_row<T>(static_cast<const T*>(a.dy.raw_data()),
                             static_cast<const T*>(a.x.raw_data()), opt_ptr<T>(a.gamma),
                             a.mean.data<A>(), a.rstd.data<A>(), static_cast<T*>(a.dx.raw_data()),
                             a.x.size(0), a.x.size(1), a.x.device());
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
