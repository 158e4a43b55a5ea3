// Internals shared by the emulated CUDA runtime (runtime.cpp) and the emulated NCCL (nccl.cpp).
#pragma once
#include <cuda_runtime.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace aim::simt::device {

using Clock = std::chrono::steady_clock;

// Work a stream must wait for before it runs anything else: a collective whose peers have not
// all arrived. The rank that arrives last completes it (or an abort fails it).
struct Pending {
  std::string what;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::string error;  // set when it failed (aborted communicator)
  Clock::time_point finished;
  std::vector<std::pair<uintptr_t, size_t>> buffers;  // the memory it reads and writes
  void complete(const std::string& err = "");
  bool is_done();
};
using PendingPtr = std::shared_ptr<Pending>;

// Where a pointer lies: device memory of `device`, pinned host memory (device = -1), or pageable
// host memory (found = false).
struct Where {
  bool found = false, pinned = false;
  int device = -1;
  uintptr_t base = 0;
  size_t size = 0;
};
Where where(const void* p);

int current_device();
// The stream's device; throws for a destroyed or unknown stream.
int stream_device(cudaStream_t s);
// Makes later work on s wait for p (an issued collective).
void stream_add_pending(cudaStream_t s, PendingPtr p);
// True while s is being captured into a graph.
bool stream_capturing(cudaStream_t s);
// AIM_EMU_PROTECT=1: device memory is mapped without access while no emulated device work runs,
// so host code that reads or writes it directly (not through a copy) faults, and the fault names
// the block. DeviceAccess is the scope of emulated device work (kernels, copies, collectives):
// while any thread is inside one, device memory is accessible (so the check is exact in a
// single-threaded run and best effort with rank threads).
bool protect_mode();
class DeviceAccess {
 public:
  DeviceAccess();
  ~DeviceAccess();
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;
};

// Makes p known to check_block_free (with its buffers filled in by then, under its lock).
void register_pending(const PendingPtr& p);
// Waits until p is done (throws on failure or after AIM_EMU_WAIT_S seconds, default 600).
void wait_pending(const PendingPtr& p, const std::string& for_what);

}  // namespace aim::simt::device
