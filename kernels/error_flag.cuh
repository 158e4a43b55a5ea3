// Device side of the error flag (kernels/error_flag.h): record_device_error. Include after
// kernels/cuda_common.h in a *_cuda.cu; emulatable (plain atomics, no asm).
#pragma once
#include "kernels/cuda_common.h"
#include "kernels/error_flag.h"

namespace aim::kernels::AIM_CUDA_NS {

// Counts one bad value and, when the record is still free, claims it for `op` and writes what
// was found. Any thread may call it, any number of times; never traps.
__device__ __forceinline__ void record_device_error(DeviceErrorRecord* r, DeviceErrorOp op,
                                                    int64_t position, int64_t sample, int64_t value,
                                                    int64_t bound, int64_t extra) {
  unsigned long long* w = reinterpret_cast<unsigned long long*>(r);
  atomicAdd(w + 6, 1ull);  // count
  if (atomicCAS(w, 0ull, static_cast<unsigned long long>(op)) == 0ull) {
    r->position = position;
    r->sample = sample;
    r->value = value;
    r->bound = bound;
    r->extra = extra;
  }
}

}  // namespace aim::kernels::AIM_CUDA_NS
