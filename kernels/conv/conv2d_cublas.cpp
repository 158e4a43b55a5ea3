// conv2d: cuBLAS variant (CUDA builds only).
//
// cuda.im2col_cublas: the explicit lowering. Images are processed in chunks of nb (the column
//   buffer [nb, C, R, S, P, Q] capped at ~256 MiB, at least one image); per chunk:
//     fwd         im2col, then per group one strided-batched GEMM over the nb images
//                 y_g [K/G, P*Q] = w_g [K/G, C/G*R*S] . col_g; bias added by an own kernel.
//     bwd_data    per group one strided-batched GEMM col_g = w_g^T . dy_g, then col2im (a gather:
//                 each dx element written once).
//     bwd_filter  im2col, then per image one strided-batched GEMM over the groups
//                 dw_g [K/G, C/G*R*S] += dy_g . col_g^T (beta = 1: images accumulate in order).
//                 f16/bf16: into an f32 copy of dw, rounded into dw once at the end.
//                 dbias by the own fixed-order reduction kernel.
//   cuBLAS is column-major: a row-major [R, C] matrix is the column-major [C, R] one, so each
//   row-major product C = A.B is issued as C^T = B^T.A^T. Compute: f32 with CUBLAS_COMPUTE_32F,
//   or CUBLAS_COMPUTE_32F_FAST_TF32 when TF32 is allowed for convolutions (the default, as cuDNN's
//   in PyTorch; kernels/math_mode.h), f16/bf16 with fp32 compute (tensor cores) and fp32 scalars.
//   im2col/col2im/bias kernels: kernels/conv/im2col_cuda.h (defined in conv2d_cuda.cu).
#include <algorithm>
#include <climits>

#include "kernels/conv/conv2d.h"
#include "kernels/conv/im2col_cuda.h"
#include "kernels/math_mode.h"
#include "kernels/registry.h"
#include "kernels/vendor.h"
#include "tensor/cuda_check.h"

namespace aim::kernels {
namespace {

constexpr int64_t kColBytes = int64_t(256) << 20;

cudaDataType data_type(DType t) {
  switch (t) {
    case DType::f32:
      return CUDA_R_32F;
    case DType::f16:
      return CUDA_R_16F;
    case DType::bf16:
      return CUDA_R_16BF;
    default:
      AIM_FAIL("[conv2d] cuda.im2col_cublas takes f32, f16, bf16, got ", dtype_name(t));
  }
}

// Column-major strided-batched C = op(A) op(B) + beta C with fp32 compute and fp32 scalars.
struct Gemm {
  cublasOperation_t ta, tb;
  int64_t m, n, k;
  const void* A;
  int64_t lda, sa;
  const void* B;
  int64_t ldb, sb;
  void* C;
  int64_t ldc, sc;
  int64_t batch;
  float beta;
  cudaDataType ab_type, c_type;
};

void run(cublasHandle_t h, const Gemm& g) {
  const float alpha = 1.0f;
  // TF32 only for f32 operands (kernels/math_mode.h); 16-bit inputs take tensor cores anyway.
  const cublasComputeType_t compute =
      g.ab_type == CUDA_R_32F && tf32().conv ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  AIM_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      h, g.ta, g.tb, int(g.m), int(g.n), int(g.k), &alpha, g.A, g.ab_type, int(g.lda),
      (long long)g.sa, g.B, g.ab_type, int(g.ldb), (long long)g.sb, &g.beta, g.C, g.c_type,
      int(g.ldc), (long long)g.sc, int(g.batch), compute, CUBLAS_GEMM_DEFAULT));
}

struct Sizes {
  int64_t N, C, H, W, K, R, S, P, Q, G, Cg, Kg, CRS, PQ, nb;
};

Sizes sizes_of(const Tensor& xside, const Tensor& w, const Tensor& yside, int64_t groups) {
  Sizes s;
  s.N = xside.size(0);
  s.C = xside.size(1);
  s.H = xside.size(2);
  s.W = xside.size(3);
  s.K = w.size(0);
  s.R = w.size(2);
  s.S = w.size(3);
  s.P = yside.size(2);
  s.Q = yside.size(3);
  s.G = groups;
  s.Cg = s.C / s.G;
  s.Kg = s.K / s.G;
  s.CRS = s.Cg * s.R * s.S;
  s.PQ = s.P * s.Q;
  const int64_t per_image = std::max<int64_t>(1, s.C * s.R * s.S * s.PQ * dtype_size(w.dtype()));
  s.nb = std::max<int64_t>(1, std::min<int64_t>(s.N, kColBytes / per_image));
  return s;
}

std::string cublas_limits(const Sizes& s, const Tensor& big) {
  const int64_t biggest =
      std::max({s.CRS, s.PQ, s.Kg, s.N, s.G, s.nb * s.C * s.R * s.S * s.PQ, big.numel()});
  if (biggest > INT_MAX)
    return str("needs GEMM extents and tensors under 2^31 (int), got ", biggest);
  return "";
}

std::string supports_fwd(const Conv2dFwdArgs& a) {
  check_conv2d_fwd_args(a);
  if (std::string why = conv2d_fwd_plain_reason(a); !why.empty()) return why;
  return cublas_limits(sizes_of(a.x, a.w, a.y, a.p.groups), a.x);
}
std::string supports_bwd_data(const Conv2dBwdDataArgs& a) {
  check_conv2d_bwd_data_args(a);
  return cublas_limits(sizes_of(a.dx, a.w, a.dy, a.p.groups), a.dx);
}
std::string supports_bwd_filter(const Conv2dBwdFilterArgs& a) {
  check_conv2d_bwd_filter_args(a);
  return cublas_limits(sizes_of(a.x, a.dw, a.dy, a.p.groups), a.x);
}

char* bytes(const Tensor& t) { return static_cast<char*>(t.raw_data()); }

void conv2d_fwd_cuda_im2col_cublas(const Conv2dFwdArgs& a) {
  const std::string why = supports_fwd(a);
  AIM_CHECK(why.empty(), "[conv2d_fwd] cuda.im2col_cublas ", why);
  const Sizes s = sizes_of(a.x, a.w, a.y, a.p.groups);
  if (a.y.numel() == 0) return;
  const Device dev = a.x.device();
  const int64_t e = dtype_size(a.x.dtype());
  const cudaDataType t = data_type(a.x.dtype());
  vendor::DeviceGuard guard(dev);
  cublasHandle_t h = vendor::cublas(dev);
  Tensor col = Tensor::empty({s.nb * s.C * s.R * s.S * s.PQ}, a.x.dtype(), dev);
  for (int64_t n0 = 0; n0 < s.N; n0 += s.nb) {
    const int64_t nb = std::min(s.nb, s.N - n0);
    cuda::conv2d_im2col(a.x, n0, nb, s.R, s.S, a.p, col);
    for (int64_t g = 0; g < s.G; ++g) {
      // y_g^T [PQ, Kg] = col_g^T [PQ, CRS] . w_g^T [CRS, Kg], batched over images
      Gemm m{CUBLAS_OP_N,
             CUBLAS_OP_N,
             s.PQ,
             s.Kg,
             s.CRS,
             bytes(col) + g * s.CRS * s.PQ * e,
             std::max<int64_t>(1, s.PQ),
             s.G * s.CRS * s.PQ,
             bytes(a.w) + g * s.Kg * s.CRS * e,
             std::max<int64_t>(1, s.CRS),
             0,
             bytes(a.y) + (n0 * s.K + g * s.Kg) * s.PQ * e,
             std::max<int64_t>(1, s.PQ),
             s.K * s.PQ,
             nb,
             0.0f,
             t,
             t};
      run(h, m);
    }
  }
  cuda::conv2d_add_bias(a.y, a.bias, a.relu, a.residual);
}

void conv2d_bwd_data_cuda_im2col_cublas(const Conv2dBwdDataArgs& a) {
  const std::string why = supports_bwd_data(a);
  AIM_CHECK(why.empty(), "[conv2d_bwd_data] cuda.im2col_cublas ", why);
  const Sizes s = sizes_of(a.dx, a.w, a.dy, a.p.groups);
  if (a.dx.numel() == 0) return;
  const Device dev = a.dy.device();
  const int64_t e = dtype_size(a.dy.dtype());
  const cudaDataType t = data_type(a.dy.dtype());
  vendor::DeviceGuard guard(dev);
  cublasHandle_t h = vendor::cublas(dev);
  Tensor col = Tensor::empty({s.nb * s.C * s.R * s.S * s.PQ}, a.dy.dtype(), dev);
  for (int64_t n0 = 0; n0 < s.N; n0 += s.nb) {
    const int64_t nb = std::min(s.nb, s.N - n0);
    for (int64_t g = 0; g < s.G; ++g) {
      // col_g^T [PQ, CRS] = dy_g^T [PQ, Kg] . w_g [Kg, CRS]
      Gemm m{CUBLAS_OP_N,
             CUBLAS_OP_T,
             s.PQ,
             s.CRS,
             s.Kg,
             bytes(a.dy) + (n0 * s.K + g * s.Kg) * s.PQ * e,
             std::max<int64_t>(1, s.PQ),
             s.K * s.PQ,
             bytes(a.w) + g * s.Kg * s.CRS * e,
             std::max<int64_t>(1, s.CRS),
             0,
             bytes(col) + g * s.CRS * s.PQ * e,
             std::max<int64_t>(1, s.PQ),
             s.G * s.CRS * s.PQ,
             nb,
             0.0f,
             t,
             t};
      run(h, m);
    }
    cuda::conv2d_col2im(col, n0, nb, s.R, s.S, a.p, a.dx);
  }
}

void conv2d_bwd_filter_cuda_im2col_cublas(const Conv2dBwdFilterArgs& a) {
  const std::string why = supports_bwd_filter(a);
  AIM_CHECK(why.empty(), "[conv2d_bwd_filter] cuda.im2col_cublas ", why);
  const Sizes s = sizes_of(a.x, a.dw, a.dy, a.p.groups);
  const Device dev = a.x.device();
  const DType dt = a.x.dtype();
  const int64_t e = dtype_size(dt);
  const cudaDataType t = data_type(dt);
  if (a.dw.numel() > 0 && s.PQ > 0 && s.N > 0) {
    vendor::DeviceGuard guard(dev);
    cublasHandle_t h = vendor::cublas(dev);
    // 16-bit: accumulate the images into an f32 copy of dw, round into dw once.
    const bool wide = dt != DType::f32;
    Tensor acc = wide ? a.dw.to(DType::f32) : a.dw;
    Tensor col = Tensor::empty({s.nb * s.C * s.R * s.S * s.PQ}, dt, dev);
    for (int64_t n0 = 0; n0 < s.N; n0 += s.nb) {
      const int64_t nb = std::min(s.nb, s.N - n0);
      cuda::conv2d_im2col(a.x, n0, nb, s.R, s.S, a.p, col);
      for (int64_t i = 0; i < nb; ++i) {
        // dw_g^T [CRS, Kg] += col_g [CRS, PQ] . dy_g^T [PQ, Kg], batched over groups
        Gemm m{CUBLAS_OP_T,
               CUBLAS_OP_N,
               s.CRS,
               s.Kg,
               s.PQ,
               bytes(col) + i * s.C * s.R * s.S * s.PQ * e,
               std::max<int64_t>(1, s.PQ),
               s.CRS * s.PQ,
               bytes(a.dy) + (n0 + i) * s.K * s.PQ * e,
               std::max<int64_t>(1, s.PQ),
               s.Kg * s.PQ,
               bytes(acc),
               std::max<int64_t>(1, s.CRS),
               s.Kg * s.CRS,
               s.G,
               1.0f,
               t,
               CUDA_R_32F};
        run(h, m);
      }
    }
    if (wide) a.dw.copy_(acc);
  }
  if (a.dbias.defined()) cuda::conv2d_bias_grad(a.dy, a.dbias);
}

}  // namespace

void register_conv2d_cublas(Registry& r) {
  const std::vector<DType> types = {DType::f32, DType::f16, DType::bf16};
  r.op<Conv2dFwdArgs>("conv2d_fwd")
      .add({"cuda.im2col_cublas", Backend::CUDA, Provider::Vendor, conv2d_fwd_cuda_im2col_cublas,
            types, supports_fwd});
  r.op<Conv2dBwdDataArgs>("conv2d_bwd_data")
      .add({"cuda.im2col_cublas", Backend::CUDA, Provider::Vendor,
            conv2d_bwd_data_cuda_im2col_cublas, types, supports_bwd_data});
  r.op<Conv2dBwdFilterArgs>("conv2d_bwd_filter")
      .add({"cuda.im2col_cublas", Backend::CUDA, Provider::Vendor,
            conv2d_bwd_filter_cuda_im2col_cublas, types, supports_bwd_filter});
}

}  // namespace aim::kernels
