// cuda.direct, forward of max and average pooling and adaptive average pooling with P*Q > 1: one
// thread per output element, grid-stride over N*C*P*Q with q fastest, so a warp covers a run of
// neighbouring windows of one output row. Each thread loops over its window (clipped to the
// input) in row-major order: max keeps the first maximum (strict >) and lets NaN through, as
// cpu.ref; average sums in float (double for f64) and divides once. Traffic: x is read from DRAM
// about once (overlapping windows hit L1/L2), y (+ i32 indices) written once, coalesced ->
// bandwidth bound. Any shape and window; index arithmetic in int64.
// cuda.direct, adaptive average pooling to 1x1 (global pooling): one warp per plane (grid-stride
// over planes, 8 warps per 256-thread block), lanes stride the contiguous plane (coalesced),
// warp_sum, lane 0 writes. Reads x once -> bandwidth bound; planes shorter than ~32 elements
// leave lanes idle (7x7 = 49: two loads per lane).
// cuda.direct, backward (max, average, adaptive): a gather over the input, no atomics. One
// thread per dx element (grid-stride, w fastest): the outputs whose windows contain (h, w) are
// rows [ceil((h + pad_top - kernel_h + 1) / stride_h), floor((h + pad_top) / stride_h)] of [0, P)
// (adaptive: [floor(h*P/H), ceil((h+1)*P/H)) checked against each window), columns likewise.
// Max adds dy where the output's index is this element; average adds dy / divisor. Sums run in
// (p, q) order in float (double for f64): deterministic, every dx written once, no zeroing pass.
// Traffic: dx written once; dy (+ indices) read about (kernel/stride)^2 times, mostly from cache.
// Limit (max): indices must come from a forward with the same windows (p): an index outside its
// window is never gathered (the CPU variants throw on it).
#include "kernels/cuda_common.h"
#include "kernels/pool/pool2d.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kThreads = 256;

__host__ __device__ __forceinline__ int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
__host__ __device__ __forceinline__ int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

// Window geometry of one call (passed by value to every kernel).
struct Geom {
  int64_t NC, H, W, P, Q;
  int64_t kh, kw, sh, sw, pt, pb, pl, pr;
  bool count_include_pad;
};

Geom geom(const Tensor& x, const Tensor& y, const Pool2dParams& p) {
  return Geom{x.size(0) * x.size(1),
              x.size(2),
              x.size(3),
              y.size(2),
              y.size(3),
              p.kernel_h,
              p.kernel_w,
              p.stride_h,
              p.stride_w,
              p.pad_top,
              p.pad_bottom,
              p.pad_left,
              p.pad_right,
              p.count_include_pad};
}

// First output whose window (o*stride - pad, + k) still reaches input position i, and the last
// whose window starts at or before it, clipped to [0, O).
__device__ __forceinline__ int64_t first_window(int64_t i, int64_t k, int64_t stride, int64_t pad) {
  const int64_t t = i + pad - k + 1;
  return t <= 0 ? 0 : (t + stride - 1) / stride;
}
__device__ __forceinline__ int64_t last_window(int64_t i, int64_t stride, int64_t pad, int64_t O) {
  return imin((i + pad) / stride, O - 1);
}

// Average divisor extent of one axis: the window clipped to the padded extent, or to the input.
__device__ __forceinline__ int64_t avg_extent(int64_t o, int64_t k, int64_t stride,
                                              int64_t pad_before, int64_t pad_after, int64_t in,
                                              bool padded) {
  const int64_t s = o * stride - pad_before;
  return padded ? imin(s + k, in + pad_after) - s : imin(s + k, in) - imax(s, 0);
}

__device__ __forceinline__ int64_t adaptive_start(int64_t o, int64_t in, int64_t out) {
  return (o * in) / out;
}
__device__ __forceinline__ int64_t adaptive_end(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

__device__ __forceinline__ int64_t grid_start() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_step() { return int64_t(blockDim.x) * gridDim.x; }

// ---- forward --------------------------------------------------------------------------------

template <class T>
__global__ void maxpool_fwd_kernel(const T* x, T* y, int32_t* indices, Geom g) {
  using A = typename Acc<T>::type;
  const int64_t total = g.NC * g.P * g.Q;
  for (int64_t o = grid_start(); o < total; o += grid_step()) {
    const int64_t q = o % g.Q, p = (o / g.Q) % g.P, nc = o / (g.Q * g.P);
    const int64_t h0 = p * g.sh - g.pt, w0 = q * g.sw - g.pl;
    const int64_t hs = imax(h0, 0), he = imin(h0 + g.kh, g.H);
    const int64_t ws = imax(w0, 0), we = imin(w0 + g.kw, g.W);
    const T* xp = x + nc * g.H * g.W;
    A m = A(-INFINITY);
    int64_t at = hs * g.W + ws;
    for (int64_t h = hs; h < he; ++h)
      for (int64_t w = ws; w < we; ++w) {
        const A v = to_acc<A>(xp[h * g.W + w]);
        if (v > m || isnan(v)) {
          m = v;
          at = h * g.W + w;
        }
      }
    y[o] = from_acc<T>(m);
    if (indices) indices[o] = int32_t(at);
  }
}

template <class T>
__global__ void avgpool_fwd_kernel(const T* x, T* y, Geom g) {
  using A = typename Acc<T>::type;
  const int64_t total = g.NC * g.P * g.Q;
  for (int64_t o = grid_start(); o < total; o += grid_step()) {
    const int64_t q = o % g.Q, p = (o / g.Q) % g.P, nc = o / (g.Q * g.P);
    const int64_t h0 = p * g.sh - g.pt, w0 = q * g.sw - g.pl;
    const int64_t hs = imax(h0, 0), he = imin(h0 + g.kh, g.H);
    const int64_t ws = imax(w0, 0), we = imin(w0 + g.kw, g.W);
    const T* xp = x + nc * g.H * g.W;
    A s = 0;
    for (int64_t h = hs; h < he; ++h)
      for (int64_t w = ws; w < we; ++w) s += to_acc<A>(xp[h * g.W + w]);
    const int64_t count = avg_extent(p, g.kh, g.sh, g.pt, g.pb, g.H, g.count_include_pad) *
                          avg_extent(q, g.kw, g.sw, g.pl, g.pr, g.W, g.count_include_pad);
    y[o] = from_acc<T>(s / A(count));
  }
}

template <class T>
__global__ void adaptive_fwd_kernel(const T* x, T* y, int64_t NC, int64_t H, int64_t W, int64_t P,
                                    int64_t Q) {
  using A = typename Acc<T>::type;
  const int64_t total = NC * P * Q;
  for (int64_t o = grid_start(); o < total; o += grid_step()) {
    const int64_t q = o % Q, p = (o / Q) % P, nc = o / (Q * P);
    const int64_t hs = adaptive_start(p, H, P), he = adaptive_end(p, H, P);
    const int64_t ws = adaptive_start(q, W, Q), we = adaptive_end(q, W, Q);
    const T* xp = x + nc * H * W;
    A s = 0;
    for (int64_t h = hs; h < he; ++h)
      for (int64_t w = ws; w < we; ++w) s += to_acc<A>(xp[h * W + w]);
    y[o] = from_acc<T>(s / A((he - hs) * (we - ws)));
  }
}

// One warp per plane; the loop bound is the same for the whole warp (no divergence at the
// shuffles).
template <class T>
__global__ void global_avg_fwd_kernel(const T* x, T* y, int64_t NC, int64_t HW) {
  using A = typename Acc<T>::type;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / kWarpSize);
  for (int64_t nc = int64_t(blockIdx.x) * (blockDim.x / kWarpSize) + threadIdx.x / kWarpSize;
       nc < NC; nc += warps) {
    const T* xp = x + nc * HW;
    A s = 0;
    for (int64_t i = lane; i < HW; i += kWarpSize) s += to_acc<A>(xp[i]);
    s = warp_sum(s);
    if (lane == 0) y[nc] = from_acc<T>(s / A(HW));
  }
}

// ---- backward: gathers over dx ----------------------------------------------------------------

template <class T>
__global__ void maxpool_bwd_kernel(const T* dy, const int32_t* indices, T* dx, Geom g) {
  using A = typename Acc<T>::type;
  const int64_t total = g.NC * g.H * g.W;
  for (int64_t i = grid_start(); i < total; i += grid_step()) {
    const int64_t w = i % g.W, h = (i / g.W) % g.H, nc = i / (g.W * g.H);
    const int64_t p0 = first_window(h, g.kh, g.sh, g.pt), p1 = last_window(h, g.sh, g.pt, g.P);
    const int64_t q0 = first_window(w, g.kw, g.sw, g.pl), q1 = last_window(w, g.sw, g.pl, g.Q);
    const int32_t target = int32_t(h * g.W + w);
    const int64_t base = nc * g.P * g.Q;
    A s = 0;
    for (int64_t p = p0; p <= p1; ++p)
      for (int64_t q = q0; q <= q1; ++q) {
        const int64_t o = base + p * g.Q + q;
        if (indices[o] == target) s += to_acc<A>(dy[o]);
      }
    dx[i] = from_acc<T>(s);
  }
}

template <class T>
__global__ void avgpool_bwd_kernel(const T* dy, T* dx, Geom g) {
  using A = typename Acc<T>::type;
  const int64_t total = g.NC * g.H * g.W;
  for (int64_t i = grid_start(); i < total; i += grid_step()) {
    const int64_t w = i % g.W, h = (i / g.W) % g.H, nc = i / (g.W * g.H);
    const int64_t p0 = first_window(h, g.kh, g.sh, g.pt), p1 = last_window(h, g.sh, g.pt, g.P);
    const int64_t q0 = first_window(w, g.kw, g.sw, g.pl), q1 = last_window(w, g.sw, g.pl, g.Q);
    const T* dyp = dy + nc * g.P * g.Q;
    A s = 0;
    for (int64_t p = p0; p <= p1; ++p) {
      const int64_t ch = avg_extent(p, g.kh, g.sh, g.pt, g.pb, g.H, g.count_include_pad);
      for (int64_t q = q0; q <= q1; ++q) {
        const int64_t cw = avg_extent(q, g.kw, g.sw, g.pl, g.pr, g.W, g.count_include_pad);
        s += to_acc<A>(dyp[p * g.Q + q]) / A(ch * cw);
      }
    }
    dx[i] = from_acc<T>(s);
  }
}

template <class T>
__global__ void adaptive_bwd_kernel(const T* dy, T* dx, int64_t NC, int64_t H, int64_t W, int64_t P,
                                    int64_t Q) {
  using A = typename Acc<T>::type;
  const int64_t total = NC * H * W;
  for (int64_t i = grid_start(); i < total; i += grid_step()) {
    const int64_t w = i % W, h = (i / W) % H, nc = i / (W * H);
    // Windows containing h: start(p) <= h < end(p), i.e. p in [floor(h*P/H), ceil((h+1)*P/H)).
    const int64_t p0 = (h * P) / H, p1 = imin(((h + 1) * P + H - 1) / H, P);
    const int64_t q0 = (w * Q) / W, q1 = imin(((w + 1) * Q + W - 1) / W, Q);
    const T* dyp = dy + nc * P * Q;
    A s = 0;
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t hs = adaptive_start(p, H, P), he = adaptive_end(p, H, P);
      if (h < hs || h >= he) continue;
      for (int64_t q = q0; q < q1; ++q) {
        const int64_t ws = adaptive_start(q, W, Q), we = adaptive_end(q, W, Q);
        if (w < ws || w >= we) continue;
        s += to_acc<A>(dyp[p * Q + q]) / A((he - hs) * (we - ws));
      }
    }
    dx[i] = from_acc<T>(s);
  }
}

// ---- launchers ------------------------------------------------------------------------------

void maxpool2d_fwd_cuda_direct(const MaxPool2dFwdArgs& a) {
  check_maxpool2d_fwd_args(a);
  const Geom g = geom(a.x, a.y, a.p);
  const int64_t n = a.y.numel();
  if (n == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, {
    AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream_for(a.x.device()), maxpool_fwd_kernel<T>)
    (static_cast<const T*>(a.x.raw_data()), static_cast<T*>(a.y.raw_data()),
     a.indices.defined() ? a.indices.data<int32_t>() : nullptr, g);
  });
  AIM_CHECK_LAUNCH();
}

void maxpool2d_bwd_cuda_direct(const MaxPool2dBwdArgs& a) {
  check_maxpool2d_bwd_args(a);
  const Geom g = geom(a.dx, a.dy, a.p);
  const int64_t n = a.dx.numel();
  if (n == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.dy.dtype(), T, {
    AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream_for(a.dy.device()), maxpool_bwd_kernel<T>)
    (static_cast<const T*>(a.dy.raw_data()), a.indices.data<int32_t>(),
     static_cast<T*>(a.dx.raw_data()), g);
  });
  AIM_CHECK_LAUNCH();
}

void avgpool2d_fwd_cuda_direct(const AvgPool2dFwdArgs& a) {
  check_avgpool2d_fwd_args(a);
  const Geom g = geom(a.x, a.y, a.p);
  const int64_t n = a.y.numel();
  if (n == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, {
    AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream_for(a.x.device()), avgpool_fwd_kernel<T>)
    (static_cast<const T*>(a.x.raw_data()), static_cast<T*>(a.y.raw_data()), g);
  });
  AIM_CHECK_LAUNCH();
}

void avgpool2d_bwd_cuda_direct(const AvgPool2dBwdArgs& a) {
  check_avgpool2d_bwd_args(a);
  const Geom g = geom(a.dx, a.dy, a.p);
  const int64_t n = a.dx.numel();
  if (n == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.dy.dtype(), T, {
    AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream_for(a.dy.device()), avgpool_bwd_kernel<T>)
    (static_cast<const T*>(a.dy.raw_data()), static_cast<T*>(a.dx.raw_data()), g);
  });
  AIM_CHECK_LAUNCH();
}

void adaptive_avgpool2d_fwd_cuda_direct(const AdaptiveAvgPool2dFwdArgs& a) {
  check_adaptive_avgpool2d_fwd_args(a);
  const int64_t NC = a.x.size(0) * a.x.size(1), H = a.x.size(2), W = a.x.size(3);
  const int64_t P = a.y.size(2), Q = a.y.size(3);
  if (NC == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, {
    if (P == 1 && Q == 1) {
      AIM_LAUNCH(grid_for(NC * kWarpSize, kThreads), kThreads, 0, stream_for(a.x.device()),
                 global_avg_fwd_kernel<T>)
      (static_cast<const T*>(a.x.raw_data()), static_cast<T*>(a.y.raw_data()), NC, H * W);
    } else {
      AIM_LAUNCH(grid_for(NC * P * Q, kThreads), kThreads, 0, stream_for(a.x.device()),
                 adaptive_fwd_kernel<T>)
      (static_cast<const T*>(a.x.raw_data()), static_cast<T*>(a.y.raw_data()), NC, H, W, P, Q);
    }
  });
  AIM_CHECK_LAUNCH();
}

void adaptive_avgpool2d_bwd_cuda_direct(const AdaptiveAvgPool2dBwdArgs& a) {
  check_adaptive_avgpool2d_bwd_args(a);
  const int64_t NC = a.dx.size(0) * a.dx.size(1), H = a.dx.size(2), W = a.dx.size(3);
  const int64_t P = a.dy.size(2), Q = a.dy.size(3);
  if (NC == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.dy.dtype(), T, {
    AIM_LAUNCH(grid_for(NC * H * W, kThreads), kThreads, 0, stream_for(a.dy.device()),
               adaptive_bwd_kernel<T>)
    (static_cast<const T*>(a.dy.raw_data()), static_cast<T*>(a.dx.raw_data()), NC, H, W, P, Q);
  });
  AIM_CHECK_LAUNCH();
}

const std::vector<DType> kFloatTypes = {DType::f32, DType::f64, DType::f16, DType::bf16};

}  // namespace

void register_pool2d_cuda(Registry& r) {
  auto& mf = r.op<MaxPool2dFwdArgs>("maxpool2d_fwd");
  mf.add({"cuda.direct", AIM_CUDA_BACKEND, Provider::Own, maxpool2d_fwd_cuda_direct, kFloatTypes});
  mf.set_default(AIM_CUDA_BACKEND, "cuda.direct");
  auto& mb = r.op<MaxPool2dBwdArgs>("maxpool2d_bwd");
  mb.add({"cuda.direct", AIM_CUDA_BACKEND, Provider::Own, maxpool2d_bwd_cuda_direct, kFloatTypes});
  mb.set_default(AIM_CUDA_BACKEND, "cuda.direct");
  auto& af = r.op<AvgPool2dFwdArgs>("avgpool2d_fwd");
  af.add({"cuda.direct", AIM_CUDA_BACKEND, Provider::Own, avgpool2d_fwd_cuda_direct, kFloatTypes});
  af.set_default(AIM_CUDA_BACKEND, "cuda.direct");
  auto& ab = r.op<AvgPool2dBwdArgs>("avgpool2d_bwd");
  ab.add({"cuda.direct", AIM_CUDA_BACKEND, Provider::Own, avgpool2d_bwd_cuda_direct, kFloatTypes});
  ab.set_default(AIM_CUDA_BACKEND, "cuda.direct");
  auto& df = r.op<AdaptiveAvgPool2dFwdArgs>("adaptive_avgpool2d_fwd");
  df.add({"cuda.direct", AIM_CUDA_BACKEND, Provider::Own, adaptive_avgpool2d_fwd_cuda_direct,
          kFloatTypes});
  df.set_default(AIM_CUDA_BACKEND, "cuda.direct");
  auto& db = r.op<AdaptiveAvgPool2dBwdArgs>("adaptive_avgpool2d_bwd");
  db.add({"cuda.direct", AIM_CUDA_BACKEND, Provider::Own, adaptive_avgpool2d_bwd_cuda_direct,
          kFloatTypes});
  db.set_default(AIM_CUDA_BACKEND, "cuda.direct");
}

}  // namespace aim::kernels::AIM_CUDA_NS
