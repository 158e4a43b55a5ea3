// Declarations of every group's registration function (lists in families.def).
#pragma once
#include "kernels/registry.h"

namespace aim::kernels {
#define AIM_OP_GROUP(name)                  \
  void register_##name##_cpu(Registry& r);  \
  namespace cuda {                          \
  void register_##name##_cuda(Registry& r); \
  }                                         \
  namespace simt {                          \
  void register_##name##_cuda(Registry& r); \
  }
#include "kernels/families.def"
#undef AIM_OP_GROUP
#define AIM_VENDOR_GROUP(name) void register_##name(Registry& r);
#include "kernels/vendor_families.def"
#undef AIM_VENDOR_GROUP
}  // namespace aim::kernels
