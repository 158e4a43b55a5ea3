// qlinear: cuBLASLt variant (CUDA builds only).
//
// cuda.cublaslt: cublasLtMatmul with int8 inputs, CUBLAS_COMPUTE_32I and an int32 output
//   (alpha 1, beta 0, int32 scale type), then the own epilogue kernel qlinear_epilogue_i32
//   (quant_cuda.cu: scales, bias, ReLU, requantisation, the same fp32 operations as every other
//   variant). cuBLASLt is column-major; the row-major y[M,N] = x[M,K] . w[N,K]^T is the
//   column-major acc^T [N,M] = op(A) . B with A = the bytes of w seen as a column-major [K,N]
//   (ld K) transposed, B = the bytes of x seen as column-major [K,M] (ld K): the "TN" form that
//   cuBLASLt's int8 kernels require, with the nn.Linear weight layout used as stored.
//   Layout constraints of int8 cuBLASLt GEMMs with the default (column) order, enforced by
//   supports(): TN only (always the case here), K % 4 == 0 (lda = ldb = K), N % 4 == 0 (the
//   int32 C's leading dimension and the rows of op(A)), K > 0, every pointer 16-byte aligned,
//   M, N, K <= INT_MAX. The int32 product needs an M*N*4-byte scratch per call (the caching
//   allocator's, stream-ordered); fusing the epilogue into cuBLASLt (CUBLASLT_EPILOGUE_* with an
//   int8 D and per-row alpha vectors) is the next step.
//   Not run without a GPU: tools/gpu-check.sh's aim_kernel_tests checks it against cpu.ref.
#include <climits>
#include <cstdint>

#include "kernels/quant/quant.h"
#include "kernels/registry.h"
#include "kernels/vendor.h"
#include "tensor/cuda_check.h"

namespace aim::kernels {

namespace cuda {
// quant_cuda.cu: y = epilogue(acc) for acc i32 [M, N] on a's device, on the current stream.
void qlinear_epilogue_i32(const Tensor& acc, const QLinearArgs& a);
}  // namespace cuda

namespace {

// Owns the cuBLASLt descriptors of one call.
struct LtDescs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  LtDescs() = default;
  LtDescs(const LtDescs&) = delete;
  LtDescs& operator=(const LtDescs&) = delete;
  ~LtDescs() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

bool aligned16(const Tensor& t) { return reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0; }

std::string cublaslt_supports(const QLinearArgs& a) {
  const QLinearDims d = qlinear_check(a);
  if (d.K == 0) return "needs K > 0";
  if (d.K % 4 != 0) return str("needs K % 4 == 0 (int8 leading dimensions), got K = ", d.K);
  if (d.N % 4 != 0) return str("needs N % 4 == 0 (int32 output leading dimension), got N = ", d.N);
  if (std::max({d.M, d.N, d.K}) > INT_MAX) return str("needs M, N, K <= ", INT_MAX);
  if (d.M > 0 && (!aligned16(a.x) || !aligned16(a.w) || !aligned16(a.y)))
    return "needs x, w and y 16-byte aligned";
  return "";
}

void qlinear_cuda_cublaslt(const QLinearArgs& a) {
  const QLinearDims d = qlinear_check(a);
  const std::string why = cublaslt_supports(a);
  AIM_CHECK(why.empty(), "[qlinear] cuda.cublaslt: ", why);
  if (d.M == 0 || d.N == 0) return;
  const Device dev = a.y.device();
  vendor::DeviceGuard guard(dev);
  cublasLtHandle_t h = vendor::cublaslt(dev);
  const vendor::Workspace ws = vendor::workspace(dev);
  Tensor acc = Tensor::empty({d.M, d.N}, DType::i32, dev);

  LtDescs g;
  AIM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&g.op, CUBLAS_COMPUTE_32I, CUDA_R_32I));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  AIM_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  AIM_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  // A: w bytes, column-major [K, N] (ld K), used transposed; B: x bytes, column-major [K, M];
  // C: int32 column-major [N, M] (ld N) = row-major [M, N].
  AIM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g.a, CUDA_R_8I, uint64_t(d.K), uint64_t(d.N), d.K));
  AIM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g.b, CUDA_R_8I, uint64_t(d.K), uint64_t(d.M), d.K));
  AIM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g.c, CUDA_R_32I, uint64_t(d.N), uint64_t(d.M), d.N));
  AIM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&g.pref));
  const size_t ws_bytes = ws.bytes;
  AIM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      g.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  AIM_CUBLAS_CHECK(
      cublasLtMatmulAlgoGetHeuristic(h, g.op, g.a, g.b, g.c, g.c, g.pref, 1, &result, &found));
  AIM_CHECK(found > 0, "[qlinear] cuda.cublaslt: cuBLASLt has no int8 algorithm for M=", d.M,
            " N=", d.N, " K=", d.K);
  const int32_t alpha = 1, beta = 0;
  AIM_CUBLAS_CHECK(cublasLtMatmul(h, g.op, &alpha, a.w.raw_data(), g.a, a.x.raw_data(), g.b, &beta,
                                  acc.raw_data(), g.c, acc.raw_data(), g.c, &result.algo, ws.data,
                                  ws.bytes, vendor::stream(dev)));
  cuda::qlinear_epilogue_i32(acc, a);
}

}  // namespace

void register_quant_cublaslt(Registry& r) {
  auto& op = r.op<QLinearArgs>("qlinear");
  op.add({"cuda.cublaslt",
          Backend::CUDA,
          Provider::Vendor,
          qlinear_cuda_cublaslt,
          {DType::f32, DType::i8},
          cublaslt_supports});
}

}  // namespace aim::kernels
