// layernorm: CPU variants (in progress).
#include "kernels/registry.h"

namespace aim::kernels {
void register_layernorm_cpu(Registry&) {}
}  // namespace aim::kernels
