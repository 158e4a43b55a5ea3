// Check macros for CUDA, cuBLAS, cuDNN and NCCL calls: each names the expression, the error
// string and file:line. Only for translation units built with the CUDA toolkit.
#pragma once
#include <cuda_runtime.h>

#include "tensor/check.h"

#define AIM_CUDA_CHECK(expr)                                                  \
  do {                                                                        \
    const cudaError_t aim_err_ = (expr);                                      \
    if (aim_err_ != cudaSuccess)                                              \
      ::aim::fail(__FILE__, __LINE__,                                         \
                  ::aim::str("CUDA error ", cudaGetErrorName(aim_err_), ": ", \
                             cudaGetErrorString(aim_err_), " in " #expr));    \
  } while (0)

#define AIM_CUBLAS_CHECK(expr)                                                              \
  do {                                                                                      \
    const cublasStatus_t aim_st_ = (expr);                                                  \
    if (aim_st_ != CUBLAS_STATUS_SUCCESS)                                                   \
      ::aim::fail(__FILE__, __LINE__,                                                       \
                  ::aim::str("cuBLAS error ", cublasGetStatusName(aim_st_), " in " #expr)); \
  } while (0)

#define AIM_CUDNN_CHECK(expr)                                                              \
  do {                                                                                     \
    const cudnnStatus_t aim_st_ = (expr);                                                  \
    if (aim_st_ != CUDNN_STATUS_SUCCESS)                                                   \
      ::aim::fail(__FILE__, __LINE__,                                                      \
                  ::aim::str("cuDNN error ", cudnnGetErrorString(aim_st_), " in " #expr)); \
  } while (0)

#define AIM_NCCL_CHECK(expr)                                                             \
  do {                                                                                   \
    const ncclResult_t aim_st_ = (expr);                                                 \
    if (aim_st_ != ncclSuccess)                                                          \
      ::aim::fail(__FILE__, __LINE__,                                                    \
                  ::aim::str("NCCL error ", ncclGetErrorString(aim_st_), " in " #expr)); \
  } while (0)

namespace aim {
bool cuda_sync_after_launch();  // AIM_SYNC=1: synchronise after every launch to locate faults
}

// After every kernel launch: catches bad launch configurations at once, faults under AIM_SYNC=1.
#define AIM_CHECK_LAUNCH()                                                        \
  do {                                                                            \
    AIM_CUDA_CHECK(cudaGetLastError());                                           \
    if (::aim::cuda_sync_after_launch()) AIM_CUDA_CHECK(cudaDeviceSynchronize()); \
  } while (0)
