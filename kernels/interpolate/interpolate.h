// 2-D resampling of NCHW maps as torch.nn.functional.interpolate (torch 1.13, the CPU kernels):
//   nearest:  PyTorch's legacy 'nearest' index rule (not 'nearest-exact');
//   bilinear: align_corners true or false, the scale from the sizes or from the scale_factor the
//             caller gave (recompute_scale_factor=False).
// Shapes: x, dx [N, C, H, W]; y, dy [N, C, P, Q]. The output extent is y's shape (F.interpolate
// takes floor(H * scale_factor) when given a factor). Upsampling and downsampling alike.
// Every variant evaluates the source indices and weights below (written once, host and device) in
// PyTorch's precision (nearest: float; bilinear: the data's dtype); sums run in double in cpu.ref.
// Math and gradients: kernels/interpolate/README.md
#pragma once
#include <cmath>

#include "kernels/op.h"

namespace aim::kernels {

enum class InterpMode : int64_t { nearest = 0, bilinear = 1 };

struct InterpolateParams {
  InterpMode mode = InterpMode::bilinear;
  bool align_corners = false;       // bilinear only (PyTorch rejects it for nearest)
  double scale_h = 0, scale_w = 0;  // F.interpolate's scale_factor; 0: from the sizes
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.param("mode", s.mode), f.param("align_corners", s.align_corners);
    f.param("scale_h", s.scale_h), f.param("scale_w", s.scale_w);
  }
};

struct InterpolateFwdArgs {
  Tensor x;  // [N, C, H, W]
  Tensor y;  // [N, C, P, Q]: written
  InterpolateParams p;
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.out("y", s.y);
    f.group(s.p);
  }
};
struct InterpolateBwdArgs {
  Tensor dy;  // [N, C, P, Q]
  Tensor dx;  // [N, C, H, W]: written (=)
  InterpolateParams p;
  Device device() const { return dy.device(); }
  DType dtype() const { return dy.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dy", s.dy), f.out("dx", s.dx);
    f.group(s.p);
  }
};

// ---- source indices and weights, written once for every variant ----------------------------
#if defined(__CUDACC__)
#define AIM_INTERP_HD __host__ __device__ __forceinline__
#else
#define AIM_INTERP_HD inline
#endif
// A product rounded on its own: nvcc would contract `a * b - c` into an FMA.
AIM_INTERP_HD float interp_mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
AIM_INTERP_HD double interp_mul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

// nearest (UpSample.h nearest_idx): equal sizes copy, doubling shifts, otherwise
// min(floor(o * scale), in - 1) in float with scale = 1 / scale_factor or in / out.
AIM_INTERP_HD float nearest_scale(int64_t in, int64_t out, double scale_factor) {
  return scale_factor > 0 ? float(1.0 / scale_factor) : float(in) / float(out);
}
AIM_INTERP_HD int64_t nearest_source(int64_t o, int64_t in, int64_t out, float scale) {
  if (out == in) return o;
  if (out == 2 * in) return o >> 1;
  const int64_t s = int64_t(floorf(interp_mul(float(o), scale)));
  return s < in - 1 ? s : in - 1;
}

// bilinear (area_pixel_compute_scale / compute_source_index_and_lambda): align_corners maps the
// corner pixels' centres onto each other, scale (in - 1) / (out - 1) (0 for one output), source
// scale * o; otherwise scale 1 / scale_factor or in / out, source scale (o + 0.5) - 0.5 clamped at
// 0. i0 = floor(source), i1 = i0 + 1 unless i0 is the last pixel, weights 1 - l and l. Equal
// sizes copy (per axis, as the CPU kernel).
template <class T>
AIM_INTERP_HD T linear_scale(int64_t in, int64_t out, bool align_corners, double scale_factor) {
  if (align_corners) return out > 1 ? T(in - 1) / T(out - 1) : T(0);
  return scale_factor > 0 ? T(1.0 / scale_factor) : T(in) / T(out);
}
template <class T>
struct Lerp {
  int64_t i0, i1;
  T l0, l1;
};
template <class T>
AIM_INTERP_HD Lerp<T> linear_source(int64_t o, int64_t in, int64_t out, T scale,
                                    bool align_corners) {
  Lerp<T> r;
  if (out == in) {
    r.i0 = r.i1 = o;
    r.l0 = T(1), r.l1 = T(0);
    return r;
  }
  T src = align_corners ? interp_mul(scale, T(o)) : interp_mul(scale, T(o) + T(0.5)) - T(0.5);
  if (src < T(0)) src = T(0);
  r.i0 = int64_t(src);
  r.i1 = r.i0 + (r.i0 < in - 1 ? 1 : 0);
  r.l1 = src - T(r.i0);
  r.l0 = T(1) - r.l1;
  return r;
}

// ---- cost ------------------------------------------------------------------------------------
// nearest: data movement, no FLOPs (backward: one addition per dy element); bilinear: 4 products
// and 3 sums per output (backward: the same per dy element). Bytes: x once, or only the elements
// the output reads when it is smaller (4 per output for bilinear, 1 for nearest); y once.
// Backward: dy once, dx written once.
inline double interpolate_reads_per_output(InterpMode m) {
  return m == InterpMode::bilinear ? 4 : 1;
}
inline Cost interpolate_fwd_cost(const InterpolateFwdArgs& a) {
  const double e = double(dtype_size(a.x.dtype())), out = double(a.y.numel());
  const double reads = std::fmin(double(a.x.numel()), interpolate_reads_per_output(a.p.mode) * out);
  return Cost{a.p.mode == InterpMode::bilinear ? 7 * out : 0.0, reads * e, out * e};
}
inline Cost interpolate_bwd_cost(const InterpolateBwdArgs& a) {
  const double e = double(dtype_size(a.dy.dtype())), out = double(a.dy.numel());
  return Cost{a.p.mode == InterpMode::bilinear ? 7 * out : out, out * e, double(a.dx.numel()) * e};
}

// Host-side validation shared by every variant ("[interpolate_fwd] ...").
void check_interpolate_fwd_args(const InterpolateFwdArgs& a);
void check_interpolate_bwd_args(const InterpolateBwdArgs& a);

void interpolate_fwd(const InterpolateFwdArgs& a);  // run the selected variant
void interpolate_bwd(const InterpolateBwdArgs& a);

// F.interpolate's output extent for a scale_factor: floor(in * scale_factor).
inline int64_t interpolate_out_size(int64_t in, double scale_factor) {
  return int64_t(std::floor(double(in) * scale_factor));
}

}  // namespace aim::kernels
