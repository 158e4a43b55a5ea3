// Definitions behind kernels/cuda_common.h (compiled by nvcc and, under AIM_SIMT, as C++).
#include <cstring>

#include "kernels/cuda_common.h"

namespace aim::kernels::AIM_CUDA_NS {

void memset_zero(void* p, size_t bytes, Device d) {
  if (bytes == 0) return;
#ifdef AIM_SIMT
  (void)d;
  std::memset(p, 0, bytes);
#else
  AIM_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_for(d)));
#endif
}

}  // namespace aim::kernels::AIM_CUDA_NS
