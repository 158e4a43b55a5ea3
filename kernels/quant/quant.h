// Symmetric INT8 quantisation and the int8 GEMM / convolution of post-training quantised
// inference (DESIGN.md §5, issue 8).
//
// Convention (written once, here; math and the fast variants' tricks: kernels/quant/README.md):
//   * symmetric, zero point 0: x ≈ q * scale, q int8 in [-127, 127] (-128 is never produced;
//     as an input it is accepted and means -128);
//   * quantise: q = clamp(round_half_even(x / scale), -127, 127); NaN -> 0, ±inf -> ±127;
//   * per-tensor activations (one float scale), per-channel weights (f32 scales [C] along an
//     axis, 0 for weights: output channels);
//   * weight scales computed as max(absmax_c / 127, kQMinScale): an all-zero channel gets the
//     safe scale 1e-8 (it quantises to zeros and dequantises to zeros, never divides by zero);
//   * int8 x int8 products accumulated in int32; the reduction length (K of qlinear,
//     C/G*R*S of qconv2d) is at most kQMaxReduction, so no variant's int32 accumulator can
//     overflow (the VNNI +128 shift included);
//   * epilogue, the same fp32 operations in every variant (so variants agree bit for bit):
//       s[n] = x_scale * w_scales[n]                       (fp32 product)
//       y    = fma(float(acc), s[n], bias[n] or 0)         (one fused multiply-add)
//       y    = relu ? max(y, 0) : y
//       out  = y (f32 output)  or  quantize(y, out_scale) (int8 output: fused requantisation)
// Output dtype of qlinear/qconv2d is chosen by the output tensor (f32 or i8).
// Dimension letters: qlinear is a GEMM (M, N, K; x [M,K], w [N,K] as nn.Linear, y [M,N]);
// qconv2d uses the conv letters (x [N,C,H,W], w [K,C/G,R,S], y [N,K,P,Q]).
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/conv/conv2d.h"
#include "kernels/op.h"

#if defined(__CUDACC__)
#define AIM_QUANT_HD __host__ __device__
#else
#define AIM_QUANT_HD
#endif

namespace aim::kernels {

constexpr int kQMax = 127;                 // int8 range used: [-127, 127]
constexpr float kQMinScale = 1e-8f;        // smallest per-channel scale (all-zero channels)
constexpr int64_t kQMaxReduction = 65536;  // K (qlinear), C/G*R*S (qconv2d): int32 safe

// quantize(v, scale): clamp(round_half_even(v / scale), -127, 127); NaN -> 0. IEEE division and
// rint (round to nearest even in the default rounding mode) on host and device.
AIM_QUANT_HD inline int8_t quantize_value(float v, float scale) {
#if defined(__CUDA_ARCH__)
  float r = rintf(__fdiv_rn(v, scale));
#else
  float r = std::rint(v / scale);
#endif
  if (!(r == r)) return 0;  // NaN
  r = r > float(kQMax) ? float(kQMax) : r;
  r = r < -float(kQMax) ? -float(kQMax) : r;
  return int8_t(r);
}

// The epilogue of qlinear/qconv2d for one int32 accumulator, before the optional requantisation
// (quantize_value(y, out_scale)). combined_scale = x_scale * w_scales[n] in fp32.
AIM_QUANT_HD inline float qepilogue_value(int32_t acc, float combined_scale, float bias,
                                          bool relu) {
#if defined(__CUDA_ARCH__)
  float y = __fmaf_rn(float(acc), combined_scale, bias);
#else
  float y = std::fma(float(acc), combined_scale, bias);
#endif
  return relu ? (y > 0.f ? y : 0.f) : y;  // relu(NaN) = 0, as max(NaN, 0) of AVX-512 / fmaxf
}

// Per-channel weight scale from the channel's absolute maximum.
AIM_QUANT_HD inline float channel_scale(float absmax) {
  const float s = absmax / float(kQMax);
  return s < kQMinScale ? kQMinScale : s;
}

// --- quantize / dequantize ------------------------------------------------------------------

// x -> q. Per-tensor when `scales` is undefined (uses `scale`), else per-channel along `axis`.
struct QuantizeArgs {
  Tensor x;          // f32, f16 or bf16, contiguous, any shape
  Tensor q;          // i8, x's shape, contiguous: written
  float scale = 0;   // per-tensor scale (> 0, finite); ignored when scales is given
  Tensor scales;     // f32 [x.size(axis)] (> 0, finite): per-channel; undefined = per-tensor
  int64_t axis = 0;  // channel axis of the per-channel form (negative counts from the end)
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.in_opt("scales", s.scales), f.out("q", s.q);
    f.param("scale", s.scale), f.param("axis", s.axis);
  }
};

// q -> y = q * scale (per-tensor) or q * scales[c] (per-channel along axis).
struct DequantizeArgs {
  Tensor q;  // i8, contiguous, any shape
  Tensor y;  // f32, q's shape, contiguous: written
  float scale = 0;
  Tensor scales;  // f32 [q.size(axis)] or undefined (per-tensor)
  int64_t axis = 0;
  Device device() const { return q.device(); }
  DType dtype() const { return y.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("q", s.q), f.in_opt("scales", s.scales), f.out("y", s.y);
    f.param("scale", s.scale), f.param("axis", s.axis);
  }
};

// Weights: computes scales[c] = channel_scale(absmax over channel c of w along axis), then
// q = quantize(w, scales[c]). A non-finite weight is an error naming the channel.
struct QuantizePerChannelArgs {
  Tensor w;          // f32, f16 or bf16, contiguous, any shape (>= 1-D)
  Tensor q;          // i8, w's shape, contiguous: written
  Tensor scales;     // f32 [w.size(axis)], contiguous: written
  int64_t axis = 0;  // 0: output channels of Linear [N,K] and Conv [K,C/G,R,S] weights
  Device device() const { return w.device(); }
  DType dtype() const { return w.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("w", s.w), f.out("q", s.q), f.out("scales", s.scales);
    f.param("axis", s.axis);
  }
};

// --- qlinear: int8 GEMM with fused epilogue --------------------------------------------------

// y[m,n] = epilogue(sum_k x[m,k] * w[n,k]) (the convention above). All tensors contiguous, one
// device.
struct QLinearArgs {
  Tensor x;             // i8 [M, K]
  Tensor w;             // i8 [N, K] (nn.Linear layout)
  float x_scale = 0;    // per-tensor activation scale (> 0, finite)
  Tensor w_scales;      // f32 [N] (> 0, finite)
  Tensor bias;          // f32 [N] or undefined
  bool relu = false;    // fused ReLU (before requantisation)
  float out_scale = 0;  // requantisation scale (> 0, finite) when y is i8; ignored for f32
  Tensor y;             // f32 or i8 [M, N]: written
  Device device() const { return y.device(); }
  DType dtype() const { return y.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.in("w", s.w), f.in("w_scales", s.w_scales), f.in_opt("bias", s.bias);
    f.out("y", s.y);
    f.param("x_scale", s.x_scale), f.param("relu", s.relu), f.param("out_scale", s.out_scale);
  }
};

struct QLinearDims {
  int64_t M = 0, N = 0, K = 0;
};

// Validates dtypes, shapes, devices, contiguity, scales and K <= kQMaxReduction; throws
// "[qlinear] ..." naming the tensor. Every variant calls it first.
QLinearDims qlinear_check(const QLinearArgs& a);

// Compulsory work: 2*M*N*K int8 ops (multiply and add), 3 epilogue ops per output; x, w,
// w_scales (and bias) read once, y written once.
inline Cost qlinear_cost(const QLinearArgs& a) {
  const double M = double(a.x.size(0)), K = double(a.x.size(1)), N = double(a.w.size(0));
  return Cost{/*flops=*/2.0 * M * N * K + 3.0 * M * N,
              /*bytes_read=*/M * K + N * K + 4.0 * N * (a.bias.defined() ? 2 : 1),
              /*bytes_written=*/M * N * double(dtype_size(a.y.dtype()))};
}

// --- qconv2d: int8 convolution with fused epilogue -------------------------------------------

// The convolution of kernels/conv/conv2d.h (same geometry, Conv2dParams) on int8 NCHW, with the
// qlinear epilogue per output channel k (w_scales[k], bias[k]).
struct QConv2dArgs {
  Tensor x;           // i8 [N, C, H, W]
  Tensor w;           // i8 [K, C/G, R, S]
  float x_scale = 0;  // per-tensor (> 0, finite)
  Tensor w_scales;    // f32 [K] (> 0, finite)
  Tensor bias;        // f32 [K] or undefined
  bool relu = false;
  float out_scale = 0;  // requantisation scale when y is i8
  Tensor y;             // f32 or i8 [N, K, P, Q]: written
  Conv2dParams p;
  Device device() const { return y.device(); }
  DType dtype() const { return y.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.in("w", s.w), f.in("w_scales", s.w_scales), f.in_opt("bias", s.bias);
    f.out("y", s.y);
    f.param("x_scale", s.x_scale), f.param("relu", s.relu), f.param("out_scale", s.out_scale);
    f.group(s.p);
  }
};

// Validates as check_conv2d_fwd_args does for the geometry plus dtypes, scales and
// C/G*R*S <= kQMaxReduction; throws "[qconv2d] ...".
void check_qconv2d_args(const QConv2dArgs& a);

inline Cost qconv2d_cost(const QConv2dArgs& a) {
  const double ny = double(a.y.numel());
  return Cost{/*flops=*/2.0 * conv2d_macs(a.w, a.y) + 3.0 * ny,
              /*bytes_read=*/double(a.x.numel()) + double(a.w.numel()) +
                  4.0 * double(a.w.size(0)) * (a.bias.defined() ? 2 : 1),
              /*bytes_written=*/ny * double(dtype_size(a.y.dtype()))};
}

void check_quantize_args(const QuantizeArgs& a);
void check_dequantize_args(const DequantizeArgs& a);
void check_quantize_per_channel_args(const QuantizePerChannelArgs& a);

// Entry points: run the selected variant (registered ops "quantize", "dequantize",
// "quantize_per_channel", "qlinear", "qconv2d").
void quantize(const QuantizeArgs& a);
void dequantize(const DequantizeArgs& a);
void quantize_per_channel(const QuantizePerChannelArgs& a);
void qlinear(const QLinearArgs& a);
void qconv2d(const QConv2dArgs& a);

// Allocating helpers (outputs on the input's device).
Tensor quantize_tensor(const Tensor& x, float scale);                           // -> i8
Tensor quantize_tensor(const Tensor& x, const Tensor& scales, int64_t axis);    // -> i8
Tensor dequantize_tensor(const Tensor& q, float scale);                         // -> f32
Tensor dequantize_tensor(const Tensor& q, const Tensor& scales, int64_t axis);  // -> f32
struct QuantizedWeight {
  Tensor q;       // i8, the weight's shape
  Tensor scales;  // f32 [w.size(axis)]
  int64_t axis = 0;
};
QuantizedWeight quantize_weight(const Tensor& w, int64_t axis = 0);  // per-channel, computes scales

}  // namespace aim::kernels
