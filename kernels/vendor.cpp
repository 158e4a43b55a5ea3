// The one owner of vendor library handles and workspaces (see vendor.h).
#include "kernels/vendor.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "tensor/allocator.h"
#include "tensor/cuda_check.h"

namespace aim::kernels::vendor {
namespace {

struct StreamState {
  cublasHandle_t blas = nullptr;
  cudnnHandle_t dnn = nullptr;
  cusparseHandle_t sparse = nullptr;
  void* ws = nullptr;
  size_t ws_bytes = 0;
};

struct State {
  std::mutex mu;
  std::map<std::pair<int, cudaStream_t>, StreamState> streams;
  std::map<int, cublasLtHandle_t> lt;
};

// Never destroyed: handles must not be torn down after the CUDA runtime at process exit.
State& state() {
  static State* s = new State;
  return *s;
}

void check_cuda_device(Device d) {
  AIM_CHECK(d.is_cuda(), "[vendor] handles are for CUDA devices, got ", d.str());
}

// Grows the workspace of `st` to at least min_bytes; caller holds the lock and a DeviceGuard.
void ensure_workspace(StreamState& st, cudaStream_t s, size_t min_bytes) {
  if (st.ws && st.ws_bytes >= min_bytes) return;
  if (st.ws) {
    AIM_CUDA_CHECK(cudaStreamSynchronize(s));  // queued work may still use the old buffer
    AIM_CUDA_CHECK(cudaFree(st.ws));
    st.ws = nullptr;
    st.ws_bytes = 0;
  }
  AIM_CUDA_CHECK(cudaMalloc(&st.ws, min_bytes));
  st.ws_bytes = min_bytes;
  if (st.blas) AIM_CUBLAS_CHECK(cublasSetWorkspace(st.blas, st.ws, st.ws_bytes));
}

StreamState& stream_state(Device d) {  // caller holds the lock
  check_cuda_device(d);
  return state().streams[{d.index, stream(d)}];
}

}  // namespace

cudaStream_t stream(Device d) {
  check_cuda_device(d);
  return static_cast<cudaStream_t>(current_stream(d.index));
}

cublasHandle_t cublas(Device d) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  StreamState& st = stream_state(d);
  if (!st.blas) {
    DeviceGuard g(d);
    AIM_CUBLAS_CHECK(cublasCreate(&st.blas));
    AIM_CUBLAS_CHECK(cublasSetStream(st.blas, stream(d)));
    AIM_CUBLAS_CHECK(cublasSetMathMode(st.blas, CUBLAS_DEFAULT_MATH));  // no implicit TF32
    ensure_workspace(st, stream(d), kDefaultWorkspaceBytes);
    AIM_CUBLAS_CHECK(cublasSetWorkspace(st.blas, st.ws, st.ws_bytes));
  }
  return st.blas;
}

cublasLtHandle_t cublaslt(Device d) {
  check_cuda_device(d);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  cublasLtHandle_t& h = s.lt[d.index];
  if (!h) {
    DeviceGuard g(d);
    AIM_CUBLAS_CHECK(cublasLtCreate(&h));
  }
  return h;
}

cudnnHandle_t cudnn(Device d) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  StreamState& st = stream_state(d);
  if (!st.dnn) {
    DeviceGuard g(d);
    AIM_CUDNN_CHECK(cudnnCreate(&st.dnn));
    AIM_CUDNN_CHECK(cudnnSetStream(st.dnn, stream(d)));
  }
  return st.dnn;
}

cusparseHandle_t cusparse(Device d) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  StreamState& st = stream_state(d);
  if (!st.sparse) {
    DeviceGuard g(d);
    AIM_CUSPARSE_CHECK(cusparseCreate(&st.sparse));
    AIM_CUSPARSE_CHECK(cusparseSetStream(st.sparse, stream(d)));
  }
  return st.sparse;
}

Workspace workspace(Device d, size_t min_bytes) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  StreamState& st = stream_state(d);
  if (!st.ws || st.ws_bytes < min_bytes) {
    DeviceGuard g(d);
    ensure_workspace(st, stream(d), std::max(min_bytes, kDefaultWorkspaceBytes));
  }
  return Workspace{st.ws, st.ws_bytes};
}

}  // namespace aim::kernels::vendor
