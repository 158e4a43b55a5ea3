// roi_align, roi_pool: own CUDA variants (torchvision's CUDA decomposition).
// roi_align_fwd cuda.direct: one thread per output (k, c, ph, pw), grid-stride with pw fastest, so
// a warp covers neighbouring bins of one RoI and channel. Each thread derives its RoI's box
// (roi.h, the same arithmetic as the CPU), walks its bin's grid_h x grid_w samples and sums the
// four bilinear corners in the data's dtype. Traffic: the corners come through L1/L2 (bins of a
// RoI overlap little; RoIs of one image overlap much), y written once, coalesced. Bound: the
// gathers' latency for small grids, the FLOPs of large adaptive grids.
// roi_align_bwd cuda.atomic: dx zeroed (memset), then one thread per dy element scatters
// dy / count times each corner's weight with atomicAdd (float/double): the order of the additions
// varies from run to run, so dx does in its last bits (the CPU variants are deterministic).
// roi_pool_fwd cuda.direct: one thread per output; the bin rounded as on the CPU, max in
// row-major order (strict >, first maximum, NaN never taken), argmax written.
// roi_pool_bwd cuda.atomic: dx zeroed, one thread per dy element adds dy at argmax (atomicAdd).
// roi_pool_bwd cuda.sorted (deterministic; --deterministic selects it): index_add's cuda.sorted
// (kernels/index/index_cuda.cu): each dy element's key is the dx element it feeds (-1: empty bin
// or bad batch index); the key buckets of kernels/key_buckets.cuh sort the dy positions by key
// (integer atomics, one-block scan, buckets ordered by position: quadratic in one bucket's size,
// i.e. in how many bins share one argmax); then one thread per fed dx element sums its dy values
// in position order, which is cpu.ref's (k, c, bin) order, in double as cpu.ref does: the bits of
// cpu.ref, on every run. dx is zeroed first. Scratch: int32 3 x dy.numel() + 2 x dx.numel() + min
// of the two; both below 2^31 - 2. Not the default (five more passes over dy; not timed on a
// GPU).
// roi_align_bwd cuda.gather (deterministic; --deterministic selects it): one thread per dx
// element (n, c, h, w) gathers instead of scattering: for every RoI of image n in order, the
// sample rows and columns that can reach (h, w) (a cheap conservative test on the clamped sample
// coordinate), each bilinear corner that is (h, w) adding dy / count times its weight, the same
// products the atomic variant adds, in a fixed order (RoI, bin row, sample row, bin column,
// sample column, corner) in the data's dtype. Every thread walks every RoI's box: work
// N*C*H*W*K box tests against cuda.atomic's K*C*PH*PW*samples, so it is much slower on large
// maps; not timed on a GPU.
// All: a RoI whose batch index is outside [0, N) gives zeros and no gradient (the CPU variants
// throw; here that would need a device-to-host read). Index arithmetic in int64. Not yet timed on
// a GPU.
#include "kernels/cuda_common.h"
// (cuda_common.h first, as every *_cuda.cu)
#include <cfloat>

#include "kernels/key_buckets.cuh"
#include "kernels/roi/roi.h"

#if !defined(__CUDACC__)
// Compiled as C++ for the emulated device: round the geometry as nvcc's __fmul_rn does (and as
// roi_cpu.cpp), without GCC's FMA contraction.
#pragma GCC optimize("fp-contract=off")
#endif

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ int64_t grid_start() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_step() { return int64_t(blockDim.x) * gridDim.x; }

// Shapes of one call (by value to every kernel).
struct Dims {
  int64_t N, C, H, W, K, PH, PW;
};

template <class T>
__global__ void roi_align_fwd_kernel(const T* x, const T* rois, T* y, Dims d, T scale,
                                     int64_t sampling_ratio, bool aligned) {
  const int64_t total = d.K * d.C * d.PH * d.PW;
  for (int64_t o = grid_start(); o < total; o += grid_step()) {
    const int64_t pw = o % d.PW, ph = (o / d.PW) % d.PH, c = (o / (d.PW * d.PH)) % d.C;
    const int64_t k = o / (d.PW * d.PH * d.C);
    const T* roi = rois + k * 5;
    if (!roi_batch_ok(roi[0], d.N)) {
      y[o] = T(0);
      continue;
    }
    const RoiAlignBox<T> b = roi_align_box(roi, scale, d.PH, d.PW, sampling_ratio, aligned);
    const T* plane = x + (b.n * d.C + c) * d.H * d.W;
    T acc = T(0);
    for (int64_t iy = 0; iy < b.grid_h; ++iy) {
      const T sy = roi_align_sample(b.start_h, ph, b.bin_h, iy, b.grid_h);
      for (int64_t ix = 0; ix < b.grid_w; ++ix) {
        const T sx = roi_align_sample(b.start_w, pw, b.bin_w, ix, b.grid_w);
        const RoiBilinear<T> s = roi_bilinear(sy, sx, d.H, d.W);
        if (!s.valid) continue;
        acc += s.w1 * plane[s.o1] + s.w2 * plane[s.o2] + s.w3 * plane[s.o3] + s.w4 * plane[s.o4];
      }
    }
    y[o] = acc / b.count;
  }
}

template <class T>
__global__ void roi_align_bwd_kernel(const T* dy, const T* rois, T* dx, Dims d, T scale,
                                     int64_t sampling_ratio, bool aligned) {
  const int64_t total = d.K * d.C * d.PH * d.PW;
  for (int64_t o = grid_start(); o < total; o += grid_step()) {
    const int64_t pw = o % d.PW, ph = (o / d.PW) % d.PH, c = (o / (d.PW * d.PH)) % d.C;
    const int64_t k = o / (d.PW * d.PH * d.C);
    const T* roi = rois + k * 5;
    if (!roi_batch_ok(roi[0], d.N)) continue;
    const RoiAlignBox<T> b = roi_align_box(roi, scale, d.PH, d.PW, sampling_ratio, aligned);
    T* plane = dx + (b.n * d.C + c) * d.H * d.W;
    const T g = dy[o] / b.count;
    for (int64_t iy = 0; iy < b.grid_h; ++iy) {
      const T sy = roi_align_sample(b.start_h, ph, b.bin_h, iy, b.grid_h);
      for (int64_t ix = 0; ix < b.grid_w; ++ix) {
        const T sx = roi_align_sample(b.start_w, pw, b.bin_w, ix, b.grid_w);
        const RoiBilinear<T> s = roi_bilinear(sy, sx, d.H, d.W);
        if (!s.valid) continue;
        atomicAdd(plane + s.o1, g * s.w1);
        atomicAdd(plane + s.o2, g * s.w2);
        atomicAdd(plane + s.o3, g * s.w3);
        atomicAdd(plane + s.o4, g * s.w4);
      }
    }
  }
}

template <class T>
__global__ void roi_pool_fwd_kernel(const T* x, const T* rois, T* y, int32_t* argmax, Dims d,
                                    T scale) {
  const int64_t total = d.K * d.C * d.PH * d.PW;
  for (int64_t o = grid_start(); o < total; o += grid_step()) {
    const int64_t pw = o % d.PW, ph = (o / d.PW) % d.PH, c = (o / (d.PW * d.PH)) % d.C;
    const int64_t k = o / (d.PW * d.PH * d.C);
    const T* roi = rois + k * 5;
    T m = T(0);
    int64_t at = -1;
    if (roi_batch_ok(roi[0], d.N)) {
      const RoiPoolBox<T> b = roi_pool_box(roi, scale, d.PH, d.PW);
      const RoiSpan hs = roi_pool_span(ph, b.bin_h, b.start_h, d.H);
      const RoiSpan ws = roi_pool_span(pw, b.bin_w, b.start_w, d.W);
      if (hs.end > hs.start && ws.end > ws.start) {
        m = T(-FLT_MAX);
        const T* plane = x + (b.n * d.C + c) * d.H * d.W;
        for (int64_t h = hs.start; h < hs.end; ++h)
          for (int64_t w = ws.start; w < ws.end; ++w)
            if (plane[h * d.W + w] > m) m = plane[h * d.W + w], at = h * d.W + w;
      }
    }
    y[o] = m;
    if (argmax) argmax[o] = int32_t(at);
  }
}

template <class T>
__global__ void roi_pool_bwd_kernel(const T* dy, const int32_t* argmax, const T* rois, T* dx,
                                    Dims d) {
  const int64_t total = d.K * d.C * d.PH * d.PW, HW = d.H * d.W;
  for (int64_t o = grid_start(); o < total; o += grid_step()) {
    const int64_t i = argmax[o];
    const int64_t c = (o / (d.PW * d.PH)) % d.C, k = o / (d.PW * d.PH * d.C);
    const T bi = rois[k * 5];
    // An index outside the plane (not from this forward) is skipped, never used as an address.
    if (i < 0 || i >= HW || !roi_batch_ok(bi, d.N)) continue;
    atomicAdd(dx + (int64_t(bi) * d.C + c) * HW + i, dy[o]);
  }
}

// ---- roi_align_bwd cuda.gather ---------------------------------------------------------------

// Whether a sample at coordinate y (before clamping) can have p among its two corners along an
// axis of size S: conservative (the exact test is on the corner offsets).
template <class T>
__device__ __forceinline__ bool may_touch(T y, int64_t p, int64_t S) {
  const T c = y <= T(0) ? T(0) : (y >= T(S - 1) ? T(S - 1) : y);
  return c > T(p) - T(2) && c < T(p) + T(2);
}

template <class T>
__global__ void roi_align_bwd_gather_kernel(const T* dy, const T* rois, T* dx, Dims d, T scale,
                                            int64_t sampling_ratio, bool aligned) {
  const int64_t total = d.N * d.C * d.H * d.W;
  for (int64_t e = grid_start(); e < total; e += grid_step()) {
    const int64_t w = e % d.W, h = (e / d.W) % d.H, c = (e / (d.W * d.H)) % d.C;
    const int64_t n = e / (d.W * d.H * d.C), target = h * d.W + w;
    T acc = T(0);
    for (int64_t k = 0; k < d.K; ++k) {
      const T* roi = rois + k * 5;
      if (!roi_batch_ok(roi[0], d.N)) continue;
      const RoiAlignBox<T> b = roi_align_box(roi, scale, d.PH, d.PW, sampling_ratio, aligned);
      if (b.n != n) continue;
      const T* g = dy + (k * d.C + c) * d.PH * d.PW;
      for (int64_t ph = 0; ph < d.PH; ++ph)
        for (int64_t iy = 0; iy < b.grid_h; ++iy) {
          const T sy = roi_align_sample(b.start_h, ph, b.bin_h, iy, b.grid_h);
          if (!may_touch(sy, h, d.H)) continue;
          for (int64_t pw = 0; pw < d.PW; ++pw) {
            const T gk = g[ph * d.PW + pw] / b.count;  // as the atomic variant's g
            for (int64_t ix = 0; ix < b.grid_w; ++ix) {
              const T sx = roi_align_sample(b.start_w, pw, b.bin_w, ix, b.grid_w);
              if (!may_touch(sx, w, d.W)) continue;
              const RoiBilinear<T> s = roi_bilinear(sy, sx, d.H, d.W);
              if (!s.valid) continue;
              if (s.o1 == target) acc += gk * s.w1;
              if (s.o2 == target) acc += gk * s.w2;
              if (s.o3 == target) acc += gk * s.w3;
              if (s.o4 == target) acc += gk * s.w4;
            }
          }
        }
    }
    dx[e] = acc;
  }
}

// ---- roi_pool_bwd cuda.sorted: key buckets (kernels/key_buckets.cuh) -------------------------

// keys[o] = the dx offset dy[o] feeds, or -1.
template <class T>
__global__ void roi_pool_keys_kernel(const int32_t* argmax, const T* rois, int* keys, Dims d) {
  const int64_t total = d.K * d.C * d.PH * d.PW, HW = d.H * d.W;
  for (int64_t o = grid_start(); o < total; o += grid_step()) {
    const int64_t i = argmax[o];
    const int64_t c = (o / (d.PW * d.PH)) % d.C, k = o / (d.PW * d.PH * d.C);
    const T bi = rois[k * 5];
    keys[o] =
        i < 0 || i >= HW || !roi_batch_ok(bi, d.N) ? -1 : int((int64_t(bi) * d.C + c) * HW + i);
  }
}

// One thread per fed dx element: its dy values in position order, in double (as cpu.ref).
template <class T>
__global__ void roi_pool_bwd_sorted_kernel(const T* dy, T* dx, const int* offsets,
                                           const int* sorted, const int* uniq, const int* meta) {
  const int64_t nu = meta[0];
  for (int64_t u = grid_start(); u < nu; u += grid_step()) {
    const int64_t v = uniq[u];
    double acc = 0;
    for (int q = offsets[v]; q < offsets[v + 1]; ++q) acc += double(dy[sorted[q]]);
    dx[v] = T(acc);
  }
}

Dims dims_of(const Tensor& x, const Tensor& rois, const Tensor& y) {
  return Dims{x.size(0), x.size(1), x.size(2), x.size(3), rois.size(0), y.size(2), y.size(3)};
}

template <class F>
void dispatch_roi(DType t, F f) {
  if (t == DType::f32)
    f(float{});
  else
    f(double{});  // the checks admit f32 and f64 only
}

void roi_align_fwd_cuda_direct(const RoiAlignFwdArgs& a) {
  check_roi_align_fwd_args(a);
  const Dims d = dims_of(a.x, a.rois, a.y);
  const int64_t total = a.y.numel();
  if (total == 0) return;
  dispatch_roi(a.x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    AIM_LAUNCH(grid_for(total, kThreads), kThreads, 0, stream_for(a.x.device()),
               roi_align_fwd_kernel<T>)
    (a.x.data<T>(), a.rois.data<T>(), a.y.data<T>(), d, T(a.p.spatial_scale), a.p.sampling_ratio,
     a.p.aligned);
    AIM_CHECK_LAUNCH();
  });
}

void roi_align_bwd_cuda_atomic(const RoiAlignBwdArgs& a) {
  check_roi_align_bwd_args(a);
  const Dims d = dims_of(a.dx, a.rois, a.dy);
  memset_zero(a.dx.raw_data(), size_t(a.dx.nbytes()), a.dx.device());
  const int64_t total = a.dy.numel();
  if (total == 0) return;
  dispatch_roi(a.dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    AIM_LAUNCH(grid_for(total, kThreads), kThreads, 0, stream_for(a.dy.device()),
               roi_align_bwd_kernel<T>)
    (a.dy.data<T>(), a.rois.data<T>(), a.dx.data<T>(), d, T(a.p.spatial_scale), a.p.sampling_ratio,
     a.p.aligned);
    AIM_CHECK_LAUNCH();
  });
}

void roi_align_bwd_cuda_gather(const RoiAlignBwdArgs& a) {
  check_roi_align_bwd_args(a);
  const Dims d = dims_of(a.dx, a.rois, a.dy);
  const int64_t total = a.dx.numel();
  if (total == 0) return;
  dispatch_roi(a.dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    AIM_LAUNCH(grid_for(total, kThreads), kThreads, 0, stream_for(a.dy.device()),
               roi_align_bwd_gather_kernel<T>)
    (a.dy.data<T>(), a.rois.data<T>(), a.dx.data<T>(), d, T(a.p.spatial_scale), a.p.sampling_ratio,
     a.p.aligned);
    AIM_CHECK_LAUNCH();
  });
}

void roi_pool_fwd_cuda_direct(const RoiPoolFwdArgs& a) {
  check_roi_pool_fwd_args(a);
  const Dims d = dims_of(a.x, a.rois, a.y);
  const int64_t total = a.y.numel();
  if (total == 0) return;
  dispatch_roi(a.x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    AIM_LAUNCH(grid_for(total, kThreads), kThreads, 0, stream_for(a.x.device()),
               roi_pool_fwd_kernel<T>)
    (a.x.data<T>(), a.rois.data<T>(), a.y.data<T>(),
     a.argmax.defined() ? a.argmax.data<int32_t>() : nullptr, d, T(a.spatial_scale));
    AIM_CHECK_LAUNCH();
  });
}

void roi_pool_bwd_cuda_atomic(const RoiPoolBwdArgs& a) {
  check_roi_pool_bwd_args(a);
  const Dims d = dims_of(a.dx, a.rois, a.dy);
  memset_zero(a.dx.raw_data(), size_t(a.dx.nbytes()), a.dx.device());
  const int64_t total = a.dy.numel();
  if (total == 0) return;
  dispatch_roi(a.dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    AIM_LAUNCH(grid_for(total, kThreads), kThreads, 0, stream_for(a.dy.device()),
               roi_pool_bwd_kernel<T>)
    (a.dy.data<T>(), a.argmax.data<int32_t>(), a.rois.data<T>(), a.dx.data<T>(), d);
    AIM_CHECK_LAUNCH();
  });
}

void roi_pool_bwd_cuda_sorted(const RoiPoolBwdArgs& a) {
  check_roi_pool_bwd_args(a);
  const Dims d = dims_of(a.dx, a.rois, a.dy);
  const Device dev = a.dx.device();
  const auto stream = stream_for(dev);
  memset_zero(a.dx.raw_data(), size_t(a.dx.nbytes()), dev);
  const int64_t n = a.dy.numel(), V = a.dx.numel();
  if (n == 0 || V == 0) return;
  const KeyBuckets kb(n, V, dev, /*stored_keys=*/true);
  dispatch_roi(a.dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream, roi_pool_keys_kernel<T>)
    (a.argmax.data<int32_t>(), a.rois.data<T>(), kb.keys, d);
    AIM_CHECK_LAUNCH();
  });
  kb.sort(StoredKeys{kb.keys}, stream);
  dispatch_roi(a.dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    AIM_LAUNCH(grid_for(kb.max_uniq, kThreads), kThreads, 0, stream, roi_pool_bwd_sorted_kernel<T>)
    (a.dy.data<T>(), a.dx.data<T>(), kb.offsets, kb.sorted, kb.uniq, kb.meta);
    AIM_CHECK_LAUNCH();
  });
}

std::string roi_pool_sorted_supports(const RoiPoolBwdArgs& a) {
  if (a.dy.numel() < kKeyBucketsLimit && a.dx.numel() < kKeyBucketsLimit) return "";
  return str("needs dy and dx below 2^31 - 2 elements (int32 scratch), got ", a.dy.numel(), " and ",
             a.dx.numel());
}

}  // namespace

void register_roi_cuda(Registry& r) {
  const std::vector<DType> dt = {DType::f32, DType::f64};
  r.op<RoiAlignFwdArgs>("roi_align_fwd")
      .add({"cuda.direct", AIM_CUDA_BACKEND, Provider::Own, roi_align_fwd_cuda_direct, dt});
  r.op<RoiAlignBwdArgs>("roi_align_bwd")
      .add({"cuda.atomic", AIM_CUDA_BACKEND, Provider::Own, roi_align_bwd_cuda_atomic, dt});
  r.op<RoiAlignBwdArgs>("roi_align_bwd")
      .add({"cuda.gather", AIM_CUDA_BACKEND, Provider::Own, roi_align_bwd_cuda_gather, dt});
  r.op<RoiPoolFwdArgs>("roi_pool_fwd")
      .add({"cuda.direct", AIM_CUDA_BACKEND, Provider::Own, roi_pool_fwd_cuda_direct, dt});
  r.op<RoiPoolBwdArgs>("roi_pool_bwd")
      .add({"cuda.atomic", AIM_CUDA_BACKEND, Provider::Own, roi_pool_bwd_cuda_atomic, dt});
  r.op<RoiPoolBwdArgs>("roi_pool_bwd")
      .add({"cuda.sorted", AIM_CUDA_BACKEND, Provider::Own, roi_pool_bwd_cuda_sorted, dt,
            roi_pool_sorted_supports});
  r.op<RoiAlignFwdArgs>("roi_align_fwd").set_default(AIM_CUDA_BACKEND, "cuda.direct");
  r.op<RoiAlignBwdArgs>("roi_align_bwd").set_default(AIM_CUDA_BACKEND, "cuda.atomic");
  r.op<RoiPoolFwdArgs>("roi_pool_fwd").set_default(AIM_CUDA_BACKEND, "cuda.direct");
  r.op<RoiPoolBwdArgs>("roi_pool_bwd").set_default(AIM_CUDA_BACKEND, "cuda.atomic");
  r.op<RoiAlignBwdArgs>("roi_align_bwd")
      .set_nondeterministic("cuda.atomic", "cuda.gather",
                            "float atomicAdd: the order of the adds varies");
  r.op<RoiPoolBwdArgs>("roi_pool_bwd")
      .set_nondeterministic("cuda.atomic", "cuda.sorted",
                            "float atomicAdd: the order of the adds varies");
}

}  // namespace aim::kernels::AIM_CUDA_NS
