// conv2d on the CPU (math: kernels/conv/README.md).
// cpu.ref: the oracle. Direct loops over every output (fwd, bwd_filter) or a scatter of every
//   dy element into a double image (bwd_data); double accumulation, one rounding at the output;
//   f32 f64 f16 bf16 (gradcheck runs it in f64).
// cpu.widen (default for f16/bf16): 16-bit tensors widened to f32 for the f32 algorithm of the
//   shape (Winograd or cpu.im2col; im2col's forward and input gradient in chunks of images),
//   outputs rounded once (the rounding points of a tensor-core convolution, f32 accumulation).
// cpu.im2col (default for f32): per image and group, lower the convolution to one GEMM through a
//   column matrix col [C/G*R*S, P*Q] (row (c, r, s), column (p, q)):
//     fwd         y_g [K/G, P*Q]       = w_g [K/G, C/G*R*S] . col
//     bwd_data    col                  = w_g^T . dy_g [K/G, P*Q], then col2im adds col into dx
//     bwd_filter  dw_g [K/G, C/G*R*S] += dy_g . col^T,  dbias[k] += row sums of dy
//   1x1 stride-1 unpadded convolutions skip im2col/col2im: the image is already the matrix.
//   The columns are processed in chunks of whole output rows sized so the chunk's col (<= ~512
//   KiB, >= ~256 columns) stays in the core's L2 between im2col, the GEMM and col2im; small
//   images (P*Q < 384) go several to one column matrix instead (plan_of), their x (pointwise),
//   dy and y planes read and written in place as the GEMM's column blocks. Stride 1
//   with Q == W (same padding): one tap's valid rows are one contiguous copy (or add), then the
//   one or two wrapped-around columns per row are fixed up.
//   bwd_filter's GEMM has a transposed operand (the reduction runs along the rows of dy and col),
//   which sgemm_avx512 packs with in-register 16x16 transposes.
//   GEMM: the own AVX-512 SGEMM (sgemm_avx512) where the CPU has AVX-512, else OpenBLAS.
//   Threads: OpenMP over images (or blocks of images) when there are >= the team size (each GEMM
//   single-threaded inside the region), else images one after another with the GEMM using the team.
//   bwd_filter over images in parallel accumulates one partial dw per thread, added into dw in
//   thread order. Column buffers are thread_local and only grow: no allocation or page faults in
//   steady state.
// Test cases: conv2d_cases.cpp.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#ifdef AIM_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "kernels/conv/conv2d.h"
#include "kernels/conv/conv2d_cpu.h"
#include "kernels/conv/conv2d_winograd.h"
#include "kernels/conv/cpu_blocks.h"
#include "kernels/elementwise/loops_cpu.h"
#include "kernels/matmul/gemm_avx512.h"
#include "kernels/registry.h"

namespace aim::kernels {

namespace {

using conv_cpu::blocks_parallel;
using conv_cpu::for_blocks;
using conv_cpu::thread_buffer;

// Sizes of one convolution, checked: per-group channel counts Cg = C/G, Kg = K/G.
struct Dims {
  int64_t N, C, H, W, K, R, S, P, Q, G, Cg, Kg;
};

std::string sh(const Tensor& t) { return t.defined() ? to_string(t.sizes()) : "undefined"; }

void check_params(const char* op, const Conv2dParams& p) {
  AIM_CHECK(p.stride_h >= 1 && p.stride_w >= 1, "[", op, "] stride must be >= 1, got ", p.stride_h,
            ",", p.stride_w);
  AIM_CHECK(p.dil_h >= 1 && p.dil_w >= 1, "[", op, "] dilation must be >= 1, got ", p.dil_h, ",",
            p.dil_w);
  AIM_CHECK(p.pad_top >= 0 && p.pad_bottom >= 0 && p.pad_left >= 0 && p.pad_right >= 0, "[", op,
            "] padding must be >= 0, got top ", p.pad_top, " bottom ", p.pad_bottom, " left ",
            p.pad_left, " right ", p.pad_right);
  AIM_CHECK(p.groups >= 1, "[", op, "] groups must be >= 1, got ", p.groups);
}

// x-side [N, C, H, W] and w [K, C/G, R, S]: the channel/group relations and the output extent.
Dims make_dims(const char* op, const char* xname, const Tensor& x, const Tensor& w,
               const Conv2dParams& p) {
  check_params(op, p);
  AIM_CHECK(x.defined() && x.dim() == 4, "[", op, "] ", xname, " must be [N, C, H, W], got ",
            sh(x));
  AIM_CHECK(w.defined() && w.dim() == 4, "[", op, "] w must be [K, C/groups, R, S], got ", sh(w));
  Dims d;
  d.N = x.size(0);
  d.C = x.size(1);
  d.H = x.size(2);
  d.W = x.size(3);
  d.K = w.size(0);
  d.R = w.size(2);
  d.S = w.size(3);
  d.G = p.groups;
  AIM_CHECK(d.C % d.G == 0, "[", op, "] channels C = ", d.C, " of ", xname, " ", sh(x),
            " must be divisible by groups = ", d.G);
  AIM_CHECK(d.K % d.G == 0, "[", op, "] output channels K = ", d.K, " of w ", sh(w),
            " must be divisible by groups = ", d.G);
  d.Cg = d.C / d.G;
  d.Kg = d.K / d.G;
  AIM_CHECK(w.size(1) == d.Cg, "[", op, "] w must be [K, C/groups = ", d.Cg, ", R, S] for ", xname,
            " ", sh(x), " and groups ", d.G, ", got ", sh(w));
  AIM_CHECK(d.R >= 1 && d.S >= 1, "[", op, "] kernel must be at least 1x1, got w ", sh(w));
  d.P = conv2d_out_size(d.H, d.R, p.stride_h, p.pad_top, p.pad_bottom, p.dil_h);
  d.Q = conv2d_out_size(d.W, d.S, p.stride_w, p.pad_left, p.pad_right, p.dil_w);
  const int64_t eff_h = p.dil_h * (d.R - 1) + 1, eff_w = p.dil_w * (d.S - 1) + 1;
  AIM_CHECK(d.H + p.pad_top + p.pad_bottom >= eff_h && d.W + p.pad_left + p.pad_right >= eff_w, "[",
            op, "] kernel ", d.R, "x", d.S, " with dilation ", p.dil_h, ",", p.dil_w, " (extent ",
            eff_h, "x", eff_w, ") does not fit ", xname, " ", sh(x), " padded by ", p.pad_top, "+",
            p.pad_bottom, " rows and ", p.pad_left, "+", p.pad_right, " columns");
  return d;
}

void check_tensor(const char* op, const char* name, const Tensor& t, const Shape& want, DType dt,
                  Device dev) {
  AIM_CHECK(t.defined(), "[", op, "] ", name, " must be given (", to_string(want), " ",
            dtype_name(dt), ")");
  AIM_CHECK(t.sizes() == want, "[", op, "] ", name, " must be ", to_string(want), ", got ",
            to_string(t.sizes()));
  AIM_CHECK(t.dtype() == dt, "[", op, "] ", name, " must be ", dtype_name(dt), " like the other ",
            "tensors, got ", dtype_name(t.dtype()));
  AIM_CHECK(t.device() == dev, "[", op, "] ", name, " must be on ", dev.str(), ", got ",
            t.device().str());
  AIM_CHECK(t.is_contiguous(), "[", op, "] ", name, " ", to_string(t.sizes()),
            " must be contiguous");
}

void check_float(const char* op, DType t) {
  AIM_CHECK(is_floating(t), "[", op, "] expected a float dtype (f32 f64 f16 bf16), got ",
            dtype_name(t));
}

Dims dims_fwd(const Conv2dFwdArgs& a) {
  const char* op = "conv2d_fwd";
  const Dims d = make_dims(op, "x", a.x, a.w, a.p);
  check_float(op, a.x.dtype());
  const DType t = a.x.dtype();
  const Device dev = a.x.device();
  if (a.has_prologue() || a.in_shift.defined()) {
    // With a prologue, x's images may lie farther apart (Conv2dFwdArgs): each one contiguous.
    const int64_t HW = d.H * d.W;
    AIM_CHECK(conv2d_images_contiguous(a.x), "[", op, "] x ", sh(a.x),
              " must hold each image contiguous (strides [>= ", d.C * HW, ", ", HW, ", ", d.W,
              ", 1]), got strides ", to_string(a.x.strides()));
    AIM_CHECK(a.in_scale.defined() && a.in_shift.defined(), "[", op,
              "] the input prologue needs both in_scale and in_shift");
    // f32; f64 too, for the oracle's f64 runs (the registry test casts its inputs).
    const DType st = a.in_scale.dtype() == DType::f64 ? DType::f64 : DType::f32;
    check_tensor(op, "in_scale", a.in_scale, {d.C}, st, dev);
    check_tensor(op, "in_shift", a.in_shift, {d.C}, st, dev);
  } else {
    check_tensor(op, "x", a.x, a.x.sizes(), t, dev);
  }
  check_tensor(op, "w", a.w, a.w.sizes(), t, dev);
  if (a.bias.defined()) check_tensor(op, "bias", a.bias, {d.K}, t, dev);
  check_tensor(op, "y", a.y, {d.N, d.K, d.P, d.Q}, t, dev);
  if (a.residual.defined()) check_tensor(op, "residual", a.residual, {d.N, d.K, d.P, d.Q}, t, dev);
  return d;
}

// Floats from one image of x to the next (C*H*W, or more for a prologue's strided x).
int64_t x_image_stride(const Tensor& x, const Dims& d) {
  return d.N > 1 ? x.stride(0) : d.C * d.H * d.W;
}

Dims dims_bwd_data(const Conv2dBwdDataArgs& a) {
  const char* op = "conv2d_bwd_data";
  const Dims d = make_dims(op, "dx", a.dx, a.w, a.p);
  check_float(op, a.dy.dtype());
  const DType t = a.dy.dtype();
  const Device dev = a.dy.device();
  check_tensor(op, "dy", a.dy, {d.N, d.K, d.P, d.Q}, t, dev);
  check_tensor(op, "w", a.w, a.w.sizes(), t, dev);
  check_tensor(op, "dx", a.dx, a.dx.sizes(), t, dev);
  return d;
}

Dims dims_bwd_filter(const Conv2dBwdFilterArgs& a) {
  const char* op = "conv2d_bwd_filter";
  const Dims d = make_dims(op, "x", a.x, a.dw, a.p);
  check_float(op, a.x.dtype());
  const DType t = a.x.dtype();
  const Device dev = a.x.device();
  check_tensor(op, "x", a.x, a.x.sizes(), t, dev);
  check_tensor(op, "dy", a.dy, {d.N, d.K, d.P, d.Q}, t, dev);
  check_tensor(op, "dw", a.dw, a.dw.sizes(), t, dev);
  if (a.dbias.defined()) check_tensor(op, "dbias", a.dbias, {d.K}, t, dev);
  return d;
}

}  // namespace

void check_conv2d_fwd_args(const Conv2dFwdArgs& a) { dims_fwd(a); }

namespace {
std::atomic<int64_t> g_chunk_elems{0};  // 0: not set

int64_t env_chunk_elems() {
  static const int64_t v = [] {
    const char* s = std::getenv("AIM_CONV_MAX_ELEMS_TEST");
    if (!s || !*s) return int64_t(0);
    char* end = nullptr;
    const long long n = std::strtoll(s, &end, 10);
    AIM_CHECK(*end == 0 && n > 0, "AIM_CONV_MAX_ELEMS_TEST must be a positive integer, got '", s,
              "'");
    return int64_t(n);
  }();
  return v;
}

int64_t image_elems(const Tensor& t) { return t.size(0) > 0 ? t.numel() / t.size(0) : 0; }
}  // namespace

int64_t conv2d_chunk_elems() {
  int64_t n = g_chunk_elems.load(std::memory_order_relaxed);
  if (n <= 0) n = env_chunk_elems();
  return n > 0 ? std::min<int64_t>(n, INT_MAX) : int64_t(INT_MAX);
}

void set_conv2d_chunk_elems(int64_t elems) {
  g_chunk_elems.store(std::max<int64_t>(elems, 0), std::memory_order_relaxed);
}

std::string conv2d_chunk_reason(const Tensor& xs, const Tensor& w, const Tensor& ys) {
  const int64_t limit = conv2d_chunk_elems();
  const std::string lim = limit == INT_MAX ? std::string("2^31") : str(limit, " (lowered)");
  if (xs.size(0) > INT_MAX) return str("needs a batch under 2^31 images, got ", xs.size(0));
  if (w.numel() > limit)
    return str("needs the filter under ", lim, " elements (32-bit indexing), got ",
               to_string(w.sizes()));
  for (const Tensor* t : {&xs, &ys})
    if (image_elems(*t) > limit)
      return str("needs one image under ", lim,
                 " elements (32-bit indexing within a chunk of images), got ",
                 to_string(t->sizes()));
  return "";
}

int64_t conv2d_images_per_chunk(const Tensor& xs, const Tensor& ys) {
  const int64_t N = xs.size(0), per = std::max(image_elems(xs), image_elems(ys));
  if (per == 0) return std::max<int64_t>(N, 1);
  return std::clamp<int64_t>(conv2d_chunk_elems() / per, 1, std::max<int64_t>(N, 1));
}
void check_conv2d_bwd_data_args(const Conv2dBwdDataArgs& a) { dims_bwd_data(a); }
void check_conv2d_bwd_filter_args(const Conv2dBwdFilterArgs& a) { dims_bwd_filter(a); }

namespace {

// ---- cpu.ref --------------------------------------------------------------------------------

template <class T>
void fwd_ref(const Conv2dFwdArgs& a, const Dims& d) {
  const Conv2dParams& p = a.p;
  const T* x = a.x.data<T>();
  const T* w = a.w.data<T>();
  const T* bias = a.bias.defined() ? a.bias.data<T>() : nullptr;
  const T* res = a.residual.defined() ? a.residual.data<T>() : nullptr;
  // The input prologue on each value read (padding stays zero); x's images xs apart.
  std::vector<double> in_scale, in_shift;
  if (a.has_prologue()) {
    in_scale = a.in_scale.to(DType::f64).to_vector<double>();
    in_shift = a.in_shift.to(DType::f64).to_vector<double>();
  }
  const int64_t xs = x_image_stride(a.x, d);
  auto input = [&](int64_t n, int64_t c, int64_t ih, int64_t iw) {
    double v = double(x[n * xs + (c * d.H + ih) * d.W + iw]);
    if (in_scale.empty()) return v;
    v = v * in_scale[size_t(c)] + in_shift[size_t(c)];
    return a.in_relu && v < 0.0 ? 0.0 : v;  // NaN stays NaN
  };
  T* y = a.y.data<T>();
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t k = 0; k < d.K; ++k) {
      const int64_t g = k / d.Kg;
      for (int64_t op = 0; op < d.P; ++op)
        for (int64_t oq = 0; oq < d.Q; ++oq) {
          double acc = bias ? double(bias[k]) : 0.0;
          for (int64_t c = 0; c < d.Cg; ++c)
            for (int64_t r = 0; r < d.R; ++r)
              for (int64_t s = 0; s < d.S; ++s) {
                const int64_t ih = op * p.stride_h - p.pad_top + r * p.dil_h;
                const int64_t iw = oq * p.stride_w - p.pad_left + s * p.dil_w;
                if (ih < 0 || ih >= d.H || iw < 0 || iw >= d.W) continue;
                acc += input(n, g * d.Cg + c, ih, iw) *
                       double(w[((k * d.Cg + c) * d.R + r) * d.S + s]);
              }
          const int64_t yi = ((n * d.K + k) * d.P + op) * d.Q + oq;
          if (res) acc += double(res[yi]);
          if (a.relu && acc < 0.0) acc = 0.0;  // NaN stays NaN
          y[yi] = T(acc);
        }
    }
}

template <class T>
void bwd_data_ref(const Conv2dBwdDataArgs& a, const Dims& d) {
  const Conv2dParams& p = a.p;
  const T* dy = a.dy.data<T>();
  const T* w = a.w.data<T>();
  std::vector<double> dx(size_t(d.N * d.C * d.H * d.W), 0.0);
  // Every output position sends dy * w back to the input pixel its window read.
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t k = 0; k < d.K; ++k) {
      const int64_t g = k / d.Kg;
      for (int64_t op = 0; op < d.P; ++op)
        for (int64_t oq = 0; oq < d.Q; ++oq) {
          const double v = double(dy[((n * d.K + k) * d.P + op) * d.Q + oq]);
          for (int64_t c = 0; c < d.Cg; ++c)
            for (int64_t r = 0; r < d.R; ++r)
              for (int64_t s = 0; s < d.S; ++s) {
                const int64_t ih = op * p.stride_h - p.pad_top + r * p.dil_h;
                const int64_t iw = oq * p.stride_w - p.pad_left + s * p.dil_w;
                if (ih < 0 || ih >= d.H || iw < 0 || iw >= d.W) continue;
                dx[size_t(((n * d.C + g * d.Cg + c) * d.H + ih) * d.W + iw)] +=
                    v * double(w[((k * d.Cg + c) * d.R + r) * d.S + s]);
              }
        }
    }
  T* out = a.dx.data<T>();
  for (size_t i = 0; i < dx.size(); ++i) out[i] = T(dx[i]);
}

template <class T>
void bwd_filter_ref(const Conv2dBwdFilterArgs& a, const Dims& d) {
  const Conv2dParams& p = a.p;
  const T* dy = a.dy.data<T>();
  const T* x = a.x.data<T>();
  T* dw = a.dw.data<T>();
  for (int64_t k = 0; k < d.K; ++k) {
    const int64_t g = k / d.Kg;
    for (int64_t c = 0; c < d.Cg; ++c)
      for (int64_t r = 0; r < d.R; ++r)
        for (int64_t s = 0; s < d.S; ++s) {
          double acc = 0.0;
          for (int64_t n = 0; n < d.N; ++n)
            for (int64_t op = 0; op < d.P; ++op)
              for (int64_t oq = 0; oq < d.Q; ++oq) {
                const int64_t ih = op * p.stride_h - p.pad_top + r * p.dil_h;
                const int64_t iw = oq * p.stride_w - p.pad_left + s * p.dil_w;
                if (ih < 0 || ih >= d.H || iw < 0 || iw >= d.W) continue;
                acc += double(dy[((n * d.K + k) * d.P + op) * d.Q + oq]) *
                       double(x[((n * d.C + g * d.Cg + c) * d.H + ih) * d.W + iw]);
              }
          T& o = dw[((k * d.Cg + c) * d.R + r) * d.S + s];
          o = T(double(o) + acc);
        }
  }
  if (a.dbias.defined()) {
    T* db = a.dbias.data<T>();
    for (int64_t k = 0; k < d.K; ++k) {
      double acc = 0.0;
      for (int64_t n = 0; n < d.N; ++n)
        for (int64_t i = 0; i < d.P * d.Q; ++i) acc += double(dy[(n * d.K + k) * d.P * d.Q + i]);
      db[k] = T(double(db[k]) + acc);
    }
  }
}

void conv2d_fwd_cpu_ref(const Conv2dFwdArgs& a) {
  const Dims d = dims_fwd(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { fwd_ref<T>(a, d); });
}
void conv2d_bwd_data_cpu_ref(const Conv2dBwdDataArgs& a) {
  const Dims d = dims_bwd_data(a);
  AIM_DISPATCH_FLOAT_TYPES(a.dy.dtype(), T, { bwd_data_ref<T>(a, d); });
}
void conv2d_bwd_filter_cpu_ref(const Conv2dBwdFilterArgs& a) {
  const Dims d = dims_bwd_filter(a);
  AIM_DISPATCH_FLOAT_TYPES(a.x.dtype(), T, { bwd_filter_ref<T>(a, d); });
}

// ---- cpu.im2col -----------------------------------------------------------------------------

bool have_fast_gemm() {
#ifdef AIM_HAVE_OPENBLAS
  return true;
#else
  return cpu_has_avx512();
#endif
}

// Row-major C[M,N] = alpha op(A) op(B) + beta C, then the epilogue (GemmEpilogue: row bias,
// relu). Single-threaded inside a parallel region. stream_c: sgemm_avx512's hint (C part of an
// output beyond the caches). blocks: op(B) (= B) and C in column blocks (several images side by
// side read and written in place; GemmColumnBlocks).
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc, bool stream_c = false,
          const GemmColumnBlocks& blocks = {}, const GemmEpilogue& epilogue = {}) {
  if (cpu_has_avx512()) {
    sgemm_avx512(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc, stream_c, blocks, nullptr,
                 epilogue);
    return;
  }
#ifdef AIM_HAVE_OPENBLAS
  AIM_CHECK(!tb || !blocks.blocks_b(), "[conv2d] column blocks of a transposed B");
  const int64_t w = blocks.width > 0 ? blocks.width : N;
  for (int64_t j = 0; j < N; j += w)  // one product per block
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                blasint(M), blasint(std::min(w, N - j)), blasint(K), 1.0f, A, blasint(lda),
                blocks.blocks_b() ? B + j / w * blocks.b_stride
                : tb              ? B + j * ldb
                                  : B + j,
                blasint(ldb), beta, blocks.blocks_c() ? C + j / w * blocks.c_stride : C + j,
                blasint(ldc));
  // The epilogue after the product, in GemmEpilogue's order (sgemm_avx512's own pass for its
  // other paths lives in its AVX-512 translation unit, which this CPU may not run).
  if (epilogue.any())
    for (int64_t j = 0; j < N; j += w) {
      float* cb = blocks.blocks_c() ? C + j / w * blocks.c_stride : C + j;
      for (int64_t i = 0; i < M; ++i) {
        float* c = cb + i * ldc;
        for (int64_t q = 0; q < std::min(w, N - j); ++q) {
          float v = c[q];
          if (epilogue.row_bias) v += epilogue.row_bias[i];
          c[q] = epilogue.relu && v < 0.0f ? 0.0f : v;
        }
      }
    }
#else
  AIM_FAIL("[conv2d] cpu.im2col needs AVX-512 or OpenBLAS, this build and CPU have neither");
#endif
}

// Valid output columns [q0, q1) of one (s) tap: 0 <= q*sw + iw0 < W.
inline void q_range(int64_t iw0, int64_t sw, int64_t W, int64_t Q, int64_t& q0, int64_t& q1) {
  q0 = iw0 >= 0 ? 0 : (-iw0 + sw - 1) / sw;
  q1 = W - iw0 <= 0 ? 0 : (W - iw0 + sw - 1) / sw;  // first q with q*sw + iw0 >= W
  q0 = std::min(q0, Q);
  q1 = std::max(q0, std::min(q1, Q));
}

// Output rows [pa, pb) of tap row r whose input row lies inside the image, clipped to [p0, p1);
// ih0 is the input row of output row 0.
struct RowRange {
  int64_t ih0, pa, pb;
};
RowRange row_range(int64_t r, const Dims& d, const Conv2dParams& p, int64_t p0, int64_t p1) {
  const int64_t ih0 = r * p.dil_h - p.pad_top;
  int64_t pa = ih0 >= 0 ? 0 : (-ih0 + p.stride_h - 1) / p.stride_h;
  int64_t pb = d.H - ih0 <= 0 ? 0 : (d.H - ih0 + p.stride_h - 1) / p.stride_h;
  pa = std::min(std::max(pa, p0), p1);
  pb = std::max(pa, std::min(pb, p1));
  return {ih0, pa, pb};
}

// Strided convolutions with wide kernels (stride_w > 1, S >= 5: the 7x7/2 stems, AlexNet's
// 11x11/4) see each input row as stride_w phases, phase k holding columns k, k + sw, k + 2 sw,
// ...: a tap's columns q*sw + iw0 are one contiguous run of phase mod(iw0, sw). One input row is
// split into its phases once for all S taps (a strided gather per tap otherwise: the ResNet
// stem's im2col took as long as its GEMM), and col2im gathers the taps' sums per phase before one
// interleaving pass adds them into dx. With S <= 3 the split costs more than it saves (measured:
// 3x3/2 on 14x14 and 1x1/2 10-20% slower), so those keep the gather.
bool use_phases(const Dims& d, const Conv2dParams& p) { return p.stride_w > 1 && d.S >= 5; }
struct Phases {
  int64_t sw, len;  // phases, floats per phase (ceil(W / sw))
  float* buf;       // [sw, len], thread_local
  Phases(int64_t stride, int64_t W) : sw(stride), len((W + stride - 1) / stride) {
    thread_local std::vector<float> storage;
    if (storage.size() < size_t(sw * len)) storage.resize(size_t(sw * len));
    buf = storage.data();
  }
  // Where tap columns q = 0, 1, ... (input columns q*sw + iw0) start; valid for [q0, q1).
  float* tap(int64_t iw0) const {
    const int64_t k = ((iw0 % sw) + sw) % sw;
    return buf + k * len + (iw0 - k) / sw;
  }
  void split(const float* row, int64_t W) {
    if (sw == 2) {
      float *even = buf, *odd = buf + len;
      int64_t i = 0;
      for (; 2 * i + 1 < W; ++i) {
        even[i] = row[2 * i];
        odd[i] = row[2 * i + 1];
      }
      if (2 * i < W) even[i] = row[2 * i];
      return;
    }
    for (int64_t k = 0; k < sw; ++k)
      for (int64_t i = 0; k + i * sw < W; ++i) buf[k * len + i] = row[k + i * sw];
  }
  // row[w] += phase sums, every column of the row.
  void add_into(float* row, int64_t W) const {
    for (int64_t k = 0; k < sw; ++k)
      for (int64_t i = 0; k + i * sw < W; ++i) row[k + i * sw] += buf[k * len + i];
  }
  void zero() { std::fill(buf, buf + sw * len, 0.0f); }
};

void im2col_phases(const float* x, float* col, int64_t ld, const Dims& d, const Conv2dParams& p,
                   int64_t p0, int64_t p1) {
  Phases ph(p.stride_w, d.W);
  for (int64_t c = 0; c < d.Cg; ++c)
    for (int64_t r = 0; r < d.R; ++r) {
      const RowRange rr = row_range(r, d, p, p0, p1);
      float* taps = col + (c * d.R + r) * d.S * ld;  // tap s's row at taps + s * ld
      for (int64_t s = 0; s < d.S; ++s) {
        float* out = taps + s * ld;
        std::fill(out, out + (rr.pa - p0) * d.Q, 0.0f);
        std::fill(out + (rr.pb - p0) * d.Q, out + (p1 - p0) * d.Q, 0.0f);
      }
      for (int64_t op = rr.pa; op < rr.pb; ++op) {
        ph.split(x + (c * d.H + op * p.stride_h + rr.ih0) * d.W, d.W);
        for (int64_t s = 0; s < d.S; ++s) {
          float* o = taps + s * ld + (op - p0) * d.Q;
          const int64_t iw0 = s * p.dil_w - p.pad_left;
          int64_t q0, q1;
          q_range(iw0, p.stride_w, d.W, d.Q, q0, q1);
          const float* in = ph.tap(iw0);
          for (int64_t q = 0; q < q0; ++q) o[q] = 0.0f;
          for (int64_t q = q0; q < q1; ++q) o[q] = in[q];
          for (int64_t q = std::max(q0, q1); q < d.Q; ++q) o[q] = 0.0f;
        }
      }
    }
}

void col2im_add_phases(const float* col, int64_t ld, float* dx, const Dims& d,
                       const Conv2dParams& p, int64_t p0, int64_t p1) {
  Phases ph(p.stride_w, d.W);
  for (int64_t c = 0; c < d.Cg; ++c)
    for (int64_t r = 0; r < d.R; ++r) {
      const RowRange rr = row_range(r, d, p, p0, p1);
      const float* taps = col + (c * d.R + r) * d.S * ld;
      for (int64_t op = rr.pa; op < rr.pb; ++op) {
        ph.zero();
        for (int64_t s = 0; s < d.S; ++s) {
          const float* i = taps + s * ld + (op - p0) * d.Q;
          const int64_t iw0 = s * p.dil_w - p.pad_left;
          int64_t q0, q1;
          q_range(iw0, p.stride_w, d.W, d.Q, q0, q1);
          float* acc = ph.tap(iw0);
          for (int64_t q = q0; q < q1; ++q) acc[q] += i[q];
        }
        ph.add_into(dx + (c * d.H + op * p.stride_h + rr.ih0) * d.W, d.W);
      }
    }
}

// Output rows [p0, p1) of one image's columns from the image slice x [Cg, H, W]: row (c, r, s)
// of the column matrix starts at col + ((c*R + r)*S + s) * ld and this image's (p1-p0)*Q columns
// are its first ones (ld >= that: several images side by side); every one of them written.
// Stride 1 with Q == W (same padding): source and destination rows have the same stride, so the
// valid rows of one tap are one contiguous copy, then the few columns that wrapped around from
// the neighbouring row (or read padding) are zeroed.
void im2col(const float* x, float* col, int64_t ld, const Dims& d, const Conv2dParams& p,
            int64_t p0, int64_t p1) {
  if (use_phases(d, p)) return im2col_phases(x, col, ld, d, p, p0, p1);
  const bool bulk = p.stride_w == 1 && p.stride_h == 1 && d.Q == d.W;
  for (int64_t c = 0; c < d.Cg; ++c)
    for (int64_t r = 0; r < d.R; ++r)
      for (int64_t s = 0; s < d.S; ++s) {
        float* out = col + ((c * d.R + r) * d.S + s) * ld;
        const int64_t iw0 = s * p.dil_w - p.pad_left;
        int64_t q0, q1;
        q_range(iw0, p.stride_w, d.W, d.Q, q0, q1);
        const auto [ih0, pa, pb] = row_range(r, d, p, p0, p1);
        if (pa > p0) std::memset(out, 0, size_t((pa - p0) * d.Q) * sizeof(float));
        if (pb < p1) std::memset(out + (pb - p0) * d.Q, 0, size_t((p1 - pb) * d.Q) * sizeof(float));
        if (pb == pa) continue;
        if (bulk && q1 > q0) {
          const float* in = x + (c * d.H + pa + ih0) * d.W + iw0;  // row pa, column q = 0
          float* o = out + (pa - p0) * d.Q;
          std::memcpy(o + q0, in + q0, size_t((pb - pa - 1) * d.Q + q1 - q0) * sizeof(float));
          for (int64_t op = pa; op < pb; ++op, o += d.Q) {
            for (int64_t q = 0; q < q0; ++q) o[q] = 0.0f;
            for (int64_t q = q1; q < d.Q; ++q) o[q] = 0.0f;
          }
          continue;
        }
        for (int64_t op = pa; op < pb; ++op) {
          float* o = out + (op - p0) * d.Q;
          const float* in = x + (c * d.H + op * p.stride_h + ih0) * d.W + iw0;
          for (int64_t q = 0; q < q0; ++q) o[q] = 0.0f;
          if (p.stride_w == 1) {
            for (int64_t q = q0; q < q1; ++q) o[q] = in[q];
          } else {
            for (int64_t q = q0; q < q1; ++q) o[q] = in[q * p.stride_w];
          }
          for (int64_t q = std::max(q0, q1); q < d.Q; ++q) o[q] = 0.0f;
        }
      }
}

// dx [Cg, H, W] += one image's columns of col (laid out as im2col's, output rows [p0, p1)) at the
// pixels they were read from. The bulk case zeroes the wrapped-around columns of col first, then
// adds one contiguous range per tap.
void col2im_add(float* col, int64_t ld, float* dx, const Dims& d, const Conv2dParams& p, int64_t p0,
                int64_t p1) {
  if (use_phases(d, p)) return col2im_add_phases(col, ld, dx, d, p, p0, p1);
  const bool bulk = p.stride_w == 1 && p.stride_h == 1 && d.Q == d.W;
  for (int64_t c = 0; c < d.Cg; ++c)
    for (int64_t r = 0; r < d.R; ++r)
      for (int64_t s = 0; s < d.S; ++s) {
        float* in = col + ((c * d.R + r) * d.S + s) * ld;
        const int64_t iw0 = s * p.dil_w - p.pad_left;
        int64_t q0, q1;
        q_range(iw0, p.stride_w, d.W, d.Q, q0, q1);
        const auto [ih0, pa, pb] = row_range(r, d, p, p0, p1);
        if (pb == pa || q1 <= q0) continue;
        if (bulk) {
          float* i = in + (pa - p0) * d.Q;
          for (int64_t op = pa; op < pb; ++op, i += d.Q) {
            for (int64_t q = 0; q < q0; ++q) i[q] = 0.0f;
            for (int64_t q = q1; q < d.Q; ++q) i[q] = 0.0f;
          }
          float* o = dx + (c * d.H + pa + ih0) * d.W + iw0 + q0;
          const float* src = in + (pa - p0) * d.Q + q0;
          const int64_t len = (pb - pa - 1) * d.Q + q1 - q0;
          for (int64_t k = 0; k < len; ++k) o[k] += src[k];
          continue;
        }
        for (int64_t op = pa; op < pb; ++op) {
          const float* i = in + (op - p0) * d.Q;
          float* o = dx + (c * d.H + op * p.stride_h + ih0) * d.W + iw0;
          if (p.stride_w == 1) {
            for (int64_t q = q0; q < q1; ++q) o[q] += i[q];
          } else {
            for (int64_t q = q0; q < q1; ++q) o[q * p.stride_w] += i[q];
          }
        }
      }
}

bool is_pointwise(const Dims& d, const Conv2dParams& p) { return conv2d_pointwise(d.R, d.S, p); }

// How the columns are cut into GEMMs.
// - Large images: chunks of whole output rows of one image, sized so the chunk's column matrix
//   (<= ~512 KiB, >= ~256 columns) stays in the core's L2 between im2col, the GEMM and col2im.
//   A pointwise convolution reads the image itself as the matrix (`direct`).
// - Small images (P*Q < kMinCols / 2, e.g. CRNN's 4x25 or ResNet's 7x7 layers): `images` whole
//   images side by side in one column matrix [Cg*R*S, images*P*Q] (their dy gathered likewise),
//   so the GEMM's column (fwd, bwd_data) or reduction (bwd_filter) extent is ~kMinCols instead
//   of P*Q: per image, sgemm_avx512 would pack all of w for a 100-column product and bwd_filter
//   would stream its whole dw through memory for a reduction of 100 (measured on CRNN's
//   512x4608 layers: ~145 -> ~200 GFLOP/s fwd, ~97 -> ~190 bwd_filter GEMM, same load).
//   Limits: a column matrix of at most 16 MiB per thread; the blocks a multiple of the team size,
//   the images spread evenly over them (conv_cpu::balanced_images).
constexpr int64_t kMinCols = 768;

struct Plan {
  int64_t images = 1;   // images per GEMM
  int64_t rows = 1;     // output rows per chunk (P when images > 1)
  int64_t blocks = 1;   // ceil(N / images): the units of work spread over the threads
  bool direct = false;  // pointwise, one image at a time: no column matrix
};

// `ordered`: the blocks as for one thread, whatever the team (the filter gradient's sums over the
// images then do not depend on the team size). Outputs of at most 4 pixels are grouped as for one
// thread too: a block of them can make a GEMM of N <= 4 columns, which sgemm_avx512 computes by
// its dot-product path (other rounding), so a grouping that followed the team size would change
// the forward's bits with --threads (docs/determinism.md).
constexpr int64_t kGemmSmallN = 4;  // sgemm_avx512's kSmallN

// `copy_input`: a pointwise convolution copies its input into the column matrix all the same
// (the forward's input prologue), so its chunks are sized as for im2col.
Plan plan_of(const Dims& d, const Conv2dParams& p, bool ordered = false, bool copy_input = false) {
  Plan pl;
  const int64_t PQ = d.P * d.Q, crs = d.Cg * d.R * d.S;
  const int nt = ordered || PQ <= kGemmSmallN || omp_in_parallel() ? 1 : omp_get_max_threads();
  const bool small = 2 * PQ < kMinCols;
  const int64_t fit = std::max<int64_t>(1, (int64_t(4) << 20) / std::max<int64_t>(1, crs * PQ));
  if (small) {
    const int64_t want = (kMinCols + PQ - 1) / PQ;
    pl.images = conv_cpu::balanced_images(d.N, std::min(want, fit), nt);
  }
  pl.direct = pl.images == 1 && is_pointwise(d, p) && !copy_input;
  // Small images take whole images even alone in a block (when their column matrix fits): the
  // input gradient's col2im adds chunk by chunk, so rows cut by the grouping, which follows the
  // team size, would change dx's last bits with --threads (docs/determinism.md).
  if (pl.images > 1 || pl.direct || (small && crs * PQ <= (int64_t(4) << 20))) {
    pl.rows = d.P;
  } else {
    const int64_t target =
        std::max<int64_t>(256, (int64_t(512) << 10) / (4 * std::max<int64_t>(1, crs)));
    pl.rows = std::max<int64_t>(1, std::min<int64_t>(d.P, target / std::max<int64_t>(1, d.Q)));
  }
  pl.blocks = (d.N + pl.images - 1) / pl.images;
  return pl;
}

// row += res, then relu when asked (x < 0 ? 0 : x: NaN stays NaN).
void add_residual(float* row, const float* res, bool relu, int64_t cols) {
  for (int64_t j = 0; j < cols; ++j) {
    const float v = row[j] + res[j];
    row[j] = relu && v < 0.0f ? 0.0f : v;
  }
}

// Copies rows of `cols` floats from each image's slice of an NCHW tensor (row k of image i at
// t + i * img_stride + k * row_stride) into a [rows, images * cols] matrix (image i's columns at
// i * cols): the filter gradient's dy as the reduction side of its GEMM.
void gather_rows(const float* t, int64_t img_stride, int64_t row_stride, int64_t images,
                 int64_t rows, int64_t cols, float* m) {
  const int64_t ld = images * cols;
  for (int64_t k = 0; k < rows; ++k)
    for (int64_t i = 0; i < images; ++i)
      std::memcpy(m + k * ld + i * cols, t + i * img_stride + k * row_stride,
                  size_t(cols) * sizeof(float));
}
// The input prologue's copy of output rows [p0, p0 + cols / Q) of one image's channels
// x [Cg, H*W] (a pointwise convolution: output pixels are input pixels) into its columns of col
// (row c at col + c * ld): relu(scale[c] * x + shift[c]), in float as the GEMM will read it.
void prologue_copy(const float* x, float* col, int64_t ld, int64_t Cg, int64_t HW, int64_t first,
                   int64_t cols, const float* scale, const float* shift, bool relu) {
  for (int64_t c = 0; c < Cg; ++c) {
    const float* src = x + c * HW + first;
    float* dst = col + c * ld;
    const float sc = scale[c], sf = shift[c];
    if (relu) {
      for (int64_t j = 0; j < cols; ++j) {
        const float v = src[j] * sc + sf;
        dst[j] = v < 0.0f ? 0.0f : v;  // NaN stays NaN
      }
    } else {
      for (int64_t j = 0; j < cols; ++j) dst[j] = src[j] * sc + sf;
    }
  }
}

void conv2d_fwd_cpu_im2col(const Conv2dFwdArgs& a) {
  const Dims d = dims_fwd(a);
  const Conv2dParams& p = a.p;
  const int64_t PQ = d.P * d.Q, HW = d.H * d.W, CRS = d.Cg * d.R * d.S;
  const int64_t xs = x_image_stride(a.x, d);
  const float* x = a.x.data<float>();
  const float* w = a.w.data<float>();
  const float* bias = a.bias.defined() ? a.bias.data<float>() : nullptr;
  const float* res = a.residual.defined() ? a.residual.data<float>() : nullptr;
  // The input prologue (pointwise only, im2col_input_reason): the chunk's input transformed into
  // col, where the GEMM then reads it from the L2 (the batch norm's pass wrote it to memory and
  // the GEMM read it back: DenseNet's norm1 -> conv1).
  const bool pro = a.has_prologue();
  AIM_CHECK(!pro || a.in_scale.dtype() == DType::f32, "[conv2d_fwd] cpu.im2col: in_scale and ",
            "in_shift must be f32, got ", dtype_name(a.in_scale.dtype()));
  const float* in_scale = pro ? a.in_scale.data<float>() : nullptr;
  const float* in_shift = pro ? a.in_shift.data<float>() : nullptr;
  float* y = a.y.data<float>();
  const Plan pl = plan_of(d, p, false, pro);
  // An output beyond the L3 that no pass reads back: the GEMMs stream it to memory (sgemm_avx512's
  // stream_c). The bias and relu are applied in the GEMM's registers before its one store of each
  // tile (GemmEpilogue); a residual is added by a pass over the chunk after the product (read row
  // by row, which the prefetchers follow: added in the GEMM's tiles, 14 rows far apart at a time,
  // the shortcut's reads waited on memory and a 128 -> 512 convolution at 28x28 ran ~20% slower).
  const bool stream = !res && beyond_l3(a.y.nbytes());
  // A pointwise convolution reads the images themselves as its matrix (one image, or several
  // side by side as the GEMM's column blocks: whole images, so rows == P).
  const bool pointwise = is_pointwise(d, p) && !pro;
  for_blocks(pl.blocks, [&](int64_t b, int) {
    const int64_t n0 = b * pl.images, nb = std::min(pl.images, d.N - n0);
    float* col = pointwise ? nullptr : thread_buffer(0, size_t(CRS * nb * pl.rows * d.Q));
    for (int64_t g = 0; g < d.G; ++g) {
      const float* xg = x + n0 * xs + g * d.Cg * HW;
      float* yg = y + (n0 * d.K + g * d.Kg) * PQ;
      const float* bg = bias ? bias + g * d.Kg : nullptr;
      for (int64_t p0 = 0; p0 < d.P; p0 += pl.rows) {
        const int64_t p1 = std::min(d.P, p0 + pl.rows), cols = (p1 - p0) * d.Q, ld = nb * cols;
        if (pro)
          for (int64_t i = 0; i < nb; ++i)
            prologue_copy(xg + i * xs, col + i * cols, ld, d.Cg, HW, p0 * d.Q, cols,
                          in_scale + g * d.Cg, in_shift + g * d.Cg, a.in_relu);
        else if (!pointwise)
          for (int64_t i = 0; i < nb; ++i) im2col(xg + i * xs, col + i * cols, ld, d, p, p0, p1);
        // y_g[:, chunk] [Kg, ld] = w_g [Kg, CRS] . col [CRS, ld]; several images: each one's
        // columns of col (or its own plane of x) and of y are a column block of the product.
        // y = (product + bias) (+ residual), then relu: the bias (per output channel, a row of
        // the product) in the GEMM, and the relu there too unless a residual comes between.
        const GemmColumnBlocks blocks{nb > 1 ? cols : 0, pointwise ? xs : 0, d.K * PQ};
        gemm(false, false, d.Kg, ld, CRS, w + g * d.Kg * CRS, CRS, pointwise ? xg : col,
             pointwise ? HW : ld, 0.0f, yg + p0 * d.Q, PQ, stream, blocks,
             GemmEpilogue{bg, a.relu && !res});
        if (res)  // the chunk just computed, while it is in cache
          for (int64_t i = 0; i < nb; ++i)
            for (int64_t k = 0; k < d.Kg; ++k) {
              float* row = yg + i * d.K * PQ + k * PQ + p0 * d.Q;
              add_residual(row, res + (row - y), a.relu, cols);
            }
      }
    }
  });
}

void conv2d_bwd_data_cpu_im2col(const Conv2dBwdDataArgs& a) {
  const Dims d = dims_bwd_data(a);
  const Conv2dParams& p = a.p;
  const int64_t PQ = d.P * d.Q, HW = d.H * d.W, CRS = d.Cg * d.R * d.S;
  const float* dy = a.dy.data<float>();
  const float* w = a.w.data<float>();
  float* dx = a.dx.data<float>();
  const Plan pl = plan_of(d, p);
  const bool stream = beyond_l3(a.dx.nbytes());
  // Several images: each one's dy (and, pointwise, its dx) a column block of the product.
  const bool pointwise = is_pointwise(d, p);
  for_blocks(pl.blocks, [&](int64_t b, int) {
    const int64_t n0 = b * pl.images, nb = std::min(pl.images, d.N - n0);
    float* col = pointwise ? nullptr : thread_buffer(0, size_t(CRS * nb * pl.rows * d.Q));
    for (int64_t g = 0; g < d.G; ++g) {
      const float* dyg = dy + (n0 * d.K + g * d.Kg) * PQ;
      float* dxg = dx + (n0 * d.C + g * d.Cg) * HW;
      if (pointwise) {  // dx_g [Cg, HW] = w_g^T [Cg, Kg] . dy_g [Kg, HW] (rows == P)
        const GemmColumnBlocks blocks{nb > 1 ? PQ : 0, d.K * PQ, d.C * HW};
        gemm(true, false, CRS, nb * PQ, d.Kg, w + g * d.Kg * CRS, CRS, dyg, PQ, 0.0f, dxg, PQ,
             stream, blocks);
        continue;
      }
      for (int64_t i = 0; i < nb; ++i)
        std::memset(dxg + i * d.C * HW, 0, size_t(d.Cg * HW) * sizeof(float));
      for (int64_t p0 = 0; p0 < d.P; p0 += pl.rows) {
        const int64_t p1 = std::min(d.P, p0 + pl.rows), cols = (p1 - p0) * d.Q, ld = nb * cols;
        // col [CRS, ld] = w_g^T [CRS, Kg] . dy_g[:, chunk] [Kg, ld]
        const GemmColumnBlocks blocks{nb > 1 ? cols : 0, d.K * PQ, 0};
        gemm(true, false, CRS, ld, d.Kg, w + g * d.Kg * CRS, CRS, dyg + p0 * d.Q, PQ, 0.0f, col, ld,
             false, blocks);
        for (int64_t i = 0; i < nb; ++i)
          col2im_add(col + i * cols, ld, dxg + i * d.C * HW, d, p, p0, p1);
      }
    }
  });
}

// ordered = false (cpu.im2col): blocks over the team with a partial dw per thread, added in thread
// order: the sums depend on the team size. ordered = true (cpu.im2col_ordered, --deterministic):
// the one-thread plan, blocks one after another into dw with each GEMM on the team: the same bits
// at any team size (and the same as cpu.im2col at one thread).
void bwd_filter_im2col(const Conv2dBwdFilterArgs& a, bool ordered) {
  const Dims d = dims_bwd_filter(a);
  const Conv2dParams& p = a.p;
  const int64_t PQ = d.P * d.Q, HW = d.H * d.W, CRS = d.Cg * d.R * d.S;
  const float* dy = a.dy.data<float>();
  const float* x = a.x.data<float>();
  float* dw = a.dw.data<float>();
  const Plan pl = plan_of(d, p, ordered);
  const bool par = blocks_parallel(pl.blocks, ordered);
  const int nt = par ? omp_get_max_threads() : 1;
  const int64_t wsize = d.K * CRS;
  // In parallel each thread sums its images into its own partial dw, added in thread order. A
  // thread's first block writes its partial (GEMM beta 0 on its first rows), later ones add: no
  // zeroing pass and no read of zeros.
  float* part = nullptr;
  std::vector<char> started(size_t(nt), 0);
  if (par) {
    thread_local std::vector<float> partials;
    if (partials.size() < size_t(nt * wsize)) partials.resize(size_t(nt * wsize));
    part = partials.data();
  }
  for_blocks(pl.blocks, ordered, [&](int64_t b, int tid) {
    const int64_t n0 = b * pl.images, nb = std::min(pl.images, d.N - n0);
    float* col = pl.direct ? nullptr : thread_buffer(0, size_t(CRS * nb * pl.rows * d.Q));
    float* dyb = nb > 1 ? thread_buffer(1, size_t(d.Kg * nb * PQ)) : nullptr;
    float* acc = par ? part + tid * wsize : dw;
    for (int64_t g = 0; g < d.G; ++g) {
      const float* xg = x + (n0 * d.C + g * d.Cg) * HW;
      const float* dyg = dy + (n0 * d.K + g * d.Kg) * PQ;
      for (int64_t p0 = 0; p0 < d.P; p0 += pl.rows) {
        const int64_t p1 = std::min(d.P, p0 + pl.rows), cols = (p1 - p0) * d.Q, ld = nb * cols;
        if (!pl.direct)
          for (int64_t i = 0; i < nb; ++i)
            im2col(xg + i * d.C * HW, col + i * cols, ld, d, p, p0, p1);
        const float* A = dyg + p0 * d.Q;
        int64_t lda = PQ;
        if (nb > 1) {
          gather_rows(A, d.K * PQ, PQ, nb, d.Kg, cols, dyb);
          A = dyb;
          lda = ld;
        }
        // dw_g [Kg, CRS] += dy_g[:, chunk] [Kg, ld] . col^T [ld, CRS]
        const float beta = !par || started[size_t(tid)] || p0 > 0 ? 1.0f : 0.0f;
        gemm(false, true, d.Kg, CRS, ld, A, lda, pl.direct ? xg + p0 * d.Q : col,
             pl.direct ? PQ : ld, beta, acc + g * d.Kg * CRS, CRS);
      }
    }
    started[size_t(tid)] = 1;
  });
  if (par) {
    // dw[i] + partial 0 + partial 1 + ..., in that order for every i (the bits do not depend on
    // how the elements are split over the threads); the passes over the team.
    for (int t = 0; t < nt; ++t) {
      if (!started[size_t(t)]) continue;
      const float* src = part + t * wsize;
#pragma omp parallel for simd schedule(static) if (wsize >= (int64_t(1) << 16))
      for (int64_t i = 0; i < wsize; ++i) dw[i] += src[i];
    }
  }
  if (a.dbias.defined()) conv2d_bias_grad_cpu(a.dy, a.dbias);
}

void conv2d_bwd_filter_cpu_im2col(const Conv2dBwdFilterArgs& a) { bwd_filter_im2col(a, false); }
void conv2d_bwd_filter_cpu_im2col_ordered(const Conv2dBwdFilterArgs& a) {
  bwd_filter_im2col(a, true);
}

}  // namespace

void conv2d_bias_grad_cpu(const Tensor& dy_t, const Tensor& dbias) {
  // Each image's plane summed in 16 interleaved float partial sums (the loop vectorises; one
  // running float sum was bound by the add latency: 1.8 ms of a 3.7 ms filter gradient of
  // 16x64x56x56), the planes' sums added in double. Channels spread over the threads, each
  // channel's sum in one fixed order: the same bits at any team size.
  const int64_t N = dy_t.size(0), K = dy_t.size(1), PQ = dy_t.size(2) * dy_t.size(3);
  const float* dy = dy_t.data<float>();
  float* db = dbias.data<float>();
  constexpr int64_t L = 16;
#pragma omp parallel for schedule(static) if (N * K * PQ > (int64_t(1) << 16))
  for (int64_t k = 0; k < K; ++k) {
    double s = 0.0;  // N * PQ terms: per-image float sums, added in double
    for (int64_t n = 0; n < N; ++n) {
      const float* row = dy + (n * K + k) * PQ;
      float part[L] = {};
      int64_t i = 0;
      for (; i + L <= PQ; i += L)
        for (int64_t j = 0; j < L; ++j) part[j] += row[i + j];
      float rs = 0.0f;
      for (int64_t j = 0; j < L; ++j) rs += part[j];
      for (; i < PQ; ++i) rs += row[i];
      s += double(rs);
    }
    db[k] = float(double(db[k]) + s);
  }
}

namespace {

// ---- cpu.widen --------------------------------------------------------------------------------
// f16/bf16: every tensor widened to f32, the f32 algorithm the default selection takes for the
// shape (cpu.winograd4 / cpu.winograd for 3x3 and cpu.winograd_5x5 for 5x5 stride-1 convolutions
// with >= 16 channels, else cpu.im2col), the outputs rounded once to 16 bits (dw and dbias
// accumulate in f32 before their rounding): the rounding points of a tensor-core convolution with
// f32 accumulation, at the f32 path's speed.

// Runs the f32 algorithm for conv2d_winograd_tile's answer: F(4x4, 3x3), F(2x2, 3x3),
// F(2x2, 5x5) or im2col.
template <class Args>
void run_f32_algorithm(int tile, const Args& a, void (*f4)(const Args&), void (*f2)(const Args&),
                       void (*f5x5)(const Args&), void (*im2col)(const Args&)) {
  (tile == 4 ? f4 : tile == 2 ? f2 : tile == kWinograd5x5 ? f5x5 : im2col)(a);
}

Tensor widened(const Tensor& t) { return t.defined() ? t.to(DType::f32) : Tensor(); }

// Images per chunk for cpu.im2col in the directions that treat images independently (forward,
// input gradient): a chunk's f32 copies (~8 MiB) stay in the L3 between their widening, the GEMMs
// and the rounding of the output, where a whole batch's went out to memory and back (ResNet-50's
// 1x1 256 -> 64 at 56x56, batch 16: the f32 input alone is 51 MB; 8.6 -> 6.9 ms, f32 5.2 ms).
// A multiple of the thread count (im2col splits images over the threads), chunks of equal size.
// The Winograd variants run the whole batch: they work through blocks of tiles already, and
// smaller calls measured slower (VGG's 64 -> 64 at 56x56: 7.2 -> 11.1 ms in chunks).
int64_t widen_chunk_images(int64_t N, int64_t floats_per_image) {
  constexpr int64_t kTargetFloats = int64_t(2) << 20;  // 8 MiB
  const int64_t nt = std::max(1, omp_get_max_threads());
  const int64_t fit = kTargetFloats / std::max<int64_t>(floats_per_image, 1) / nt * nt;
  if (N <= std::max(fit, nt)) return std::max<int64_t>(N, 1);
  const int64_t chunks = (N + std::max(fit, nt) - 1) / std::max(fit, nt);
  return (N + chunks - 1) / chunks;
}

Tensor images(const Tensor& t, int64_t n0, int64_t n) {
  return t.defined() ? t.narrow(0, n0, n) : Tensor();
}

// f(n0, n) over the chunks of images: the whole batch at once for Winograd (any tile), chunks
// of widen_chunk_images for im2col; `floats` is the f32 size of the chunked tensors together.
template <class F>
void for_image_chunks(int tile, int64_t N, int64_t floats, F f) {
  const int64_t one = std::max<int64_t>(N, 1);
  const int64_t step = tile ? one : widen_chunk_images(N, floats / one);
  for (int64_t n0 = 0; n0 < N; n0 += step) f(n0, std::min(step, N - n0));
}

void conv2d_fwd_cpu_widen(const Conv2dFwdArgs& a) {
  const Tensor wf = widened(a.w), bf = widened(a.bias);
  const int tile = conv2d_winograd_tile(wf, a.p, a.y.size(0), a.y.size(2), a.y.size(3));
  for_image_chunks(tile, a.x.size(0), a.x.numel() + a.y.numel(), [&](int64_t n0, int64_t n) {
    Conv2dFwdArgs w = a;
    w.x = widened(images(a.x, n0, n));
    w.w = wf;
    w.bias = bf;
    w.residual = widened(images(a.residual, n0, n));
    w.y = Tensor::empty(images(a.y, n0, n).sizes(), DType::f32);
    run_f32_algorithm(tile, w, conv2d_fwd_cpu_winograd4, conv2d_fwd_cpu_winograd,
                      conv2d_fwd_cpu_winograd5x5, conv2d_fwd_cpu_im2col);
    images(a.y, n0, n).copy_(w.y);
  });
}

void conv2d_bwd_data_cpu_widen(const Conv2dBwdDataArgs& a) {
  const Tensor wf = widened(a.w);
  const int tile = conv2d_winograd_tile(wf, a.p, a.dy.size(0), a.dy.size(2), a.dy.size(3));
  for_image_chunks(tile, a.dy.size(0), a.dy.numel() + a.dx.numel(), [&](int64_t n0, int64_t n) {
    Conv2dBwdDataArgs w = a;
    w.dy = widened(images(a.dy, n0, n));
    w.w = wf;
    w.dx = Tensor::empty(images(a.dx, n0, n).sizes(), DType::f32);
    run_f32_algorithm(tile, w, conv2d_bwd_data_cpu_winograd4, conv2d_bwd_data_cpu_winograd,
                      conv2d_bwd_data_cpu_winograd5x5, conv2d_bwd_data_cpu_im2col);
    images(a.dx, n0, n).copy_(w.dx);
  });
}

void bwd_filter_widen(const Conv2dBwdFilterArgs& a, bool ordered) {
  Conv2dBwdFilterArgs w = a;
  w.dy = widened(a.dy);
  w.x = widened(a.x);
  w.dw = widened(a.dw);
  w.dbias = widened(a.dbias);
  const int tile = conv2d_winograd_tile(w.dw, w.p, w.dy.size(0), w.dy.size(2), w.dy.size(3));
  if (ordered)
    run_f32_algorithm(
        tile, w, conv2d_bwd_filter_cpu_winograd4_ordered, conv2d_bwd_filter_cpu_winograd_ordered,
        conv2d_bwd_filter_cpu_winograd5x5_ordered, conv2d_bwd_filter_cpu_im2col_ordered);
  else
    run_f32_algorithm(tile, w, conv2d_bwd_filter_cpu_winograd4, conv2d_bwd_filter_cpu_winograd,
                      conv2d_bwd_filter_cpu_winograd5x5, conv2d_bwd_filter_cpu_im2col);
  a.dw.copy_(w.dw);
  if (a.dbias.defined()) a.dbias.copy_(w.dbias);
}
void conv2d_bwd_filter_cpu_widen(const Conv2dBwdFilterArgs& a) { bwd_filter_widen(a, false); }
void conv2d_bwd_filter_cpu_widen_ordered(const Conv2dBwdFilterArgs& a) {
  bwd_filter_widen(a, true);
}

std::string im2col_supports_dims(const Dims& d) {
  if (!have_fast_gemm()) return "needs AVX-512 or an OpenBLAS build for its GEMM";
  (void)d;
  return "";
}

// The forward's input prologue (Conv2dFwdArgs): cpu.im2col and cpu.widen take it for pointwise
// convolutions (copied into the column matrix, prologue_copy), the Winograd variants not at all.
std::string im2col_input_reason(const Conv2dFwdArgs& a, const Dims& d) {
  if (a.has_prologue() && !is_pointwise(d, a.p))
    return "takes an input prologue only for a pointwise convolution (1x1, stride 1, unpadded)";
  return "";
}
std::string winograd_input_reason(const Conv2dFwdArgs& a) { return conv2d_fwd_plain_reason(a); }
template <class Args>
std::string im2col_input_reason(const Args&, const Dims&) {
  return "";
}
template <class Args>
std::string winograd_input_reason(const Args&) {
  return "";
}

std::vector<DType> float_dtypes() { return {DType::f32, DType::f64, DType::f16, DType::bf16}; }

}  // namespace

void conv2d_fwd(const Conv2dFwdArgs& a) { AIM_DISPATCH_OP(Conv2dFwdArgs, "conv2d_fwd", a); }
void conv2d_bwd_data(const Conv2dBwdDataArgs& a) {
  AIM_DISPATCH_OP(Conv2dBwdDataArgs, "conv2d_bwd_data", a);
}
void conv2d_bwd_filter(const Conv2dBwdFilterArgs& a) {
  AIM_DISPATCH_OP(Conv2dBwdFilterArgs, "conv2d_bwd_filter", a);
}

// The default CPU f32 variant per call: cpu.winograd4 or cpu.winograd where Winograd is preferred
// (3x3 stride 1, >= 16 channels each way; F(4x4) where conv2d_winograd_tile finds it wins),
// cpu.winograd_5x5 for such 5x5 convolutions, else the registered default (cpu.im2col).
std::string winograd_rule(const Tensor& t, const Tensor& w, const Conv2dParams& p,
                          const Tensor& out) {
  if (t.dtype() != DType::f32 || w.dim() != 4 || out.dim() != 4) return "";
  switch (conv2d_winograd_tile(w, p, out.size(0), out.size(2), out.size(3))) {
    case 4:
      return "cpu.winograd4";
    case 2:
      return "cpu.winograd";
    case kWinograd5x5:
      return "cpu.winograd_5x5";
    default:
      return "";
  }
}

namespace {

// The three conv ops register the same CPU variants, defaults and tests; what differs per op is
// below: its functions, its argument check (dims) and the tensors Winograd's rule and supports
// look at.
template <class Args>
struct ConvCpuOp {
  const char* name;
  const char* description;
  void (*ref)(const Args&);
  void (*im2col)(const Args&);
  void (*widen)(const Args&);
  void (*winograd)(const Args&);
  void (*winograd4)(const Args&);
  void (*winograd5x5)(const Args&);
  Dims (*dims)(const Args&);
  const Tensor& (*weight)(const Args&);  // w, or dw for the filter gradient
  std::string (*rule)(const Args&);      // the Winograd variant where one wins
  Cost (*cost)(const Args&);
  TestCase (*make_case)(const TestShape&, DType, uint64_t);
};

template <class Args>
void register_conv_cpu_op(Registry& r, const ConvCpuOp<Args>& o) {
  const bool fast = have_fast_gemm();
  auto& op = r.op<Args>(o.name);
  op.description = o.description;
  auto im2col_ok = [dims = o.dims](const Args& a) {
    const Dims d = dims(a);
    const std::string why = im2col_supports_dims(d);
    return why.empty() ? im2col_input_reason(a, d) : why;
  };
  op.add({"cpu.ref", Backend::CPU, Provider::Own, o.ref, float_dtypes()});
  op.add({"cpu.im2col", Backend::CPU, Provider::Own, o.im2col, {DType::f32}, im2col_ok});
  op.add({"cpu.widen", Backend::CPU, Provider::Own, o.widen, {DType::f16, DType::bf16}, im2col_ok});
  op.add({"cpu.winograd",
          Backend::CPU,
          Provider::Own,
          o.winograd,
          {DType::f32},
          [dims = o.dims, weight = o.weight](const Args& a) {
            dims(a);
            const std::string why = winograd_input_reason(a);
            return why.empty() ? conv2d_winograd_supports(weight(a), a.p) : why;
          }});
  op.add({"cpu.winograd4",
          Backend::CPU,
          Provider::Own,
          o.winograd4,
          {DType::f32},
          [dims = o.dims, weight = o.weight](const Args& a) {
            dims(a);
            const std::string why = winograd_input_reason(a);
            return why.empty() ? conv2d_winograd4_supports(weight(a), a.p) : why;
          }});
  op.add({"cpu.winograd_5x5",
          Backend::CPU,
          Provider::Own,
          o.winograd5x5,
          {DType::f32},
          [dims = o.dims, weight = o.weight](const Args& a) {
            dims(a);
            const std::string why = winograd_input_reason(a);
            return why.empty() ? conv2d_winograd5x5_supports(weight(a), a.p) : why;
          }});
  op.set_default(Backend::CPU, "cpu.ref");
  if (fast) op.set_default(Backend::CPU, "cpu.im2col", {DType::f32});
  if (cpu_has_avx512()) op.set_default_rule(Backend::CPU, o.rule);
  if (fast) op.set_default(Backend::CPU, "cpu.widen", {DType::f16, DType::bf16});
  op.set_cost(o.cost);
  op.make_case = o.make_case;
  op.set_shape_fields(conv_cpu::conv2d_shape_fields());
  op.add_test_shapes(conv_cpu::conv2d_test_shapes());
  op.tolerance = conv_cpu::conv2d_tolerance;
  // F(4x4, 3x3) rounds ~10x more than F(2x2) (kernels/conv/README.md).
  op.variant_tolerance["cpu.winograd4"] = conv_cpu::conv2d_winograd4_tolerance;
  op.variant_tolerance["cpu.winograd_5x5"] = conv_cpu::conv2d_winograd4_tolerance;
  op.small_enough_for_simt = conv_cpu::conv2d_simt_small;
}

}  // namespace

void register_conv2d_cpu(Registry& r) {
  register_conv_cpu_op<Conv2dFwdArgs>(
      r, {"conv2d_fwd", "2-D convolution, NCHW, groups/stride/dilation/asymmetric pads (F.conv2d)",
          conv2d_fwd_cpu_ref, conv2d_fwd_cpu_im2col, conv2d_fwd_cpu_widen, conv2d_fwd_cpu_winograd,
          conv2d_fwd_cpu_winograd4, conv2d_fwd_cpu_winograd5x5, dims_fwd,
          [](const Conv2dFwdArgs& a) -> const Tensor& { return a.w; },
          [](const Conv2dFwdArgs& a) { return winograd_rule(a.x, a.w, a.p, a.y); }, conv2d_fwd_cost,
          conv_cpu::make_conv2d_fwd_case});
  register_conv_cpu_op<Conv2dBwdDataArgs>(
      r,
      {"conv2d_bwd_data", "conv2d input gradient dx (=); also conv_transpose2d forward",
       conv2d_bwd_data_cpu_ref, conv2d_bwd_data_cpu_im2col, conv2d_bwd_data_cpu_widen,
       conv2d_bwd_data_cpu_winograd, conv2d_bwd_data_cpu_winograd4, conv2d_bwd_data_cpu_winograd5x5,
       dims_bwd_data, [](const Conv2dBwdDataArgs& a) -> const Tensor& { return a.w; },
       [](const Conv2dBwdDataArgs& a) { return winograd_rule(a.dy, a.w, a.p, a.dy); },
       conv2d_bwd_data_cost, conv_cpu::make_conv2d_bwd_data_case});
  register_conv_cpu_op<Conv2dBwdFilterArgs>(
      r,
      {"conv2d_bwd_filter", "conv2d weight gradient dw and dbias (+=)", conv2d_bwd_filter_cpu_ref,
       conv2d_bwd_filter_cpu_im2col, conv2d_bwd_filter_cpu_widen, conv2d_bwd_filter_cpu_winograd,
       conv2d_bwd_filter_cpu_winograd4, conv2d_bwd_filter_cpu_winograd5x5, dims_bwd_filter,
       [](const Conv2dBwdFilterArgs& a) -> const Tensor& { return a.dw; },
       [](const Conv2dBwdFilterArgs& a) { return winograd_rule(a.x, a.dw, a.p, a.dy); },
       conv2d_bwd_filter_cost, conv_cpu::make_conv2d_bwd_filter_case});
  // The filter gradient sums over the images; its fast variants give each thread a partial sum
  // (and group the images for the team size), so the last bits follow --threads. The *_ordered
  // variants run the one-thread plan on any team: --deterministic selects them.
  auto& bf = r.op<Conv2dBwdFilterArgs>("conv2d_bwd_filter");
  const auto bf_dims = [](const Conv2dBwdFilterArgs& a) {
    return im2col_supports_dims(dims_bwd_filter(a));
  };
  bf.add({"cpu.im2col_ordered",
          Backend::CPU,
          Provider::Own,
          conv2d_bwd_filter_cpu_im2col_ordered,
          {DType::f32},
          bf_dims});
  bf.add({"cpu.widen_ordered",
          Backend::CPU,
          Provider::Own,
          conv2d_bwd_filter_cpu_widen_ordered,
          {DType::f16, DType::bf16},
          bf_dims});
  bf.add({"cpu.winograd_ordered",
          Backend::CPU,
          Provider::Own,
          conv2d_bwd_filter_cpu_winograd_ordered,
          {DType::f32},
          [](const Conv2dBwdFilterArgs& a) {
            dims_bwd_filter(a);
            return conv2d_winograd_supports(a.dw, a.p);
          }});
  bf.add({"cpu.winograd4_ordered",
          Backend::CPU,
          Provider::Own,
          conv2d_bwd_filter_cpu_winograd4_ordered,
          {DType::f32},
          [](const Conv2dBwdFilterArgs& a) {
            dims_bwd_filter(a);
            return conv2d_winograd4_supports(a.dw, a.p);
          }});
  bf.add({"cpu.winograd_5x5_ordered",
          Backend::CPU,
          Provider::Own,
          conv2d_bwd_filter_cpu_winograd5x5_ordered,
          {DType::f32},
          [](const Conv2dBwdFilterArgs& a) {
            dims_bwd_filter(a);
            return conv2d_winograd5x5_supports(a.dw, a.p);
          }});
  for (const char* v :
       {"cpu.winograd4", "cpu.winograd4_ordered", "cpu.winograd_5x5", "cpu.winograd_5x5_ordered"})
    bf.variant_tolerance[v] = conv_cpu::conv2d_winograd_filter_tolerance;
  const char* why = "per-thread partial sums over the images: the last bits depend on --threads";
  bf.set_nondeterministic("cpu.im2col", "cpu.im2col_ordered", why);
  bf.set_nondeterministic("cpu.widen", "cpu.widen_ordered", why);
  bf.set_nondeterministic("cpu.winograd", "cpu.winograd_ordered", why);
  bf.set_nondeterministic("cpu.winograd4", "cpu.winograd4_ordered", why);
  bf.set_nondeterministic("cpu.winograd_5x5", "cpu.winograd_5x5_ordered", why);
}

}  // namespace aim::kernels
