// index: CPU variants (in progress).
#include "kernels/registry.h"

namespace aim::kernels {
void register_index_cpu(Registry&) {}
}  // namespace aim::kernels
