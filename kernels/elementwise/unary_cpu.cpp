// unary: CPU variants (in progress).
#include "kernels/registry.h"

namespace aim::kernels {
void register_unary_cpu(Registry&) {}
}  // namespace aim::kernels
