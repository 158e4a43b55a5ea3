// INT8 quantisation, qlinear and qconv2d on the CPU (convention: quant.h; math: README.md).
// cpu.ref: the oracles. quantize/dequantize/quantize_per_channel: plain loops over every element
//   through quantize_value(); qlinear/qconv2d: direct loops, int64 accumulation checked to fit
//   int32 (it always does under kQMaxReduction), then qepilogue_value() per output.
// cpu.parallel (quantize, dequantize): the reference's per-element function under an OpenMP
//   loop; the default (activations are quantised at every layer of an int8 network).
// cpu.vnni: quant_cpu_vnni.cpp. Test cases: quant_cases.cpp.
#include "kernels/quant/quant_cpu.h"

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

namespace quant_cpu {

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

}  // namespace quant_cpu

using quant_cpu::qconv_dims;
using quant_cpu::QDims;

void check_qconv2d_args(const QConv2dArgs& a) { quant_cpu::qconv_dims(a); }

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
  const std::vector<TestShape> qshapes = quant_cpu::quantize_shapes();

  auto& q = r.op<QuantizeArgs>("quantize");
  q.description = "x -> int8, symmetric, per-tensor or per-channel scales (round half even)";
  q.add({"cpu.ref", Backend::CPU, Provider::Own, quantize_cpu_ref, floats});
  q.add({"cpu.parallel", Backend::CPU, Provider::Own, quantize_cpu_parallel, floats});
  q.set_default(Backend::CPU, "cpu.parallel");
  q.set_cost([](const QuantizeArgs& a) {
    const double n = double(a.x.numel());
    return Cost{2.0 * n, n * double(dtype_size(a.x.dtype())), n};
  });
  q.make_case = quant_cpu::make_quantize_case;
  q.set_shape_fields(quant_cpu::quantize_shape_fields());
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
  dq.make_case = quant_cpu::make_dequantize_case;
  dq.tolerance = quant_cpu::quant_tolerance;
  dq.set_shape_fields(quant_cpu::quantize_shape_fields());
  dq.add_test_shapes(qshapes);

  auto& pc = r.op<QuantizePerChannelArgs>("quantize_per_channel");
  pc.description = "weights -> int8 with per-channel scales absmax/127 computed along an axis";
  pc.add({"cpu.ref", Backend::CPU, Provider::Own, quantize_per_channel_cpu_ref, floats});
  pc.set_cost([](const QuantizePerChannelArgs& a) {
    const double n = double(a.w.numel());
    return Cost{3.0 * n, n * double(dtype_size(a.w.dtype())), n + 4.0 * double(a.scales.numel())};
  });
  pc.make_case = quant_cpu::make_quantize_per_channel_case;
  pc.tolerance = quant_cpu::quant_tolerance;
  pc.set_shape_fields(quant_cpu::quantize_shape_fields());
  pc.add_test_shapes(quant_cpu::quantize_per_channel_shapes());

  auto& l = r.op<QLinearArgs>("qlinear");
  l.description = "int8 GEMM y = epilogue(x[M,K] . w[N,K]^T), int32 accumulation, f32 or i8 out";
  l.add({"cpu.ref", Backend::CPU, Provider::Own, qlinear_cpu_ref, {DType::f32, DType::i8}});
  l.add({"cpu.vnni",
         Backend::CPU,
         Provider::Own,
         quant_cpu::qlinear_cpu_vnni,
         {DType::f32, DType::i8},
         [](const QLinearArgs& a) {
           qlinear_check(a);
           return quant_cpu::vnni_supports_cpu();
         }});
  l.set_default(Backend::CPU, quant_cpu::cpu_has_vnni() ? "cpu.vnni" : "cpu.ref");
  l.set_cost(qlinear_cost);
  l.make_case = quant_cpu::make_qlinear_case;
  l.tolerance = quant_cpu::quant_tolerance;
  l.set_shape_fields(quant_cpu::qlinear_shape_fields());
  l.add_test_shapes(quant_cpu::qlinear_shapes());
  l.small_enough_for_simt = quant_cpu::qlinear_simt_small;

  auto& cv = r.op<QConv2dArgs>("qconv2d");
  cv.description = "int8 conv2d NCHW (conv2d geometry), int32 accumulation, f32 or i8 out";
  cv.add({"cpu.ref", Backend::CPU, Provider::Own, qconv2d_cpu_ref, {DType::f32, DType::i8}});
  cv.add({"cpu.vnni",
          Backend::CPU,
          Provider::Own,
          quant_cpu::qconv2d_cpu_vnni,
          {DType::f32, DType::i8},
          [](const QConv2dArgs& a) {
            check_qconv2d_args(a);
            return quant_cpu::vnni_supports_cpu();
          }});
  cv.set_default(Backend::CPU, quant_cpu::cpu_has_vnni() ? "cpu.vnni" : "cpu.ref");
  cv.set_cost(qconv2d_cost);
  cv.make_case = quant_cpu::make_qconv2d_case;
  cv.tolerance = quant_cpu::quant_tolerance;
  cv.set_shape_fields(quant_cpu::qconv2d_shape_fields());
  cv.add_test_shapes(quant_cpu::qconv2d_shapes());
  cv.small_enough_for_simt = quant_cpu::qconv2d_simt_small;
}

}  // namespace aim::kernels
