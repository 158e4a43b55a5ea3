// Caching allocators. Freed blocks go back to a cache and are reused (the CPU's: a per-size-class
// cache up to 1 MiB, above, blocks split from and merged back into 1 GiB segments, chosen to touch
// the fewest new pages; the GPUs': per size class); memory is returned to the system only by
// empty_cache(). On this machine first touch of fresh memory costs ~12 us per 4 KiB page
// (MACHINE.md), so the hot path must never hit the OS.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tensor/device.h"

namespace aim {

struct AllocatorStats {
  int64_t current_bytes = 0;   // bytes in live blocks (rounded sizes)
  int64_t peak_bytes = 0;      // high-water mark of current_bytes since reset_peak()
  int64_t reserved_bytes = 0;  // live + cached bytes obtained from the system (the CPU's: whole
                               // segments, address space of which only touched pages are resident)
  int64_t alloc_count = 0;     // allocate() calls
  int64_t cache_hits = 0;      // served from the cache
  int64_t system_allocs = 0;   // served by malloc / cudaMalloc
  std::string str() const;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;  // never returns null: throws aim::Error
  virtual void deallocate(void* p, size_t nbytes) = 0;
  virtual AllocatorStats stats() const = 0;
  virtual void reset_peak() = 0;
  virtual void empty_cache() = 0;  // give cached (free) blocks back to the system
};

// Size classes: sizes are rounded up so a freed block serves later requests of similar size.
size_t allocator_round_size(size_t nbytes);

Allocator& cpu_allocator();
// A separate instance of cpu_allocator()'s kind, for tests of its policy (it frees its cached
// blocks when destroyed; live ones must be freed first).
std::unique_ptr<Allocator> new_cpu_caching_allocator();
Allocator& cuda_allocator(int device);  // throws when built without CUDA
// Page-locked host memory (cudaHostAlloc) for host tensors copied to a GPU (Tensor::pin_memory):
// copies from it are asynchronous, so a freed block may still be read by a queued copy; it is
// handed out again only after the events recorded at its copies have completed (queried, never
// waited for). Throws when built without CUDA.
Allocator& pinned_host_allocator();

// Current CUDA stream of this host thread for a device (nullptr = legacy default stream).
using StreamHandle = void*;
StreamHandle current_stream(int device);
void set_current_stream(int device, StreamHandle s);

// CUDA streams and graphs (aim-infer --cuda-graph). A capture records the work this thread
// queues on stream s (relaxed mode: the caching allocator may still reserve memory); the
// instantiated graph replays it on the same buffers. Errors name the CUDA failure (a host
// synchronisation inside the captured code ends the capture with an error).
using GraphHandle = void*;
StreamHandle create_stream(int device);  // non-blocking
void destroy_stream(int device, StreamHandle s);
void begin_capture(int device, StreamHandle s);
GraphHandle end_capture(int device, StreamHandle s);  // instantiated, ready to launch
void launch_graph(GraphHandle g, StreamHandle s);
void destroy_graph(GraphHandle g);
void synchronize_stream(int device, StreamHandle s);
// Stream `waiter` waits (on the device, not the host) for the work queued on `waitee` so far.
void stream_wait(int device, StreamHandle waiter, StreamHandle waitee);
// Uploads made by copy_bytes inside captures (host data frozen into a graph) since the process
// started, on this thread: a captured training step must make none (its batch is copied into
// the graph's inputs before each replay).
int64_t captured_uploads();

// Host synchronisations and device-to-host copies on a CUDA device since the process started:
// what the emulated runtime counted (every call), else what aim's own wrappers did (copy_bytes,
// synchronize, synchronize_stream). Zero for the CPU. Diffs over steps give per-step counts.
struct DeviceSyncCounters {
  int64_t host_syncs = 0, d2h_bytes = 0, d2h_copies = 0, launches = 0;
};
DeviceSyncCounters device_sync_counters(Device d);

// Raw copies between devices on the current stream of the CUDA side; a device-to-host copy
// returns when the bytes are there (a host synchronisation), the others are stream-ordered.
void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t n);
void synchronize(Device d);

}  // namespace aim
