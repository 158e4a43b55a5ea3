// matmul: CPU variants (in progress).
#include "kernels/registry.h"

namespace aim::kernels {
void register_matmul_cpu(Registry&) {}
}  // namespace aim::kernels
