// embedding: own CUDA variants (in progress).
#include "kernels/cuda_common.h"

namespace aim::kernels::AIM_CUDA_NS {
void register_embedding_cuda(Registry&) {}
}  // namespace aim::kernels::AIM_CUDA_NS
