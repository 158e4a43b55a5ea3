// SIMT emulator: runs our own CUDA kernels, compiled as plain C++ with -DAIM_SIMT, on the CPU.
//
// Blocks are spread over OS threads (OpenMP); the threads of one block run as fibers
// (Boost.Context) on one OS thread, which runs one block at a time. That is what makes
// `__shared__` (= `static thread_local`) one instance per block. Scheduling inside a block is
// deterministic: every thread runs until its next synchronisation point (barrier, warp
// collective, exit), one thread after another, in thread order (or reverse order, see
// set_schedule). How it works, the rules a kernel must follow, and what it cannot show:
// kernels/simt/README.md.
//
// Include order matters: the toolkit's host headers first (dim3, uint3, vector types, __half,
// __nv_bfloat16), then the emulation of the CUDA built-ins on top of them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>  // global-namespace math (expf, ::isnan, float overloads) as in device code

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

// ---------------------------------------------------------------------------------------------
// Keywords. In host mode the toolkit already defines __global__, __device__, __host__,
// __constant__, __managed__, __grid_constant__ as nothing and __forceinline__ as always_inline;
// __shared__ also as nothing, which we replace: one instance per block = per OS thread.
#undef __shared__
#define __shared__ static thread_local
#ifndef __global__
#define __global__
#endif
#ifndef __device__
#define __device__
#endif
#ifndef __host__
#define __host__
#endif
#ifndef __forceinline__
#define __forceinline__ inline __attribute__((always_inline))
#endif
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif
// __noinline__ is deliberately left undefined: libstdc++ uses __attribute__((__noinline__)).

// ---------------------------------------------------------------------------------------------
// Built-in variables: real thread-local variables (not macros, so host code may still use
// `blockDim` as a local name or `prop.warpSize` as a member). threadIdx is rewritten on every
// fiber switch, the other three once per block.
extern __thread uint3 threadIdx;
extern __thread uint3 blockIdx;
extern __thread dim3 blockDim;
extern __thread dim3 gridDim;
inline constexpr int warpSize = 32;

namespace aim::simt {

// Order in which the threads of a block are run between synchronisation points.
// Forward (default): thread 0 first. Reverse: the last thread first. A missing barrier shows up
// deterministically when a thread reads what a thread scheduled *after* it writes: tree
// reductions (read tid + s) under Forward, scans/neighbour reads (read tid - 1) under Reverse.
// The environment variable AIM_SIMT_SCHEDULE=forward|reverse sets the initial value.
enum class Schedule { Forward, Reverse };
void set_schedule(Schedule s);
Schedule schedule();

// 16-byte aligned (in fact 128) per-block buffer of the launch's dynamic shared memory size,
// filled with 0xFF bytes (NaN / -1) at the start of every block.
namespace detail {
extern __thread void* g_dyn_smem;
}
inline void* dynamic_shared() { return detail::g_dyn_smem; }

// Type-erased launch, run by simt.cpp.
struct LaunchSpec {
  dim3 grid, block;
  size_t smem;
  const char* name;
  void (*thunk)(const void* state);  // runs the kernel once for the current thread
  const void* state;
};
// Runs the whole grid synchronously; throws std::runtime_error on a bad configuration, a
// deadlock or a warp-collective misuse, and rethrows the first exception a kernel thread threw.
void execute(const LaunchSpec& spec);

// Launch(grid, block, smem, "name", kernel)(args...): converts args to the kernel's parameter
// types (as a CUDA launch does) and runs the grid. Class template arguments are deduced from the
// kernel's function pointer type.
template <class... P>
class Launch {
 public:
  Launch(dim3 grid, dim3 block, size_t smem, const char* name, void (*kernel)(P...))
      : grid_(grid), block_(block), smem_(smem), name_(name), kernel_(kernel) {}

  template <class... A>
  void operator()(A&&... args) const {
    static_assert(sizeof...(A) == sizeof...(P), "AIM_LAUNCH: wrong number of kernel arguments");
    const State state{kernel_, Params(std::forward<A>(args)...)};
    execute(LaunchSpec{grid_, block_, smem_, name_, &call, &state});
  }

 private:
  using Params = std::tuple<std::decay_t<P>...>;
  struct State {
    void (*kernel)(P...);
    Params params;
  };
  static void call(const void* s) {
    const State* st = static_cast<const State*>(s);
    std::apply(st->kernel, st->params);  // each thread gets its own copy of the parameters
  }

  dim3 grid_, block_;
  size_t smem_;
  const char* name_;
  void (*kernel_)(P...);
};

namespace detail {
enum class ShflMode : int { Idx = 0, Up = 1, Down = 2, Bfly = 3 };
enum class VoteKind : int { Ballot = 0, Any = 1, All = 2, SyncWarp = 3 };
enum class ReduceOp : int { AddU, AddS, MinU, MinS, MaxU, MaxS, And, Or, Xor };

// Block barrier; returns the number of arrived threads whose pred was nonzero, via *arrived
// the number of threads that took part.
int block_sync(int pred, int* arrived);
// Warp rendezvous of the lanes in mask (lanes that exited do not count). b, c as in PTX shfl.
void shfl(unsigned mask, const void* in, void* out, unsigned size, ShflMode mode, int b, int c);
unsigned vote(unsigned mask, int pred, VoteKind kind, unsigned* participating);
unsigned match(unsigned mask, const void* v, unsigned size, bool all, int* pred);
unsigned reduce(unsigned mask, unsigned v, ReduceOp op);
unsigned active_mask();
[[noreturn]] void fail(const char* what);

template <class T>
inline T shfl_t(unsigned mask, const T& var, ShflMode mode, int b, int width, bool up) {
  static_assert(sizeof(T) <= 16, "warp shuffle of a type larger than 16 bytes");
  if (width < 1 || width > 32 || (width & (width - 1)) != 0)
    fail("__shfl*_sync: width must be a power of two in [1, 32]");
  const int c = ((32 - width) << 8) | (up ? 0 : 0x1f);
  T r = var;
  shfl(mask, static_cast<const void*>(&var), static_cast<void*>(&r), unsigned(sizeof(T)), mode, b,
       c);
  return r;
}

template <class T>
inline T bits_as(const void* p) {
  T r;
  std::memcpy(static_cast<void*>(&r), p, sizeof(T));
  return r;
}
}  // namespace detail
}  // namespace aim::simt

// ---------------------------------------------------------------------------------------------
// Synchronisation.
inline void __syncthreads() {
  int n;
  ::aim::simt::detail::block_sync(0, &n);
}
inline int __syncthreads_count(int pred) {
  int n;
  return ::aim::simt::detail::block_sync(pred, &n);
}
inline int __syncthreads_and(int pred) {
  int n;
  return ::aim::simt::detail::block_sync(pred, &n) == n;
}
inline int __syncthreads_or(int pred) {
  int n;
  return ::aim::simt::detail::block_sync(pred, &n) != 0;
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::aim::simt::detail::vote(mask, 0, ::aim::simt::detail::VoteKind::SyncWarp, nullptr);
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
inline void __nanosleep(unsigned) {}
[[noreturn]] inline void __trap() { ::aim::simt::detail::fail("__trap() called in a kernel"); }
inline long long clock64() {  // nanoseconds, not cycles
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// ---------------------------------------------------------------------------------------------
// Warp primitives (lanes = consecutive threads, threadIdx linearised x-fastest).
template <class T>
inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize) {
  return ::aim::simt::detail::shfl_t(mask, var, ::aim::simt::detail::ShflMode::Idx, src_lane, width,
                                     false);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  return ::aim::simt::detail::shfl_t(mask, var, ::aim::simt::detail::ShflMode::Up, int(delta),
                                     width, true);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  return ::aim::simt::detail::shfl_t(mask, var, ::aim::simt::detail::ShflMode::Down, int(delta),
                                     width, false);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize) {
  return ::aim::simt::detail::shfl_t(mask, var, ::aim::simt::detail::ShflMode::Bfly, lane_mask,
                                     width, false);
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
  return ::aim::simt::detail::vote(mask, pred, ::aim::simt::detail::VoteKind::Ballot, nullptr);
}
inline int __any_sync(unsigned mask, int pred) {
  return ::aim::simt::detail::vote(mask, pred, ::aim::simt::detail::VoteKind::Any, nullptr) != 0;
}
inline int __all_sync(unsigned mask, int pred) {
  unsigned part = 0;
  const unsigned b =
      ::aim::simt::detail::vote(mask, pred, ::aim::simt::detail::VoteKind::All, &part);
  return b == part;
}
inline unsigned __activemask() { return ::aim::simt::detail::active_mask(); }
template <class T>
inline unsigned __match_any_sync(unsigned mask, T value) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "__match_any_sync: 32- or 64-bit types");
  return ::aim::simt::detail::match(mask, &value, unsigned(sizeof(T)), false, nullptr);
}
template <class T>
inline unsigned __match_all_sync(unsigned mask, T value, int* pred) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "__match_all_sync: 32- or 64-bit types");
  return ::aim::simt::detail::match(mask, &value, unsigned(sizeof(T)), true, pred);
}
#define AIM_SIMT_REDUCE_(name, T, op)                                                           \
  inline T name(unsigned mask, T value) {                                                       \
    return T(                                                                                   \
        ::aim::simt::detail::reduce(mask, unsigned(value), ::aim::simt::detail::ReduceOp::op)); \
  }
AIM_SIMT_REDUCE_(__reduce_add_sync, unsigned, AddU)
AIM_SIMT_REDUCE_(__reduce_add_sync, int, AddS)
AIM_SIMT_REDUCE_(__reduce_min_sync, unsigned, MinU)
AIM_SIMT_REDUCE_(__reduce_min_sync, int, MinS)
AIM_SIMT_REDUCE_(__reduce_max_sync, unsigned, MaxU)
AIM_SIMT_REDUCE_(__reduce_max_sync, int, MaxS)
AIM_SIMT_REDUCE_(__reduce_and_sync, unsigned, And)
AIM_SIMT_REDUCE_(__reduce_or_sync, unsigned, Or)
AIM_SIMT_REDUCE_(__reduce_xor_sync, unsigned, Xor)
#undef AIM_SIMT_REDUCE_

// ---------------------------------------------------------------------------------------------
// Atomics: real atomics (blocks run concurrently on several OS threads). All return the old
// value, as in CUDA. Floating-point adds are compare-and-swap loops.
#define AIM_SIMT_ATOMIC_INT_(T)                                                                  \
  inline T atomicAdd(T* a, T v) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }           \
  inline T atomicSub(T* a, T v) { return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST); }           \
  inline T atomicExch(T* a, T v) { return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST); }         \
  inline T atomicAnd(T* a, T v) { return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST); }           \
  inline T atomicOr(T* a, T v) { return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST); }             \
  inline T atomicXor(T* a, T v) { return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST); }           \
  inline T atomicCAS(T* a, T compare, T v) {                                                     \
    __atomic_compare_exchange_n(a, &compare, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);      \
    return compare;                                                                              \
  }                                                                                              \
  inline T atomicMax(T* a, T v) {                                                                \
    T old = __atomic_load_n(a, __ATOMIC_RELAXED);                                                \
    while (old < v &&                                                                            \
           !__atomic_compare_exchange_n(a, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) { \
    }                                                                                            \
    return old;                                                                                  \
  }                                                                                              \
  inline T atomicMin(T* a, T v) {                                                                \
    T old = __atomic_load_n(a, __ATOMIC_RELAXED);                                                \
    while (v < old &&                                                                            \
           !__atomic_compare_exchange_n(a, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) { \
    }                                                                                            \
    return old;                                                                                  \
  }
AIM_SIMT_ATOMIC_INT_(int)
AIM_SIMT_ATOMIC_INT_(unsigned)
AIM_SIMT_ATOMIC_INT_(unsigned long long)
AIM_SIMT_ATOMIC_INT_(long long)
#undef AIM_SIMT_ATOMIC_INT_
inline unsigned short atomicCAS(unsigned short* a, unsigned short compare, unsigned short v) {
  __atomic_compare_exchange_n(a, &compare, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return compare;
}
// atomicInc/Dec: ((old >= v) ? 0 : old + 1) and ((old == 0 || old > v) ? v : old - 1).
inline unsigned atomicInc(unsigned* a, unsigned v) {
  unsigned old = __atomic_load_n(a, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(a, &old, old >= v ? 0u : old + 1u, true, __ATOMIC_SEQ_CST,
                                      __ATOMIC_RELAXED)) {
  }
  return old;
}
inline unsigned atomicDec(unsigned* a, unsigned v) {
  unsigned old = __atomic_load_n(a, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(a, &old, (old == 0 || old > v) ? v : old - 1u, true,
                                      __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
  }
  return old;
}

namespace aim::simt::detail {
// Read-modify-write of a T through a same-sized unsigned integer CAS loop.
template <class T, class U, class F>
inline T atomic_rmw_bits(T* addr, F f) {
  static_assert(sizeof(T) == sizeof(U), "size mismatch");
  U* a = reinterpret_cast<U*>(addr);
  U old = __atomic_load_n(a, __ATOMIC_RELAXED);
  for (;;) {
    const T cur = bits_as<T>(&old);
    const T next = f(cur);
    U nbits;
    std::memcpy(&nbits, static_cast<const void*>(&next), sizeof(U));
    if (__atomic_compare_exchange_n(a, &old, nbits, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
      return cur;
  }
}
}  // namespace aim::simt::detail

inline float atomicAdd(float* a, float v) {
  return ::aim::simt::detail::atomic_rmw_bits<float, uint32_t>(a, [v](float x) { return x + v; });
}
inline double atomicAdd(double* a, double v) {
  return ::aim::simt::detail::atomic_rmw_bits<double, uint64_t>(a, [v](double x) { return x + v; });
}
inline float atomicExch(float* a, float v) {
  return ::aim::simt::detail::atomic_rmw_bits<float, uint32_t>(a, [v](float) { return v; });
}
inline float atomicMax(float* a, float v) {  // not in CUDA, but commonly hand-written via CAS
  return ::aim::simt::detail::atomic_rmw_bits<float, uint32_t>(
      a, [v](float x) { return x < v ? v : x; });
}
inline float atomicMin(float* a, float v) {
  return ::aim::simt::detail::atomic_rmw_bits<float, uint32_t>(
      a, [v](float x) { return v < x ? v : x; });
}
inline __half atomicAdd(__half* a, __half v) {
  return ::aim::simt::detail::atomic_rmw_bits<__half, uint16_t>(
      a, [v](__half x) { return __float2half(__half2float(x) + __half2float(v)); });
}
inline __nv_bfloat16 atomicAdd(__nv_bfloat16* a, __nv_bfloat16 v) {
  return ::aim::simt::detail::atomic_rmw_bits<__nv_bfloat16, uint16_t>(a, [v](__nv_bfloat16 x) {
    return __float2bfloat16(__bfloat162float(x) + __bfloat162float(v));
  });
}
inline __half2 atomicAdd(__half2* a, __half2 v) {
  return ::aim::simt::detail::atomic_rmw_bits<__half2, uint32_t>(a, [v](__half2 x) {
    return __floats2half2_rn(__low2float(x) + __low2float(v), __high2float(x) + __high2float(v));
  });
}
inline __nv_bfloat162 atomicAdd(__nv_bfloat162* a, __nv_bfloat162 v) {
  return ::aim::simt::detail::atomic_rmw_bits<__nv_bfloat162, uint32_t>(a, [v](__nv_bfloat162 x) {
    return __floats2bfloat162_rn(__low2float(x) + __low2float(v),
                                 __high2float(x) + __high2float(v));
  });
}

// ---------------------------------------------------------------------------------------------
// Intrinsics and math that device code has and C++ lacks. Fast-math variants are the accurate
// functions (results may differ from the GPU in the last bits, never in the other direction).
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return powf(10.0f, x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline void __sincosf(float x, float* s, float* c) { *s = sinf(x), *c = cosf(x); }
inline float __tanhf(float x) { return tanhf(x); }
inline float __fdividef(float x, float y) { return x / y; }
inline float fdividef(float x, float y) { return x / y; }
inline float __fdiv_rn(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
inline float __fadd_rn(float x, float y) { return x + y; }
inline float __fsub_rn(float x, float y) { return x - y; }
inline float __fmul_rn(float x, float y) { return x * y; }
inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
inline double __dadd_rn(double x, double y) { return x + y; }
inline double __dmul_rn(double x, double y) { return x * y; }
inline double __fma_rn(double x, double y, double z) { return fma(x, y, z); }
inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }  // NaN->0
inline float normcdff(float x) { return 0.5f * erfcf(-x * 0.70710678118654752f); }
inline double normcdf(double x) { return 0.5 * erfc(-x * 0.70710678118654752440); }
inline float __int2float_rn(int x) { return float(x); }
inline float __uint2float_rn(unsigned x) { return float(x); }
inline float __ll2float_rn(long long x) { return float(x); }
inline float __double2float_rn(double x) { return float(x); }
inline int __float2int_rn(float x) { return int(nearbyintf(x)); }  // default mode: to nearest
inline int __float2int_rz(float x) { return int(truncf(x)); }
inline int __float2int_rd(float x) { return int(floorf(x)); }
inline int __float2int_ru(float x) { return int(ceilf(x)); }
inline unsigned __float2uint_rn(float x) { return unsigned(nearbyintf(x)); }
inline unsigned __float2uint_rz(float x) { return unsigned(truncf(x)); }
inline long long __float2ll_rn(float x) { return (long long)(nearbyintf(x)); }
inline int __double2int_rn(double x) { return int(nearbyint(x)); }
inline int __float_as_int(float x) { return ::aim::simt::detail::bits_as<int>(&x); }
inline unsigned __float_as_uint(float x) { return ::aim::simt::detail::bits_as<unsigned>(&x); }
inline float __int_as_float(int x) { return ::aim::simt::detail::bits_as<float>(&x); }
inline float __uint_as_float(unsigned x) { return ::aim::simt::detail::bits_as<float>(&x); }
inline long long __double_as_longlong(double x) {
  return ::aim::simt::detail::bits_as<long long>(&x);
}
inline double __longlong_as_double(long long x) { return ::aim::simt::detail::bits_as<double>(&x); }

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(unsigned(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  return __builtin_bswap32(x);
}
inline unsigned long long __brevll(unsigned long long x) {
  return (static_cast<unsigned long long>(__brev(unsigned(x))) << 32) | __brev(unsigned(x >> 32));
}
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const unsigned long long v = (static_cast<unsigned long long>(y) << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= unsigned((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
}
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned s) {
  const unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
  return unsigned((v << (s & 31)) >> 32);
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned s) {
  const unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
  return unsigned(v >> (s & 31));
}
inline int __mulhi(int x, int y) { return int((static_cast<long long>(x) * y) >> 32); }
inline unsigned __umulhi(unsigned x, unsigned y) {
  return unsigned((static_cast<unsigned long long>(x) * y) >> 32);
}
inline long long __mul64hi(long long x, long long y) {
  return (long long)((static_cast<__int128>(x) * y) >> 64);
}
inline unsigned long long __umul64hi(unsigned long long x, unsigned long long y) {
  return (unsigned long long)((static_cast<unsigned __int128>(x) * y) >> 64);
}
inline int __mul24(int x, int y) { return ((x << 8) >> 8) * ((y << 8) >> 8); }
inline unsigned __umul24(unsigned x, unsigned y) { return (x & 0xffffffu) * (y & 0xffffffu); }
inline int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; ++i) c += int(int8_t(a >> (8 * i))) * int(int8_t(b >> (8 * i)));
  return c;
}
inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) {
  for (int i = 0; i < 4; ++i) c += ((a >> (8 * i)) & 0xffu) * ((b >> (8 * i)) & 0xffu);
  return c;
}

// Cache-hinted loads and stores: plain memory accesses.
template <class T>
inline T __ldg(const T* p) {
  return *p;
}
template <class T>
inline T __ldcg(const T* p) {
  return *p;
}
template <class T>
inline T __ldca(const T* p) {
  return *p;
}
template <class T>
inline T __ldcs(const T* p) {
  return *p;
}
template <class T>
inline T __ldlu(const T* p) {
  return *p;
}
template <class T>
inline T __ldcv(const T* p) {
  return *p;
}
template <class T>
inline void __stcg(T* p, T v) {
  *p = v;
}
template <class T>
inline void __stcs(T* p, T v) {
  *p = v;
}
template <class T>
inline void __stwb(T* p, T v) {
  *p = v;
}
template <class T>
inline void __stwt(T* p, T v) {
  *p = v;
}

// Unqualified min/max as device code has them (same overload set as CUDA's math headers).
#define AIM_SIMT_MINMAX_(T)                        \
  inline T min(T a, T b) { return b < a ? b : a; } \
  inline T max(T a, T b) { return a < b ? b : a; }
AIM_SIMT_MINMAX_(int)
AIM_SIMT_MINMAX_(unsigned)
AIM_SIMT_MINMAX_(long)
AIM_SIMT_MINMAX_(unsigned long)
AIM_SIMT_MINMAX_(long long)
AIM_SIMT_MINMAX_(unsigned long long)
#undef AIM_SIMT_MINMAX_
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline double min(float a, double b) { return fmin(double(a), b); }
inline double min(double a, float b) { return fmin(a, double(b)); }
inline double max(float a, double b) { return fmax(double(a), b); }
inline double max(double a, float b) { return fmax(a, double(b)); }
inline unsigned min(int a, unsigned b) { return min(unsigned(a), b); }
inline unsigned min(unsigned a, int b) { return min(a, unsigned(b)); }
inline unsigned max(int a, unsigned b) { return max(unsigned(a), b); }
inline unsigned max(unsigned a, int b) { return max(a, unsigned(b)); }
inline unsigned umin(unsigned a, unsigned b) { return min(a, b); }
inline unsigned umax(unsigned a, unsigned b) { return max(a, b); }
inline long long llmin(long long a, long long b) { return min(a, b); }
inline long long llmax(long long a, long long b) { return max(a, b); }
inline unsigned long long ullmin(unsigned long long a, unsigned long long b) { return min(a, b); }
inline unsigned long long ullmax(unsigned long long a, unsigned long long b) { return max(a, b); }
