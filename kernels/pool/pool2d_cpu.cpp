// cpu.ref: the oracle. Plain loops over every output (forward) or every window (backward
// scatter), double accumulators, first maximum on ties, NaN propagates (as PyTorch).
// cpu.omp: OpenMP over the N*C planes. Max and average pooling work one output row at a time:
// the outputs whose windows lie inside the input columns form a run that the innermost loop
// (over output columns) walks with a fixed stride, so it vectorises; compile-time instances of
// that loop for 3x3/2 (max, average) and 2x2/2 (average), where they measured faster. The few
// edge windows take a scalar path. Adaptive average to 1x1 (global pooling) is a plain plane sum
// with independent partial sums. Backward scatters into a per-plane buffer (float; double for
// f64) in output order: deterministic, no races (one plane per thread). Accumulation in float
// (double for f64), 16-bit outputs rounded once.
// Test cases: pool2d_cases.cpp.
#include "kernels/pool/pool2d_cpu.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/elementwise/loops_cpu.h"
#include "kernels/pool/pool2d.h"
#include "kernels/registry.h"

namespace aim::kernels {

namespace {

std::string params_str(const Pool2dParams& p) {
  return str("kernel ", p.kernel_h, "x", p.kernel_w, " stride ", p.stride_h, "x", p.stride_w,
             " padding (top ", p.pad_top, ", bottom ", p.pad_bottom, ", left ", p.pad_left,
             ", right ", p.pad_right, ")");
}

std::string desc(const Tensor& t) {
  return t.defined() ? to_string(t.sizes()) + " " + dtype_name(t.dtype()) : "undefined";
}

// x-like [N, C, H, W] and y-like [N, C, P, Q] tensors: rank, float dtype, same N, C and dtype,
// contiguous, same device.
void check_planes(const char* op, const char* xn, const Tensor& x, const char* yn,
                  const Tensor& y) {
  AIM_CHECK(x.defined() && x.dim() == 4, "[", op, "] ", xn, " must be [N, C, H, W], got ", desc(x));
  AIM_CHECK(y.defined() && y.dim() == 4, "[", op, "] ", yn, " must be [N, C, P, Q], got ", desc(y));
  AIM_CHECK(is_floating(x.dtype()), "[", op, "] ", xn, " must be f32, f64, f16 or bf16, got ",
            dtype_name(x.dtype()));
  AIM_CHECK(y.dtype() == x.dtype(), "[", op, "] ", yn, " must have ", xn, "'s dtype ",
            dtype_name(x.dtype()), ", got ", dtype_name(y.dtype()));
  AIM_CHECK(y.size(0) == x.size(0) && y.size(1) == x.size(1), "[", op, "] ", xn, " ",
            to_string(x.sizes()), " and ", yn, " ", to_string(y.sizes()),
            " must have the same N and C");
  AIM_CHECK(x.size(2) >= 1 && x.size(3) >= 1 && y.size(2) >= 1 && y.size(3) >= 1, "[", op,
            "] planes must not be empty, got ", xn, " ", to_string(x.sizes()), " and ", yn, " ",
            to_string(y.sizes()));
  AIM_CHECK(x.is_contiguous() && y.is_contiguous(), "[", op, "] ", xn, " and ", yn,
            " must be contiguous");
  AIM_CHECK(x.device() == y.device(), "[", op, "] ", xn, " is on ", x.device().str(), ", ", yn,
            " on ", y.device().str());
}

// Kernel, stride and padding, and every window of the P x Q output covering at least one input
// element (output row p covers rows [p*stride_h - pad_top, ... + kernel_h)).
void check_windows(const char* op, const Pool2dParams& p, const Tensor& x, const Tensor& y) {
  AIM_CHECK(p.kernel_h >= 1 && p.kernel_w >= 1 && p.stride_h >= 1 && p.stride_w >= 1, "[", op,
            "] kernel and stride must be >= 1, got ", params_str(p));
  AIM_CHECK(p.pad_top >= 0 && p.pad_bottom >= 0 && p.pad_left >= 0 && p.pad_right >= 0, "[", op,
            "] padding must be >= 0, got ", params_str(p));
  const int64_t H = x.size(2), W = x.size(3), P = y.size(2), Q = y.size(3);
  AIM_CHECK(p.pad_top < p.kernel_h && p.pad_left < p.kernel_w, "[", op,
            "] the first window lies in the padding only: ", params_str(p));
  AIM_CHECK((P - 1) * p.stride_h - p.pad_top < H && (Q - 1) * p.stride_w - p.pad_left < W, "[", op,
            "] output ", to_string(y.sizes()), " is too large for input ", to_string(x.sizes()),
            " with ", params_str(p), ": the last window must start inside the input (at most ",
            (H + p.pad_top - 1) / p.stride_h + 1, "x", (W + p.pad_left - 1) / p.stride_w + 1,
            " outputs)");
}

void check_indices(const char* op, const Tensor& idx, const Tensor& y, const Tensor& x) {
  AIM_CHECK(idx.sizes() == y.sizes() && idx.dtype() == DType::i32 && idx.is_contiguous(), "[", op,
            "] indices must be contiguous ", to_string(y.sizes()), " i32, got ", desc(idx));
  AIM_CHECK(idx.device() == y.device(), "[", op, "] indices are on ", idx.device().str(),
            ", the other tensors on ", y.device().str());
  AIM_CHECK(x.size(2) * x.size(3) <= int64_t(std::numeric_limits<int32_t>::max()), "[", op,
            "] i32 indices need H*W < 2^31, got ", to_string(x.sizes()));
}

}  // namespace

void check_maxpool2d_fwd_args(const MaxPool2dFwdArgs& a) {
  check_planes("maxpool2d_fwd", "x", a.x, "y", a.y);
  check_windows("maxpool2d_fwd", a.p, a.x, a.y);
  if (a.indices.defined()) check_indices("maxpool2d_fwd", a.indices, a.y, a.x);
}

void check_maxpool2d_bwd_args(const MaxPool2dBwdArgs& a) {
  check_planes("maxpool2d_bwd", "dx", a.dx, "dy", a.dy);
  check_windows("maxpool2d_bwd", a.p, a.dx, a.dy);
  AIM_CHECK(a.indices.defined(), "[maxpool2d_bwd] needs the forward's indices");
  check_indices("maxpool2d_bwd", a.indices, a.dy, a.dx);
}

void check_avgpool2d_fwd_args(const AvgPool2dFwdArgs& a) {
  check_planes("avgpool2d_fwd", "x", a.x, "y", a.y);
  check_windows("avgpool2d_fwd", a.p, a.x, a.y);
}

void check_avgpool2d_bwd_args(const AvgPool2dBwdArgs& a) {
  check_planes("avgpool2d_bwd", "dx", a.dx, "dy", a.dy);
  check_windows("avgpool2d_bwd", a.p, a.dx, a.dy);
}

void check_adaptive_avgpool2d_fwd_args(const AdaptiveAvgPool2dFwdArgs& a) {
  check_planes("adaptive_avgpool2d_fwd", "x", a.x, "y", a.y);
}

void check_adaptive_avgpool2d_bwd_args(const AdaptiveAvgPool2dBwdArgs& a) {
  check_planes("adaptive_avgpool2d_bwd", "dx", a.dx, "dy", a.dy);
}

namespace {

template <class T>
using AccOf = std::conditional_t<std::is_same_v<T, double>, double, float>;

// One axis of a window: [start, end) in input coordinates clipped to the input, and the
// average's divisor extent (clipped to the padded extent when padding counts).
struct Span {
  int64_t start, end, count_padded;
};
inline Span window(int64_t o, int64_t k, int64_t stride, int64_t pad_before, int64_t pad_after,
                   int64_t in) {
  const int64_t s = o * stride - pad_before;
  const int64_t e_padded = std::min(s + k, in + pad_after);
  return {std::max<int64_t>(s, 0), std::min(s + k, in), e_padded - s};
}

// Adaptive window of output o over an axis of `in` elements: [floor(o*in/out), ceil((o+1)*in/out)).
inline int64_t adaptive_start(int64_t o, int64_t in, int64_t out) { return (o * in) / out; }
inline int64_t adaptive_end(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

inline bool takes(double v, double m) { return v > m || std::isnan(v); }

// Throws unless `idx` lies in the window of output (p, q): indices and p come from one forward.
void check_index_in_window(int64_t idx, int64_t plane, int64_t p, int64_t q, const Span& hs,
                           const Span& ws, int64_t W) {
  const int64_t h = idx / W, w = idx % W;
  AIM_CHECK(idx >= 0 && h >= hs.start && h < hs.end && w >= ws.start && w < ws.end,
            "[maxpool2d_bwd] index ", idx, " of plane ", plane, " output (", p, ", ", q,
            ") is outside its window rows [", hs.start, ", ", hs.end, ") columns [", ws.start, ", ",
            ws.end, ") of a ", W, "-wide plane: indices and p must come from the same forward");
}

// ---- cpu.ref --------------------------------------------------------------------------------

template <class T>
void maxpool_fwd_ref(const MaxPool2dFwdArgs& a) {
  const Pool2dParams& pp = a.p;
  const int64_t NC = a.x.size(0) * a.x.size(1), H = a.x.size(2), W = a.x.size(3);
  const int64_t P = a.y.size(2), Q = a.y.size(3);
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  int32_t* ind = a.indices.defined() ? a.indices.data<int32_t>() : nullptr;
  for (int64_t nc = 0; nc < NC; ++nc) {
    for (int64_t p = 0; p < P; ++p) {
      const Span hs = window(p, pp.kernel_h, pp.stride_h, pp.pad_top, pp.pad_bottom, H);
      for (int64_t q = 0; q < Q; ++q) {
        const Span ws = window(q, pp.kernel_w, pp.stride_w, pp.pad_left, pp.pad_right, W);
        double m = -std::numeric_limits<double>::infinity();
        int64_t at = hs.start * W + ws.start;
        for (int64_t h = hs.start; h < hs.end; ++h)
          for (int64_t w = ws.start; w < ws.end; ++w) {
            const double v = double(x[(nc * H + h) * W + w]);
            if (takes(v, m)) {
              m = v;
              at = h * W + w;
            }
          }
        y[(nc * P + p) * Q + q] = T(m);
        if (ind) ind[(nc * P + p) * Q + q] = int32_t(at);
      }
    }
  }
}

template <class T>
void maxpool_bwd_ref(const MaxPool2dBwdArgs& a) {
  const Pool2dParams& pp = a.p;
  const int64_t NC = a.dx.size(0) * a.dx.size(1), H = a.dx.size(2), W = a.dx.size(3);
  const int64_t P = a.dy.size(2), Q = a.dy.size(3);
  const T* dy = a.dy.data<T>();
  const int32_t* ind = a.indices.data<int32_t>();
  T* dx = a.dx.data<T>();
  std::vector<double> acc(static_cast<size_t>(H * W));
  for (int64_t nc = 0; nc < NC; ++nc) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t p = 0; p < P; ++p) {
      const Span hs = window(p, pp.kernel_h, pp.stride_h, pp.pad_top, pp.pad_bottom, H);
      for (int64_t q = 0; q < Q; ++q) {
        const Span ws = window(q, pp.kernel_w, pp.stride_w, pp.pad_left, pp.pad_right, W);
        const int64_t o = (nc * P + p) * Q + q;
        check_index_in_window(ind[o], nc, p, q, hs, ws, W);
        acc[size_t(ind[o])] += double(dy[o]);
      }
    }
    for (int64_t i = 0; i < H * W; ++i) dx[nc * H * W + i] = T(acc[size_t(i)]);
  }
}

template <class T>
void avgpool_fwd_ref(const AvgPool2dFwdArgs& a) {
  const Pool2dParams& pp = a.p;
  const int64_t NC = a.x.size(0) * a.x.size(1), H = a.x.size(2), W = a.x.size(3);
  const int64_t P = a.y.size(2), Q = a.y.size(3);
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  for (int64_t nc = 0; nc < NC; ++nc)
    for (int64_t p = 0; p < P; ++p) {
      const Span hs = window(p, pp.kernel_h, pp.stride_h, pp.pad_top, pp.pad_bottom, H);
      for (int64_t q = 0; q < Q; ++q) {
        const Span ws = window(q, pp.kernel_w, pp.stride_w, pp.pad_left, pp.pad_right, W);
        double sum = 0.0;
        for (int64_t h = hs.start; h < hs.end; ++h)
          for (int64_t w = ws.start; w < ws.end; ++w) sum += double(x[(nc * H + h) * W + w]);
        const int64_t count = pp.count_include_pad ? hs.count_padded * ws.count_padded
                                                   : (hs.end - hs.start) * (ws.end - ws.start);
        y[(nc * P + p) * Q + q] = T(sum / double(count));
      }
    }
}

template <class T>
void avgpool_bwd_ref(const AvgPool2dBwdArgs& a) {
  const Pool2dParams& pp = a.p;
  const int64_t NC = a.dx.size(0) * a.dx.size(1), H = a.dx.size(2), W = a.dx.size(3);
  const int64_t P = a.dy.size(2), Q = a.dy.size(3);
  const T* dy = a.dy.data<T>();
  T* dx = a.dx.data<T>();
  std::vector<double> acc(static_cast<size_t>(H * W));
  for (int64_t nc = 0; nc < NC; ++nc) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t p = 0; p < P; ++p) {
      const Span hs = window(p, pp.kernel_h, pp.stride_h, pp.pad_top, pp.pad_bottom, H);
      for (int64_t q = 0; q < Q; ++q) {
        const Span ws = window(q, pp.kernel_w, pp.stride_w, pp.pad_left, pp.pad_right, W);
        const int64_t count = pp.count_include_pad ? hs.count_padded * ws.count_padded
                                                   : (hs.end - hs.start) * (ws.end - ws.start);
        const double g = double(dy[(nc * P + p) * Q + q]) / double(count);
        for (int64_t h = hs.start; h < hs.end; ++h)
          for (int64_t w = ws.start; w < ws.end; ++w) acc[size_t(h * W + w)] += g;
      }
    }
    for (int64_t i = 0; i < H * W; ++i) dx[nc * H * W + i] = T(acc[size_t(i)]);
  }
}

template <class T>
void adaptive_fwd_ref(const AdaptiveAvgPool2dFwdArgs& a) {
  const int64_t NC = a.x.size(0) * a.x.size(1), H = a.x.size(2), W = a.x.size(3);
  const int64_t P = a.y.size(2), Q = a.y.size(3);
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  for (int64_t nc = 0; nc < NC; ++nc)
    for (int64_t p = 0; p < P; ++p) {
      const int64_t h0 = adaptive_start(p, H, P), h1 = adaptive_end(p, H, P);
      for (int64_t q = 0; q < Q; ++q) {
        const int64_t w0 = adaptive_start(q, W, Q), w1 = adaptive_end(q, W, Q);
        double sum = 0.0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) sum += double(x[(nc * H + h) * W + w]);
        y[(nc * P + p) * Q + q] = T(sum / double((h1 - h0) * (w1 - w0)));
      }
    }
}

template <class T>
void adaptive_bwd_ref(const AdaptiveAvgPool2dBwdArgs& a) {
  const int64_t NC = a.dx.size(0) * a.dx.size(1), H = a.dx.size(2), W = a.dx.size(3);
  const int64_t P = a.dy.size(2), Q = a.dy.size(3);
  const T* dy = a.dy.data<T>();
  T* dx = a.dx.data<T>();
  std::vector<double> acc(static_cast<size_t>(H * W));
  for (int64_t nc = 0; nc < NC; ++nc) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t p = 0; p < P; ++p) {
      const int64_t h0 = adaptive_start(p, H, P), h1 = adaptive_end(p, H, P);
      for (int64_t q = 0; q < Q; ++q) {
        const int64_t w0 = adaptive_start(q, W, Q), w1 = adaptive_end(q, W, Q);
        const double g = double(dy[(nc * P + p) * Q + q]) / double((h1 - h0) * (w1 - w0));
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) acc[size_t(h * W + w)] += g;
      }
    }
    for (int64_t i = 0; i < H * W; ++i) dx[nc * H * W + i] = T(acc[size_t(i)]);
  }
}

}  // namespace

// maxpool2d_bwd's test cases take their indices from it (pool2d_cpu.h).
void pool2d_cpu::maxpool2d_fwd_cpu_ref(const MaxPool2dFwdArgs& a) {
  check_maxpool2d_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { maxpool_fwd_ref<T>(a); });
}

namespace {

void maxpool2d_bwd_cpu_ref(const MaxPool2dBwdArgs& a) {
  check_maxpool2d_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.dy.dtype(), T, { maxpool_bwd_ref<T>(a); });
}
void avgpool2d_fwd_cpu_ref(const AvgPool2dFwdArgs& a) {
  check_avgpool2d_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { avgpool_fwd_ref<T>(a); });
}
void avgpool2d_bwd_cpu_ref(const AvgPool2dBwdArgs& a) {
  check_avgpool2d_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.dy.dtype(), T, { avgpool_bwd_ref<T>(a); });
}
void adaptive_avgpool2d_fwd_cpu_ref(const AdaptiveAvgPool2dFwdArgs& a) {
  check_adaptive_avgpool2d_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { adaptive_fwd_ref<T>(a); });
}
void adaptive_avgpool2d_bwd_cpu_ref(const AdaptiveAvgPool2dBwdArgs& a) {
  check_adaptive_avgpool2d_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.dy.dtype(), T, { adaptive_bwd_ref<T>(a); });
}

// ---- cpu.omp --------------------------------------------------------------------------------

// Work (elements touched) above which the plane loop is split over threads.
constexpr int64_t kOmpMinWork = int64_t(1) << 15;

// Output columns [q_lo, q_hi) whose windows lie inside the input columns (no clipping).
struct Interior {
  int64_t lo, hi;
};
Interior interior(int64_t Q, int64_t k, int64_t stride, int64_t pad_before, int64_t in) {
  const int64_t lo = std::min(Q, (pad_before + stride - 1) / stride);
  const int64_t last = in + pad_before - k;  // the last window start (+pad) that still fits
  const int64_t hi = last < 0 ? 0 : std::min(Q, last / stride + 1);
  return {lo, std::max(lo, hi)};
}

// One output row of max pooling: rows [h0, h1) of plane x (already float for 16-bit types via
// A), output columns q in [0, Q). KW/SW > 0: compile-time kernel width / stride for the
// interior run. Scan order per output is row-major over the window, strictly greater wins:
// the first maximum, as cpu.ref.
template <class T, int KW, int SW>
void max_row(const T* x, int64_t W, int64_t h0, int64_t h1, const Pool2dParams& pp, int64_t Q,
             const Interior& in, AccOf<T>* m, int32_t* at, T* y, int32_t* ind) {
  using A = AccOf<T>;
  const int64_t kw = KW > 0 ? KW : pp.kernel_w, sw = SW > 0 ? SW : pp.stride_w;
  const int64_t pl = pp.pad_left;
  for (int64_t q = 0; q < Q; ++q) {
    m[q] = -std::numeric_limits<A>::infinity();
    at[q] = int32_t(h0 * W + std::max<int64_t>(q * sw - pl, 0));
  }
  for (int64_t h = h0; h < h1; ++h) {
    const T* xr = x + h * W;
    // Edge windows [0, lo) and [hi, Q): clipped columns, scalar.
    for (const auto& [q0, q1] : {std::pair{int64_t(0), in.lo}, std::pair{in.hi, Q}})
      for (int64_t q = q0; q < q1; ++q) {
        const Span ws = window(q, kw, sw, pl, pp.pad_right, W);
        for (int64_t w = ws.start; w < ws.end; ++w) {
          const A v = A(xr[w]);
          if (v > m[q] || v != v) {
            m[q] = v;
            at[q] = int32_t(h * W + w);
          }
        }
      }
    // Interior run [lo, hi): whole windows; the q loop vectorises (strided loads, blends).
    for (int64_t j = 0; j < kw; ++j) {
      const int64_t off = j - pl;
      const int32_t base = int32_t(h * W + off);
      for (int64_t q = in.lo; q < in.hi; ++q) {
        const A v = A(xr[q * sw + off]);
        const bool take = v > m[q] || v != v;
        m[q] = take ? v : m[q];
        at[q] = take ? base + int32_t(q * sw) : at[q];
      }
    }
  }
  for (int64_t q = 0; q < Q; ++q) y[q] = T(m[q]);
  if (ind)
    for (int64_t q = 0; q < Q; ++q) ind[q] = at[q];
}

#if defined(__AVX2__)
// 3x3/2 in f32 with AVX2, the hot case of every CNN's stem and stage pools. The compiler's own
// vector loops over a pooled row (27 or 55 outputs) left the last 3 to 7 to a scalar remainder
// whose compares branch on the data (and chose the scalar version of some rows outright): most
// of the forward's time. Here every run of at least 8 outputs is whole vectors, the last one
// moved back to end at the run's end (recomputing a few outputs with the same values). The
// selects are the scalar loops': v > best or v is NaN takes v.
inline __m256 takes(__m256 v, __m256 best) {
  return _mm256_or_ps(_mm256_cmp_ps(v, best, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}
// f(q) for the 8-wide blocks covering [lo, hi), hi - lo >= 8.
template <class F>
inline void blocks8(int64_t lo, int64_t hi, const F& f) {
  for (int64_t q0 = lo; q0 < hi; q0 += 8) f(std::min(q0, hi - 8));
}
// Row maxima of 3 columns at stride 2 for outputs [lo, hi) of one input row: m[q], c[q] = the
// maximum of xr[2q - pl + {0, 1, 2}] and its column. Reads xr[2*lo - pl .. 2*(hi-1) - pl + 2].
inline void row_max_3s2_f32(const float* xr, int64_t pl, int64_t lo, int64_t hi, float* m,
                            int32_t* c) {
  const __m256i lane2 = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  const __m256i next = _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 0);
  blocks8(lo, hi, [&](int64_t q) {
    const float* p = xr + 2 * q - pl;
    const __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
    // [a0 a2 b0 b2 | a4 a6 b4 b6] -> [a0 a2 a4 a6 b0 b2 b4 b6]; odd columns likewise.
    const __m256 v0 = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
    const __m256 v1 = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
    // Third columns p[2], p[4], ..., p[16]: v0 moved down a lane, p[16] into the last.
    const __m256 v2 =
        _mm256_blend_ps(_mm256_permutevar8x32_ps(v0, next), _mm256_broadcast_ss(p + 16), 0x80);
    const __m256 t1 = takes(v1, v0);
    const __m256 b1 = _mm256_blendv_ps(v0, v1, t1);
    const __m256 t2 = takes(v2, b1);
    _mm256_storeu_ps(m + q, _mm256_blendv_ps(b1, v2, t2));
    // Column: w0 + (t2 ? 2 : t1 ? 1 : 0); a true mask is -1 as an integer.
    const __m256i i1 = _mm256_castps_si256(t1), i2 = _mm256_castps_si256(t2);
    const __m256i off =
        _mm256_blendv_epi8(_mm256_sub_epi32(_mm256_setzero_si256(), i1), _mm256_set1_epi32(2), i2);
    const __m256i w0 = _mm256_add_epi32(_mm256_set1_epi32(int32_t(2 * q - pl)), lane2);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + q), _mm256_add_epi32(w0, off));
  });
}
// One output row from three rows of row maxima (m0, m0 + Q, m0 + 2Q) and their columns, Q >= 8:
// y[q] = the first row holding the maximum (a NaN: the last), ind[q] its flat index (base: the
// window's first row * W).
inline void col_max_3_f32(const float* m0, const int32_t* c0, int64_t Q, int64_t W, int32_t base,
                          float* y, int32_t* ind) {
  const __m256i b0 = _mm256_set1_epi32(base), bw = _mm256_set1_epi32(base + int32_t(W)),
                b2w = _mm256_set1_epi32(base + int32_t(2 * W));
  blocks8(0, Q, [&](int64_t q) {
    const __m256 r0 = _mm256_loadu_ps(m0 + q), r1 = _mm256_loadu_ps(m0 + Q + q),
                 r2 = _mm256_loadu_ps(m0 + 2 * Q + q);
    const __m256 t1 = takes(r1, r0);
    const __m256 b1 = _mm256_blendv_ps(r0, r1, t1);
    const __m256 t2 = takes(r2, b1);
    _mm256_storeu_ps(y + q, _mm256_blendv_ps(b1, r2, t2));
    if (!ind) return;
    auto col = [&](int64_t r) {
      return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c0 + r * Q + q));
    };
    const __m256i j1 = _mm256_blendv_epi8(_mm256_add_epi32(b0, col(0)),
                                          _mm256_add_epi32(bw, col(1)), _mm256_castps_si256(t1));
    const __m256i j2 =
        _mm256_blendv_epi8(j1, _mm256_add_epi32(b2w, col(2)), _mm256_castps_si256(t2));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(ind + q), j2);
  });
}
#define AIM_POOL_AVX2_3S2 1
#else
#define AIM_POOL_AVX2_3S2 0
#endif

// K x K windows, 3x3 at stride SW = 1 (GoogLeNet's inception pooling branches, SAME padding) or 2
// (the stem and stage pools of most CNNs) and 2x2 at stride 2 (VGG's), one plane at a time and
// separably: each input row's K-wide
// maxima (value and column) at the output columns first, then each output the maximum of K of
// those rows. 6 comparisons per output instead of 9 (3x3), every input row's maxima found once (a
// row is in two windows at stride 2, three at stride 1), and every loop runs the whole plane's rows
// instead of one short output row per window row. Exactly cpu.ref's result: the row-major window
// scan's winner is the first row holding the window's maximum and the first column of it in that
// row (a NaN replaces the current winner in both orders, so the last NaN wins in both), and a
// window of -inf keeps its first element.
// hm/hc: H x Q scratch (row maxima and their columns).
template <class T, int K, int SW>
void max_plane_sep(const T* x, int64_t H, int64_t W, const Pool2dParams& pp, int64_t P, int64_t Q,
                   const Interior& in, AccOf<T>* hm, int32_t* hc, T* y, int32_t* ind) {
  static_assert(K == 2 || K == 3, "separable windows of 2 or 3");
  using A = AccOf<T>;
  const int64_t pl = pp.pad_left;
  for (int64_t h = 0; h < H; ++h) {
    const T* xr = x + h * W;
    A* m = hm + h * Q;
    int32_t* c = hc + h * Q;
    for (const auto& [q0, q1] : {std::pair{int64_t(0), in.lo}, std::pair{in.hi, Q}})
      for (int64_t q = q0; q < q1; ++q) {  // clipped windows, scalar
        const Span ws = window(q, K, SW, pl, pp.pad_right, W);
        A best = -std::numeric_limits<A>::infinity();
        int32_t at = int32_t(ws.start);
        for (int64_t w = ws.start; w < ws.end; ++w) {
          const A v = A(xr[w]);
          if (v > best || v != v) best = v, at = int32_t(w);
        }
        m[q] = best;
        c[q] = at;
      }
#if AIM_POOL_AVX2_3S2
    if constexpr (std::is_same_v<T, float> && K == 3 && SW == 2)
      if (in.hi - in.lo >= 8) {
        row_max_3s2_f32(xr, pl, in.lo, in.hi, m, c);
        continue;
      }
#endif
    for (int64_t q = in.lo; q < in.hi; ++q) {  // whole windows: vectorises over q
      const int64_t w0 = q * SW - pl;
      // The first column taken as is: v0 > -inf or NaN, else -inf with its own column.
      const A v0 = A(xr[w0]), v1 = A(xr[w0 + 1]);
      const bool t1 = v1 > v0 || v1 != v1;
      const A b1 = t1 ? v1 : v0;
      if constexpr (K == 2) {
        m[q] = b1;
        c[q] = int32_t(w0) + (t1 ? 1 : 0);
      } else {
        const A v2 = A(xr[w0 + 2]);
        const bool t2 = v2 > b1 || v2 != v2;
        m[q] = t2 ? v2 : b1;
        c[q] = int32_t(w0) + (t2 ? 2 : t1 ? 1 : 0);
      }
    }
  }
  for (int64_t p = 0; p < P; ++p) {
    const Span hs = window(p, K, pp.stride_h, pp.pad_top, pp.pad_bottom, H);
    const A* m0 = hm + hs.start * Q;
    const int32_t* c0 = hc + hs.start * Q;
    T* yr = y + p * Q;
    int32_t* ir = ind ? ind + p * Q : nullptr;
    const int32_t base = int32_t(hs.start * W);
    const int64_t rows = hs.end - hs.start;
    if (K == 2 && rows == 2) {
      const A* m1 = m0 + Q;
      for (int64_t q = 0; q < Q; ++q) {
        const bool t1 = m1[q] > m0[q] || m1[q] != m1[q];
        yr[q] = T(t1 ? m1[q] : m0[q]);
      }
      if (ir)
        for (int64_t q = 0; q < Q; ++q) {
          const bool t1 = m0[Q + q] > m0[q] || m0[Q + q] != m0[Q + q];
          ir[q] = t1 ? base + int32_t(W) + c0[Q + q] : base + c0[q];
        }
      continue;
    }
#if AIM_POOL_AVX2_3S2
    if constexpr (std::is_same_v<T, float> && K == 3 && SW == 2)
      if (rows == 3 && Q >= 8) {
        col_max_3_f32(m0, c0, Q, W, base, yr, ir);
        continue;
      }
#endif
    if (K == 3 && rows == 3) {
      const A* m1 = m0 + Q;
      const A* m2 = m1 + Q;
      for (int64_t q = 0; q < Q; ++q) {
        const bool t1 = m1[q] > m0[q] || m1[q] != m1[q];
        const A b1 = t1 ? m1[q] : m0[q];
        const bool t2 = m2[q] > b1 || m2[q] != m2[q];
        yr[q] = T(t2 ? m2[q] : b1);
      }
      if (ir)
        for (int64_t q = 0; q < Q; ++q) {
          const bool t1 = m0[Q + q] > m0[q] || m0[Q + q] != m0[Q + q];
          const A b1 = t1 ? m0[Q + q] : m0[q];
          const bool t2 = m0[2 * Q + q] > b1 || m0[2 * Q + q] != m0[2 * Q + q];
          ir[q] = t2   ? base + int32_t(2 * W) + c0[2 * Q + q]
                  : t1 ? base + int32_t(W) + c0[Q + q]
                       : base + c0[q];
        }
      continue;
    }
    for (int64_t q = 0; q < Q; ++q) {  // edge rows: fewer than K rows in the window
      A best = m0[q];
      int32_t at = base + c0[q];
      for (int64_t r = 1; r < rows; ++r) {
        const A v = m0[r * Q + q];
        if (v > best || v != v) best = v, at = base + int32_t(r * W) + c0[r * Q + q];
      }
      yr[q] = T(best);
      if (ir) ir[q] = at;
    }
  }
}

// The SAME case (padding 1 on every side, H, W >= 3) over `planes` consecutive planes: their
// rows are contiguous, so each pass is one loop over all of them (a 7x7 or 14x14 map's rows are
// far too short for vector loops of their own): the row maxima over every element (then the
// two edge columns of every row, whose flat neighbours belong to the next or previous row), then
// the column maxima over every element (then each plane's first and last rows, whose windows
// have two rows: the flat loop read the neighbouring plane's). Indices are flat over the planes
// until a last pass makes them relative to each plane.
template <class T>
void max_planes_3x3s1_same(const T* x, int64_t planes, int64_t H, int64_t W, AccOf<T>* hm,
                           int32_t* hc, T* y, int32_t* ind) {
  using A = AccOf<T>;
  const int64_t HW = H * W, n = planes * HW;
  for (int64_t i = 1; i < n - 1; ++i) {
    const A v0 = A(x[i - 1]), v1 = A(x[i]), v2 = A(x[i + 1]);
    const bool t1 = v1 > v0 || v1 != v1;
    const A b1 = t1 ? v1 : v0;
    const bool t2 = v2 > b1 || v2 != v2;
    hm[i] = t2 ? v2 : b1;
    hc[i] = int32_t(i) + (t2 ? 1 : t1 ? 0 : -1);
  }
  for (int64_t r = 0; r < n; r += W) {  // columns 0 and W-1: two-column windows
    for (const int64_t i : {r, r + W - 1}) {
      const int64_t w0 = i == r ? r : i - 1;
      const A v0 = A(x[w0]), v1 = A(x[w0 + 1]);
      const bool t1 = v1 > v0 || v1 != v1;
      hm[i] = t1 ? v1 : v0;
      hc[i] = int32_t(w0) + (t1 ? 1 : 0);
    }
  }
  if (ind)
    for (int64_t i = W; i < n - W; ++i) {
      const bool t1 = hm[i] > hm[i - W] || hm[i] != hm[i];
      const A b1 = t1 ? hm[i] : hm[i - W];
      const bool t2 = hm[i + W] > b1 || hm[i + W] != hm[i + W];
      y[i] = T(t2 ? hm[i + W] : b1);
      ind[i] = t2 ? hc[i + W] : t1 ? hc[i] : hc[i - W];
    }
  else
    for (int64_t i = W; i < n - W; ++i) {
      const bool t1 = hm[i] > hm[i - W] || hm[i] != hm[i];
      const A b1 = t1 ? hm[i] : hm[i - W];
      const bool t2 = hm[i + W] > b1 || hm[i + W] != hm[i + W];
      y[i] = T(t2 ? hm[i + W] : b1);
    }
  for (int64_t base = 0; base < n; base += HW) {
    // First row: rows 0 and 1 of the plane; last row: rows H-2 and H-1.
    for (const int64_t j0 : {base, base + HW - 2 * W}) {
      const int64_t out = j0 == base ? base : base + HW - W;
      for (int64_t q = 0; q < W; ++q) {
        const int64_t j = j0 + q;
        const bool t1 = hm[j + W] > hm[j] || hm[j + W] != hm[j + W];
        y[out + q] = T(t1 ? hm[j + W] : hm[j]);
        if (ind) ind[out + q] = t1 ? hc[j + W] : hc[j];
      }
    }
    if (ind && base > 0)
      for (int64_t i = base; i < base + HW; ++i) ind[i] -= int32_t(base);
  }
}

template <class T, int KW, int SW>
void maxpool_fwd_omp_impl(const MaxPool2dFwdArgs& a) {
  using A = AccOf<T>;
  const Pool2dParams& pp = a.p;
  const int64_t NC = a.x.size(0) * a.x.size(1), H = a.x.size(2), W = a.x.size(3);
  const int64_t P = a.y.size(2), Q = a.y.size(3);
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  int32_t* ind = a.indices.defined() ? a.indices.data<int32_t>() : nullptr;
  const Interior in = interior(Q, pp.kernel_w, pp.stride_w, pp.pad_left, W);
  const int64_t work = NC * P * Q * pp.kernel_h * pp.kernel_w;
  // 3x3/1, 3x3/2 and 2x2/2 separably (max_plane_sep), 3x3/1 SAME a group of planes at a time.
  constexpr bool kSep = (KW == 3 && (SW == 1 || SW == 2)) || (KW == 2 && SW == 2);
  const bool separable = kSep && pp.kernel_h == KW && pp.stride_h == SW;
  const bool same = separable && KW == 3 && SW == 1 && pp.pad_top == 1 && pp.pad_bottom == 1 &&
                    pp.pad_left == 1 && pp.pad_right == 1 && P == H && Q == W && H >= 3 && W >= 3;
  // Groups of planes of about 4096 elements (the scratch stays in L1/L2).
  const int64_t group = same ? std::max<int64_t>(1, 4096 / (H * W)) : 1;
#pragma omp parallel if (work > kOmpMinWork)
  {
    // Scratch: one output row's running maxima and their indices, or (separable) the row maxima
    // of a plane or a group of planes and their columns.
    const size_t n = size_t(separable ? std::max(H * Q, group * H * W) : Q);
    std::vector<A> m(n);
    std::vector<int32_t> at(n);
    if (same) {
#pragma omp for schedule(static)
      for (int64_t k = 0; k < (NC + group - 1) / group; ++k) {
        const int64_t nc = k * group, o = nc * H * W;
        max_planes_3x3s1_same<T>(x + o, std::min(group, NC - nc), H, W, m.data(), at.data(), y + o,
                                 ind ? ind + o : nullptr);
      }
    } else if (separable) {
#pragma omp for schedule(static)
      for (int64_t nc = 0; nc < NC; ++nc)
        if constexpr (kSep)
          max_plane_sep<T, KW, SW>(x + nc * H * W, H, W, pp, P, Q, in, m.data(), at.data(),
                                   y + nc * P * Q, ind ? ind + nc * P * Q : nullptr);
    } else {
#pragma omp for schedule(static)
      for (int64_t nc = 0; nc < NC; ++nc) {
        for (int64_t p = 0; p < P; ++p) {
          const Span hs = window(p, pp.kernel_h, pp.stride_h, pp.pad_top, pp.pad_bottom, H);
          const int64_t o = (nc * P + p) * Q;
          max_row<T, KW, SW>(x + nc * H * W, W, hs.start, hs.end, pp, Q, in, m.data(), at.data(),
                             y + o, ind ? ind + o : nullptr);
        }
      }
    }
  }
}

// 3x3/2 as a compile-time instance: 1.3x faster than the runtime loop (8x64x112x112 f32, one
// thread: 5.5 vs 7.0 ms); a 2x2/2 instance was slower than the runtime loop (3.1 vs 2.3 ms).
// Square 3x3 windows at stride 1 or 2 and 2x2/2 run separably (max_plane_sep; 2x2/2 as the row
// loop's instance was slower than the runtime loop, separably it is faster); 3-wide ones of another
// height or stride use the row loop with contiguous (stride 1) or compile-time strided loads.
template <class T>
void maxpool_fwd_omp(const MaxPool2dFwdArgs& a) {
  if (a.p.kernel_w == 3 && a.p.stride_w == 2)
    maxpool_fwd_omp_impl<T, 3, 2>(a);
  else if (a.p.kernel_w == 2 && a.p.stride_w == 2 && a.p.kernel_h == 2 && a.p.stride_h == 2)
    maxpool_fwd_omp_impl<T, 2, 2>(a);               // separably
  else if (a.p.kernel_w == 3 && a.p.stride_w == 1)  // and 3x3/1 separably
    maxpool_fwd_omp_impl<T, 3, 1>(a);
  else
    maxpool_fwd_omp_impl<T, 0, 0>(a);
}

template <class T>
void maxpool_bwd_omp(const MaxPool2dBwdArgs& a) {
  using A = AccOf<T>;
  const Pool2dParams& pp = a.p;
  const int64_t NC = a.dx.size(0) * a.dx.size(1), H = a.dx.size(2), W = a.dx.size(3);
  const int64_t P = a.dy.size(2), Q = a.dy.size(3);
  const T* dy = a.dy.data<T>();
  const int32_t* ind = a.indices.data<int32_t>();
  T* dx = a.dx.data<T>();
  std::vector<Span> wspans(static_cast<size_t>(Q));
  for (int64_t q = 0; q < Q; ++q)
    wspans[size_t(q)] = window(q, pp.kernel_w, pp.stride_w, pp.pad_left, pp.pad_right, W);
  const int64_t work = NC * (P * Q + H * W);
  // An exception cannot leave an OpenMP region: note the first plane with an index outside its
  // window, and throw from it (checked serially, naming the output) after the region.
  int64_t bad_plane = NC;
  // dx beyond the L3 (a stem pool's 64x112x112 maps at batch 16: 51 MB) is written with
  // non-temporal stores: no read for ownership of its lines, which was a third of the time.
  const bool stream = beyond_l3(a.dx.nbytes());
#pragma omp parallel if (work > kOmpMinWork)
  {
    std::vector<A> acc(static_cast<size_t>(H * W));
#pragma omp for schedule(static) nowait
    for (int64_t nc = 0; nc < NC; ++nc) {
      std::fill(acc.begin(), acc.end(), A(0));
      bool ok = true;
      for (int64_t p = 0; p < P && ok; ++p) {
        const Span hs = window(p, pp.kernel_h, pp.stride_h, pp.pad_top, pp.pad_bottom, H);
        const int64_t o = (nc * P + p) * Q, row0 = hs.start * W, rows = hs.end - hs.start;
        for (int64_t q = 0; q < Q; ++q) {
          const int64_t i = ind[o + q];
          const Span& ws = wspans[size_t(q)];
          // The index's row within the window: by comparisons for windows of up to 3 rows (a
          // 64-bit division per output was most of this loop's time; a loop of subtractions
          // mispredicted), else divided.
          const int64_t r = i - row0;
          const int64_t h =
              rows <= 3 ? int64_t(r >= W) + int64_t(r >= 2 * W) : (r >= 0 ? r / W : -1);
          const int64_t w = r - h * W;
          if (!(r >= 0 && h < rows && w >= ws.start && w < ws.end)) {
            ok = false;
            break;
          }
          acc[size_t(i)] += A(dy[o + q]);
        }
      }
      if (!ok) {
#pragma omp critical(aim_maxpool2d_bwd_bad_index)
        bad_plane = std::min(bad_plane, nc);
        continue;
      }
      ew_detail::write_rows(dx + nc * H * W, H * W, stream, [&](T* d, int64_t i, int64_t n) {
        for (int64_t k = 0; k < n; ++k) d[k] = T(acc[size_t(i + k)]);
      });
    }
    if (stream) ew_detail::stream_fence();
  }
  if (bad_plane < NC)
    for (int64_t p = 0; p < P; ++p) {
      const Span hs = window(p, pp.kernel_h, pp.stride_h, pp.pad_top, pp.pad_bottom, H);
      for (int64_t q = 0; q < Q; ++q)
        check_index_in_window(ind[(bad_plane * P + p) * Q + q], bad_plane, p, q, hs,
                              wspans[size_t(q)], W);
    }
}

// Divisor extents of one axis for every output position: padded (count_include_pad) or not.
std::vector<int64_t> counts(int64_t O, int64_t k, int64_t stride, int64_t pb, int64_t pa,
                            int64_t in, bool padded) {
  std::vector<int64_t> c(static_cast<size_t>(O));
  for (int64_t o = 0; o < O; ++o) {
    const Span s = window(o, k, stride, pb, pa, in);
    c[size_t(o)] = padded ? s.count_padded : s.end - s.start;
  }
  return c;
}

template <class T, int KW, int SW>
void avgpool_fwd_omp_impl(const AvgPool2dFwdArgs& a) {
  using A = AccOf<T>;
  const Pool2dParams& pp = a.p;
  const int64_t NC = a.x.size(0) * a.x.size(1), H = a.x.size(2), W = a.x.size(3);
  const int64_t P = a.y.size(2), Q = a.y.size(3);
  const int64_t kw = KW > 0 ? KW : pp.kernel_w, sw = SW > 0 ? SW : pp.stride_w;
  const int64_t pl = pp.pad_left;
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  const Interior in = interior(Q, kw, sw, pl, W);
  const std::vector<int64_t> ch =
      counts(P, pp.kernel_h, pp.stride_h, pp.pad_top, pp.pad_bottom, H, pp.count_include_pad);
  const std::vector<int64_t> cw = counts(Q, kw, sw, pl, pp.pad_right, W, pp.count_include_pad);
  const int64_t work = NC * P * Q * pp.kernel_h * kw;
#pragma omp parallel if (work > kOmpMinWork)
  {
    std::vector<A> s(static_cast<size_t>(Q));
#pragma omp for schedule(static)
    for (int64_t nc = 0; nc < NC; ++nc) {
      const T* xp = x + nc * H * W;
      for (int64_t p = 0; p < P; ++p) {
        const Span hs = window(p, pp.kernel_h, pp.stride_h, pp.pad_top, pp.pad_bottom, H);
        std::fill(s.begin(), s.end(), A(0));
        for (int64_t h = hs.start; h < hs.end; ++h) {
          const T* xr = xp + h * W;
          for (const auto& [q0, q1] : {std::pair{int64_t(0), in.lo}, std::pair{in.hi, Q}})
            for (int64_t q = q0; q < q1; ++q) {  // edge windows, scalar
              const Span ws = window(q, kw, sw, pl, pp.pad_right, W);
              for (int64_t w = ws.start; w < ws.end; ++w) s[size_t(q)] += A(xr[w]);
            }
          for (int64_t j = 0; j < kw; ++j) {  // interior run: vectorises over q
            const int64_t off = j - pl;
            for (int64_t q = in.lo; q < in.hi; ++q) s[size_t(q)] += A(xr[q * sw + off]);
          }
        }
        T* yr = y + (nc * P + p) * Q;
        for (int64_t q = 0; q < Q; ++q) yr[q] = T(s[size_t(q)] / A(ch[size_t(p)] * cw[size_t(q)]));
      }
    }
  }
}

// Compile-time 3x3/2 and 2x2/2: 1.4x and 1.2x faster than the runtime loop (8x64x112x112 f32,
// one thread: 2.65 vs 3.8 ms, 1.75 vs 2.15 ms).
template <class T>
void avgpool_fwd_omp(const AvgPool2dFwdArgs& a) {
  if (a.p.kernel_w == 3 && a.p.stride_w == 2)
    avgpool_fwd_omp_impl<T, 3, 2>(a);
  else if (a.p.kernel_w == 2 && a.p.stride_w == 2)
    avgpool_fwd_omp_impl<T, 2, 2>(a);
  else
    avgpool_fwd_omp_impl<T, 0, 0>(a);
}

template <class T>
void avgpool_bwd_omp(const AvgPool2dBwdArgs& a) {
  using A = AccOf<T>;
  const Pool2dParams& pp = a.p;
  const int64_t NC = a.dx.size(0) * a.dx.size(1), H = a.dx.size(2), W = a.dx.size(3);
  const int64_t P = a.dy.size(2), Q = a.dy.size(3);
  const int64_t kw = pp.kernel_w, sw = pp.stride_w, pl = pp.pad_left;
  const T* dy = a.dy.data<T>();
  T* dx = a.dx.data<T>();
  const Interior in = interior(Q, kw, sw, pl, W);
  const std::vector<int64_t> ch =
      counts(P, pp.kernel_h, pp.stride_h, pp.pad_top, pp.pad_bottom, H, pp.count_include_pad);
  const std::vector<int64_t> cw = counts(Q, kw, sw, pl, pp.pad_right, W, pp.count_include_pad);
  const int64_t work = NC * (P * Q * pp.kernel_h * kw + H * W);
#pragma omp parallel if (work > kOmpMinWork)
  {
    std::vector<A> acc(static_cast<size_t>(H * W)), g(static_cast<size_t>(Q));
#pragma omp for schedule(static)
    for (int64_t nc = 0; nc < NC; ++nc) {
      std::fill(acc.begin(), acc.end(), A(0));
      for (int64_t p = 0; p < P; ++p) {
        const Span hs = window(p, pp.kernel_h, pp.stride_h, pp.pad_top, pp.pad_bottom, H);
        const T* dyr = dy + (nc * P + p) * Q;
        for (int64_t q = 0; q < Q; ++q) g[size_t(q)] = A(dyr[q]) / A(ch[size_t(p)] * cw[size_t(q)]);
        for (int64_t h = hs.start; h < hs.end; ++h) {
          A* ar = acc.data() + h * W;
          for (const auto& [q0, q1] : {std::pair{int64_t(0), in.lo}, std::pair{in.hi, Q}})
            for (int64_t q = q0; q < q1; ++q) {  // edge windows, scalar
              const Span ws = window(q, kw, sw, pl, pp.pad_right, W);
              for (int64_t w = ws.start; w < ws.end; ++w) ar[w] += g[size_t(q)];
            }
          for (int64_t j = 0; j < kw; ++j) {  // interior run: vectorises over q
            const int64_t off = j - pl;
            for (int64_t q = in.lo; q < in.hi; ++q) ar[q * sw + off] += g[size_t(q)];
          }
        }
      }
      T* d = dx + nc * H * W;
      for (int64_t i = 0; i < H * W; ++i) d[i] = T(acc[size_t(i)]);
    }
  }
}

// Global average pooling: one plane sum, 16 independent partial sums (vectorises).
template <class T>
void global_avg_fwd_omp(const AdaptiveAvgPool2dFwdArgs& a) {
  using A = AccOf<T>;
  const int64_t NC = a.x.size(0) * a.x.size(1), HW = a.x.size(2) * a.x.size(3);
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  constexpr int kLanes = 16;
#pragma omp parallel for schedule(static) if (NC * HW > kOmpMinWork)
  for (int64_t nc = 0; nc < NC; ++nc) {
    const T* xp = x + nc * HW;
    A part[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= HW; i += kLanes)
      for (int l = 0; l < kLanes; ++l) part[l] += A(xp[i + l]);
    A s = 0;
    for (int l = 0; l < kLanes; ++l) s += part[l];
    for (; i < HW; ++i) s += A(xp[i]);
    y[nc] = T(s / A(HW));
  }
}

template <class T>
void adaptive_fwd_omp(const AdaptiveAvgPool2dFwdArgs& a) {
  using A = AccOf<T>;
  const int64_t NC = a.x.size(0) * a.x.size(1), H = a.x.size(2), W = a.x.size(3);
  const int64_t P = a.y.size(2), Q = a.y.size(3);
  if (P == 1 && Q == 1) return global_avg_fwd_omp<T>(a);
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
#pragma omp parallel for schedule(static) if (NC * (H * W + P * Q) > kOmpMinWork)
  for (int64_t nc = 0; nc < NC; ++nc)
    for (int64_t p = 0; p < P; ++p) {
      const int64_t h0 = adaptive_start(p, H, P), h1 = adaptive_end(p, H, P);
      for (int64_t q = 0; q < Q; ++q) {
        const int64_t w0 = adaptive_start(q, W, Q), w1 = adaptive_end(q, W, Q);
        A s = 0;
        for (int64_t h = h0; h < h1; ++h) {
          const T* xr = x + (nc * H + h) * W;
          for (int64_t w = w0; w < w1; ++w) s += A(xr[w]);
        }
        y[(nc * P + p) * Q + q] = T(s / A((h1 - h0) * (w1 - w0)));
      }
    }
}

template <class T>
void adaptive_bwd_omp(const AdaptiveAvgPool2dBwdArgs& a) {
  using A = AccOf<T>;
  const int64_t NC = a.dx.size(0) * a.dx.size(1), H = a.dx.size(2), W = a.dx.size(3);
  const int64_t P = a.dy.size(2), Q = a.dy.size(3);
  const T* dy = a.dy.data<T>();
  T* dx = a.dx.data<T>();
  if (P == 1 && Q == 1) {  // global: broadcast dy / (H*W)
#pragma omp parallel for schedule(static) if (NC * H * W > kOmpMinWork)
    for (int64_t nc = 0; nc < NC; ++nc) {
      const T g = T(A(dy[nc]) / A(H * W));
      T* d = dx + nc * H * W;
      for (int64_t i = 0; i < H * W; ++i) d[i] = g;
    }
    return;
  }
#pragma omp parallel if (NC * (H * W + P * Q) > kOmpMinWork)
  {
    std::vector<A> acc(static_cast<size_t>(H * W));
#pragma omp for schedule(static)
    for (int64_t nc = 0; nc < NC; ++nc) {
      std::fill(acc.begin(), acc.end(), A(0));
      for (int64_t p = 0; p < P; ++p) {
        const int64_t h0 = adaptive_start(p, H, P), h1 = adaptive_end(p, H, P);
        for (int64_t q = 0; q < Q; ++q) {
          const int64_t w0 = adaptive_start(q, W, Q), w1 = adaptive_end(q, W, Q);
          const A g = A(dy[(nc * P + p) * Q + q]) / A((h1 - h0) * (w1 - w0));
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) acc[size_t(h * W + w)] += g;
        }
      }
      T* d = dx + nc * H * W;
      for (int64_t i = 0; i < H * W; ++i) d[i] = T(acc[size_t(i)]);
    }
  }
}

void maxpool2d_fwd_cpu_omp(const MaxPool2dFwdArgs& a) {
  check_maxpool2d_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { maxpool_fwd_omp<T>(a); });
}
void maxpool2d_bwd_cpu_omp(const MaxPool2dBwdArgs& a) {
  check_maxpool2d_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.dy.dtype(), T, { maxpool_bwd_omp<T>(a); });
}
void avgpool2d_fwd_cpu_omp(const AvgPool2dFwdArgs& a) {
  check_avgpool2d_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { avgpool_fwd_omp<T>(a); });
}
void avgpool2d_bwd_cpu_omp(const AvgPool2dBwdArgs& a) {
  check_avgpool2d_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.dy.dtype(), T, { avgpool_bwd_omp<T>(a); });
}
void adaptive_avgpool2d_fwd_cpu_omp(const AdaptiveAvgPool2dFwdArgs& a) {
  check_adaptive_avgpool2d_fwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { adaptive_fwd_omp<T>(a); });
}
void adaptive_avgpool2d_bwd_cpu_omp(const AdaptiveAvgPool2dBwdArgs& a) {
  check_adaptive_avgpool2d_bwd_args(a);
  AIM_DISPATCH_FLOAT_TYPES(a.dy.dtype(), T, { adaptive_bwd_omp<T>(a); });
}

std::vector<DType> float_dtypes() { return {DType::f32, DType::f64, DType::f16, DType::bf16}; }

}  // namespace

void maxpool2d_fwd(const MaxPool2dFwdArgs& a) {
  AIM_DISPATCH_OP(MaxPool2dFwdArgs, "maxpool2d_fwd", a);
}
void maxpool2d_bwd(const MaxPool2dBwdArgs& a) {
  AIM_DISPATCH_OP(MaxPool2dBwdArgs, "maxpool2d_bwd", a);
}
void avgpool2d_fwd(const AvgPool2dFwdArgs& a) {
  AIM_DISPATCH_OP(AvgPool2dFwdArgs, "avgpool2d_fwd", a);
}
void avgpool2d_bwd(const AvgPool2dBwdArgs& a) {
  AIM_DISPATCH_OP(AvgPool2dBwdArgs, "avgpool2d_bwd", a);
}
void adaptive_avgpool2d_fwd(const AdaptiveAvgPool2dFwdArgs& a) {
  AIM_DISPATCH_OP(AdaptiveAvgPool2dFwdArgs, "adaptive_avgpool2d_fwd", a);
}
void adaptive_avgpool2d_bwd(const AdaptiveAvgPool2dBwdArgs& a) {
  AIM_DISPATCH_OP(AdaptiveAvgPool2dBwdArgs, "adaptive_avgpool2d_bwd", a);
}

void register_pool2d_cpu(Registry& r) {
  auto& mf = r.op<MaxPool2dFwdArgs>("maxpool2d_fwd");
  mf.description = "2-D max pooling with argmax indices (F.max_pool2d, return_indices)";
  mf.add(
      {"cpu.ref", Backend::CPU, Provider::Own, pool2d_cpu::maxpool2d_fwd_cpu_ref, float_dtypes()});
  mf.add({"cpu.omp", Backend::CPU, Provider::Own, maxpool2d_fwd_cpu_omp, float_dtypes()});
  mf.set_default(Backend::CPU, "cpu.omp");
  mf.set_cost(maxpool2d_fwd_cost);
  mf.make_case = pool2d_cpu::make_maxpool2d_fwd_case;
  mf.set_shape_fields(pool2d_cpu::pool2d_window_shape_fields("indices"));
  mf.add_test_shapes(pool2d_cpu::maxpool2d_fwd_test_shapes());
  mf.small_enough_for_simt = pool2d_cpu::pool2d_window_simt_small;

  auto& mb = r.op<MaxPool2dBwdArgs>("maxpool2d_bwd");
  mb.description = "2-D max pooling gradient: dx = 0, dx[indices] += dy";
  mb.add({"cpu.ref", Backend::CPU, Provider::Own, maxpool2d_bwd_cpu_ref, float_dtypes()});
  mb.add({"cpu.omp", Backend::CPU, Provider::Own, maxpool2d_bwd_cpu_omp, float_dtypes()});
  mb.set_default(Backend::CPU, "cpu.omp");
  mb.set_cost(maxpool2d_bwd_cost);
  mb.make_case = pool2d_cpu::make_maxpool2d_bwd_case;
  mb.set_shape_fields(pool2d_cpu::pool2d_window_shape_fields("flag"));  // unused: always indices
  mb.add_test_shapes(pool2d_cpu::pool2d_window_test_shapes());
  mb.small_enough_for_simt = pool2d_cpu::pool2d_window_simt_small;

  auto& af = r.op<AvgPool2dFwdArgs>("avgpool2d_fwd");
  af.description = "2-D average pooling (F.avg_pool2d: ceil_mode, count_include_pad)";
  af.add({"cpu.ref", Backend::CPU, Provider::Own, avgpool2d_fwd_cpu_ref, float_dtypes()});
  af.add({"cpu.omp", Backend::CPU, Provider::Own, avgpool2d_fwd_cpu_omp, float_dtypes()});
  af.set_default(Backend::CPU, "cpu.omp");
  af.set_cost(avgpool2d_fwd_cost);
  af.make_case = pool2d_cpu::make_avgpool2d_fwd_case;
  af.set_shape_fields(pool2d_cpu::pool2d_window_shape_fields("count_pad"));
  af.add_test_shapes(pool2d_cpu::pool2d_window_test_shapes());
  af.small_enough_for_simt = pool2d_cpu::pool2d_window_simt_small;

  auto& ab = r.op<AvgPool2dBwdArgs>("avgpool2d_bwd");
  ab.description = "2-D average pooling gradient";
  ab.add({"cpu.ref", Backend::CPU, Provider::Own, avgpool2d_bwd_cpu_ref, float_dtypes()});
  ab.add({"cpu.omp", Backend::CPU, Provider::Own, avgpool2d_bwd_cpu_omp, float_dtypes()});
  ab.set_default(Backend::CPU, "cpu.omp");
  ab.set_cost(avgpool2d_bwd_cost);
  ab.make_case = pool2d_cpu::make_avgpool2d_bwd_case;
  ab.set_shape_fields(pool2d_cpu::pool2d_window_shape_fields("count_pad"));
  ab.add_test_shapes(pool2d_cpu::pool2d_window_test_shapes());
  ab.small_enough_for_simt = pool2d_cpu::pool2d_window_simt_small;

  auto& df = r.op<AdaptiveAvgPool2dFwdArgs>("adaptive_avgpool2d_fwd");
  df.description = "adaptive 2-D average pooling (F.adaptive_avg_pool2d; 1x1 = global)";
  df.add({"cpu.ref", Backend::CPU, Provider::Own, adaptive_avgpool2d_fwd_cpu_ref, float_dtypes()});
  df.add({"cpu.omp", Backend::CPU, Provider::Own, adaptive_avgpool2d_fwd_cpu_omp, float_dtypes()});
  df.set_default(Backend::CPU, "cpu.omp");
  df.set_cost(adaptive_avgpool2d_fwd_cost);
  df.make_case = pool2d_cpu::make_adaptive_avgpool2d_fwd_case;
  df.set_shape_fields(pool2d_cpu::adaptive_avgpool2d_shape_fields());
  df.add_test_shapes(pool2d_cpu::adaptive_avgpool2d_test_shapes());
  df.small_enough_for_simt = pool2d_cpu::adaptive_avgpool2d_simt_small;

  auto& db = r.op<AdaptiveAvgPool2dBwdArgs>("adaptive_avgpool2d_bwd");
  db.description = "adaptive 2-D average pooling gradient";
  db.add({"cpu.ref", Backend::CPU, Provider::Own, adaptive_avgpool2d_bwd_cpu_ref, float_dtypes()});
  db.add({"cpu.omp", Backend::CPU, Provider::Own, adaptive_avgpool2d_bwd_cpu_omp, float_dtypes()});
  db.set_default(Backend::CPU, "cpu.omp");
  db.set_cost(adaptive_avgpool2d_bwd_cost);
  db.make_case = pool2d_cpu::make_adaptive_avgpool2d_bwd_case;
  db.set_shape_fields(pool2d_cpu::adaptive_avgpool2d_shape_fields());
  db.add_test_shapes(pool2d_cpu::adaptive_avgpool2d_test_shapes());
  db.small_enough_for_simt = pool2d_cpu::adaptive_avgpool2d_simt_small;
}

}  // namespace aim::kernels
