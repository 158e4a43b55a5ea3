#include "bench/timing.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <vector>

#ifdef AIM_CUDA
#include <cuda_runtime.h>

#include "tensor/allocator.h"
#include "tensor/cuda_check.h"
#endif

namespace aim::bench {

RepTimer::RepTimer(Device dev) : dev_(dev) {
#ifdef AIM_CUDA
  if (dev_.is_cuda()) {
    cudaEvent_t a, b;
    AIM_CUDA_CHECK(cudaEventCreate(&a));
    AIM_CUDA_CHECK(cudaEventCreate(&b));
    start_ = a;
    stop_ = b;
  }
#endif
}

RepTimer::~RepTimer() {
#ifdef AIM_CUDA
  if (start_) cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  if (stop_) cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
#endif
}

void RepTimer::flush_caches() {
#ifdef AIM_CUDA
  if (dev_.is_cuda()) {
    // Kept for the process: one buffer per device, sized from its L2.
    static std::map<int, std::pair<void*, size_t>> buffers;
    auto it = buffers.find(dev_.index);
    if (it == buffers.end()) {
      int l2 = 0;
      AIM_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev_.index));
      const size_t bytes = std::max<size_t>(size_t(2) * size_t(l2), size_t(8) << 20);
      void* p = nullptr;
      int prev = 0;
      AIM_CUDA_CHECK(cudaGetDevice(&prev));
      AIM_CUDA_CHECK(cudaSetDevice(dev_.index));
      AIM_CUDA_CHECK(cudaMalloc(&p, bytes));
      AIM_CUDA_CHECK(cudaSetDevice(prev));
      it = buffers.emplace(dev_.index, std::make_pair(p, bytes)).first;
    }
    static int v = 0;
    v = (v + 1) & 0xff;
    AIM_CUDA_CHECK(cudaMemsetAsync(it->second.first, v, it->second.second,
                                   static_cast<cudaStream_t>(current_stream(dev_.index))));
    return;
  }
#endif
  static std::vector<char> buf(size_t(64) << 20);
  static char v = 0;
  std::memset(buf.data(), ++v, buf.size());
}

double RepTimer::time_ms(const std::function<void()>& fn) {
#ifdef AIM_CUDA
  if (dev_.is_cuda()) {
    auto s = static_cast<cudaStream_t>(current_stream(dev_.index));
    auto a = static_cast<cudaEvent_t>(start_), b = static_cast<cudaEvent_t>(stop_);
    AIM_CUDA_CHECK(cudaEventRecord(a, s));
    fn();
    AIM_CUDA_CHECK(cudaEventRecord(b, s));
    AIM_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    AIM_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms;
  }
#endif
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace aim::bench
