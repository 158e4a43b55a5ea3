// RoI feature extraction of the two-stage detectors (issue 22), as torchvision.ops:
//   roi_align: bilinear samples averaged over each bin (Mask R-CNN; sampling_ratio, aligned);
//   roi_pool:  max over each bin of rounded RoI coordinates (Caffe / Faster R-CNN), argmax saved.
// Shapes: x, dx [N, C, H, W]; rois [K, 5] rows (batch index, x1, y1, x2, y2) in image coordinates,
// x's dtype (the batch index a whole number stored as a float); y, dy, argmax [K, C, PH, PW].
// Every variant evaluates the RoI geometry below (written once, host and device) in the data's
// dtype, in torchvision's order, so sample positions and bins are the same everywhere; sums run in
// double in cpu.ref and in the data's dtype elsewhere. Math and gradients: kernels/roi/README.md
#pragma once
#include <cmath>

#include "kernels/op.h"

namespace aim::kernels {

struct RoiAlignParams {
  double spatial_scale = 1.0;  // image -> feature map coordinates (1/16 for a stride-16 map)
  int64_t sampling_ratio = 0;  // samples per bin and axis; <= 0: adaptive, ceil(RoI extent / bins)
  bool aligned = false;        // true: shift by -0.5 pixel (torchvision aligned=True)
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.param("spatial_scale", s.spatial_scale), f.param("sampling_ratio", s.sampling_ratio);
    f.param("aligned", s.aligned);
  }
};

struct RoiAlignFwdArgs {
  Tensor x;     // [N, C, H, W]
  Tensor rois;  // [K, 5]
  Tensor y;     // [K, C, PH, PW]: written
  RoiAlignParams p;
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.in("rois", s.rois), f.out("y", s.y);
    f.group(s.p);
  }
};
struct RoiAlignBwdArgs {
  Tensor dy;    // [K, C, PH, PW]
  Tensor rois;  // [K, 5]
  Tensor dx;    // [N, C, H, W]: written (=), zero where no sample reads
  RoiAlignParams p;
  Device device() const { return dy.device(); }
  DType dtype() const { return dy.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dy", s.dy), f.in("rois", s.rois), f.out("dx", s.dx);
    f.group(s.p);
  }
};

struct RoiPoolFwdArgs {
  Tensor x;       // [N, C, H, W]
  Tensor rois;    // [K, 5]
  Tensor y;       // [K, C, PH, PW]: written
  Tensor argmax;  // [K, C, PH, PW] i32: written, flat h*W + w in the plane, -1 for an empty bin;
                  // undefined when no backward follows
  double spatial_scale = 1.0;
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.in("rois", s.rois), f.out("y", s.y), f.out_opt("argmax", s.argmax);
    f.param("spatial_scale", s.spatial_scale);
  }
};
struct RoiPoolBwdArgs {
  Tensor dy;      // [K, C, PH, PW]
  Tensor argmax;  // [K, C, PH, PW] i32 from the forward
  Tensor rois;    // [K, 5]: the batch index of each RoI
  Tensor dx;      // [N, C, H, W]: written (=)
  Device device() const { return dy.device(); }
  DType dtype() const { return dy.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dy", s.dy), f.in("argmax", s.argmax), f.in("rois", s.rois), f.out("dx", s.dx);
  }
};

// ---- geometry, written once for every variant -----------------------------------------------
// Products are rounded on their own (nvcc would contract `a * b + c` into an FMA and round
// differently from the host, where roi_cpu.cpp turns GCC's contraction off): a sample that lands
// on the border of the map must land there on every device.
#if defined(__CUDACC__)
#define AIM_ROI_HD __host__ __device__ __forceinline__
#else
#define AIM_ROI_HD inline
#endif
AIM_ROI_HD float roi_mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
AIM_ROI_HD double roi_mul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

// A RoI's batch index selects an image when it truncates into [0, N) (NaN does not).
template <class T>
AIM_ROI_HD bool roi_batch_ok(T b, int64_t N) {
  return b > T(-1) && b < T(N);
}

// One RoI of roi_align in feature-map coordinates (torchvision's roi_align_kernel.cpp).
template <class T>
struct RoiAlignBox {
  int64_t n;               // batch index (truncated, as torchvision's int cast)
  T start_h, start_w;      // top-left corner
  T bin_h, bin_w;          // bin extent
  int64_t grid_h, grid_w;  // samples per bin and axis (<= 0: no sample)
  T count;                 // the average's divisor, max(grid_h * grid_w, 1)
};

template <class T>
AIM_ROI_HD RoiAlignBox<T> roi_align_box(const T* roi, T scale, int64_t PH, int64_t PW,
                                        int64_t sampling_ratio, bool aligned) {
  RoiAlignBox<T> b;
  b.n = int64_t(roi[0]);
  const T offset = aligned ? T(0.5) : T(0);
  b.start_w = roi_mul(roi[1], scale) - offset;
  b.start_h = roi_mul(roi[2], scale) - offset;
  T w = (roi_mul(roi[3], scale) - offset) - b.start_w;
  T h = (roi_mul(roi[4], scale) - offset) - b.start_h;
  if (!aligned) {  // malformed RoIs forced to 1x1 (only without alignment, as torchvision)
    w = w > T(1) ? w : T(1);
    h = h > T(1) ? h : T(1);
  }
  b.bin_h = h / T(PH);
  b.bin_w = w / T(PW);
  // ceil(roi_height / pooled_height) in T: the same quotient as the bin extent.
  b.grid_h = sampling_ratio > 0 ? sampling_ratio : int64_t(ceil(double(b.bin_h)));
  b.grid_w = sampling_ratio > 0 ? sampling_ratio : int64_t(ceil(double(b.bin_w)));
  const int64_t g = b.grid_h * b.grid_w;
  b.count = T(g > 1 ? g : 1);
  return b;
}

// Sample i (of `grid`) of bin p along one axis: start + p bin + (i + 0.5) bin / grid.
template <class T>
AIM_ROI_HD T roi_align_sample(T start, int64_t p, T bin, int64_t i, int64_t grid) {
  return (start + roi_mul(T(p), bin)) + roi_mul(T(float(i) + 0.5f), bin) / T(grid);
}

// Bilinear interpolation at (y, x) of an H x W plane: four flat offsets and weights. Samples
// more than one pixel outside the map are zero (valid = false); the others are clamped to it.
template <class T>
struct RoiBilinear {
  bool valid;
  int64_t o1, o2, o3, o4;  // (y_low, x_low), (y_low, x_high), (y_high, x_low), (y_high, x_high)
  T w1, w2, w3, w4;
};
template <class T>
AIM_ROI_HD RoiBilinear<T> roi_bilinear(T y, T x, int64_t H, int64_t W) {
  RoiBilinear<T> r;
  if (y < T(-1) || y > T(H) || x < T(-1) || x > T(W)) {
    r.valid = false;
    r.o1 = r.o2 = r.o3 = r.o4 = 0;
    r.w1 = r.w2 = r.w3 = r.w4 = T(0);
    return r;
  }
  r.valid = true;
  if (y <= T(0)) y = T(0);
  if (x <= T(0)) x = T(0);
  int64_t y_low = int64_t(y), x_low = int64_t(x), y_high, x_high;
  if (y_low >= H - 1) {
    y_high = y_low = H - 1;
    y = T(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= W - 1) {
    x_high = x_low = W - 1;
    x = T(x_low);
  } else {
    x_high = x_low + 1;
  }
  const T ly = y - T(y_low), lx = x - T(x_low);
  const T hy = T(1) - ly, hx = T(1) - lx;
  r.w1 = roi_mul(hy, hx), r.w2 = roi_mul(hy, lx), r.w3 = roi_mul(ly, hx), r.w4 = roi_mul(ly, lx);
  r.o1 = y_low * W + x_low, r.o2 = y_low * W + x_high;
  r.o3 = y_high * W + x_low, r.o4 = y_high * W + x_high;
  return r;
}

// One RoI of roi_pool: coordinates rounded (half away from zero) to feature cells, at least 1x1,
// bins of (extent / pooled) cells (torchvision's roi_pool_kernel.cpp).
template <class T>
struct RoiPoolBox {
  int64_t n;
  int64_t start_h, start_w;
  T bin_h, bin_w;
};
template <class T>
AIM_ROI_HD RoiPoolBox<T> roi_pool_box(const T* roi, T scale, int64_t PH, int64_t PW) {
  RoiPoolBox<T> b;
  b.n = int64_t(roi[0]);
  b.start_w = int64_t(round(roi_mul(roi[1], scale)));
  b.start_h = int64_t(round(roi_mul(roi[2], scale)));
  const int64_t end_w = int64_t(round(roi_mul(roi[3], scale)));
  const int64_t end_h = int64_t(round(roi_mul(roi[4], scale)));
  const int64_t w = end_w - b.start_w + 1 > 1 ? end_w - b.start_w + 1 : 1;
  const int64_t h = end_h - b.start_h + 1 > 1 ? end_h - b.start_h + 1 : 1;
  b.bin_h = T(h) / T(PH);
  b.bin_w = T(w) / T(PW);
  return b;
}
// Bin p of an axis: [floor(p bin), ceil((p + 1) bin)) shifted by the RoI start, clipped to
// [0, extent).
struct RoiSpan {
  int64_t start, end;
};
template <class T>
AIM_ROI_HD RoiSpan roi_pool_span(int64_t p, T bin, int64_t roi_start, int64_t extent) {
  int64_t s = int64_t(floor(roi_mul(T(p), bin))) + roi_start;
  int64_t e = int64_t(ceil(roi_mul(T(p + 1), bin))) + roi_start;
  s = s < 0 ? 0 : (s > extent ? extent : s);
  e = e < 0 ? 0 : (e > extent ? extent : e);
  return {s, e};
}

// ---- cost ------------------------------------------------------------------------------------
// roi_align: per output, grid_h * grid_w bilinear samples (4 products, 4 sums; the weights are
// shared by the channels and not counted) and one division. The adaptive grid depends on the RoIs,
// which the cost does not read: it is counted as one sample per bin (the least a non-empty RoI
// takes), a lower bound. Bytes: the RoIs, x once or the samples' four corners when those are fewer,
// y once. Backward: the same samples (4 products, 4 additions each) and the division into dx, which
// is written whole (zeroed, then scattered).
inline double roi_align_samples_per_bin(const RoiAlignParams& p) {
  return p.sampling_ratio > 0 ? double(p.sampling_ratio) * double(p.sampling_ratio) : 1.0;
}
inline Cost roi_align_fwd_cost(const RoiAlignFwdArgs& a) {
  const double e = double(dtype_size(a.x.dtype())), out = double(a.y.numel());
  const double s = roi_align_samples_per_bin(a.p);
  const double x_reads = std::fmin(double(a.x.numel()), 4 * s * out);
  return Cost{out * (8 * s + 1), (x_reads + double(a.rois.numel())) * e, out * e};
}
inline Cost roi_align_bwd_cost(const RoiAlignBwdArgs& a) {
  const double e = double(dtype_size(a.dy.dtype())), out = double(a.dy.numel());
  const double s = roi_align_samples_per_bin(a.p);
  return Cost{out * (8 * s + 1), (out + double(a.rois.numel())) * e, double(a.dx.numel()) * e};
}
// roi_pool: one comparison per bin element; the bins' extents depend on the RoIs (not read), so
// one comparison per output is counted, a lower bound. Backward: one addition per output.
inline Cost roi_pool_fwd_cost(const RoiPoolFwdArgs& a) {
  const double e = double(dtype_size(a.x.dtype())), out = double(a.y.numel());
  return Cost{out, (std::fmin(double(a.x.numel()), out) + double(a.rois.numel())) * e,
              out * e + (a.argmax.defined() ? out * 4 : 0.0)};
}
inline Cost roi_pool_bwd_cost(const RoiPoolBwdArgs& a) {
  const double e = double(dtype_size(a.dy.dtype())), out = double(a.dy.numel());
  return Cost{out, out * (e + 4) + double(a.rois.numel()) * e, double(a.dx.numel()) * e};
}

// Host-side validation shared by every variant ("[roi_align_fwd] ..." naming the shapes). The
// CPU variants also check every RoI's batch index (they read the RoIs anyway); the CUDA variants
// cannot without a device-to-host read: a RoI whose index is outside [0, N) gives zeros there
// and no gradient.
void check_roi_align_fwd_args(const RoiAlignFwdArgs& a);
void check_roi_align_bwd_args(const RoiAlignBwdArgs& a);
void check_roi_pool_fwd_args(const RoiPoolFwdArgs& a);
void check_roi_pool_bwd_args(const RoiPoolBwdArgs& a);

void roi_align_fwd(const RoiAlignFwdArgs& a);  // run the selected variant
void roi_align_bwd(const RoiAlignBwdArgs& a);
void roi_pool_fwd(const RoiPoolFwdArgs& a);
void roi_pool_bwd(const RoiPoolBwdArgs& a);

}  // namespace aim::kernels
