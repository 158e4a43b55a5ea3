// matmul: cuBLAS variants (in progress).
#include "kernels/registry.h"

namespace aim::kernels {
void register_matmul_cublas(Registry&) {}
}  // namespace aim::kernels
