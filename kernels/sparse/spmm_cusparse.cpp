// spmm: cuSPARSE variant (CUDA builds only).
//
// cuda.cusparse: cusparseSpMM (generic API) with A as a CSR descriptor (32-bit indices, base 0)
//   over our row_ptr/col_idx/values, x and y as row-major dense descriptors (ld = N), alpha = 1,
//   beta = 0, CUSPARSE_SPMM_CSR_ALG2 (cuSPARSE's algorithm for row-major dense operands;
//   deterministic per the documentation), compute type = the data type (f32 or f64). Handle from
//   kernels/vendor.h (stream set), buffer from the shared vendor workspace. Descriptors are made
//   per call: they are host structs wrapping our pointers, no device work.
#include "kernels/registry.h"
#include "kernels/sparse/spmm.h"
#include "kernels/vendor.h"
#include "tensor/cuda_check.h"

namespace aim::kernels {
namespace {

void spmm_cuda_cusparse(const SpmmArgs& a) {
  check_spmm_args(a);
  if (a.y.numel() == 0) return;
  const int64_t M = a.row_ptr.numel() - 1, K = a.x.size(0), N = a.x.size(1);
  const int64_t nnz = a.col_idx.numel();
  const Device dev = a.x.device();
  vendor::DeviceGuard guard(dev);
  cusparseHandle_t h = vendor::cusparse(dev);
  const bool f64 = a.x.dtype() == DType::f64;
  const cudaDataType t = f64 ? CUDA_R_64F : CUDA_R_32F;
  cusparseSpMatDescr_t A = nullptr;
  cusparseDnMatDescr_t X = nullptr, Y = nullptr;
  AIM_CUSPARSE_CHECK(cusparseCreateCsr(&A, M, K, nnz, a.row_ptr.raw_data(), a.col_idx.raw_data(),
                                       a.values.raw_data(), CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                       CUSPARSE_INDEX_BASE_ZERO, t));
  AIM_CUSPARSE_CHECK(cusparseCreateDnMat(&X, K, N, N, a.x.raw_data(), t, CUSPARSE_ORDER_ROW));
  AIM_CUSPARSE_CHECK(cusparseCreateDnMat(&Y, M, N, N, a.y.raw_data(), t, CUSPARSE_ORDER_ROW));
  const float alpha_f = 1.f, beta_f = 0.f;
  const double alpha_d = 1.0, beta_d = 0.0;
  const void* alpha = f64 ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta = f64 ? static_cast<const void*>(&beta_d) : &beta_f;
  const auto op = CUSPARSE_OPERATION_NON_TRANSPOSE;
  size_t bytes = 0;
  AIM_CUSPARSE_CHECK(
      cusparseSpMM_bufferSize(h, op, op, alpha, A, X, beta, Y, t, CUSPARSE_SPMM_CSR_ALG2, &bytes));
  const vendor::Workspace ws = vendor::workspace(dev, bytes);
  AIM_CUSPARSE_CHECK(
      cusparseSpMM(h, op, op, alpha, A, X, beta, Y, t, CUSPARSE_SPMM_CSR_ALG2, ws.data));
  AIM_CUSPARSE_CHECK(cusparseDestroyDnMat(Y));
  AIM_CUSPARSE_CHECK(cusparseDestroyDnMat(X));
  AIM_CUSPARSE_CHECK(cusparseDestroySpMat(A));
}

std::string cusparse_supports(const SpmmArgs& a) {
  if (a.col_idx.numel() == 0) return "cuSPARSE refuses a matrix with no stored entries";
  return "";
}

}  // namespace

void register_spmm_cusparse(Registry& r) {
  auto& op = r.op<SpmmArgs>("spmm");
  op.add({"cuda.cusparse",
          Backend::CUDA,
          Provider::Vendor,
          spmm_cuda_cusparse,
          {DType::f32, DType::f64},
          cusparse_supports});
}

}  // namespace aim::kernels
