// reduce: CPU variants (in progress).
#include "kernels/registry.h"

namespace aim::kernels {
void register_reduce_cpu(Registry&) {}
}  // namespace aim::kernels
