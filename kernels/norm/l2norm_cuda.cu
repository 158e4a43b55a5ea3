// l2norm_fwd, l2norm_bwd: own CUDA variants.
// cuda.column (forward and backward): one thread per (n, s) column of x [N, C, S], grid-stride;
// the thread walks the channels twice (sums, then outputs): consecutive threads take consecutive
// s, so every load coalesces and the second walk hits L1/L2 for small C. Backward: the same with
// the dot product sum_c scale dy x; when dscale is wanted each column's 1/d goes to an f32 (f64)
// scratch and a second kernel, one block per channel, sums dy x / d over (n, s) in a fixed order
// and adds it: deterministic, no atomics. Accumulation in float (double for f64), 16-bit outputs
// rounded once. Bound: memory (x read twice, from L2 the second time when a column block fits);
// with few columns (N S < a few thousand) most of the GPU idles. Not yet timed on a GPU.
#include "kernels/cuda_common.h"
// (cuda_common.h first, as every *_cuda.cu)
#include "kernels/norm/l2norm.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void fwd_kernel(const T* x, const T* scale, T* y, int64_t N, int64_t C, int64_t S,
                           double eps) {
  using A = typename Acc<T>::type;
  for (int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; col < N * S;
       col += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = (col / S) * C * S + col % S;
    A ss = 0;
    for (int64_t c = 0; c < C; ++c) {
      const A v = to_acc<A>(x[base + c * S]);
      ss += v * v;
    }
    const A d = max(sqrt(ss), A(eps));
    const A inv = A(1) / d;
    for (int64_t c = 0; c < C; ++c) {
      const A k = scale ? to_acc<A>(scale[c]) : A(1);
      y[base + c * S] = from_acc<T>(k * to_acc<A>(x[base + c * S]) * inv);
    }
  }
}

template <class T>
__global__ void bwd_kernel(const T* dy, const T* x, const T* scale, T* dx,
                           typename Acc<T>::type* invd, int64_t N, int64_t C, int64_t S,
                           double eps) {
  using A = typename Acc<T>::type;
  for (int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; col < N * S;
       col += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = (col / S) * C * S + col % S;
    A ss = 0, g = 0;
    for (int64_t c = 0; c < C; ++c) {
      const A v = to_acc<A>(x[base + c * S]);
      const A k = scale ? to_acc<A>(scale[c]) : A(1);
      ss += v * v;
      g += k * to_acc<A>(dy[base + c * S]) * v;
    }
    const A r = sqrt(ss), d = max(r, A(eps));
    const A inv = A(1) / d;
    const A coef = double(r) >= eps ? g / (d * d * r) : A(0);
    if (invd) invd[col] = inv;
    for (int64_t c = 0; c < C; ++c) {
      const int64_t i = base + c * S;
      const A k = scale ? to_acc<A>(scale[c]) : A(1);
      dx[i] = from_acc<T>(k * to_acc<A>(dy[i]) * inv - to_acc<A>(x[i]) * coef);
    }
  }
}

// dscale[c] += sum_{n,s} dy x / d: one block per channel.
template <class T>
__global__ void dscale_kernel(const T* dy, const T* x, const typename Acc<T>::type* invd, T* dscale,
                              int64_t N, int64_t C, int64_t S) {
  using A = typename Acc<T>::type;
  __shared__ A scratch[32];
  const int64_t c = blockIdx.x;
  A sum = 0;
  for (int64_t e = threadIdx.x; e < N * S; e += blockDim.x) {
    const int64_t n = e / S, s = e % S, i = (n * C + c) * S + s;
    sum += to_acc<A>(dy[i]) * to_acc<A>(x[i]) * invd[e];
  }
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) dscale[c] = from_acc<T>(to_acc<A>(dscale[c]) + sum);
}

struct Folded {
  int64_t N, C, S;
};
Folded fold(const Tensor& x) {
  Folded f{x.size(0), x.size(1), 1};
  for (int64_t d = 2; d < x.dim(); ++d) f.S *= x.size(d);
  return f;
}

void l2norm_fwd_cuda_column(const L2NormFwdArgs& a) {
  check_l2norm_fwd_args(a);
  const Folded f = fold(a.x);
  if (f.N * f.C * f.S == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, {
    AIM_LAUNCH(grid_for(f.N * f.S, kThreads), kThreads, 0, stream_for(a.x.device()), fwd_kernel<T>)
    (static_cast<const T*>(a.x.raw_data()),
     a.scale.defined() ? static_cast<const T*>(a.scale.raw_data()) : nullptr,
     static_cast<T*>(a.y.raw_data()), f.N, f.C, f.S, a.eps);
    AIM_CHECK_LAUNCH();
  });
}

void l2norm_bwd_cuda_column(const L2NormBwdArgs& a) {
  check_l2norm_bwd_args(a);
  const Folded f = fold(a.x);
  if (f.N * f.C * f.S == 0) return;  // dscale += 0
  const Device dev = a.x.device();
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, {
    using A = typename Acc<T>::type;
    const bool ds = a.dscale.defined();
    Tensor invd = ds ? Tensor::empty({f.N * f.S}, dtype_of<A>(), dev) : Tensor();
    AIM_LAUNCH(grid_for(f.N * f.S, kThreads), kThreads, 0, stream_for(dev), bwd_kernel<T>)
    (static_cast<const T*>(a.dy.raw_data()), static_cast<const T*>(a.x.raw_data()),
     a.scale.defined() ? static_cast<const T*>(a.scale.raw_data()) : nullptr,
     static_cast<T*>(a.dx.raw_data()), ds ? invd.data<A>() : nullptr, f.N, f.C, f.S, a.eps);
    AIM_CHECK_LAUNCH();
    if (ds) {
      AIM_LAUNCH(unsigned(f.C), kThreads, 0, stream_for(dev), dscale_kernel<T>)
      (static_cast<const T*>(a.dy.raw_data()), static_cast<const T*>(a.x.raw_data()),
       invd.data<A>(), static_cast<T*>(a.dscale.raw_data()), f.N, f.C, f.S);
      AIM_CHECK_LAUNCH();
    }
  });
}

const std::vector<DType> kFloatTypes = {DType::f32, DType::f64, DType::f16, DType::bf16};

}  // namespace

void register_l2norm_cuda(Registry& r) {
  auto& f = r.op<L2NormFwdArgs>("l2norm_fwd");
  f.add({"cuda.column", AIM_CUDA_BACKEND, Provider::Own, l2norm_fwd_cuda_column, kFloatTypes});
  f.set_default(AIM_CUDA_BACKEND, "cuda.column");
  auto& b = r.op<L2NormBwdArgs>("l2norm_bwd");
  b.add({"cuda.column", AIM_CUDA_BACKEND, Provider::Own, l2norm_bwd_cuda_column, kFloatTypes});
  b.set_default(AIM_CUDA_BACKEND, "cuda.column");
}

}  // namespace aim::kernels::AIM_CUDA_NS
