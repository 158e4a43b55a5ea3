// binary: CPU variants (in progress).
#include "kernels/registry.h"

namespace aim::kernels {
void register_binary_cpu(Registry&) {}
}  // namespace aim::kernels
