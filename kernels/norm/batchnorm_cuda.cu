// cuda.channel (forward and backward), the default CUDA variant. x [N, C, S] (trailing dims
// folded into S).
// Statistics / reductions: one 512-thread block per channel walks the channel's N*S values
// (thread t takes values t, t + 512, ... of the channel in (n, s) order: consecutive threads read
// consecutive s, so loads coalesce when S >= 32) and reduces with block_sum (warp shuffles, then
// the warps in fixed order): deterministic, no atomics. Forward training: two passes (mean, then
// squared deviations: no cancellation), thread 0 writes save_mean/save_rstd and updates the
// running statistics (unbiased variance). Eval: one thread per channel turns running_var into
// rstd. Backward: one pass for sum(dy) and sum(dy * xhat); thread 0 adds them into dbeta/dgamma
// and keeps them in a [2, C] scratch for dx.
// Elementwise pass (y, dx): a flat grid-stride loop over x, at least 4 elements per thread, the
// channel of each element tracked incrementally (no division per element); per-channel values
// are broadcast loads from L1.
// Traffic: forward training reads x three times (two stat passes, y) and writes y once;
// backward reads x and dy twice, writes dx once -> bandwidth bound. Limit: the stat kernels
// run C blocks, so C below the SM count (132 on H100/H200) leaves SMs idle; splitting a channel
// over several blocks (a second deterministic stage) is the next variant to try. Loads are not
// vectorised.
// Accumulation in float (double for f64), statistics and parameters in the statistics dtype
// (batchnorm_stat_dtype); 16-bit outputs rounded once.
#include "kernels/cuda_common.h"
#include "kernels/norm/batchnorm.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kStatThreads = 512;
constexpr int kApplyThreads = 256;
// Elements per thread of the elementwise passes (at least): amortises the divisions that place
// a thread's first element.
constexpr int64_t kItemsPerThread = 4;

// ---- per-channel statistics and sums --------------------------------------------------------

// Thread threadIdx.x's walk over one channel's N*S values in (n, s) order, from value
// threadIdx.x in steps of blockDim.x, without a division per value. Value (n, s) of channel c is
// x[n * C * S + c * S + s].
struct ChannelWalk {
  int64_t n, s, dn, ds;
  __device__ explicit ChannelWalk(int64_t S)
      : n(int64_t(threadIdx.x) / S),
        s(int64_t(threadIdx.x) % S),
        dn(int64_t(blockDim.x) / S),
        ds(int64_t(blockDim.x) % S) {}
  __device__ void next(int64_t S) {
    s += ds;
    n += dn;
    if (s >= S) {
      s -= S;
      ++n;
    }
  }
};

template <class T>
__global__ void fwd_stats_kernel(const T* x, typename Acc<T>::type* mean,
                                 typename Acc<T>::type* rstd, typename Acc<T>::type* running_mean,
                                 typename Acc<T>::type* running_var, int64_t N, int64_t C,
                                 int64_t S, double momentum, double eps) {
  using A = typename Acc<T>::type;
  __shared__ A scratch[kWarpSize];
  const int64_t c = blockIdx.x;
  const T* xc = x + c * S;
  const int64_t CS = C * S;
  A sum = 0;
  for (ChannelWalk w(S); w.n < N; w.next(S)) sum += to_acc<A>(xc[w.n * CS + w.s]);
  const A M = A(N * S);
  const A m = block_sum(sum, scratch) / M;
  A sq = 0;
  for (ChannelWalk w(S); w.n < N; w.next(S)) {
    const A d = to_acc<A>(xc[w.n * CS + w.s]) - m;
    sq += d * d;
  }
  const A tot = block_sum(sq, scratch);
  if (threadIdx.x == 0) {
    mean[c] = m;
    rstd[c] = A(1) / sqrt(tot / M + A(eps));  // biased variance normalises
    if (running_mean) {
      const A mo = A(momentum);
      running_mean[c] = (A(1) - mo) * running_mean[c] + mo * m;
      running_var[c] = (A(1) - mo) * running_var[c] + mo * (tot / (M - A(1)));  // unbiased
    }
  }
}

template <class A>
__global__ void eval_stats_kernel(const A* running_mean, const A* running_var, A* mean, A* rstd,
                                  int64_t C, double eps) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  mean[c] = running_mean[c];
  rstd[c] = A(1) / sqrt(running_var[c] + A(eps));
}

// sums (optional) [2, C]: sum(dy), sum(dy * xhat) per channel; dgamma/dbeta (optional) += them.
// y_relu (optional): the forward's fused relu output; dy counts where it is > 0.
template <class T>
__global__ void bwd_sums_kernel(const T* dy, const T* x, const T* y_relu,
                                const typename Acc<T>::type* mean,
                                const typename Acc<T>::type* rstd, typename Acc<T>::type* sums,
                                typename Acc<T>::type* dgamma, typename Acc<T>::type* dbeta,
                                int64_t N, int64_t C, int64_t S) {
  using A = typename Acc<T>::type;
  __shared__ A scratch[kWarpSize];
  const int64_t c = blockIdx.x;
  const T* xc = x + c * S;
  const T* dyc = dy + c * S;
  const T* yc = y_relu ? y_relu + c * S : nullptr;
  const int64_t CS = C * S;
  const A m = mean[c];
  A s1 = 0, s2 = 0;
  for (ChannelWalk w(S); w.n < N; w.next(S)) {
    const int64_t i = w.n * CS + w.s;
    const A d = yc && !(to_acc<A>(yc[i]) > A(0)) ? A(0) : to_acc<A>(dyc[i]);
    s1 += d;
    s2 += d * (to_acc<A>(xc[i]) - m);
  }
  s1 = block_sum(s1, scratch);
  s2 = block_sum(s2, scratch) * rstd[c];
  if (threadIdx.x == 0) {
    if (sums) {
      sums[c] = s1;
      sums[C + c] = s2;
    }
    if (dgamma) dgamma[c] += s2;
    if (dbeta) dbeta[c] += s1;
  }
}

// ---- elementwise passes ---------------------------------------------------------------------

// Grid-stride position in x [N, C, S]: flat index i, its s and channel c, advanced without a
// division per element (dc + carry <= C, so one wrap is enough).
struct Walk {
  int64_t i, s, c, stride, ds, dc;
  __device__ Walk(int64_t C, int64_t S) {
    i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    stride = int64_t(gridDim.x) * blockDim.x;
    s = i % S;
    c = (i / S) % C;
    ds = stride % S;
    dc = (stride / S) % C;
  }
  __device__ void next(int64_t C, int64_t S) {
    i += stride;
    s += ds;
    int64_t carry = 0;
    if (s >= S) {
      s -= S;
      carry = 1;
    }
    c += dc + carry;
    if (c >= C) c -= C;
  }
};

template <class T>
__global__ void fwd_apply_kernel(const T* x, T* y, const typename Acc<T>::type* gamma,
                                 const typename Acc<T>::type* beta,
                                 const typename Acc<T>::type* mean,
                                 const typename Acc<T>::type* rstd, int64_t total, int64_t C,
                                 int64_t S, bool relu) {
  using A = typename Acc<T>::type;
  for (Walk w(C, S); w.i < total; w.next(C, S)) {
    A v = (to_acc<A>(x[w.i]) - mean[w.c]) * rstd[w.c];
    if (gamma) v = v * gamma[w.c] + beta[w.c];
    if (relu && v < A(0)) v = A(0);  // eval's fused relu; NaN stays NaN
    y[w.i] = from_acc<T>(v);
  }
}

// dx = gamma * rstd * (dy - sum(dy)/M - xhat * sum(dy*xhat)/M); frozen (sums null): gamma*rstd*dy.
template <class T>
__global__ void bwd_apply_kernel(const T* dy, const T* x, const T* y_relu,
                                 const typename Acc<T>::type* gamma,
                                 const typename Acc<T>::type* mean,
                                 const typename Acc<T>::type* rstd,
                                 const typename Acc<T>::type* sums, T* dx, int64_t total, int64_t C,
                                 int64_t S, double inv_m) {
  using A = typename Acc<T>::type;
  const A im = A(inv_m);
  for (Walk w(C, S); w.i < total; w.next(C, S)) {
    const A r = rstd[w.c];
    const A k = gamma ? gamma[w.c] * r : r;
    const A d = y_relu && !(to_acc<A>(y_relu[w.i]) > A(0)) ? A(0) : to_acc<A>(dy[w.i]);
    if (sums) {
      const A xh = (to_acc<A>(x[w.i]) - mean[w.c]) * r;
      dx[w.i] = from_acc<T>(k * (d - sums[w.c] * im - xh * (sums[C + w.c] * im)));
    } else {
      dx[w.i] = from_acc<T>(k * d);
    }
  }
}

// ---- launchers ------------------------------------------------------------------------------

struct Folded {
  int64_t N, C, S;
};
Folded fold(const Tensor& x) {
  Folded f{x.size(0), x.size(1), 1};
  for (int64_t d = 2; d < x.dim(); ++d) f.S *= x.size(d);
  return f;
}

template <class A>
A* opt(const Tensor& t) {
  return t.defined() ? t.data<A>() : nullptr;
}

void batchnorm_fwd_cuda_channel(const BatchNormFwdArgs& a) {
  check_batchnorm_fwd_args(a);
  const Folded f = fold(a.x);
  const int64_t total = a.x.numel();
  const Device dev = a.x.device();
  if (f.C == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, {
    using A = typename Acc<T>::type;
    // Eval without save_*: the statistics still go through a [C] buffer for the y pass.
    const Tensor mean =
        a.save_mean.defined() ? a.save_mean : Tensor::empty({f.C}, dtype_of<A>(), dev);
    const Tensor rstd =
        a.save_rstd.defined() ? a.save_rstd : Tensor::empty({f.C}, dtype_of<A>(), dev);
    if (a.training) {
      AIM_LAUNCH(unsigned(f.C), kStatThreads, 0, stream_for(dev), fwd_stats_kernel<T>)
      (static_cast<const T*>(a.x.raw_data()), mean.data<A>(), rstd.data<A>(),
       opt<A>(a.running_mean), opt<A>(a.running_var), f.N, f.C, f.S, a.momentum, a.eps);
    } else {
      AIM_LAUNCH(unsigned(ceil_div(f.C, 256)), 256, 0, stream_for(dev), eval_stats_kernel<A>)
      (a.running_mean.data<A>(), a.running_var.data<A>(), mean.data<A>(), rstd.data<A>(), f.C,
       a.eps);
    }
    AIM_CHECK_LAUNCH();
    if (total > 0) {
      AIM_LAUNCH(grid_for(ceil_div(total, kItemsPerThread), kApplyThreads), kApplyThreads, 0,
                 stream_for(dev), fwd_apply_kernel<T>)
      (static_cast<const T*>(a.x.raw_data()), static_cast<T*>(a.y.raw_data()), opt<A>(a.gamma),
       opt<A>(a.beta), mean.data<A>(), rstd.data<A>(), total, f.C, f.S, a.relu);
      AIM_CHECK_LAUNCH();
    }
  });
}

void batchnorm_bwd_cuda_channel(const BatchNormBwdArgs& a) {
  check_batchnorm_bwd_args(a);
  const Folded f = fold(a.x);
  const int64_t total = a.x.numel();
  if (total == 0) return;  // dx has no element; dgamma, dbeta += an empty sum
  const Device dev = a.x.device();
  const bool dx_sums = a.training && a.dx.defined();
  const bool need_sums = dx_sums || a.dgamma.defined() || a.dbeta.defined();
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, {
    using A = typename Acc<T>::type;
    const T* dy = static_cast<const T*>(a.dy.raw_data());
    const T* x = static_cast<const T*>(a.x.raw_data());
    const T* yr = a.y_relu.defined() ? static_cast<const T*>(a.y_relu.raw_data()) : nullptr;
    const Tensor sums = dx_sums ? Tensor::empty({2, f.C}, dtype_of<A>(), dev) : Tensor();
    if (need_sums) {
      AIM_LAUNCH(unsigned(f.C), kStatThreads, 0, stream_for(dev), bwd_sums_kernel<T>)
      (dy, x, yr, a.save_mean.data<A>(), a.save_rstd.data<A>(), opt<A>(sums), opt<A>(a.dgamma),
       opt<A>(a.dbeta), f.N, f.C, f.S);
      AIM_CHECK_LAUNCH();
    }
    if (a.dx.defined()) {
      AIM_LAUNCH(grid_for(ceil_div(total, kItemsPerThread), kApplyThreads), kApplyThreads, 0,
                 stream_for(dev), bwd_apply_kernel<T>)
      (dy, x, yr, opt<A>(a.gamma), a.save_mean.data<A>(), a.save_rstd.data<A>(), opt<A>(sums),
       static_cast<T*>(a.dx.raw_data()), total, f.C, f.S, 1.0 / double(f.N * f.S));
      AIM_CHECK_LAUNCH();
    }
  });
}

// One block per channel: the grid's x dimension.
template <class Args>
std::string channels_fit(const Args& a) {
  if (!a.x.defined() || a.x.dim() < 2) return "";  // the launcher's check names the problem
  const int64_t C = a.x.size(1);
  return C <= int64_t(0x7fffffff) ? "" : str("needs C <= 2^31-1 channels, got ", C);
}

const std::vector<DType> kFloatTypes = {DType::f32, DType::f64, DType::f16, DType::bf16};

}  // namespace

void register_batchnorm_cuda(Registry& r) {
  auto& f = r.op<BatchNormFwdArgs>("batchnorm_fwd");
  f.add({"cuda.channel", AIM_CUDA_BACKEND, Provider::Own, batchnorm_fwd_cuda_channel, kFloatTypes,
         channels_fit<BatchNormFwdArgs>});
  f.set_default(AIM_CUDA_BACKEND, "cuda.channel");
  auto& b = r.op<BatchNormBwdArgs>("batchnorm_bwd");
  b.add({"cuda.channel", AIM_CUDA_BACKEND, Provider::Own, batchnorm_bwd_cuda_channel, kFloatTypes,
         channels_fit<BatchNormBwdArgs>});
  b.set_default(AIM_CUDA_BACKEND, "cuda.channel");
}

}  // namespace aim::kernels::AIM_CUDA_NS
