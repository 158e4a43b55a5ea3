// embedding: CPU variants (in progress).
#include "kernels/registry.h"

namespace aim::kernels {
void register_embedding_cpu(Registry&) {}
}  // namespace aim::kernels
