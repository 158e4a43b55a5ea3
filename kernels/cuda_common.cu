// Definitions behind kernels/cuda_common.h (compiled by nvcc and, under AIM_SIMT, as C++).
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
