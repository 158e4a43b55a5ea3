// Manual ASan poisoning for aim's caching allocators (tensor/allocator.cpp, and the emulated
// device's in tensor/cuda_runtime.cpp): a cached block is poisoned while it sits in the cache and
// the rounding slack past the requested bytes while it is handed out, so that a tensor's
// use-after-free or overflow does not land in memory ASan believes live. No-ops without ASan.
#pragma once

// GCC defines __SANITIZE_ADDRESS__, clang (the fuzz build) answers __has_feature: without the
// latter the fuzzers allocated 1 GiB segments (found by fuzz_planetoid: -malloc_limit_mb=1024).
#if defined(__SANITIZE_ADDRESS__)
#define AIM_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AIM_UNDER_ASAN 1
#endif
#endif
#if defined(AIM_UNDER_ASAN)
#include <sanitizer/asan_interface.h>
#define AIM_ASAN_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define AIM_ASAN_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define AIM_ASAN_POISON(p, n) ((void)(p), (void)(n))
#define AIM_ASAN_UNPOISON(p, n) ((void)(p), (void)(n))
#endif
