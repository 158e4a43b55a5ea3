// random: CPU variants (in progress).
#include "kernels/registry.h"

namespace aim::kernels {
void register_random_cpu(Registry&) {}
}  // namespace aim::kernels
