// The emulated CUDA device (build option AIM_CUDA_EMULATOR; kernels/simt/device/README.md).
//
// In that build `--device cuda[:N]` is served on the CPU: the CUDA runtime and NCCL calls aim
// makes are implemented by runtime.cpp and nccl.cpp over host memory tagged with its device, and
// every own kernel (compiled as C++ for the SIMT emulator) is launched through DeviceLaunch below,
// which checks its pointer arguments and runs it on its stream — or records it into the graph
// being captured there. The runtime checks what the hardware requires and counts the host
// synchronisations; this header is what the kernels' launch macro and aim's runtime wrappers use.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernels/simt/simt.h"

namespace aim::simt::device {

// Number of emulated devices: AIM_SIM_GPUS (default 8).
int device_count();

// Throws when `p`, the argument `arg` of kernel `kernel`, is not null and does not lie in memory
// of the current device (device memory of another device, or host memory).
void check_kernel_pointer(const void* p, const char* kernel, int arg);

// Runs `work` on stream s: now, after the work s waits for (collectives, events of other
// streams), or, while s is being captured, records it into the graph. The stream must belong to
// the current device.
void submit(cudaStream_t s, const char* what, std::function<void()> work);

// Called by the caching allocator when a block goes back to its cache: aborts the process, naming
// the work, when an incomplete collective still reads or writes the block (it would be handed to
// the next allocation while the collective uses it: the stream-ordering error of a freed block
// reused on another stream).
void check_block_free(const void* p, size_t bytes);

// Host synchronisations (stream/event/device synchronise, synchronous copies, device-to-host
// copies into pageable memory, cudaFree) and device-to-host traffic, per device since start.
struct Counters {
  int64_t host_syncs = 0, d2h_bytes = 0, d2h_copies = 0, launches = 0;
};
Counters counters(int device);

// A kernel launch on the emulated device: AIM_LAUNCH(grid, block, smem, stream, kernel)(args...)
// converts the arguments to the kernel's parameter types, checks every pointer parameter, and
// submits the grid to the stream (kernels/simt runs it).
template <class... P>
class DeviceLaunch {
 public:
  DeviceLaunch(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, const char* name,
               void (*kernel)(P...))
      : grid_(grid), block_(block), smem_(smem), stream_(stream), name_(name), kernel_(kernel) {}

  template <class... A>
  void operator()(A&&... args) const {
    static_assert(sizeof...(A) == sizeof...(P), "AIM_LAUNCH: wrong number of kernel arguments");
    auto state = std::make_shared<State>(State{kernel_, Params(std::forward<A>(args)...)});
    check(state->params, std::index_sequence_for<P...>{});
    const LaunchSpec spec{grid_, block_, smem_, name_, &call, nullptr};
    submit(stream_, name_, [state, spec] {
      LaunchSpec s = spec;
      s.state = state.get();
      execute(s);
    });
  }

 private:
  using Params = std::tuple<std::decay_t<P>...>;
  struct State {
    void (*kernel)(P...);
    Params params;
  };
  static void call(const void* s) {
    const State* st = static_cast<const State*>(s);
    std::apply(st->kernel, st->params);
  }
  template <size_t... I>
  void check(const Params& p, std::index_sequence<I...>) const {
    (check_one(std::get<I>(p), int(I)), ...);
  }
  template <class T>
  void check_one(const T& v, int arg) const {
    if constexpr (std::is_pointer_v<T>)
      check_kernel_pointer(static_cast<const void*>(v), name_, arg);
  }

  dim3 grid_, block_;
  size_t smem_;
  cudaStream_t stream_;
  const char* name_;
  void (*kernel_)(P...);
};

}  // namespace aim::simt::device
