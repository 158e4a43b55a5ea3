// interpolate: own CUDA variants.
// cuda.direct, forward: one thread per output (plane, oh, ow), grid-stride with ow fastest, so a
// warp writes a contiguous run of an output row; each thread derives its source indices and
// weights (interpolate.h, the CPU's arithmetic) and reads one (nearest) or four (bilinear)
// elements of x. Traffic: y written once, coalesced; x read about once (neighbouring threads share
// their sources through L1/L2) -> bandwidth bound. Any sizes; index arithmetic in int64.
// cuda.direct, backward: a gather, no atomics, deterministic. One thread per dx element (plane,
// h, w): the outputs that read input row h are a contiguous range (the source index is
// non-decreasing in the output index), found by binary search over the output rows -- for
// bilinear, those whose i0 is h - 1 or h; for nearest, those whose source is h -- and columns
// likewise; the thread sums weight_h * weight_w * dy over that rectangle in (oh, ow) order (float
// accumulation; double for f64). Traffic: dx written once, dy read about once per input that uses
// it (a few times for upsampling, from cache); the binary searches cost O(log P + log Q) per
// thread. Not yet timed on a GPU.
#include "kernels/cuda_common.h"
// (cuda_common.h first, as every *_cuda.cu)
#include "kernels/interpolate/interpolate.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ int64_t grid_start() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_step() { return int64_t(blockDim.x) * gridDim.x; }

// Sizes and scales of one call (by value to every kernel). Scales in both precisions: nearest's
// rule is in float whatever the data, bilinear's in the data's dtype.
template <class T>
struct Geom {
  int64_t NC, H, W, P, Q;
  float nearest_h, nearest_w;
  T linear_h, linear_w;
  bool align_corners;
};

template <class T>
Geom<T> geom(const Tensor& x, const Tensor& y, const InterpolateParams& p) {
  const int64_t H = x.size(2), W = x.size(3), P = y.size(2), Q = y.size(3);
  return Geom<T>{x.size(0) * x.size(1),
                 H,
                 W,
                 P,
                 Q,
                 nearest_scale(H, P, p.scale_h),
                 nearest_scale(W, Q, p.scale_w),
                 linear_scale<T>(H, P, p.align_corners, p.scale_h),
                 linear_scale<T>(W, Q, p.align_corners, p.scale_w),
                 p.align_corners};
}

// First output in [0, out) whose source is >= target (out when none): nearest's source, or
// bilinear's i0.
__device__ __forceinline__ int64_t nearest_first(int64_t target, int64_t in, int64_t out,
                                                 float scale) {
  int64_t lo = 0, hi = out;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (nearest_source(mid, in, out, scale) >= target)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}
template <class T>
__device__ __forceinline__ int64_t linear_first(int64_t target, int64_t in, int64_t out, T scale,
                                                bool align_corners) {
  int64_t lo = 0, hi = out;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (linear_source(mid, in, out, scale, align_corners).i0 >= target)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}
// The weight with which output source r reads input i.
template <class T>
__device__ __forceinline__ T lerp_weight(const Lerp<T>& r, int64_t i) {
  return (r.i0 == i ? r.l0 : T(0)) + (r.i1 == i ? r.l1 : T(0));
}

template <class T>
__global__ void nearest_fwd_kernel(const T* x, T* y, Geom<T> g) {
  const int64_t total = g.NC * g.P * g.Q;
  for (int64_t o = grid_start(); o < total; o += grid_step()) {
    const int64_t ow = o % g.Q, oh = (o / g.Q) % g.P, nc = o / (g.Q * g.P);
    const int64_t h = nearest_source(oh, g.H, g.P, g.nearest_h);
    const int64_t w = nearest_source(ow, g.W, g.Q, g.nearest_w);
    y[o] = x[(nc * g.H + h) * g.W + w];
  }
}

template <class T>
__global__ void bilinear_fwd_kernel(const T* x, T* y, Geom<T> g) {
  const int64_t total = g.NC * g.P * g.Q;
  for (int64_t o = grid_start(); o < total; o += grid_step()) {
    const int64_t ow = o % g.Q, oh = (o / g.Q) % g.P, nc = o / (g.Q * g.P);
    const Lerp<T> r = linear_source(oh, g.H, g.P, g.linear_h, g.align_corners);
    const Lerp<T> c = linear_source(ow, g.W, g.Q, g.linear_w, g.align_corners);
    const T* r0 = x + (nc * g.H + r.i0) * g.W;
    const T* r1 = x + (nc * g.H + r.i1) * g.W;
    y[o] = r.l0 * (c.l0 * r0[c.i0] + c.l1 * r0[c.i1]) + r.l1 * (c.l0 * r1[c.i0] + c.l1 * r1[c.i1]);
  }
}

template <class T>
__global__ void nearest_bwd_kernel(const T* dy, T* dx, Geom<T> g) {
  using A = typename Acc<T>::type;
  const int64_t total = g.NC * g.H * g.W;
  for (int64_t e = grid_start(); e < total; e += grid_step()) {
    const int64_t w = e % g.W, h = (e / g.W) % g.H, nc = e / (g.W * g.H);
    const int64_t h0 = nearest_first(h, g.H, g.P, g.nearest_h);
    const int64_t h1 = nearest_first(h + 1, g.H, g.P, g.nearest_h);
    const int64_t w0 = nearest_first(w, g.W, g.Q, g.nearest_w);
    const int64_t w1 = nearest_first(w + 1, g.W, g.Q, g.nearest_w);
    A acc = A(0);
    for (int64_t oh = h0; oh < h1; ++oh) {
      const T* row = dy + (nc * g.P + oh) * g.Q;
      for (int64_t ow = w0; ow < w1; ++ow) acc += A(row[ow]);
    }
    dx[e] = T(acc);
  }
}

template <class T>
__global__ void bilinear_bwd_kernel(const T* dy, T* dx, Geom<T> g) {
  using A = typename Acc<T>::type;
  const int64_t total = g.NC * g.H * g.W;
  for (int64_t e = grid_start(); e < total; e += grid_step()) {
    const int64_t w = e % g.W, h = (e / g.W) % g.H, nc = e / (g.W * g.H);
    // Outputs whose i0 is h - 1 or h (i1 is then h or h + 1).
    const int64_t h0 = linear_first(h - 1, g.H, g.P, g.linear_h, g.align_corners);
    const int64_t h1 = linear_first(h + 1, g.H, g.P, g.linear_h, g.align_corners);
    const int64_t w0 = linear_first(w - 1, g.W, g.Q, g.linear_w, g.align_corners);
    const int64_t w1 = linear_first(w + 1, g.W, g.Q, g.linear_w, g.align_corners);
    A acc = A(0);
    for (int64_t oh = h0; oh < h1; ++oh) {
      const T wh = lerp_weight(linear_source(oh, g.H, g.P, g.linear_h, g.align_corners), h);
      const T* row = dy + (nc * g.P + oh) * g.Q;
      A sum = A(0);
      for (int64_t ow = w0; ow < w1; ++ow)
        sum += A(lerp_weight(linear_source(ow, g.W, g.Q, g.linear_w, g.align_corners), w)) *
               A(row[ow]);
      acc += A(wh) * sum;
    }
    dx[e] = T(acc);
  }
}

template <class F>
void dispatch_interp(DType t, F f) {
  if (t == DType::f32)
    f(float{});
  else
    f(double{});  // the checks admit f32 and f64 only
}

void interpolate_fwd_cuda_direct(const InterpolateFwdArgs& a) {
  check_interpolate_fwd_args(a);
  const int64_t total = a.y.numel();
  if (total == 0) return;
  dispatch_interp(a.x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Geom<T> g = geom<T>(a.x, a.y, a.p);
    const cudaStream_t st = stream_for(a.x.device());
    if (a.p.mode == InterpMode::nearest) {
      AIM_LAUNCH(grid_for(total, kThreads), kThreads, 0, st, nearest_fwd_kernel<T>)
      (a.x.data<T>(), a.y.data<T>(), g);
    } else {
      AIM_LAUNCH(grid_for(total, kThreads), kThreads, 0, st, bilinear_fwd_kernel<T>)
      (a.x.data<T>(), a.y.data<T>(), g);
    }
    AIM_CHECK_LAUNCH();
  });
}

void interpolate_bwd_cuda_direct(const InterpolateBwdArgs& a) {
  check_interpolate_bwd_args(a);
  const int64_t total = a.dx.numel();
  if (total == 0) return;
  dispatch_interp(a.dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Geom<T> g = geom<T>(a.dx, a.dy, a.p);
    const cudaStream_t st = stream_for(a.dy.device());
    if (a.p.mode == InterpMode::nearest) {
      AIM_LAUNCH(grid_for(total, kThreads), kThreads, 0, st, nearest_bwd_kernel<T>)
      (a.dy.data<T>(), a.dx.data<T>(), g);
    } else {
      AIM_LAUNCH(grid_for(total, kThreads), kThreads, 0, st, bilinear_bwd_kernel<T>)
      (a.dy.data<T>(), a.dx.data<T>(), g);
    }
    AIM_CHECK_LAUNCH();
  });
}

}  // namespace

void register_interpolate_cuda(Registry& r) {
  const std::vector<DType> dt = {DType::f32, DType::f64};
  r.op<InterpolateFwdArgs>("interpolate_fwd")
      .add({"cuda.direct", AIM_CUDA_BACKEND, Provider::Own, interpolate_fwd_cuda_direct, dt});
  r.op<InterpolateBwdArgs>("interpolate_bwd")
      .add({"cuda.direct", AIM_CUDA_BACKEND, Provider::Own, interpolate_bwd_cuda_direct, dt});
  r.op<InterpolateFwdArgs>("interpolate_fwd").set_default(AIM_CUDA_BACKEND, "cuda.direct");
  r.op<InterpolateBwdArgs>("interpolate_bwd").set_default(AIM_CUDA_BACKEND, "cuda.direct");
}

}  // namespace aim::kernels::AIM_CUDA_NS
