// cuBLAS, cuBLASLt, cuDNN and cuSPARSE handles and workspaces: the one owner (CUDA builds only;
// included by the vendor variants, *_cublas.cpp / *_cudnn.cpp).
//
// Handles are created lazily, once per (device, stream) — the stream being the calling host
// thread's current stream for that device (tensor/allocator.h) — and live until the process
// ends. A cuBLAS handle comes with its stream and its workspace already set, and with the
// default math mode: no TF32 for fp32 unless a variant asks for it explicitly by its compute type
// (CUBLAS_COMPUTE_32F_FAST_TF32), which the variants do as kernels/math_mode.h says (--tf32).
// cuBLASLt handles are per device (they do not hold a stream; the stream is an argument of
// cublasLtMatmul). The workspace of a (device, stream) is shared by the libraries on that
// stream: their calls run in stream order, so they never use it at the same time.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <cusparse.h>

#include <cstddef>

#include "tensor/check.h"
#include "tensor/device.h"

#define AIM_CUSPARSE_CHECK(expr)                                                                 \
  do {                                                                                           \
    const cusparseStatus_t aim_st_ = (expr);                                                     \
    if (aim_st_ != CUSPARSE_STATUS_SUCCESS)                                                      \
      ::aim::fail(__FILE__, __LINE__,                                                            \
                  ::aim::str("cuSPARSE error ", cusparseGetErrorString(aim_st_), " in " #expr)); \
  } while (0)

namespace aim::kernels::vendor {

// cuBLAS's recommended workspace on Hopper.
constexpr size_t kDefaultWorkspaceBytes = size_t(32) << 20;

// Makes `d` the current CUDA device for a scope (tensor/device.h).
using DeviceGuard = ::aim::DeviceGuard;

cudaStream_t stream(Device d);        // the current stream of this host thread for d
cublasHandle_t cublas(Device d);      // for (d, current stream): stream and workspace set
cublasLtHandle_t cublaslt(Device d);  // per device
cudnnHandle_t cudnn(Device d);        // for (d, current stream): stream set
cusparseHandle_t cusparse(Device d);  // for (d, current stream): stream set

struct Workspace {
  void* data = nullptr;
  size_t bytes = 0;
};
// The workspace of (d, current stream), grown to at least min_bytes when needed (growing
// synchronises that stream once, then frees the old buffer; the cuBLAS handle follows).
Workspace workspace(Device d, size_t min_bytes = kDefaultWorkspaceBytes);

}  // namespace aim::kernels::vendor
