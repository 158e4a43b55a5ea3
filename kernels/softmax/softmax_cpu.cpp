// softmax: CPU variants (in progress).
#include "kernels/registry.h"

namespace aim::kernels {
void register_softmax_cpu(Registry&) {}
}  // namespace aim::kernels
