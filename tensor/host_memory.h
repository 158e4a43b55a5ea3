// Host memory limits (tensor/allocator.cpp): the CPU allocator and the batch check before a run
// (data/batch_fits.h) refuse what cannot fit instead of letting the kernel's OOM killer end the
// process without a word.
#pragma once
#include <cstdint>
#include <string>

namespace aim {

// The bytes of host memory aim's CPU tensors may hold: AIM_CPU_MEMORY_LIMIT (bytes, or with a K,
// M or G suffix) when set, else this machine's physical memory. The CPU allocator refuses an
// allocation that would take its live tensors above it (an aim::Error naming the size, the
// limit and the allocator's state).
uint64_t host_memory_limit();
// Replaces the limit for this process (tests; 0 restores the one above).
void set_host_memory_limit(uint64_t bytes);
std::string format_bytes(double bytes);  // "3.2 GiB", "512 KiB", "17 B"

// Where the calling thread is when an allocation fails, for the allocators' messages: " (in step
// 3, fwd, layer3)" or "" when nothing is known. The profiler (which tracks its step, phase and
// layer scopes on every thread, profiling on or off) installs the source; tensor/ cannot call it.
std::string allocation_context();
void set_allocation_context_source(std::string (*source)());

}  // namespace aim
