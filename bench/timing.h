// Timing of one repetition of benchmark work on a device, shared by the benchmarks (foundation,
// op lab). CPU: the steady clock around the call. CUDA: an event pair recorded on the device's
// current stream around the work, so launch overhead on the host and the synchronisation are not
// counted; the call waits for the second event.
#pragma once
#include <functional>

#include "tensor/device.h"

namespace aim::bench {

class RepTimer {
 public:
  explicit RepTimer(Device dev);
  ~RepTimer();
  RepTimer(const RepTimer&) = delete;
  RepTimer& operator=(const RepTimer&) = delete;

  // Evicts the caches before a cold repetition. CUDA: cudaMemsetAsync on the current stream of a
  // device buffer twice the L2 size (allocated once per device), ordered before the next timed
  // work and outside its events. CPU: a host memset of 64 MB (more than the last-level cache).
  void flush_caches();

  // Runs fn once and returns its time in milliseconds.
  double time_ms(const std::function<void()>& fn);

 private:
  Device dev_;
  void* start_ = nullptr;  // cudaEvent_t, CUDA only
  void* stop_ = nullptr;
};

}  // namespace aim::bench
