// Shared helpers for own CUDA kernels. Every *_cuda.cu includes this first. The same source
// compiles with nvcc (namespace aim::kernels::cuda, Backend::CUDA) and, under AIM_SIMT, as plain
// C++ for the CPU emulator in kernels/simt (namespace aim::kernels::simt, Backend::SIMT).
// Rules for kernels (kernels/simt/README.md): launch with AIM_LAUNCH, dynamic shared memory with
// AIM_DYNAMIC_SHARED, inline PTX only behind #ifndef AIM_SIMT with a plain fallback.
#pragma once

#if defined(AIM_SIMT) && defined(AIM_SIMT_DEVICE)
// The emulated CUDA device (AIM_CUDA_EMULATOR build): these are the CUDA variants, launched on
// their stream with their pointer arguments checked (kernels/simt/device).
#include "kernels/simt/device/device.h"
#include "tensor/cuda_check.h"
#define AIM_CUDA_NS cuda
#define AIM_CUDA_BACKEND ::aim::kernels::Backend::CUDA
#define AIM_LAUNCH(grid, block, smem, stream, ...) \
  ::aim::simt::device::DeviceLaunch(grid, block, smem, stream, #__VA_ARGS__, __VA_ARGS__)
#define AIM_DYNAMIC_SHARED(T, name) T* name = reinterpret_cast<T*>(::aim::simt::dynamic_shared())
#define AIM_CHECK_LAUNCH() \
  do {                     \
  } while (0)
#elif defined(AIM_SIMT)
#include "kernels/simt/simt.h"
#define AIM_CUDA_NS simt
#define AIM_CUDA_BACKEND ::aim::kernels::Backend::SIMT
#define AIM_LAUNCH(grid, block, smem, stream, ...) \
  ((void)(stream), ::aim::simt::Launch(grid, block, smem, #__VA_ARGS__, __VA_ARGS__))
#define AIM_DYNAMIC_SHARED(T, name) T* name = reinterpret_cast<T*>(::aim::simt::dynamic_shared())
// The emulator runs launches synchronously and throws on a bad configuration.
#define AIM_CHECK_LAUNCH() \
  do {                     \
  } while (0)
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "tensor/cuda_check.h"
#define AIM_CUDA_NS cuda
#define AIM_CUDA_BACKEND ::aim::kernels::Backend::CUDA
// A launch through a launcher object: under AIM_SYNC=1 or AIM_DEBUG >= 1 it first checks that
// every pointer argument is memory of the current device (cudaPointerGetAttributes), as the
// emulated device always does; otherwise it is the plain <<<>>> launch.
#define AIM_LAUNCH(grid, block, smem, stream, ...) \
  ::aim::kernels::cuda::Launcher(grid, block, smem, stream, #__VA_ARGS__, __VA_ARGS__)
#define AIM_DYNAMIC_SHARED(T, name)                                 \
  extern __shared__ __align__(16) unsigned char aim_dynamic_smem[]; \
  T* name = reinterpret_cast<T*>(aim_dynamic_smem)
#include <tuple>
#include <utility>
namespace aim::kernels::cuda {
bool launch_checks_on();  // AIM_SYNC=1 or AIM_DEBUG >= 1 (kernels/cuda_common.cu)
// Throws when p (argument `arg` of `kernel`) is neither null nor memory of the current device.
void check_launch_pointer(const void* p, const char* kernel, int arg);
template <class... P>
class Launcher {
 public:
  Launcher(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, const char* name,
           void (*kernel)(P...))
      : grid_(grid), block_(block), smem_(smem), stream_(stream), name_(name), kernel_(kernel) {}
  template <class... A>
  void operator()(A&&... args) const {
    static_assert(sizeof...(A) == sizeof...(P), "AIM_LAUNCH: wrong number of kernel arguments");
    if (launch_checks_on()) check(std::index_sequence_for<P...>{}, args...);
    // clang-format would split the launch brackets of a .h into "> > >".
    // clang-format off
    kernel_<<<grid_, block_, smem_, stream_>>>(std::forward<A>(args)...);
    // clang-format on
  }

 private:
  template <size_t... I, class... A>
  void check(std::index_sequence<I...>, const A&... args) const {
    (check_one<std::decay_t<P> >(args, int(I)), ...);
  }
  template <class T, class A>
  void check_one(const A& a, int arg) const {
    if constexpr (std::is_pointer_v<T>)
      check_launch_pointer(static_cast<const void*>(T(a)), name_, arg);
  }
  dim3 grid_, block_;
  size_t smem_;
  cudaStream_t stream_;
  const char* name_;
  void (*kernel_)(P...);
};
}  // namespace aim::kernels::cuda
#endif

// Loop unrolling hint (nvcc); the emulator build ignores it (g++ would warn on #pragma unroll).
#ifdef AIM_SIMT
#define AIM_UNROLL
#else
#define AIM_UNROLL _Pragma("unroll")
#endif

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/registry.h"

namespace aim {
// Device-side 16-bit types map to the same dtypes as the host's Half/BFloat16 (same bits).
template <>
constexpr DType dtype_of<__half>() {
  return DType::f16;
}
template <>
constexpr DType dtype_of<__nv_bfloat16>() {
  return DType::bf16;
}
}  // namespace aim

// One case of a device-type dispatch: dtype `e` binds `T` to `Type`.
#define AIM_CUDA_TYPE_CASE_(e, Type, T, ...) \
  case e: {                                  \
    using T = Type;                          \
    __VA_ARGS__;                             \
    break;                                   \
  }
#define AIM_CUDA_FLOAT_CASES_(T, ...)                            \
  AIM_CUDA_TYPE_CASE_(::aim::DType::f32, float, T, __VA_ARGS__)  \
  AIM_CUDA_TYPE_CASE_(::aim::DType::f64, double, T, __VA_ARGS__) \
  AIM_CUDA_TYPE_CASE_(::aim::DType::f16, __half, T, __VA_ARGS__) \
  AIM_CUDA_TYPE_CASE_(::aim::DType::bf16, __nv_bfloat16, T, __VA_ARGS__)

// AIM_DISPATCH_CUDA_FLOAT_TYPES(dtype, T, ...): f32, f64, f16 (__half), bf16 (__nv_bfloat16).
#define AIM_DISPATCH_CUDA_FLOAT_TYPES(dtype, T, ...)                                       \
  do {                                                                                     \
    switch (dtype) {                                                                       \
      AIM_CUDA_FLOAT_CASES_(T, __VA_ARGS__)                                                \
      default:                                                                             \
        AIM_FAIL("dtype ", ::aim::dtype_name(dtype), " not supported (float types only)"); \
    }                                                                                      \
  } while (0)

// Every dtype, with device-side 16-bit types.
#define AIM_DISPATCH_CUDA_ALL_TYPES(dtype, T, ...)                     \
  do {                                                                 \
    switch (dtype) {                                                   \
      AIM_CUDA_FLOAT_CASES_(T, __VA_ARGS__)                            \
      AIM_CUDA_TYPE_CASE_(::aim::DType::i8, int8_t, T, __VA_ARGS__)    \
      AIM_CUDA_TYPE_CASE_(::aim::DType::u8, uint8_t, T, __VA_ARGS__)   \
      AIM_CUDA_TYPE_CASE_(::aim::DType::i32, int32_t, T, __VA_ARGS__)  \
      AIM_CUDA_TYPE_CASE_(::aim::DType::i64, int64_t, T, __VA_ARGS__)  \
      AIM_CUDA_TYPE_CASE_(::aim::DType::boolean, bool, T, __VA_ARGS__) \
    }                                                                  \
  } while (0)

namespace aim::kernels::AIM_CUDA_NS {

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;

__host__ __device__ inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Conversions through float for every element type (fp16/bf16 compute in fp32).
template <class T>
__host__ __device__ __forceinline__ float to_f32(T v) {
  return static_cast<float>(v);
}
template <>
__host__ __device__ __forceinline__ float to_f32<__half>(__half v) {
  return __half2float(v);
}
template <>
__host__ __device__ __forceinline__ float to_f32<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <class T>
__host__ __device__ __forceinline__ T from_f32(float v) {
  return static_cast<T>(v);
}
template <>
__host__ __device__ __forceinline__ __half from_f32<__half>(float v) {
  return __float2half(v);
}
template <>
__host__ __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}
// Load into / store from an accumulator type A (float, or double for double data): f64 keeps
// its precision, 16-bit types go through float.
template <class A, class T>
__host__ __device__ __forceinline__ A to_acc(T v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    return A(to_f32(v));
  }
}
template <class T, class A>
__host__ __device__ __forceinline__ T from_acc(A v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    return from_f32<T>(float(v));
  }
}
// Accumulator type: double for double, float otherwise.
template <class T>
struct Acc {
  using type = float;
};
template <>
struct Acc<double> {
  using type = double;
};

// exp, log and -inf in the accumulation type A (float: expf/logf; double: exp/log).
template <class A>
__device__ __forceinline__ A exp_a(A v) {
  if constexpr (std::is_same_v<A, float>) {
    return expf(v);
  } else {
    return exp(v);
  }
}
template <class A>
__device__ __forceinline__ A log_a(A v) {
  if constexpr (std::is_same_v<A, float>) {
    return logf(v);
  } else {
    return log(v);
  }
}
template <class A>
__device__ __forceinline__ A neg_inf() {
  return -A(INFINITY);
}

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int o = kWarpSize / 2; o > 0; o /= 2) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
template <class T>
__device__ __forceinline__ T warp_max(T v) {
  for (int o = kWarpSize / 2; o > 0; o /= 2) {
    const T w = __shfl_xor_sync(kFullMask, v, o);
    v = w > v ? w : v;
  }
  return v;
}

// Sum over the block; every thread gets the result. `scratch` holds >= 32 values of T.
// blockDim.x must be a multiple of 32.
template <class T>
__device__ __forceinline__ T block_sum(T v, T* scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : T(0);
  return warp_sum(v);
}
template <class T>
__device__ __forceinline__ T block_max(T v, T* scratch, T lowest) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : lowest;
  return warp_max(v);
}

// The stream kernels on device d are launched on (the host thread's current stream).
inline cudaStream_t stream_for(Device d) {
  return static_cast<cudaStream_t>(current_stream(d.is_cuda() ? d.index : 0));
}

// Grid size for a grid-stride loop over n elements: enough blocks to fill the GPU, no more.
inline unsigned grid_for(int64_t n, int threads) {
  const int64_t blocks = ceil_div(n, threads);
  return unsigned(blocks < 65535 * 4 ? (blocks > 0 ? blocks : 1) : 65535 * 4);
}

// Zero a device buffer on the current stream (host memory under the emulator).
void memset_zero(void* p, size_t bytes, Device d);

}  // namespace aim::kernels::AIM_CUDA_NS
