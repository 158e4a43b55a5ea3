// Definitions behind kernels/cuda_common.h (compiled by nvcc and, under AIM_SIMT, as C++).
#include <cstdlib>
#include <cstring>

#include "kernels/cuda_common.h"

namespace aim::kernels::AIM_CUDA_NS {

void memset_zero(void* p, size_t bytes, Device d) {
  if (bytes == 0) return;
#if defined(AIM_SIMT) && !defined(AIM_SIMT_DEVICE)
  (void)d;
  std::memset(p, 0, bytes);
#else
  AIM_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_for(d)));
#endif
}

}  // namespace aim::kernels::AIM_CUDA_NS

#if !defined(AIM_SIMT)
namespace aim::kernels::cuda {

bool launch_checks_on() {
  static const bool on = [] {
    const char* d = std::getenv("AIM_DEBUG");
    return cuda_sync_after_launch() || (d && std::atoi(d) >= 1);
  }();
  return on;
}

void check_launch_pointer(const void* p, const char* kernel, int arg) {
  if (!p) return;
  int cur = -1;
  AIM_CUDA_CHECK(cudaGetDevice(&cur));
  cudaPointerAttributes a{};
  const cudaError_t e = cudaPointerGetAttributes(&a, p);
  if (e != cudaSuccess) cudaGetLastError();
  const bool device_mem =
      e == cudaSuccess && (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged);
  if (device_mem && a.device == cur) return;
  AIM_FAIL("kernel ", kernel, ": pointer argument ", arg, " = ", p,
           device_mem ? str(" is memory of cuda:", a.device) : std::string(" is host memory"),
           ", not of the current device cuda:", cur, " (AIM_SYNC/AIM_DEBUG launch check)");
}

}  // namespace aim::kernels::cuda
#endif
