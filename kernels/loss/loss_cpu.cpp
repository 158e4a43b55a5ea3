// loss: CPU variants (in progress).
#include "kernels/registry.h"

namespace aim::kernels {
void register_loss_cpu(Registry&) {}
}  // namespace aim::kernels
