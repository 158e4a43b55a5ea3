// INT8 quantisation, qlinear and qconv2d on the CPU (convention: quant.h; math: README.md).
// cpu.ref: the oracles. quantize/dequantize/quantize_per_channel: plain loops over every element
//   through quantize_value(); qlinear/qconv2d: direct loops, int64 accumulation checked to fit
//   int32 (it always does under kQMaxReduction), then qepilogue_value() per output.
// cpu.parallel (quantize, dequantize): the reference's per-element function under an OpenMP
//   loop; the default (activations are quantised at every layer of an int8 network).
// cpu.vnni (qlinear; qconv2d through an int8 im2col and the same GEMM): AVX-512 VNNI.
//   vpdpbusd multiplies unsigned by signed bytes, four per 32-bit lane, so the A operand
//   (activations for qlinear, weights for qconv2d) is shifted to u8 (a + 128 = a ^ 0x80) and the
//   shift is taken back per output column: acc = sum_k (a+128)*b - 128*sum_k b (README.md).
//   Packing: A rows as u8 with K padded to Kp = 4*ceil(K/4) (lda = Kp); B as panels of 16
//   columns, [Kp/4][16][4] bytes (the 4 k values of one lane together, zero padding in k and
//   n), with the correction 128*sum_k b per column computed while packing.
//   Microkernel: up to 6 rows x 4 panels (64 columns) of int32 accumulators in 24 zmm; per group
//   of 4 k: 4 panel loads, 6 broadcasts of 4 A bytes, 24 vpdpbusd. The epilogue (correction,
//   scales, bias, ReLU, requantisation) runs in AVX-512 on the 6x64 tile with the same fp32
//   operations as qepilogue_value()/quantize_value(), so results equal cpu.ref bit for bit.
//   qlinear: A = x (packed once), B = w (packed once per call: weights are not cached yet),
//   OpenMP over 96-row x 64-column output tiles. qconv2d: A = w per group (packed once), B =
//   im2col of 64 output pixels gathered straight into panel layout per work item (image, group,
//   pixel chunk, and row blocks when there are few items), thread-local buffers. The gather is
//   vectorised for stride_w == 1 (masked 16-byte loads per output-row segment, unpack
//   interleave, column sums by vpdpbusd with ones: gather_b_conv_s1) and scalar otherwise; with
//   few output channels (K/G = 64) it still costs about as much as the GEMM.
//   Limits: CPUs with AVX-512 F/BW/VL and VNNI (supports() says otherwise); 32-bit int32
//   accumulators safe for K <= kQMaxReduction (checked by every variant).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "kernels/quant/quant.h"
#include "kernels/registry.h"
#include "kernels/testing.h"

namespace aim::kernels {

namespace {

std::string sh(const Tensor& t) { return t.defined() ? to_string(t.sizes()) : "undefined"; }

void check_scale(const char* op, const char* name, float s) {
  AIM_CHECK(std::isfinite(s) && s > 0.f, "[", op, "] ", name, " must be a finite scale > 0, got ",
            s);
}

// A tensor argument: given, of `dt`, on `dev`, contiguous, and (when `want` is non-empty) of
// that shape.
void check_arg(const char* op, const char* name, const Tensor& t, DType dt, Device dev,
               const Shape* want = nullptr) {
  AIM_CHECK(t.defined(), "[", op, "] ", name, " must be given (", dtype_name(dt),
            want ? " " + to_string(*want) : std::string(), ")");
  AIM_CHECK(t.dtype() == dt, "[", op, "] ", name, " must be ", dtype_name(dt), ", got ",
            dtype_name(t.dtype()), " ", sh(t));
  if (want)
    AIM_CHECK(t.sizes() == *want, "[", op, "] ", name, " must be ", to_string(*want), ", got ",
              sh(t));
  AIM_CHECK(t.device() == dev, "[", op, "] ", name, " must be on ", dev.str(), " like the other ",
            "tensors, got ", t.device().str());
  AIM_CHECK(t.numel() == 0 || t.is_contiguous(), "[", op, "] ", name, " ", sh(t),
            " must be contiguous, got strides ", to_string(t.strides()));
}

// f32 scales [C] (> 0, finite). The values are checked on the CPU only: on a GPU that would cost
// a device-to-host copy per call (GPU scales come from quantize_weight or the caller's own
// checked calibration).
void check_scales(const char* op, const char* name, const Tensor& s, int64_t C, Device dev) {
  const Shape want{C};
  check_arg(op, name, s, DType::f32, dev, &want);
  if (!dev.is_cpu()) return;
  const float* p = s.data<float>();
  for (int64_t c = 0; c < C; ++c)
    AIM_CHECK(std::isfinite(p[c]) && p[c] > 0.f, "[", op, "] ", name, "[", c,
              "] must be a finite scale > 0, got ", p[c]);
}

int64_t norm_axis(const char* op, const char* name, int64_t axis, int64_t dim) {
  AIM_CHECK(axis >= -dim && axis < dim, "[", op, "] axis ", axis, " out of range for ", name,
            " with ", dim, " dimensions");
  return axis < 0 ? axis + dim : axis;
}

// outer x C x inner around a channel axis.
struct Split {
  int64_t outer = 1, C = 1, inner = 1;
};
Split split_at(const Tensor& t, int64_t axis) {
  Split s;
  for (int64_t i = 0; i < axis; ++i) s.outer *= t.size(i);
  s.C = t.size(axis);
  for (int64_t i = axis + 1; i < t.dim(); ++i) s.inner *= t.size(i);
  return s;
}

bool is_quant_float(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

}  // namespace

// ---- validation --------------------------------------------------------------------------------

void check_quantize_args(const QuantizeArgs& a) {
  const char* op = "quantize";
  AIM_CHECK(a.x.defined(), "[quantize] x must be given");
  AIM_CHECK(is_quant_float(a.x.dtype()), "[quantize] x must be f32, f16 or bf16, got ",
            dtype_name(a.x.dtype()));
  check_arg(op, "x", a.x, a.x.dtype(), a.x.device());
  check_arg(op, "q", a.q, DType::i8, a.x.device(), &a.x.sizes());
  if (a.scales.defined()) {
    AIM_CHECK(a.x.dim() >= 1, "[quantize] per-channel x must have at least one dimension");
    const int64_t ax = norm_axis(op, "x", a.axis, a.x.dim());
    check_scales(op, "scales", a.scales, a.x.size(ax), a.x.device());
  } else {
    check_scale(op, "scale", a.scale);
  }
}

void check_dequantize_args(const DequantizeArgs& a) {
  const char* op = "dequantize";
  AIM_CHECK(a.q.defined(), "[dequantize] q must be given");
  check_arg(op, "q", a.q, DType::i8, a.q.device());
  check_arg(op, "y", a.y, DType::f32, a.q.device(), &a.q.sizes());
  if (a.scales.defined()) {
    AIM_CHECK(a.q.dim() >= 1, "[dequantize] per-channel q must have at least one dimension");
    const int64_t ax = norm_axis(op, "q", a.axis, a.q.dim());
    check_scales(op, "scales", a.scales, a.q.size(ax), a.q.device());
  } else {
    check_scale(op, "scale", a.scale);
  }
}

void check_quantize_per_channel_args(const QuantizePerChannelArgs& a) {
  const char* op = "quantize_per_channel";
  AIM_CHECK(a.w.defined(), "[quantize_per_channel] w must be given");
  AIM_CHECK(is_quant_float(a.w.dtype()), "[quantize_per_channel] w must be f32, f16 or bf16, got ",
            dtype_name(a.w.dtype()));
  AIM_CHECK(a.w.dim() >= 1, "[quantize_per_channel] w must have at least one dimension, got ",
            sh(a.w));
  check_arg(op, "w", a.w, a.w.dtype(), a.w.device());
  check_arg(op, "q", a.q, DType::i8, a.w.device(), &a.w.sizes());
  const int64_t ax = norm_axis(op, "w", a.axis, a.w.dim());
  const Shape want{a.w.size(ax)};
  check_arg(op, "scales", a.scales, DType::f32, a.w.device(), &want);
}

QLinearDims qlinear_check(const QLinearArgs& a) {
  const char* op = "qlinear";
  AIM_CHECK(a.y.defined(), "[qlinear] y must be given (f32 or i8 [M, N])");
  const Device dev = a.y.device();
  AIM_CHECK(a.y.dtype() == DType::f32 || a.y.dtype() == DType::i8,
            "[qlinear] y must be f32 or i8 (requantised), got ", dtype_name(a.y.dtype()));
  check_arg(op, "x", a.x, DType::i8, dev);
  check_arg(op, "w", a.w, DType::i8, dev);
  AIM_CHECK(a.x.dim() == 2, "[qlinear] x must be [M, K], got ", sh(a.x));
  AIM_CHECK(a.w.dim() == 2, "[qlinear] w must be [N, K] (nn.Linear layout), got ", sh(a.w));
  QLinearDims d;
  d.M = a.x.size(0);
  d.K = a.x.size(1);
  d.N = a.w.size(0);
  AIM_CHECK(a.w.size(1) == d.K, "[qlinear] w must be [N, K] with K = ", d.K, " (x ", sh(a.x),
            "), got ", sh(a.w));
  AIM_CHECK(d.K <= kQMaxReduction, "[qlinear] K = ", d.K, " exceeds ", kQMaxReduction,
            " (int32 accumulators could overflow)");
  const Shape ys{d.M, d.N};
  check_arg(op, "y", a.y, a.y.dtype(), dev, &ys);
  check_scale(op, "x_scale", a.x_scale);
  check_scales(op, "w_scales", a.w_scales, d.N, dev);
  if (a.bias.defined()) {
    const Shape bs{d.N};
    check_arg(op, "bias", a.bias, DType::f32, dev, &bs);
  }
  if (a.y.dtype() == DType::i8) check_scale(op, "out_scale (i8 y)", a.out_scale);
  return d;
}

namespace {

// Sizes of one quantised convolution.
struct QDims {
  int64_t N, C, H, W, K, R, S, P, Q, G, Cg, Kg;
};

QDims qconv_dims(const QConv2dArgs& a) {
  const char* op = "qconv2d";
  const Conv2dParams& p = a.p;
  AIM_CHECK(p.stride_h >= 1 && p.stride_w >= 1, "[qconv2d] stride must be >= 1, got ", p.stride_h,
            ",", p.stride_w);
  AIM_CHECK(p.dil_h >= 1 && p.dil_w >= 1, "[qconv2d] dilation must be >= 1, got ", p.dil_h, ",",
            p.dil_w);
  AIM_CHECK(p.pad_top >= 0 && p.pad_bottom >= 0 && p.pad_left >= 0 && p.pad_right >= 0,
            "[qconv2d] padding must be >= 0, got top ", p.pad_top, " bottom ", p.pad_bottom,
            " left ", p.pad_left, " right ", p.pad_right);
  AIM_CHECK(p.groups >= 1, "[qconv2d] groups must be >= 1, got ", p.groups);
  AIM_CHECK(a.y.defined(), "[qconv2d] y must be given (f32 or i8 [N, K, P, Q])");
  AIM_CHECK(a.y.dtype() == DType::f32 || a.y.dtype() == DType::i8,
            "[qconv2d] y must be f32 or i8 (requantised), got ", dtype_name(a.y.dtype()));
  const Device dev = a.y.device();
  check_arg(op, "x", a.x, DType::i8, dev);
  check_arg(op, "w", a.w, DType::i8, dev);
  AIM_CHECK(a.x.dim() == 4, "[qconv2d] x must be [N, C, H, W], got ", sh(a.x));
  AIM_CHECK(a.w.dim() == 4, "[qconv2d] w must be [K, C/groups, R, S], got ", sh(a.w));
  QDims d;
  d.N = a.x.size(0);
  d.C = a.x.size(1);
  d.H = a.x.size(2);
  d.W = a.x.size(3);
  d.K = a.w.size(0);
  d.R = a.w.size(2);
  d.S = a.w.size(3);
  d.G = p.groups;
  AIM_CHECK(d.C % d.G == 0, "[qconv2d] channels C = ", d.C, " of x ", sh(a.x),
            " must be divisible by groups = ", d.G);
  AIM_CHECK(d.K % d.G == 0, "[qconv2d] output channels K = ", d.K, " of w ", sh(a.w),
            " must be divisible by groups = ", d.G);
  d.Cg = d.C / d.G;
  d.Kg = d.K / d.G;
  AIM_CHECK(a.w.size(1) == d.Cg, "[qconv2d] w must be [K, C/groups = ", d.Cg, ", R, S] for x ",
            sh(a.x), " and groups ", d.G, ", got ", sh(a.w));
  AIM_CHECK(d.R >= 1 && d.S >= 1, "[qconv2d] kernel must be at least 1x1, got w ", sh(a.w));
  const int64_t eff_h = p.dil_h * (d.R - 1) + 1, eff_w = p.dil_w * (d.S - 1) + 1;
  AIM_CHECK(d.H + p.pad_top + p.pad_bottom >= eff_h && d.W + p.pad_left + p.pad_right >= eff_w,
            "[qconv2d] kernel ", d.R, "x", d.S, " with dilation ", p.dil_h, ",", p.dil_w,
            " does not fit x ", sh(a.x), " padded by ", p.pad_top, "+", p.pad_bottom, " rows and ",
            p.pad_left, "+", p.pad_right, " columns");
  d.P = conv2d_out_size(d.H, d.R, p.stride_h, p.pad_top, p.pad_bottom, p.dil_h);
  d.Q = conv2d_out_size(d.W, d.S, p.stride_w, p.pad_left, p.pad_right, p.dil_w);
  AIM_CHECK(d.Cg * d.R * d.S <= kQMaxReduction, "[qconv2d] C/groups*R*S = ", d.Cg * d.R * d.S,
            " exceeds ", kQMaxReduction, " (int32 accumulators could overflow)");
  const Shape ys{d.N, d.K, d.P, d.Q};
  check_arg(op, "y", a.y, a.y.dtype(), dev, &ys);
  check_scale(op, "x_scale", a.x_scale);
  check_scales(op, "w_scales", a.w_scales, d.K, dev);
  if (a.bias.defined()) {
    const Shape bs{d.K};
    check_arg(op, "bias", a.bias, DType::f32, dev, &bs);
  }
  if (a.y.dtype() == DType::i8) check_scale(op, "out_scale (i8 y)", a.out_scale);
  return d;
}

}  // namespace

void check_qconv2d_args(const QConv2dArgs& a) { qconv_dims(a); }

namespace {

// ---- cpu.ref and cpu.parallel: quantize / dequantize / quantize_per_channel -------------------

template <class T>
void quantize_typed(const QuantizeArgs& a, bool parallel) {
  const T* x = a.x.data<T>();
  int8_t* q = a.q.data<int8_t>();
  const int64_t n = a.x.numel();
  if (!a.scales.defined()) {
    const float s = a.scale;
#pragma omp parallel for schedule(static) if (parallel && n > (int64_t(1) << 15))
    for (int64_t i = 0; i < n; ++i) q[i] = quantize_value(float(x[i]), s);
    return;
  }
  const Split sp = split_at(a.x, norm_axis("quantize", "x", a.axis, a.x.dim()));
  const float* s = a.scales.data<float>();
#pragma omp parallel for schedule(static) if (parallel && n > (int64_t(1) << 15))
  for (int64_t oc = 0; oc < sp.outer * sp.C; ++oc) {
    const float sc = s[oc % sp.C];
    for (int64_t i = 0; i < sp.inner; ++i)
      q[oc * sp.inner + i] = quantize_value(float(x[oc * sp.inner + i]), sc);
  }
}

void quantize_cpu_ref(const QuantizeArgs& a) {
  check_quantize_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { quantize_typed<T>(a, false); });
}
void quantize_cpu_parallel(const QuantizeArgs& a) {
  check_quantize_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { quantize_typed<T>(a, true); });
}

void dequantize_impl(const DequantizeArgs& a, bool parallel) {
  check_dequantize_args(a);
  const int8_t* q = a.q.data<int8_t>();
  float* y = a.y.data<float>();
  const int64_t n = a.q.numel();
  if (!a.scales.defined()) {
    const float s = a.scale;
#pragma omp parallel for schedule(static) if (parallel && n > (int64_t(1) << 15))
    for (int64_t i = 0; i < n; ++i) y[i] = float(q[i]) * s;
    return;
  }
  const Split sp = split_at(a.q, norm_axis("dequantize", "q", a.axis, a.q.dim()));
  const float* s = a.scales.data<float>();
#pragma omp parallel for schedule(static) if (parallel && n > (int64_t(1) << 15))
  for (int64_t oc = 0; oc < sp.outer * sp.C; ++oc) {
    const float sc = s[oc % sp.C];
    for (int64_t i = 0; i < sp.inner; ++i) y[oc * sp.inner + i] = float(q[oc * sp.inner + i]) * sc;
  }
}
void dequantize_cpu_ref(const DequantizeArgs& a) { dequantize_impl(a, false); }
void dequantize_cpu_parallel(const DequantizeArgs& a) { dequantize_impl(a, true); }

template <class T>
void quantize_per_channel_typed(const QuantizePerChannelArgs& a) {
  const int64_t ax = norm_axis("quantize_per_channel", "w", a.axis, a.w.dim());
  const Split sp = split_at(a.w, ax);
  const T* w = a.w.data<T>();
  int8_t* q = a.q.data<int8_t>();
  float* scales = a.scales.data<float>();
  for (int64_t c = 0; c < sp.C; ++c) {
    float m = 0.f;
    for (int64_t o = 0; o < sp.outer; ++o)
      for (int64_t i = 0; i < sp.inner; ++i) {
        const float v = float(w[(o * sp.C + c) * sp.inner + i]);
        AIM_CHECK(std::isfinite(v), "[quantize_per_channel] w ", sh(a.w),
                  " has a non-finite value (", v, ") in channel ", c, " of axis ", ax);
        m = std::max(m, std::fabs(v));
      }
    scales[c] = channel_scale(m);
  }
  for (int64_t o = 0; o < sp.outer; ++o)
    for (int64_t c = 0; c < sp.C; ++c)
      for (int64_t i = 0; i < sp.inner; ++i) {
        const int64_t j = (o * sp.C + c) * sp.inner + i;
        q[j] = quantize_value(float(w[j]), scales[c]);
      }
}

void quantize_per_channel_cpu_ref(const QuantizePerChannelArgs& a) {
  check_quantize_per_channel_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.w.dtype(), T, { quantize_per_channel_typed<T>(a); });
}

// ---- cpu.ref: qlinear, qconv2d ----------------------------------------------------------------

int32_t checked_acc(int64_t acc, const char* op) {
  AIM_CHECK(
      acc >= std::numeric_limits<int32_t>::min() && acc <= std::numeric_limits<int32_t>::max(), "[",
      op, "] cpu.ref: accumulator ", acc, " does not fit int32");
  return int32_t(acc);
}

// Writes the epilogue of one accumulator into y (f32 or i8) at flat index i.
struct OutWriter {
  float* yf = nullptr;
  int8_t* yq = nullptr;
  float out_scale = 0;
  explicit OutWriter(const Tensor& y, float os) : out_scale(os) {
    if (y.dtype() == DType::f32)
      yf = y.data<float>();
    else
      yq = y.data<int8_t>();
  }
  void put(int64_t i, float v) const {
    if (yf)
      yf[i] = v;
    else
      yq[i] = quantize_value(v, out_scale);
  }
};

void qlinear_cpu_ref(const QLinearArgs& a) {
  const QLinearDims d = qlinear_check(a);
  const int8_t* x = a.x.data<int8_t>();
  const int8_t* w = a.w.data<int8_t>();
  const float* ws = a.w_scales.data<float>();
  const float* bias = a.bias.defined() ? a.bias.data<float>() : nullptr;
  const OutWriter out(a.y, a.out_scale);
  for (int64_t m = 0; m < d.M; ++m)
    for (int64_t n = 0; n < d.N; ++n) {
      int64_t acc = 0;
      for (int64_t k = 0; k < d.K; ++k) acc += int64_t(x[m * d.K + k]) * int64_t(w[n * d.K + k]);
      const float s = a.x_scale * ws[n];
      out.put(m * d.N + n,
              qepilogue_value(checked_acc(acc, "qlinear"), s, bias ? bias[n] : 0.f, a.relu));
    }
}

void qconv2d_cpu_ref(const QConv2dArgs& a) {
  const QDims d = qconv_dims(a);
  const Conv2dParams& p = a.p;
  const int8_t* x = a.x.data<int8_t>();
  const int8_t* w = a.w.data<int8_t>();
  const float* ws = a.w_scales.data<float>();
  const float* bias = a.bias.defined() ? a.bias.data<float>() : nullptr;
  const OutWriter out(a.y, a.out_scale);
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t k = 0; k < d.K; ++k) {
      const int64_t g = k / d.Kg;
      const float s = a.x_scale * ws[k];
      for (int64_t pp = 0; pp < d.P; ++pp)
        for (int64_t qq = 0; qq < d.Q; ++qq) {
          int64_t acc = 0;
          for (int64_t c = 0; c < d.Cg; ++c)
            for (int64_t r = 0; r < d.R; ++r) {
              const int64_t h = pp * p.stride_h - p.pad_top + r * p.dil_h;
              if (h < 0 || h >= d.H) continue;
              for (int64_t s2 = 0; s2 < d.S; ++s2) {
                const int64_t ww = qq * p.stride_w - p.pad_left + s2 * p.dil_w;
                if (ww < 0 || ww >= d.W) continue;
                acc += int64_t(x[((n * d.C + g * d.Cg + c) * d.H + h) * d.W + ww]) *
                       int64_t(w[((k * d.Cg + c) * d.R + r) * d.S + s2]);
              }
            }
          out.put(((n * d.K + k) * d.P + pp) * d.Q + qq,
                  qepilogue_value(checked_acc(acc, "qconv2d"), s, bias ? bias[k] : 0.f, a.relu));
        }
    }
}

// ---- cpu.vnni ---------------------------------------------------------------------------------

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps() (`__m512 __Y = __Y;`), which
// -Wmaybe-uninitialized reports at every use in a target("avx512f") function: a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define AIM_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma")))

bool cpu_has_vnni() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                         __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma");
  return ok;
}

constexpr int kMR = 6;         // microkernel rows
constexpr int kNV = 4;         // microkernel panels of 16 columns
constexpr int kNC = 16 * kNV;  // microkernel columns

int64_t round4(int64_t k) { return (k + 3) / 4 * 4; }

// C tile [MR][kNC] (int32, row stride kNC) = A rows (u8, lda) . B panels (s8, panel_stride
// bytes apart) over Kq groups of 4 k.
template <int MR, int NV>
AIM_VNNI_TARGET void vnni_micro(const uint8_t* A, int64_t lda, const int8_t* B,
                                int64_t panel_stride, int64_t Kq, int32_t* C) {
  __m512i acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_setzero_si512();
  for (int64_t kq = 0; kq < Kq; ++kq) {
    __m512i b[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j)
      b[j] = _mm512_loadu_si512(static_cast<const void*>(B + j * panel_stride + kq * 64));
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      int32_t av;
      std::memcpy(&av, A + i * lda + kq * 4, 4);
      const __m512i a = _mm512_set1_epi32(av);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], a, b[j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j)
      _mm512_storeu_si512(static_cast<void*>(C + i * kNC + j * 16), acc[i][j]);
}

using MicroFn = void (*)(const uint8_t*, int64_t, const int8_t*, int64_t, int64_t, int32_t*);

template <int MR>
MicroFn micro_for_nv(int nv) {
  switch (nv) {
    case 1:
      return vnni_micro<MR, 1>;
    case 2:
      return vnni_micro<MR, 2>;
    case 3:
      return vnni_micro<MR, 3>;
    default:
      return vnni_micro<MR, 4>;
  }
}
MicroFn micro_for(int mr, int nv) {
  switch (mr) {
    case 1:
      return micro_for_nv<1>(nv);
    case 2:
      return micro_for_nv<2>(nv);
    case 3:
      return micro_for_nv<3>(nv);
    case 4:
      return micro_for_nv<4>(nv);
    case 5:
      return micro_for_nv<5>(nv);
    default:
      return micro_for_nv<6>(nv);
  }
}

// What the epilogue needs: per-column correction, scale and bias per row (qconv2d: output
// channel) or per column (qlinear: n), and the output.
struct Epi {
  const int32_t* corr = nullptr;  // corr[col - corr0]: the correction of output column col
  int64_t corr0 = 0;
  const float* scale = nullptr;  // combined x_scale * w_scale
  const float* bias = nullptr;   // or null
  bool per_row = false, relu = false;
  float* yf = nullptr;   // f32 output, or
  int8_t* yq = nullptr;  // i8 output
  float out_scale = 0;
  int64_t ldy = 0;
};

// Rows row0.. row0+mr-1, columns col0 .. col0+ncols-1 of the output from the tile t [mr][kNC].
AIM_VNNI_TARGET void vnni_epilogue(const int32_t* t, int mr, int ncols, int64_t row0, int64_t col0,
                                   const Epi& e) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512 lo = _mm512_set1_ps(-float(kQMax)), hi = _mm512_set1_ps(float(kQMax));
  const __m512 os = _mm512_set1_ps(e.out_scale);
  for (int i = 0; i < mr; ++i) {
    const int64_t row = row0 + i;
    for (int j0 = 0; j0 < ncols; j0 += 16) {
      const int rem = ncols - j0;
      const __mmask16 m = rem >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << rem) - 1);
      const int64_t col = col0 + j0;
      __m512i acc = _mm512_loadu_si512(static_cast<const void*>(t + i * kNC + j0));
      acc = _mm512_sub_epi32(acc, _mm512_maskz_loadu_epi32(m, e.corr + (col - e.corr0)));
      const __m512 f = _mm512_cvtepi32_ps(acc);
      const __m512 s =
          e.per_row ? _mm512_set1_ps(e.scale[row]) : _mm512_maskz_loadu_ps(m, e.scale + col);
      const __m512 b = !e.bias     ? zero
                       : e.per_row ? _mm512_set1_ps(e.bias[row])
                                   : _mm512_maskz_loadu_ps(m, e.bias + col);
      __m512 y = _mm512_fmadd_ps(f, s, b);
      if (e.relu) y = _mm512_max_ps(y, zero);  // NaN and -0 give +0, as qepilogue_value
      if (e.yf) {
        _mm512_mask_storeu_ps(e.yf + row * e.ldy + col, m, y);
      } else {
        __m512 r = _mm512_roundscale_ps(_mm512_div_ps(y, os),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __mmask16 nan = _mm512_cmp_ps_mask(r, r, _CMP_UNORD_Q);
        r = _mm512_min_ps(_mm512_max_ps(r, lo), hi);
        r = _mm512_mask_mov_ps(r, nan, zero);  // NaN -> 0, as quantize_value
        _mm512_mask_cvtepi32_storeu_epi8(e.yq + row * e.ldy + col, m, _mm512_cvtps_epi32(r));
      }
    }
  }
}

// Rows [r0, r1) of packed A against the packed panels [first_panel, first_panel + panels) of B
// (panel j at Bp + j * panel_bytes), columns col0 .. col0 + ncols - 1 of the output.
void vnni_block(const uint8_t* Ap, int64_t lda, int64_t r0, int64_t r1, const int8_t* Bp,
                int64_t panel_bytes, int64_t Kq, int64_t col0, int64_t ncols, const Epi& e) {
  alignas(64) int32_t tile[kMR * kNC];
  for (int64_t c = 0; c < ncols; c += kNC) {
    const int nc = int(std::min<int64_t>(kNC, ncols - c));
    const int nv = (nc + 15) / 16;
    const int8_t* B = Bp + (c / 16) * panel_bytes;
    for (int64_t r = r0; r < r1; r += kMR) {
      const int mr = int(std::min<int64_t>(kMR, r1 - r));
      micro_for(mr, nv)(Ap + r * lda, lda, B, panel_bytes, Kq, tile);
      vnni_epilogue(tile, mr, nc, r, col0 + c, e);
    }
  }
}

// A rows (s8, row stride K) -> u8 (x + 128) with row stride Kp; zero in the k padding.
void pack_a_u8(const int8_t* src, int64_t rows, int64_t K, int64_t Kp, uint8_t* dst) {
#pragma omp parallel for schedule(static) if (rows * K > (int64_t(1) << 16))
  for (int64_t m = 0; m < rows; ++m) {
    const int8_t* s = src + m * K;
    uint8_t* d = dst + m * Kp;
    for (int64_t k = 0; k < K; ++k) d[k] = uint8_t(s[k]) ^ 0x80u;
    for (int64_t k = K; k < Kp; ++k) d[k] = 0;
  }
}

// B rows n (s8, row stride K: w [N, K]) -> panels [N16/16][Kp/4][16][4], zero padded, and
// corr[n] = 128 * sum_k B[n, k] (0 for padding columns).
void pack_b_panels(const int8_t* src, int64_t N, int64_t K, int64_t Kp, int8_t* dst,
                   int32_t* corr) {
  const int64_t panels = (N + 15) / 16, Kq = Kp / 4;
#pragma omp parallel for schedule(static) if (N * K > (int64_t(1) << 16))
  for (int64_t j = 0; j < panels; ++j) {
    int8_t* P = dst + j * Kq * 64;
    std::memset(P, 0, size_t(Kq * 64));
    for (int l = 0; l < 16; ++l) {
      const int64_t n = j * 16 + l;
      int32_t sum = 0;
      if (n < N) {
        const int8_t* s = src + n * K;
        const int64_t full = K / 4;
        for (int64_t kq = 0; kq < full; ++kq) std::memcpy(P + kq * 64 + l * 4, s + 4 * kq, 4);
        for (int64_t k = 4 * full; k < K; ++k) P[full * 64 + l * 4 + (k - 4 * full)] = s[k];
        for (int64_t k = 0; k < K; ++k) sum += s[k];
      }
      corr[n] = 128 * sum;
    }
  }
}

template <class T>
T* grow(std::vector<T>& v, int64_t n) {
  if (int64_t(v.size()) < n) v.resize(size_t(n));
  return v.data();
}

std::string vnni_supports_cpu() { return cpu_has_vnni() ? "" : "CPU lacks AVX-512 VNNI"; }

void qlinear_cpu_vnni(const QLinearArgs& a) {
  const QLinearDims d = qlinear_check(a);
  AIM_CHECK(cpu_has_vnni(), "[qlinear] cpu.vnni: CPU lacks AVX-512 VNNI");
  if (d.M == 0 || d.N == 0) return;
  const int64_t Kp = round4(d.K), Kq = Kp / 4, N16 = (d.N + 15) / 16 * 16;
  static thread_local std::vector<uint8_t> abuf;
  static thread_local std::vector<int8_t> bbuf;
  static thread_local std::vector<int32_t> cbuf;
  static thread_local std::vector<float> sbuf;
  uint8_t* Ap = grow(abuf, d.M * Kp);
  int8_t* Bp = grow(bbuf, N16 * Kp);
  int32_t* corr = grow(cbuf, N16);
  float* sc = grow(sbuf, d.N);
  pack_a_u8(a.x.data<int8_t>(), d.M, d.K, Kp, Ap);
  pack_b_panels(a.w.data<int8_t>(), d.N, d.K, Kp, Bp, corr);
  const float* ws = a.w_scales.data<float>();
  for (int64_t n = 0; n < d.N; ++n) sc[n] = a.x_scale * ws[n];
  Epi e;
  e.corr = corr;
  e.scale = sc;
  e.bias = a.bias.defined() ? a.bias.data<float>() : nullptr;
  e.per_row = false;
  e.relu = a.relu;
  if (a.y.dtype() == DType::f32)
    e.yf = a.y.data<float>();
  else
    e.yq = a.y.data<int8_t>();
  e.out_scale = a.out_scale;
  e.ldy = d.N;
  constexpr int64_t kMB = 16 * kMR;  // rows per work item
  const int64_t mt = (d.M + kMB - 1) / kMB, nt = (d.N + kNC - 1) / kNC;
  const bool par = 2.0 * double(d.M) * double(d.N) * double(d.K) > 2e6 && !omp_in_parallel();
#pragma omp parallel for schedule(dynamic, 1) if (par)
  for (int64_t t = 0; t < mt * nt; ++t) {
    const int64_t ni = t % nt, mi = t / nt;
    const int64_t c0 = ni * kNC;
    vnni_block(Ap, Kp, mi * kMB, std::min(d.M, (mi + 1) * kMB), Bp + (c0 / 16) * Kq * 64, Kq * 64,
               Kq, c0, std::min<int64_t>(kNC, d.N - c0), e);
  }
}

// im2col of output pixels [pix0, pix0 + np) of image n, group g, straight into B panels
// [ceil(np/16)][Kp/4][16][4] with corr[pp] = 128 * sum_k col[pp, k].
void gather_b_conv(const int8_t* x, const QDims& d, const Conv2dParams& p, int64_t n, int64_t g,
                   int64_t pix0, int64_t np, int64_t Kp, int8_t* Bp, int32_t* corr) {
  const int64_t Kq = Kp / 4, panels = (np + 15) / 16, CRS = d.Cg * d.R * d.S;
  std::memset(Bp, 0, size_t(panels * Kq * 64));
  int64_t hb[kNC], wb[kNC];
  int32_t sum[kNC] = {0};
  for (int64_t i = 0; i < np; ++i) {
    const int64_t pix = pix0 + i;
    hb[i] = (pix / d.Q) * p.stride_h - p.pad_top;
    wb[i] = (pix % d.Q) * p.stride_w - p.pad_left;
  }
  const int8_t* xg = x + (n * d.C + g * d.Cg) * d.H * d.W;
  for (int64_t k = 0; k < CRS; ++k) {
    const int64_t c = k / (d.R * d.S), r = (k / d.S) % d.R, s = k % d.S;
    const int8_t* xc = xg + c * d.H * d.W;
    int8_t* dst = Bp + (k / 4) * 64 + (k % 4);
    for (int64_t i = 0; i < np; ++i) {
      const int64_t h = hb[i] + r * p.dil_h, w = wb[i] + s * p.dil_w;
      const int8_t v = (h >= 0 && h < d.H && w >= 0 && w < d.W) ? xc[h * d.W + w] : int8_t(0);
      dst[(i / 16) * Kq * 64 + (i % 16) * 4] = v;
      sum[i] += v;
    }
  }
  for (int64_t i = 0; i < panels * 16; ++i) corr[i] = i < np ? 128 * sum[i] : 0;
}

// gather_b_conv for stride_w == 1, vectorised: for each group of 4 k values (c, r, s) and each
// panel of 16 output pixels, the pixels of one output row read 16 consecutive bytes of an input
// row, so each k value's 16 bytes are one masked load per row segment (lanes whose tap falls in
// the padding are masked off: AVX-512 masked loads do not fault on masked bytes); the four
// 16-byte vectors are interleaved into the panel's [16][4] layout with two rounds of unpacks,
// and the per-pixel column sums come from one vpdpbusd with a ones vector.
AIM_VNNI_TARGET void gather_b_conv_s1(const int8_t* x, const QDims& d, const Conv2dParams& p,
                                      int64_t n, int64_t g, int64_t pix0, int64_t np, int64_t Kp,
                                      int8_t* Bp, int32_t* corr) {
  const int64_t Kq = Kp / 4, panels = (np + 15) / 16, CRS = d.Cg * d.R * d.S;
  // Row segments of each panel: lanes [l0, l1) on output row `row`, lane l0 at column q0.
  struct Seg {
    int l0, l1;
    int64_t row, q0;
  };
  Seg segs[kNV][16];
  int nseg[kNV];
  for (int64_t j = 0; j < panels; ++j) {
    nseg[j] = 0;
    const int lanes = int(std::min<int64_t>(16, np - 16 * j));
    for (int l = 0; l < lanes;) {
      const int64_t pix = pix0 + 16 * j + l, row = pix / d.Q, q0 = pix % d.Q;
      const int l1 = int(std::min<int64_t>(lanes, l + (d.Q - q0)));
      segs[j][nseg[j]++] = {l, l1, row, q0};
      l = l1;
    }
  }
  const int8_t* xg = x + (n * d.C + g * d.Cg) * d.H * d.W;
  __m512i csum[kNV];
  for (int j = 0; j < kNV; ++j) csum[j] = _mm512_setzero_si512();
  const __m512i ones = _mm512_set1_epi8(1);
  alignas(64) int8_t line[64];
  for (int64_t kq = 0; kq < Kq; ++kq) {
    int64_t kc[4], kr[4], ks[4];
    for (int t = 0; t < 4; ++t) {
      const int64_t k = 4 * kq + t;
      kc[t] = k < CRS ? k / (d.R * d.S) : -1;
      kr[t] = (k / d.S) % d.R;
      ks[t] = k % d.S;
    }
    for (int64_t j = 0; j < panels; ++j) {
      __m128i v[4];
      for (int t = 0; t < 4; ++t) {
        v[t] = _mm_setzero_si128();
        if (kc[t] < 0) continue;
        const int8_t* xc = xg + kc[t] * d.H * d.W;
        for (int e = 0; e < nseg[j]; ++e) {
          const Seg& sg = segs[j][e];
          const int64_t h = sg.row * p.stride_h - p.pad_top + kr[t] * p.dil_h;
          if (h < 0 || h >= d.H) continue;
          const int64_t w0 = sg.q0 - p.pad_left + ks[t] * p.dil_w;  // input column of lane l0
          const int64_t la = std::max<int64_t>(sg.l0, sg.l0 - w0);
          const int64_t lb = std::min<int64_t>(sg.l1, sg.l0 + d.W - w0);
          if (la >= lb) continue;
          const __mmask16 m = __mmask16(((1u << lb) - 1) & ~((1u << la) - 1));
          // Address of lane 0 (may lie outside x: only the masked-in lanes are read).
          const uintptr_t base = reinterpret_cast<uintptr_t>(xc + h * d.W) + uintptr_t(w0 - sg.l0);
          v[t] = _mm_mask_loadu_epi8(v[t], m, reinterpret_cast<const void*>(base));
        }
      }
      const __m128i a0 = _mm_unpacklo_epi8(v[0], v[1]), a1 = _mm_unpackhi_epi8(v[0], v[1]);
      const __m128i b0 = _mm_unpacklo_epi8(v[2], v[3]), b1 = _mm_unpackhi_epi8(v[2], v[3]);
      _mm_store_si128(reinterpret_cast<__m128i*>(line), _mm_unpacklo_epi16(a0, b0));
      _mm_store_si128(reinterpret_cast<__m128i*>(line + 16), _mm_unpackhi_epi16(a0, b0));
      _mm_store_si128(reinterpret_cast<__m128i*>(line + 32), _mm_unpacklo_epi16(a1, b1));
      _mm_store_si128(reinterpret_cast<__m128i*>(line + 48), _mm_unpackhi_epi16(a1, b1));
      const __m512i l512 = _mm512_load_si512(static_cast<const void*>(line));
      _mm512_storeu_si512(static_cast<void*>(Bp + j * Kq * 64 + kq * 64), l512);
      csum[j] = _mm512_dpbusd_epi32(csum[j], ones, l512);
    }
  }
  for (int64_t j = 0; j < panels; ++j)
    _mm512_storeu_si512(static_cast<void*>(corr + 16 * j),
                        _mm512_mullo_epi32(csum[j], _mm512_set1_epi32(128)));
}

void qconv2d_cpu_vnni(const QConv2dArgs& a) {
  const QDims d = qconv_dims(a);
  AIM_CHECK(cpu_has_vnni(), "[qconv2d] cpu.vnni: CPU lacks AVX-512 VNNI");
  const int64_t PQ = d.P * d.Q;
  if (d.N == 0 || d.K == 0 || PQ == 0) return;
  const int64_t CRS = d.Cg * d.R * d.S, Kp = round4(CRS), Kq = Kp / 4;
  // A = w [K, C/G*R*S] (each group's rows consecutive) as u8.
  std::vector<uint8_t> Ap(size_t(d.K * Kp));
  pack_a_u8(a.w.data<int8_t>(), d.K, CRS, Kp, Ap.data());
  std::vector<float> sc(size_t(d.K));
  const float* ws = a.w_scales.data<float>();
  for (int64_t k = 0; k < d.K; ++k) sc[size_t(k)] = a.x_scale * ws[k];
  const float* bias = a.bias.defined() ? a.bias.data<float>() : nullptr;
  float* yf = a.y.dtype() == DType::f32 ? a.y.data<float>() : nullptr;
  int8_t* yq = a.y.dtype() == DType::i8 ? a.y.data<int8_t>() : nullptr;
  const int8_t* x = a.x.data<int8_t>();

  const int64_t chunks = (PQ + kNC - 1) / kNC;
  const int64_t base = d.N * d.G * chunks;
  const bool par = 2.0 * double(d.N * d.K * PQ) * double(CRS) > 2e6 && !omp_in_parallel();
  const int threads = par ? omp_get_max_threads() : 1;
  // Few items (one small image): split the output channels of a group too.
  int64_t rows = d.Kg;
  if (base < 4 * threads) {
    const int64_t splits = (4 * threads + base - 1) / base;
    rows = std::max<int64_t>(kMR, ((d.Kg + splits - 1) / splits + kMR - 1) / kMR * kMR);
  }
  const int64_t mblocks = (d.Kg + rows - 1) / rows;
#pragma omp parallel for schedule(dynamic, 1) if (par)
  for (int64_t t = 0; t < base * mblocks; ++t) {
    const int64_t mb = t % mblocks, ch = (t / mblocks) % chunks, g = (t / mblocks / chunks) % d.G;
    const int64_t n = t / mblocks / chunks / d.G;
    static thread_local std::vector<int8_t> bbuf;
    static thread_local std::vector<int32_t> cbuf;
    const int64_t pix0 = ch * kNC, np = std::min<int64_t>(kNC, PQ - pix0);
    int8_t* Bp = grow(bbuf, kNC * Kp);
    int32_t* corr = grow(cbuf, kNC);
    if (a.p.stride_w == 1)
      gather_b_conv_s1(x, d, a.p, n, g, pix0, np, Kp, Bp, corr);
    else
      gather_b_conv(x, d, a.p, n, g, pix0, np, Kp, Bp, corr);
    Epi e;
    e.corr = corr;  // the chunk's pixels
    e.corr0 = pix0;
    e.scale = sc.data();
    e.bias = bias;
    e.per_row = true;
    e.relu = a.relu;
    e.out_scale = a.out_scale;
    e.ldy = PQ;
    // Rows are global output channels: y viewed as [N*K, P*Q], image n starts at row n*K.
    const int64_t r0 = g * d.Kg + mb * rows, r1 = std::min(g * d.Kg + d.Kg, r0 + rows);
    if (yf) e.yf = yf + n * d.K * PQ;
    if (yq) e.yq = yq + n * d.K * PQ;
    vnni_block(Ap.data(), Kp, r0, r1, Bp, Kq * 64, Kq, pix0, np, e);
  }
}

// ---- tests ------------------------------------------------------------------------------------

// quantize / dequantize / quantize_per_channel: {d0, d1, d2, axis (-1: per-tensor; quantize_per_
// channel always per-channel, -1 meaning the last axis)}.
Shape shape3(const TestShape& s) { return {s[0], s[1], s[2]}; }

TestCase make_quantize_case(const TestShape& s, DType t, uint64_t seed) {
  TestCase c;
  // Values in [-2, 2) with scales near 1/80: some saturate at +-127.
  c.add_in("x", random_tensor(shape3(s), t, seed, -2.0, 2.0));
  c.add_in("scales",
           s[3] >= 0 ? random_tensor({s[s[3]]}, DType::f32, seed + 1, 0.01, 0.02) : Tensor());
  c.add_out("q", poison_tensor(shape3(s), DType::i8));
  c.params["scale"] = 1.0 / 80.0;
  c.params["axis"] = double(std::max<int64_t>(s[3], 0));
  return c;
}

TestCase make_dequantize_case(const TestShape& s, DType, uint64_t seed) {
  TestCase c;
  c.add_in("q", random_tensor(shape3(s), DType::i8, seed, -128.0, 128.0));
  c.add_in("scales",
           s[3] >= 0 ? random_tensor({s[s[3]]}, DType::f32, seed + 1, 0.01, 0.02) : Tensor());
  c.add_out("y", poison_tensor(shape3(s), DType::f32));
  c.params["scale"] = 0.0123;
  c.params["axis"] = double(std::max<int64_t>(s[3], 0));
  return c;
}

TestCase make_quantize_per_channel_case(const TestShape& s, DType t, uint64_t seed) {
  TestCase c;
  const int64_t axis = s[3] >= 0 ? s[3] : 2;
  c.add_in("w", random_tensor(shape3(s), t, seed, -0.5, 0.5));
  c.add_out("q", poison_tensor(shape3(s), DType::i8));
  c.add_out("scales", poison_tensor({s[axis]}, DType::f32));
  c.params["axis"] = double(s[3]);
  return c;
}

// qlinear: {M, N, K, bias, relu}; the case's dtype is y's (f32 or i8).
TestCase make_qlinear_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t M = s[0], N = s[1], K = s[2];
  TestCase c;
  c.add_in("x", random_tensor({M, K}, DType::i8, seed, -128.0, 128.0));
  c.add_in("w", random_tensor({N, K}, DType::i8, seed + 1, -128.0, 128.0));
  c.add_in("w_scales", random_tensor({N}, DType::f32, seed + 2, 0.002, 0.006));
  c.add_in("bias", s[3] ? random_tensor({N}, DType::f32, seed + 3, -4.0, 4.0) : Tensor());
  c.add_out("y", poison_tensor({M, N}, t == DType::i8 ? DType::i8 : DType::f32));
  c.params["x_scale"] = 0.02;
  c.params["relu"] = double(s[4]);
  // y is about 0.4*sqrt(K) wide: +-2 sigma spans the int8 range, the tails saturate.
  c.params["out_scale"] = 0.8 * std::sqrt(double(std::max<int64_t>(K, 1))) / 127.0 + 0.01;
  return c;
}

QLinearArgs bind_qlinear_case(const TestCase& c) {
  QLinearArgs a;
  a.x = c.in("x");
  a.w = c.in("w");
  a.w_scales = c.in("w_scales");
  a.bias = c.in("bias");
  a.y = c.out("y");
  a.x_scale = float(c.param("x_scale"));
  a.out_scale = float(c.param("out_scale"));
  a.relu = c.param("relu") != 0;
  return a;
}

// qconv2d: conv2d's fields {N, C, H, W, K, R, S, stride, pad (-1: TF SAME), dil, groups, bias}
// plus relu.
struct QCaseDims {
  int64_t N, C, H, W, K, R, S, P, Q;
  Conv2dParams p;
};
QCaseDims qcase_dims(const TestShape& s) {
  QCaseDims d{s[0], s[1], s[2], s[3], s[4], s[5], s[6], 0, 0, {}};
  const int64_t stride = s[7], pad = s[8], dil = s[9];
  d.p.stride_h = d.p.stride_w = stride;
  d.p.dil_h = d.p.dil_w = dil;
  d.p.groups = s[10];
  if (pad < 0) {
    std::tie(d.p.pad_top, d.p.pad_bottom) = tf_same_padding(d.H, d.R, stride, dil);
    std::tie(d.p.pad_left, d.p.pad_right) = tf_same_padding(d.W, d.S, stride, dil);
  } else {
    d.p.pad_top = d.p.pad_bottom = d.p.pad_left = d.p.pad_right = pad;
  }
  d.P = conv2d_out_size(d.H, d.R, stride, d.p.pad_top, d.p.pad_bottom, dil);
  d.Q = conv2d_out_size(d.W, d.S, stride, d.p.pad_left, d.p.pad_right, dil);
  return d;
}

TestCase make_qconv2d_case(const TestShape& s, DType t, uint64_t seed) {
  const QCaseDims d = qcase_dims(s);
  TestCase c;
  c.add_in("x", random_tensor({d.N, d.C, d.H, d.W}, DType::i8, seed, -128.0, 128.0));
  c.add_in("w",
           random_tensor({d.K, d.C / d.p.groups, d.R, d.S}, DType::i8, seed + 1, -128.0, 128.0));
  c.add_in("w_scales", random_tensor({d.K}, DType::f32, seed + 2, 0.002, 0.006));
  c.add_in("bias", s[11] ? random_tensor({d.K}, DType::f32, seed + 3, -4.0, 4.0) : Tensor());
  c.add_out("y", poison_tensor({d.N, d.K, d.P, d.Q}, t == DType::i8 ? DType::i8 : DType::f32));
  c.params["x_scale"] = 0.02;
  c.params["relu"] = double(s[12]);
  const double red = double(d.C / d.p.groups * d.R * d.S);
  c.params["out_scale"] = 0.8 * std::sqrt(red) / 127.0 + 0.01;
  c.params["stride"] = double(s[7]);
  c.params["dil"] = double(s[9]);
  c.params["groups"] = double(s[10]);
  c.params["pad_top"] = double(d.p.pad_top);
  c.params["pad_bottom"] = double(d.p.pad_bottom);
  c.params["pad_left"] = double(d.p.pad_left);
  c.params["pad_right"] = double(d.p.pad_right);
  return c;
}

QConv2dArgs bind_qconv2d_case(const TestCase& c) {
  QConv2dArgs a;
  a.x = c.in("x");
  a.w = c.in("w");
  a.w_scales = c.in("w_scales");
  a.bias = c.in("bias");
  a.y = c.out("y");
  a.x_scale = float(c.param("x_scale"));
  a.out_scale = float(c.param("out_scale"));
  a.relu = c.param("relu") != 0;
  a.p.stride_h = a.p.stride_w = int64_t(c.param("stride"));
  a.p.dil_h = a.p.dil_w = int64_t(c.param("dil"));
  a.p.groups = int64_t(c.param("groups"));
  a.p.pad_top = int64_t(c.param("pad_top"));
  a.p.pad_bottom = int64_t(c.param("pad_bottom"));
  a.p.pad_left = int64_t(c.param("pad_left"));
  a.p.pad_right = int64_t(c.param("pad_right"));
  return a;
}

// Integer paths are exact; the f32 epilogue is the same fp32 operations everywhere, so f32
// outputs agree bit for bit too. The tolerance is the brief's 1e-6 relative.
Tolerance quant_tolerance(DType, const TestShape&) { return {0.0, 1e-6}; }

}  // namespace

// ---- entry points -----------------------------------------------------------------------------

// The entry points validate before dispatching, so that a wrong dtype is reported naming the
// tensor rather than as the variant's dtype list.
void quantize(const QuantizeArgs& a) {
  check_quantize_args(a);
  AIM_DISPATCH_OP(QuantizeArgs, "quantize", a);
}
void dequantize(const DequantizeArgs& a) {
  check_dequantize_args(a);
  AIM_DISPATCH_OP(DequantizeArgs, "dequantize", a);
}
void quantize_per_channel(const QuantizePerChannelArgs& a) {
  check_quantize_per_channel_args(a);
  AIM_DISPATCH_OP(QuantizePerChannelArgs, "quantize_per_channel", a);
}
void qlinear(const QLinearArgs& a) {
  qlinear_check(a);
  AIM_DISPATCH_OP(QLinearArgs, "qlinear", a);
}
void qconv2d(const QConv2dArgs& a) {
  check_qconv2d_args(a);
  AIM_DISPATCH_OP(QConv2dArgs, "qconv2d", a);
}

Tensor quantize_tensor(const Tensor& x, float scale) {
  QuantizeArgs a;
  a.x = x;
  a.q = Tensor::empty(x.sizes(), DType::i8, x.device());
  a.scale = scale;
  quantize(a);
  return a.q;
}
Tensor quantize_tensor(const Tensor& x, const Tensor& scales, int64_t axis) {
  AIM_CHECK(scales.defined(), "[quantize] per-channel scales must be given");
  QuantizeArgs a;
  a.x = x;
  a.q = Tensor::empty(x.sizes(), DType::i8, x.device());
  a.scales = scales;
  a.axis = axis;
  quantize(a);
  return a.q;
}
Tensor dequantize_tensor(const Tensor& q, float scale) {
  DequantizeArgs a;
  a.q = q;
  a.y = Tensor::empty(q.sizes(), DType::f32, q.device());
  a.scale = scale;
  dequantize(a);
  return a.y;
}
Tensor dequantize_tensor(const Tensor& q, const Tensor& scales, int64_t axis) {
  AIM_CHECK(scales.defined(), "[dequantize] per-channel scales must be given");
  DequantizeArgs a;
  a.q = q;
  a.y = Tensor::empty(q.sizes(), DType::f32, q.device());
  a.scales = scales;
  a.axis = axis;
  dequantize(a);
  return a.y;
}
QuantizedWeight quantize_weight(const Tensor& w, int64_t axis) {
  AIM_CHECK(w.defined() && w.dim() >= 1, "[quantize_per_channel] w must be a tensor of at least ",
            "one dimension, got ", sh(w));
  const int64_t ax = norm_axis("quantize_per_channel", "w", axis, w.dim());
  QuantizePerChannelArgs a;
  a.w = w;
  a.q = Tensor::empty(w.sizes(), DType::i8, w.device());
  a.scales = Tensor::empty({w.size(ax)}, DType::f32, w.device());
  a.axis = ax;
  quantize_per_channel(a);
  return {a.q, a.scales, ax};
}

void register_quant_cpu(Registry& r) {
  const std::vector<DType> floats = {DType::f32, DType::f16, DType::bf16};
  // {d0, d1, d2, axis (-1 per-tensor)}
  const std::vector<TestShape> qshapes = {{1, 1, 1, -1},    {3, 5, 7, -1},  {2, 33, 65, -1},
                                          {4, 3, 5, 0},     {3, 17, 9, 1},  {2, 3, 31, 2},
                                          {64, 32, 33, -1}, {8, 64, 130, 1}};

  auto& q = r.op<QuantizeArgs>("quantize");
  q.description = "x -> int8, symmetric, per-tensor or per-channel scales (round half even)";
  q.add({"cpu.ref", Backend::CPU, Provider::Own, quantize_cpu_ref, floats});
  q.add({"cpu.parallel", Backend::CPU, Provider::Own, quantize_cpu_parallel, floats});
  q.set_default(Backend::CPU, "cpu.parallel");
  q.set_cost([](const QuantizeArgs& a) {
    const double n = double(a.x.numel());
    return Cost{2.0 * n, n * double(dtype_size(a.x.dtype())), n};
  });
  q.set_bind([](const TestCase& c) {
    QuantizeArgs a;
    a.x = c.in("x");
    a.scales = c.in("scales");
    a.q = c.out("q");
    a.scale = float(c.param("scale"));
    a.axis = int64_t(c.param("axis"));
    return a;
  });
  q.make_case = make_quantize_case;
  q.add_test_shapes(qshapes);

  auto& dq = r.op<DequantizeArgs>("dequantize");
  dq.description = "int8 -> f32, y = q * scale (per-tensor or per-channel)";
  dq.add({"cpu.ref", Backend::CPU, Provider::Own, dequantize_cpu_ref, {DType::f32}});
  dq.add({"cpu.parallel", Backend::CPU, Provider::Own, dequantize_cpu_parallel, {DType::f32}});
  dq.set_default(Backend::CPU, "cpu.parallel");
  dq.set_cost([](const DequantizeArgs& a) {
    const double n = double(a.q.numel());
    return Cost{n, n, 4.0 * n};
  });
  dq.set_bind([](const TestCase& c) {
    DequantizeArgs a;
    a.q = c.in("q");
    a.scales = c.in("scales");
    a.y = c.out("y");
    a.scale = float(c.param("scale"));
    a.axis = int64_t(c.param("axis"));
    return a;
  });
  dq.make_case = make_dequantize_case;
  dq.tolerance = quant_tolerance;
  dq.add_test_shapes(qshapes);

  auto& pc = r.op<QuantizePerChannelArgs>("quantize_per_channel");
  pc.description = "weights -> int8 with per-channel scales absmax/127 computed along an axis";
  pc.add({"cpu.ref", Backend::CPU, Provider::Own, quantize_per_channel_cpu_ref, floats});
  pc.set_cost([](const QuantizePerChannelArgs& a) {
    const double n = double(a.w.numel());
    return Cost{3.0 * n, n * double(dtype_size(a.w.dtype())), n + 4.0 * double(a.scales.numel())};
  });
  pc.set_bind([](const TestCase& c) {
    QuantizePerChannelArgs a;
    a.w = c.in("w");
    a.q = c.out("q");
    a.scales = c.out("scales");
    a.axis = int64_t(c.param("axis"));
    return a;
  });
  pc.make_case = make_quantize_per_channel_case;
  pc.tolerance = quant_tolerance;
  pc.add_test_shapes({{1, 1, 1, 0}, {5, 3, 7, 0}, {4, 9, 3, 1}, {3, 2, 33, -1}, {64, 16, 9, 0}});

  auto& l = r.op<QLinearArgs>("qlinear");
  l.description = "int8 GEMM y = epilogue(x[M,K] . w[N,K]^T), int32 accumulation, f32 or i8 out";
  l.add({"cpu.ref", Backend::CPU, Provider::Own, qlinear_cpu_ref, {DType::f32, DType::i8}});
  l.add({"cpu.vnni",
         Backend::CPU,
         Provider::Own,
         qlinear_cpu_vnni,
         {DType::f32, DType::i8},
         [](const QLinearArgs& a) {
           qlinear_check(a);
           return vnni_supports_cpu();
         }});
  l.set_default(Backend::CPU, cpu_has_vnni() ? "cpu.vnni" : "cpu.ref");
  l.set_cost(qlinear_cost);
  l.set_bind(bind_qlinear_case);
  l.make_case = make_qlinear_case;
  l.tolerance = quant_tolerance;
  // {M, N, K, bias, relu}
  l.add_test_shapes({{1, 1, 1, 0, 0},
                     {1, 1, 1, 1, 1},
                     {3, 5, 7, 1, 0},
                     {7, 17, 13, 0, 1},
                     {13, 31, 33, 1, 1},
                     {6, 64, 64, 1, 0},
                     {31, 67, 129, 1, 1},
                     {97, 61, 89, 0, 0},
                     {5, 3, 0, 1, 1},
                     {256, 130, 301, 1, 0}});
  l.small_enough_for_simt = [](const TestShape& s) { return s[0] * s[1] * s[2] <= 600000; };

  auto& cv = r.op<QConv2dArgs>("qconv2d");
  cv.description = "int8 conv2d NCHW (conv2d geometry), int32 accumulation, f32 or i8 out";
  cv.add({"cpu.ref", Backend::CPU, Provider::Own, qconv2d_cpu_ref, {DType::f32, DType::i8}});
  cv.add({"cpu.vnni",
          Backend::CPU,
          Provider::Own,
          qconv2d_cpu_vnni,
          {DType::f32, DType::i8},
          [](const QConv2dArgs& a) {
            check_qconv2d_args(a);
            return vnni_supports_cpu();
          }});
  cv.set_default(Backend::CPU, cpu_has_vnni() ? "cpu.vnni" : "cpu.ref");
  cv.set_cost(qconv2d_cost);
  cv.set_bind(bind_qconv2d_case);
  cv.make_case = make_qconv2d_case;
  cv.tolerance = quant_tolerance;
  // {N, C, H, W, K, R, S, stride, pad (-1: TF SAME), dil, groups, bias, relu}
  cv.add_test_shapes({{1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 0},
                      {2, 7, 5, 6, 13, 1, 1, 1, 0, 1, 1, 1, 1},
                      {3, 3, 9, 11, 7, 3, 3, 1, 1, 1, 1, 0, 0},
                      {1, 3, 17, 15, 5, 7, 7, 2, 3, 1, 1, 1, 1},
                      {2, 5, 9, 10, 6, 3, 3, 2, 1, 1, 1, 1, 0},
                      {1, 6, 13, 12, 4, 3, 3, 1, 2, 2, 1, 1, 1},
                      {2, 6, 7, 9, 10, 3, 3, 1, 1, 1, 2, 1, 0},
                      {2, 8, 10, 7, 8, 3, 3, 1, 1, 1, 8, 0, 1},
                      {2, 3, 9, 7, 5, 2, 2, 2, -1, 1, 1, 1, 0},
                      {2, 31, 9, 9, 33, 3, 3, 1, 1, 1, 1, 1, 1},
                      {1, 4, 6, 7, 70, 3, 3, 1, 1, 1, 1, 1, 0},
                      {1, 16, 19, 21, 70, 3, 3, 1, 1, 1, 1, 1, 0},
                      {2, 64, 28, 28, 64, 3, 3, 1, 1, 1, 1, 1, 1}});
  cv.small_enough_for_simt = [](const TestShape& s) {
    const QCaseDims d = qcase_dims(s);
    return double(d.N * d.K * d.P * d.Q) * double(d.C / d.p.groups * d.R * d.S) <= 1.5e6;
  };
}

}  // namespace aim::kernels
