// matmul: cuBLAS variant (CUDA builds only).
//
// cuda.cublas: cublasGemmStridedBatchedEx on the current stream, handle and workspace from
//   kernels/vendor.h. cuBLAS is column-major; a row-major [R,C] matrix is the column-major
//   [C,R] matrix with the same bytes, so the row-major C = op(A) op(B) is computed as the
//   column-major C^T = op(B)^T op(A)^T: cuBLAS's "A" is our b, its "B" our a, m = N, n = M.
//   A shared 2-D operand has batch stride 0.
//   Compute types: f32 with CUBLAS_COMPUTE_32F (true fp32, PyTorch's default:
//   torch.backends.cuda.matmul.allow_tf32 = False), or CUBLAS_COMPUTE_32F_FAST_TF32 when TF32 is
//   allowed for matmul (--tf32 on|matmul, kernels/math_mode.h; the handle keeps the default math
//   mode either way), f64 with CUBLAS_COMPUTE_64F, f16 and bf16 with fp32 compute
//   (CUBLAS_COMPUTE_32F, tensor cores) and fp32 alpha/beta.
//   Bias: a rank-1 update run first, C = 1 * bias[N] x ones[M] + beta * C (a K = 1 GEMM of the
//   same kind), then the product with beta = 1. With beta == 0 C is never read and the bias is
//   copied exactly, so the result is rounded once. Costs one extra pass over C; a fused
//   cuBLASLt epilogue (CUBLASLT_EPILOGUE_BIAS) would save it (README.md, next steps).
#include <climits>

#include "kernels/math_mode.h"
#include "kernels/matmul/matmul.h"
#include "kernels/registry.h"
#include "kernels/vendor.h"
#include "tensor/cuda_check.h"

namespace aim::kernels {
namespace {

struct GemmTypes {
  cudaDataType data;
  cublasComputeType_t compute;
  bool double_scalars;  // alpha/beta are double (f64), else float
};

GemmTypes gemm_types(DType t) {
  switch (t) {
    case DType::f32:
      return {CUDA_R_32F, tf32().matmul ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, false};
    case DType::f64:
      return {CUDA_R_64F, CUBLAS_COMPUTE_64F, true};
    case DType::f16:
      return {CUDA_R_16F, CUBLAS_COMPUTE_32F, false};
    case DType::bf16:
      return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, false};
    default:
      AIM_FAIL("[matmul] cuda.cublas takes f32, f64, f16, bf16, got ", dtype_name(t));
  }
}

// One column-major strided-batched GEMM: C = alpha * op(A) op(B) + beta * C.
struct ColGemm {
  cublasOperation_t ta, tb;
  int64_t m, n, k;
  const void* A;
  int64_t lda, stride_a;
  const void* B;
  int64_t ldb, stride_b;
  void* C;
  int64_t ldc, stride_c;
  int64_t batch;
  double alpha, beta;
};

void run_col_gemm(cublasHandle_t h, const GemmTypes& t, const ColGemm& g) {
  const float af = float(g.alpha), bf = float(g.beta);
  const void* alpha = t.double_scalars ? static_cast<const void*>(&g.alpha) : &af;
  const void* beta = t.double_scalars ? static_cast<const void*>(&g.beta) : &bf;
  AIM_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      h, g.ta, g.tb, int(g.m), int(g.n), int(g.k), alpha, g.A, t.data, int(g.lda),
      (long long)g.stride_a, g.B, t.data, int(g.ldb), (long long)g.stride_b, beta, g.C, t.data,
      int(g.ldc), (long long)g.stride_c, int(g.batch), t.compute, CUBLAS_GEMM_DEFAULT));
}

std::string cublas_supports(const MatmulArgs& a) {
  const MatmulDims d = matmul_check(a);
  const int64_t biggest = std::max({d.M, d.N, d.K, d.batch});
  if (biggest > INT_MAX) return str("needs M, N, K, Bt <= ", INT_MAX, " (int), got ", biggest);
  return "";
}

void matmul_cuda_cublas(const MatmulArgs& a) {
  const MatmulDims d = matmul_check(a);
  const std::string why = cublas_supports(a);
  AIM_CHECK(why.empty(), "[matmul] cuda.cublas: ", why);
  if (d.M == 0 || d.N == 0 || d.batch == 0) return;
  const Device dev = a.c.device();
  const GemmTypes types = gemm_types(a.c.dtype());
  vendor::DeviceGuard guard(dev);
  cublasHandle_t h = vendor::cublas(dev);
  double beta = a.beta;
  Tensor ones;  // [M]; freed after enqueueing: the caching allocator is stream-ordered
  if (a.bias.defined()) {
    ones = Tensor::full({d.M}, 1.0, a.c.dtype(), dev);
    // C^T [N,M] = bias [N,1] x ones [1,M] + beta * C^T
    run_col_gemm(h, types,
                 ColGemm{CUBLAS_OP_N, CUBLAS_OP_N, d.N, d.M, 1, a.bias.raw_data(),
                         std::max<int64_t>(1, d.N), 0, ones.raw_data(), 1, 0, a.c.raw_data(),
                         std::max<int64_t>(1, d.N), d.M * d.N, d.batch, 1.0, beta});
    beta = 1.0;
  }
  // C^T [N,M] = alpha * op(b)^T [N,K] x op(a)^T [K,M] + beta * C^T
  ColGemm g;
  g.ta = a.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  g.tb = a.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  g.m = d.N;
  g.n = d.M;
  g.k = d.K;
  g.A = a.b.raw_data();
  g.lda = std::max<int64_t>(1, a.trans_b ? d.K : d.N);
  g.stride_a = d.b_batched ? d.K * d.N : 0;
  g.B = a.a.raw_data();
  g.ldb = std::max<int64_t>(1, a.trans_a ? d.M : d.K);
  g.stride_b = d.a_batched ? d.M * d.K : 0;
  g.C = a.c.raw_data();
  g.ldc = std::max<int64_t>(1, d.N);
  g.stride_c = d.M * d.N;
  g.batch = d.batch;
  g.alpha = a.alpha;
  g.beta = beta;
  run_col_gemm(h, types, g);
}

}  // namespace

void register_matmul_cublas(Registry& r) {
  auto& op = r.op<MatmulArgs>("matmul");
  op.add({"cuda.cublas",
          Backend::CUDA,
          Provider::Vendor,
          matmul_cuda_cublas,
          {DType::f32, DType::f64, DType::f16, DType::bf16},
          cublas_supports});
  op.set_default(Backend::CUDA, "cuda.cublas");
}

}  // namespace aim::kernels
