// cuda.direct (forward and backward): each thread takes elements of x [N, C, S] (at least 4) in a
// flat grid-stride loop (the channel of each element tracked without a division per element), the
// window recomputed directly from x. Consecutive threads take consecutive s: every load of the
// window coalesces, and the `size` (forward) or `size`^2 (backward) loads of neighbouring
// channels mostly hit L1/L2, so DRAM traffic stays near one read of x (and dy) and one write.
// Forward: scale = k + alpha/size * sum of x^2 over the window, y = x * scale^-beta.
// Backward: for each channel j whose window holds c, scale_j is recomputed (size loads) and
// dy_j * x_j * scale_j^(-beta-1) summed; dx = dy * scale_c^-beta - 2*alpha*beta/size * x * sum.
// So the backward does size^2 loads and size pows per element: compute bound for large sizes;
// a variant keeping a column's scales in registers or shared memory would cut that to size.
// beta = 0.75 takes scale^-0.75 = r * sqrt(r), r = rsqrt(scale); other betas call pow.
// Accumulation in float (double for f64); 16-bit outputs rounded once; no reductions across
// threads: deterministic.
#include "kernels/cuda_common.h"
#include "kernels/norm/lrn.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kThreads = 256;
// Elements per thread (at least): amortises the divisions that place a thread's first element.
constexpr int64_t kItemsPerThread = 4;

// Grid-stride position in x [N, C, S]: flat index i and its channel c, advanced without a
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

struct Params {
  int64_t size;
  double alpha_over_size, beta, k;
  bool beta_075;  // beta == 0.75: the rsqrt path
};

// scale^-beta.
template <class A>
__device__ __forceinline__ A pow_neg_beta(A scale, const Params& p) {
  if (p.beta_075) {
    const A r = A(1) / sqrt(scale);
    return r * sqrt(r);
  }
  return pow(scale, A(-p.beta));
}

// scale of channel c at flat index i of channel c: k + alpha/size * sum of x^2 over
// [c - size/2, c + (size-1)/2] within [0, C).
template <class T, class A>
__device__ __forceinline__ A window_scale(const T* x, int64_t i, int64_t c, int64_t C, int64_t S,
                                          const Params& p) {
  const int64_t lo = c - p.size / 2 > 0 ? c - p.size / 2 : 0;
  const int64_t hi = c + (p.size - 1) / 2 < C - 1 ? c + (p.size - 1) / 2 : C - 1;
  A sum = 0;
  for (int64_t j = lo; j <= hi; ++j) {
    const A v = to_acc<A>(x[i + (j - c) * S]);
    sum += v * v;
  }
  return A(p.k) + A(p.alpha_over_size) * sum;
}

template <class T>
__global__ void fwd_direct_kernel(const T* x, T* y, int64_t total, int64_t C, int64_t S, Params p) {
  using A = typename Acc<T>::type;
  for (Walk w(C, S); w.i < total; w.next(C, S)) {
    const A scale = window_scale<T, A>(x, w.i, w.c, C, S, p);
    y[w.i] = from_acc<T>(to_acc<A>(x[w.i]) * pow_neg_beta(scale, p));
  }
}

template <class T>
__global__ void bwd_direct_kernel(const T* dy, const T* x, T* dx, int64_t total, int64_t C,
                                  int64_t S, Params p) {
  using A = typename Acc<T>::type;
  for (Walk w(C, S); w.i < total; w.next(C, S)) {
    // The outputs j whose window holds c: [c - (size-1)/2, c + size/2] within [0, C).
    const int64_t lo = w.c - (p.size - 1) / 2 > 0 ? w.c - (p.size - 1) / 2 : 0;
    const int64_t hi = w.c + p.size / 2 < C - 1 ? w.c + p.size / 2 : C - 1;
    A sum = 0, own = 0;  // own: scale_c^-beta
    for (int64_t j = lo; j <= hi; ++j) {
      const int64_t ij = w.i + (j - w.c) * S;
      const A scale = window_scale<T, A>(x, ij, j, C, S, p);
      const A pj = pow_neg_beta(scale, p);
      if (j == w.c) own = pj;
      sum += to_acc<A>(dy[ij]) * to_acc<A>(x[ij]) * pj / scale;
    }
    const A coef = A(2.0 * p.alpha_over_size * p.beta);
    dx[w.i] = from_acc<T>(to_acc<A>(dy[w.i]) * own - coef * to_acc<A>(x[w.i]) * sum);
  }
}

struct Folded {
  int64_t C, S;
};
Folded fold(const Tensor& x) {
  Folded f{x.size(1), 1};
  for (int64_t d = 2; d < x.dim(); ++d) f.S *= x.size(d);
  return f;
}

Params params_of(const LrnParams& q) {
  return Params{q.size, q.alpha / double(q.size), q.beta, q.k, q.beta == 0.75};
}

void lrn_fwd_cuda_direct(const LrnFwdArgs& a) {
  check_lrn_fwd_args(a);
  const int64_t total = a.x.numel();
  if (total == 0) return;
  const Folded f = fold(a.x);
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, {
    AIM_LAUNCH(grid_for(ceil_div(total, kItemsPerThread), kThreads), kThreads, 0,
               stream_for(a.x.device()), fwd_direct_kernel<T>)
    (static_cast<const T*>(a.x.raw_data()), static_cast<T*>(a.y.raw_data()), total, f.C, f.S,
     params_of(a.p));
  });
  AIM_CHECK_LAUNCH();
}

void lrn_bwd_cuda_direct(const LrnBwdArgs& a) {
  check_lrn_bwd_args(a);
  const int64_t total = a.x.numel();
  if (total == 0) return;
  const Folded f = fold(a.x);
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, {
    AIM_LAUNCH(grid_for(ceil_div(total, kItemsPerThread), kThreads), kThreads, 0,
               stream_for(a.x.device()), bwd_direct_kernel<T>)
    (static_cast<const T*>(a.dy.raw_data()), static_cast<const T*>(a.x.raw_data()),
     static_cast<T*>(a.dx.raw_data()), total, f.C, f.S, params_of(a.p));
  });
  AIM_CHECK_LAUNCH();
}

const std::vector<DType> kFloatTypes = {DType::f32, DType::f64, DType::f16, DType::bf16};

}  // namespace

void register_lrn_cuda(Registry& r) {
  auto& f = r.op<LrnFwdArgs>("lrn_fwd");
  f.add({"cuda.direct", AIM_CUDA_BACKEND, Provider::Own, lrn_fwd_cuda_direct, kFloatTypes});
  f.set_default(AIM_CUDA_BACKEND, "cuda.direct");
  auto& b = r.op<LrnBwdArgs>("lrn_bwd");
  b.add({"cuda.direct", AIM_CUDA_BACKEND, Provider::Own, lrn_bwd_cuda_direct, kFloatTypes});
  b.set_default(AIM_CUDA_BACKEND, "cuda.direct");
}

}  // namespace aim::kernels::AIM_CUDA_NS
