// Registers the SIMT-emulated builds of every own CUDA variant (kernels/families.def).
#include "kernels/families.h"

namespace aim::kernels {
void register_simt_ops(Registry& r) {
#define AIM_OP_GROUP(name) simt::register_##name##_cuda(r);
#include "kernels/families.def"
#undef AIM_OP_GROUP
}
}  // namespace aim::kernels
