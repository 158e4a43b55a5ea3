// add_layernorm_fwd, add_layernorm_bwd: own CUDA variants.
// cuda.warp_row (forward): one warp per row, 8 rows per 256-thread block. A first pass writes
// h = x + bias + residual (rounded to h's dtype); then layernorm cuda.warp_row's row math
// (layernorm_rows.cuh) on that h: two passes for the statistics, one to write y. Each lane reads
// back only the columns it wrote (lane, lane + 32, ...), so no synchronisation is needed and the
// row is still in L1/L2. Traffic: x and residual read once, h and y written once (h re-read from
// cache): bandwidth bound. Any C; with C >> 4K and few rows a warp per row leaves the SM's
// bandwidth unused (as layernorm's warp_row).
// cuda.warp_row (backward): layernorm's dx kernel (one warp per row, one pass for the two row
// sums, one to write dh), then the deterministic column reduction of layernorm_rows.cuh for
// dgamma, dbeta and dbias = Σ_n dh (of dh as written): per (chunk of rows, 32 columns) partial
// sums into a [chunks, 3, C] scratch, one thread per column adds the chunks in order. No atomics.
// Statistics and sums in float (double for f64); 16-bit outputs rounded once. Not yet timed on a
// GPU.
#include "kernels/cuda_common.h"
#include "kernels/norm/add_layernorm.h"
#include "kernels/norm/layernorm_rows.cuh"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

template <class T>
__global__ void fwd_warp_row_kernel(const T* x, const T* bias, const T* residual, const T* gamma,
                                    const T* beta, T* h, T* y, typename Acc<T>::type* mean,
                                    typename Acc<T>::type* rstd, int64_t N, int64_t C, float eps) {
  using A = typename Acc<T>::type;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * kLnWarpsPerBlock + threadIdx.x / kWarpSize;
  if (row >= N) return;  // the whole warp leaves together: no divergence at the shuffles
  const T* xr = x + row * C;
  const T* rr = residual + row * C;
  T* hr = h + row * C;
  for (int64_t c = lane; c < C; c += kWarpSize) {
    A v = to_acc<A>(xr[c]);
    if (bias) v += to_acc<A>(bias[c]);
    hr[c] = from_acc<T>(v + to_acc<A>(rr[c]));
  }
  A m, r;
  ln_warp_row_fwd(static_cast<const T*>(hr), gamma, beta, y + row * C, C, eps, lane, m, r);
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

template <class T>
const T* in_ptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.raw_data()) : nullptr;
}
template <class T>
T* out_ptr(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr;
}

void add_layernorm_fwd_cuda_warp_row(const AddLayerNormFwdArgs& a) {
  check_add_layernorm_fwd_args(a);
  const int64_t N = a.x.size(0), C = a.x.size(1);
  if (N == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, {
    using A = typename Acc<T>::type;
    AIM_LAUNCH(unsigned(ceil_div(N, kLnWarpsPerBlock)), kLnWarpsPerBlock * kWarpSize, 0,
               stream_for(a.x.device()), fwd_warp_row_kernel<T>)
    (in_ptr<T>(a.x), in_ptr<T>(a.bias), in_ptr<T>(a.residual), in_ptr<T>(a.gamma),
     in_ptr<T>(a.beta), out_ptr<T>(a.h), out_ptr<T>(a.y), a.mean.data<A>(), a.rstd.data<A>(), N, C,
     a.eps);
  });
  AIM_CHECK_LAUNCH();
}

void add_layernorm_bwd_cuda_warp_row(const AddLayerNormBwdArgs& a) {
  check_add_layernorm_bwd_args(a);
  const int64_t N = a.h.size(0), C = a.h.size(1);
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.h.dtype(), T, {
    using A = typename Acc<T>::type;
    ln_launch_dx_warp_row<T>(in_ptr<T>(a.dy), in_ptr<T>(a.h), in_ptr<T>(a.gamma), a.mean.data<A>(),
                             a.rstd.data<A>(), out_ptr<T>(a.dh), N, C, a.h.device());
    ln_launch_params<T>(in_ptr<T>(a.dy), in_ptr<T>(a.h), in_ptr<T>(a.dh), a.mean.data<A>(),
                        a.rstd.data<A>(), out_ptr<T>(a.dgamma), out_ptr<T>(a.dbeta),
                        out_ptr<T>(a.dbias), N, C, a.h.device());
  });
}

const std::vector<DType> kFloatTypes = {DType::f32, DType::f64, DType::f16, DType::bf16};

}  // namespace

void register_add_layernorm_cuda(Registry& r) {
  auto& f = r.op<AddLayerNormFwdArgs>("add_layernorm_fwd");
  f.add({"cuda.warp_row", AIM_CUDA_BACKEND, Provider::Own, add_layernorm_fwd_cuda_warp_row,
         kFloatTypes});
  f.set_default(AIM_CUDA_BACKEND, "cuda.warp_row");
  auto& b = r.op<AddLayerNormBwdArgs>("add_layernorm_bwd");
  b.add({"cuda.warp_row", AIM_CUDA_BACKEND, Provider::Own, add_layernorm_bwd_cuda_warp_row,
         kFloatTypes});
  b.set_default(AIM_CUDA_BACKEND, "cuda.warp_row");
}

}  // namespace aim::kernels::AIM_CUDA_NS
