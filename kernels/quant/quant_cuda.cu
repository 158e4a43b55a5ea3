// INT8 quantisation, qlinear and qconv2d: own CUDA variants (convention: quant.h; math:
// README.md). Every output element goes through quantize_value() / qepilogue_value(), the same
// fp32 operations as cpu.ref, so the variants agree with it bit for bit.
// cuda.elementwise (quantize, dequantize): one thread per element, grid-stride; per-channel
//   scales indexed by (i / inner) % C. Bandwidth bound.
// cuda.channel_block (quantize_per_channel): one 256-thread block per channel computes the
//   absmax over the channel's outer*inner elements (fixed-order block reduction, a non-finite
//   value poisons the scale with NaN), writes the scale; a second, element-wise kernel
//   quantises. The host then reads the scales back (one synchronisation: weights are quantised
//   once) and reports a non-finite channel by its index.
// cuda.dp4a (qlinear; qconv2d as an implicit GEMM): one tiled int8 GEMM kernel, rows x cols of
//   int32 accumulators over a reduction of `red` int8 values:
//     qlinear  y [M, N]          = x [M, K] . w [N, K]^T                 (rows M, cols N)
//     qconv2d  y_g [K/G, N*P*Q]  = w_g [K/G, C/G*R*S] . im2col(x)_g^T    (per group g)
//   Thread mapping: 256 threads per 64x64 output tile, 4x4 accumulators per thread (rows
//   ty+16i, columns tx+16j), the reduction in steps of 32 int8 values through two shared tiles
//   As/Bs [8 words][64 (+1)] of packed 4-byte words; each thread loads 2 words of each per step
//   (8 consecutive threads read one 32-byte run of a row: coalesced for row-major operands) and
//   does 8 x 16 `__dp4a` (4 int8 products + int32 add). The B gather of qconv2d decodes its
//   output pixel once per thread and each k index (c, r, s) with divisions; out-of-image taps
//   read 0. Word loads are single 32-bit loads when the row length is a multiple of 4 (rows
//   aligned), else four byte loads. Epilogue per output: the fused scales/bias/ReLU and
//   optional requantisation, then the store (consecutive threads write consecutive columns).
//   Memory traffic: each operand element read once per 64-wide tile of the other operand
//   (through L1/L2); y written once. Expected bound: the dp4a issue rate and the byte gathers
//   (no tensor cores: IMMA/mma.s8 is the next step; cuda.cublaslt is the fast path on sm_90).
//   Limits: every tensor under 2^31 elements (32-bit indices); row tiles <= 65535 (grid.y);
//   groups <= 65535 (grid.z). `__dp4a` is a device intrinsic on sm_61+ and a plain C++
//   function in the SIMT emulator (kernels/simt/simt.h), so the same code runs in both.
// qlinear_epilogue_i32 (helper of cuda.cublaslt, CUDA builds only): one thread per output,
//   reads the int32 product of cuBLASLt and applies the same epilogue. Bandwidth bound.
#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "kernels/cuda_common.h"
#include "kernels/quant/quant.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kThreads = 256;

std::string sh(const Tensor& t) { return t.defined() ? to_string(t.sizes()) : "undefined"; }

// ---- quantize / dequantize / quantize_per_channel --------------------------------------------

template <class T>
__global__ void quantize_kernel(const T* x, int8_t* q, int64_t n, float scale, const float* scales,
                                int64_t C, int64_t inner) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float s = scales ? scales[(i / inner) % C] : scale;
    q[i] = quantize_value(to_f32(x[i]), s);
  }
}

__global__ void dequantize_kernel(const int8_t* q, float* y, int64_t n, float scale,
                                  const float* scales, int64_t C, int64_t inner) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float s = scales ? scales[(i / inner) % C] : scale;
    y[i] = float(q[i]) * s;
  }
}

// outer x C x inner around the channel axis (axis already normalised by the caller).
void split(const Tensor& t, int64_t axis, int64_t& outer, int64_t& C, int64_t& inner) {
  outer = 1;
  inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= t.size(i);
  C = t.size(axis);
  for (int64_t i = axis + 1; i < t.dim(); ++i) inner *= t.size(i);
}
int64_t axis_of(int64_t axis, int64_t dim) { return axis < 0 ? axis + dim : axis; }

void quantize_cuda_elementwise(const QuantizeArgs& a) {
  check_quantize_args(a);
  const int64_t n = a.x.numel();
  if (n == 0) return;
  int64_t outer = 1, C = 1, inner = 1;
  if (a.scales.defined()) split(a.x, axis_of(a.axis, a.x.dim()), outer, C, inner);
  const float* scales = a.scales.defined() ? a.scales.data<float>() : nullptr;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, {
    AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream_for(a.x.device()), quantize_kernel<T>)
    (static_cast<const T*>(a.x.raw_data()), a.q.data<int8_t>(), n, a.scale, scales, C, inner);
  });
  AIM_CHECK_LAUNCH();
}

void dequantize_cuda_elementwise(const DequantizeArgs& a) {
  check_dequantize_args(a);
  const int64_t n = a.q.numel();
  if (n == 0) return;
  int64_t outer = 1, C = 1, inner = 1;
  if (a.scales.defined()) split(a.q, axis_of(a.axis, a.q.dim()), outer, C, inner);
  const float* scales = a.scales.defined() ? a.scales.data<float>() : nullptr;
  AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream_for(a.q.device()), dequantize_kernel)
  (a.q.data<int8_t>(), a.y.data<float>(), n, a.scale, scales, C, inner);
  AIM_CHECK_LAUNCH();
}

// One block per channel c: scales[c] = channel_scale(absmax), or NaN when a value is not finite.
template <class T>
__global__ void channel_scale_kernel(const T* w, float* scales, int64_t outer, int64_t C,
                                     int64_t inner) {
  __shared__ float scratch[32];
  const int64_t c = blockIdx.x;
  const int64_t n = outer * inner;
  float m = 0.f, bad = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = to_f32(w[((i / inner) * C + c) * inner + i % inner]);
    if (!(v - v == 0.f)) bad = 1.f;  // NaN or inf
    const float av = v < 0.f ? -v : v;
    m = av > m ? av : m;
  }
  m = block_max(m, scratch, 0.f);
  bad = block_max(bad, scratch, 0.f);
  if (threadIdx.x == 0) scales[c] = bad != 0.f ? NAN : channel_scale(m);
}

void quantize_per_channel_cuda_channel_block(const QuantizePerChannelArgs& a) {
  check_quantize_per_channel_args(a);
  const int64_t ax = axis_of(a.axis, a.w.dim());
  int64_t outer, C, inner;
  split(a.w, ax, outer, C, inner);
  if (C == 0) return;
  const auto stream = stream_for(a.w.device());
  float* scales = a.scales.data<float>();
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.w.dtype(), T, {
    const T* w = static_cast<const T*>(a.w.raw_data());
    AIM_LAUNCH(unsigned(C), kThreads, 0, stream, channel_scale_kernel<T>)
    (w, scales, outer, C, inner);
    AIM_CHECK_LAUNCH();
    const int64_t n = a.w.numel();
    if (n > 0) {
      AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream, quantize_kernel<T>)
      (w, a.q.data<int8_t>(), n, 0.f, static_cast<const float*>(scales), C, inner);
      AIM_CHECK_LAUNCH();
    }
  });
  const std::vector<float> s = a.scales.to(kCPU).to_vector<float>();
  for (int64_t c = 0; c < C; ++c)
    AIM_CHECK(s[size_t(c)] == s[size_t(c)], "[quantize_per_channel] w ", sh(a.w),
              " has a non-finite value in channel ", c, " of axis ", ax);
}

std::string channel_block_supports(const QuantizePerChannelArgs& a) {
  check_quantize_per_channel_args(a);
  const int64_t C = a.w.size(axis_of(a.axis, a.w.dim()));
  if (C > INT_MAX) return str("needs at most ", INT_MAX, " channels (grid.x), got ", C);
  return "";
}

// ---- cuda.dp4a: the int8 GEMM ------------------------------------------------------------------

constexpr int kTile = 64, kKW = 8;  // 64x64 outputs, 8 words = 32 int8 values per step

__device__ __forceinline__ int pack4(int8_t a, int8_t b, int8_t c, int8_t d) {
  return int(uint32_t(uint8_t(a)) | (uint32_t(uint8_t(b)) << 8) | (uint32_t(uint8_t(c)) << 16) |
             (uint32_t(uint8_t(d)) << 24));
}

// 4 consecutive int8 of a row (length len, base p) from k, 0 past the end.
__device__ __forceinline__ int row_word(const int8_t* p, int len, int k, bool aligned) {
  if (aligned && k + 4 <= len) {
#ifdef AIM_SIMT
    int v;
    std::memcpy(&v, p + k, 4);  // no type punning in C++
    return v;
#else
    return *reinterpret_cast<const int*>(p + k);
#endif
  }
  return pack4(k < len ? p[k] : int8_t(0), k + 1 < len ? p[k + 1] : int8_t(0),
               k + 2 < len ? p[k + 2] : int8_t(0), k + 3 < len ? p[k + 3] : int8_t(0));
}

// Output stage shared by both problems: epilogue then store at flat index i.
struct OutStage {
  float* yf;
  int8_t* yq;
  float x_scale, out_scale;
  const float* w_scales;
  const float* bias;
  bool relu;
  __device__ __forceinline__ void put(int64_t i, int ch, int acc) const {
    const float v = qepilogue_value(acc, x_scale * w_scales[ch], bias ? bias[ch] : 0.f, relu);
    if (yf)
      yf[i] = v;
    else
      yq[i] = quantize_value(v, out_scale);
  }
};

// qlinear: rows m of x [M, K], columns n of w [N, K].
struct LinearProblem {
  const int8_t* x;
  const int8_t* w;
  int M, N, K;
  bool aligned;  // K % 4 == 0: rows start 4-byte aligned
  OutStage out;
  struct Col {
    const int8_t* row;  // w row, or null past N
  };
  __device__ int rows() const { return M; }
  __device__ int cols() const { return N; }
  __device__ int red() const { return K; }
  __device__ void set_group(int) {}
  __device__ int a_word(int m, int k) const {
    return m < M ? row_word(x + int64_t(m) * K, K, k, aligned) : 0;
  }
  __device__ Col col(int n) const { return {n < N ? w + int64_t(n) * K : nullptr}; }
  __device__ int b_word(const Col& c, int k) const {
    return c.row ? row_word(c.row, K, k, aligned) : 0;
  }
  __device__ void store(int m, int n, int acc) const { out.put(int64_t(m) * N + n, n, acc); }
};

// qconv2d, group g: rows = output channels of the group (w rows), columns = output pixels
// (n, p, q) over the batch, reduction (c, r, s) of the group's input channels.
struct ConvProblem {
  const int8_t* x;
  const int8_t* w;
  int N, C, H, W, K, R, S, P, Q, Cg, Kg;
  int sh, sw, pt, pl, dh, dw;
  bool aligned;  // C/G*R*S % 4 == 0
  OutStage out;
  int g = 0;
  struct Col {
    const int8_t* img;  // x at image n, first channel of group g; null past the last pixel
    int h0, w0;         // top-left input tap of the pixel
  };
  __device__ int rows() const { return Kg; }
  __device__ int cols() const { return N * P * Q; }
  __device__ int red() const { return Cg * R * S; }
  __device__ void set_group(int gg) { g = gg; }
  __device__ int a_word(int kk, int k) const {
    const int crs = Cg * R * S;
    return kk < Kg ? row_word(w + int64_t(g * Kg + kk) * crs, crs, k, aligned) : 0;
  }
  __device__ Col col(int j) const {
    if (j >= N * P * Q) return {nullptr, 0, 0};
    const int n = j / (P * Q), pq = j % (P * Q);
    return {x + (int64_t(n) * C + int64_t(g) * Cg) * H * W, (pq / Q) * sh - pt, (pq % Q) * sw - pl};
  }
  __device__ int8_t b_at(const Col& c, int k) const {
    if (k >= Cg * R * S) return 0;
    const int ch = k / (R * S), r = (k / S) % R, s = k % S;
    const int h = c.h0 + r * dh, ww = c.w0 + s * dw;
    return (h >= 0 && h < H && ww >= 0 && ww < W) ? c.img[(int64_t(ch) * H + h) * W + ww]
                                                  : int8_t(0);
  }
  __device__ int b_word(const Col& c, int k) const {
    if (!c.img) return 0;
    return pack4(b_at(c, k), b_at(c, k + 1), b_at(c, k + 2), b_at(c, k + 3));
  }
  __device__ void store(int kk, int j, int acc) const {
    const int n = j / (P * Q), pq = j % (P * Q);
    const int ch = g * Kg + kk;
    out.put((int64_t(n) * K + ch) * (P * Q) + pq, ch, acc);
  }
};

template <class Prob>
__global__ void __launch_bounds__(kThreads) dp4a_gemm_kernel(Prob pr) {
  __shared__ int As[kKW][kTile + 1];
  __shared__ int Bs[kKW][kTile + 1];
  pr.set_group(int(blockIdx.z));
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int row0 = int(blockIdx.y) * kTile, col0 = int(blockIdx.x) * kTile;
  // Loader: word slot l of this thread is row/column (tid + 256 l) / 8, word (tid + 256 l) % 8.
  int lr[2], lk[2];
  typename Prob::Col bc[2];
  for (int l = 0; l < 2; ++l) {
    const int wi = tid + kThreads * l;
    lr[l] = wi / kKW;
    lk[l] = wi % kKW;
    bc[l] = pr.col(col0 + lr[l]);
  }
  int acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0;
  const int red = pr.red();
  for (int k0 = 0; k0 < red; k0 += 4 * kKW) {
    for (int l = 0; l < 2; ++l) {
      const int k = k0 + 4 * lk[l];
      As[lk[l]][lr[l]] = pr.a_word(row0 + lr[l], k);
      Bs[lk[l]][lr[l]] = pr.b_word(bc[l], k);
    }
    __syncthreads();
    AIM_UNROLL
    for (int kw = 0; kw < kKW; ++kw) {
      int av[4], bv[4];
      for (int i = 0; i < 4; ++i) av[i] = As[kw][ty + 16 * i];
      for (int j = 0; j < 4; ++j) bv[j] = Bs[kw][tx + 16 * j];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = __dp4a(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
  const int rows = pr.rows(), cols = pr.cols();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
      if (r < rows && c < cols) pr.store(r, c, acc[i][j]);
    }
}

OutStage out_stage(const Tensor& y, float x_scale, const Tensor& w_scales, const Tensor& bias,
                   bool relu, float out_scale) {
  OutStage o;
  o.yf = y.dtype() == DType::f32 ? y.data<float>() : nullptr;
  o.yq = y.dtype() == DType::i8 ? y.data<int8_t>() : nullptr;
  o.x_scale = x_scale;
  o.out_scale = out_scale;
  o.w_scales = w_scales.data<float>();
  o.bias = bias.defined() ? bias.data<float>() : nullptr;
  o.relu = relu;
  return o;
}

std::string int32_sizes(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->numel() > INT_MAX)
      return str("needs every tensor under 2^31 elements (32-bit indices), got ", sh(*t));
  return "";
}

std::string dp4a_supports_linear(const QLinearArgs& a) {
  const QLinearDims d = qlinear_check(a);
  if (std::string why = int32_sizes({&a.x, &a.w, &a.y}); !why.empty()) return why;
  if ((d.M + kTile - 1) / kTile > 65535)
    return str("needs M <= ", 65535 * kTile, " (grid.y), got ", d.M);
  if ((d.N + kTile - 1) / kTile > INT_MAX) return "N too large for grid.x";
  return "";
}

void qlinear_cuda_dp4a(const QLinearArgs& a) {
  const QLinearDims d = qlinear_check(a);
  const std::string why = dp4a_supports_linear(a);
  AIM_CHECK(why.empty(), "[qlinear] cuda.dp4a: ", why);
  if (d.M == 0 || d.N == 0) return;
  LinearProblem pr;
  pr.x = a.x.data<int8_t>();
  pr.w = a.w.data<int8_t>();
  pr.M = int(d.M);
  pr.N = int(d.N);
  pr.K = int(d.K);
  pr.aligned = d.K % 4 == 0 && reinterpret_cast<uintptr_t>(pr.x) % 4 == 0 &&
               reinterpret_cast<uintptr_t>(pr.w) % 4 == 0;
  pr.out = out_stage(a.y, a.x_scale, a.w_scales, a.bias, a.relu, a.out_scale);
  const dim3 grid(unsigned((d.N + kTile - 1) / kTile), unsigned((d.M + kTile - 1) / kTile), 1);
  AIM_LAUNCH(grid, kThreads, 0, stream_for(a.y.device()), dp4a_gemm_kernel<LinearProblem>)(pr);
  AIM_CHECK_LAUNCH();
}

std::string dp4a_supports_conv(const QConv2dArgs& a) {
  check_qconv2d_args(a);
  if (std::string why = int32_sizes({&a.x, &a.w, &a.y}); !why.empty()) return why;
  if (a.p.groups > 65535) return str("needs groups <= 65535 (grid.z), got ", a.p.groups);
  const int64_t Kg = a.w.size(0) / a.p.groups;
  if ((Kg + kTile - 1) / kTile > 65535)
    return str("needs K/groups <= ", 65535 * kTile, " (grid.y), got ", Kg);
  return "";
}

void qconv2d_cuda_dp4a(const QConv2dArgs& a) {
  check_qconv2d_args(a);
  const std::string why = dp4a_supports_conv(a);
  AIM_CHECK(why.empty(), "[qconv2d] cuda.dp4a: ", why);
  ConvProblem pr;
  pr.x = a.x.data<int8_t>();
  pr.w = a.w.data<int8_t>();
  pr.N = int(a.x.size(0));
  pr.C = int(a.x.size(1));
  pr.H = int(a.x.size(2));
  pr.W = int(a.x.size(3));
  pr.K = int(a.w.size(0));
  pr.R = int(a.w.size(2));
  pr.S = int(a.w.size(3));
  pr.P = int(a.y.size(2));
  pr.Q = int(a.y.size(3));
  const int G = int(a.p.groups);
  pr.Cg = pr.C / G;
  pr.Kg = pr.K / G;
  pr.sh = int(a.p.stride_h);
  pr.sw = int(a.p.stride_w);
  pr.pt = int(a.p.pad_top);
  pr.pl = int(a.p.pad_left);
  pr.dh = int(a.p.dil_h);
  pr.dw = int(a.p.dil_w);
  pr.aligned = (pr.Cg * pr.R * pr.S) % 4 == 0 && reinterpret_cast<uintptr_t>(pr.w) % 4 == 0;
  pr.out = out_stage(a.y, a.x_scale, a.w_scales, a.bias, a.relu, a.out_scale);
  const int64_t cols = int64_t(pr.N) * pr.P * pr.Q;
  if (cols == 0 || pr.Kg == 0) return;
  const dim3 grid(unsigned((cols + kTile - 1) / kTile), unsigned((pr.Kg + kTile - 1) / kTile),
                  unsigned(G));
  AIM_LAUNCH(grid, kThreads, 0, stream_for(a.y.device()), dp4a_gemm_kernel<ConvProblem>)(pr);
  AIM_CHECK_LAUNCH();
}

#ifndef AIM_SIMT
__global__ void qlinear_epilogue_kernel(const int* acc, OutStage out, int64_t M, int64_t N) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < M * N;
       i += int64_t(gridDim.x) * blockDim.x)
    out.put(i, int(i % N), acc[i]);
}
#endif

}  // namespace

#ifndef AIM_SIMT
// Helper of cuda.cublaslt (quant_cublaslt.cpp): y = epilogue(acc), acc i32 [M, N] on a's device.
void qlinear_epilogue_i32(const Tensor& acc, const QLinearArgs& a) {
  const int64_t M = acc.size(0), N = acc.size(1);
  if (M * N == 0) return;
  AIM_LAUNCH(grid_for(M * N, kThreads), kThreads, 0, stream_for(a.y.device()),
             qlinear_epilogue_kernel)
  (acc.data<int32_t>(), out_stage(a.y, a.x_scale, a.w_scales, a.bias, a.relu, a.out_scale), M, N);
  AIM_CHECK_LAUNCH();
}
#endif

void register_quant_cuda(Registry& r) {
  const std::vector<DType> floats = {DType::f32, DType::f16, DType::bf16};
  auto& q = r.op<QuantizeArgs>("quantize");
  q.add({"cuda.elementwise", AIM_CUDA_BACKEND, Provider::Own, quantize_cuda_elementwise, floats});
  q.set_default(AIM_CUDA_BACKEND, "cuda.elementwise");
  auto& dq = r.op<DequantizeArgs>("dequantize");
  dq.add({"cuda.elementwise",
          AIM_CUDA_BACKEND,
          Provider::Own,
          dequantize_cuda_elementwise,
          {DType::f32}});
  dq.set_default(AIM_CUDA_BACKEND, "cuda.elementwise");
  auto& pc = r.op<QuantizePerChannelArgs>("quantize_per_channel");
  pc.add({"cuda.channel_block", AIM_CUDA_BACKEND, Provider::Own,
          quantize_per_channel_cuda_channel_block, floats, channel_block_supports});
  pc.set_default(AIM_CUDA_BACKEND, "cuda.channel_block");
  auto& l = r.op<QLinearArgs>("qlinear");
  l.add({"cuda.dp4a",
         AIM_CUDA_BACKEND,
         Provider::Own,
         qlinear_cuda_dp4a,
         {DType::f32, DType::i8},
         dp4a_supports_linear});
  l.set_default(AIM_CUDA_BACKEND, "cuda.dp4a");
  auto& cv = r.op<QConv2dArgs>("qconv2d");
  cv.add({"cuda.dp4a",
          AIM_CUDA_BACKEND,
          Provider::Own,
          qconv2d_cuda_dp4a,
          {DType::f32, DType::i8},
          dp4a_supports_conv});
  cv.set_default(AIM_CUDA_BACKEND, "cuda.dp4a");
}

}  // namespace aim::kernels::AIM_CUDA_NS
