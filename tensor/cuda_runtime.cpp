// CUDA side of tensor/: device discovery, the caching allocator, streams, copies.
// In the AIM_CUDA_EMULATOR build the same code runs over the emulated runtime and NCCL of
// kernels/simt/device (no cuBLAS/cuDNN there).
#include <cuda_runtime.h>
#include <nccl.h>
#ifdef AIM_CUDA_EMULATED
#include "kernels/simt/device/device.h"
#else
#include <cublas_api.h>
#include <cudnn.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>
#include <vector>

#include "tensor/allocator.h"
#include "tensor/asan.h"
#include "tensor/cuda_check.h"
#include "tensor/host_memory.h"

namespace aim {

bool cuda_sync_after_launch() {
  static const bool on = [] {
    const char* e = std::getenv("AIM_SYNC");
    return e && e[0] == '1';
  }();
  return on;
}

namespace {
struct CudaProbe {
  int count = 0;
  std::string why;
  CudaProbe() {
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      why = str("no usable CUDA device: ", cudaGetErrorString(e));
      count = 0;
      cudaGetLastError();  // clear the sticky error
    } else if (count == 0) {
      why = "no CUDA device found";
    }
  }
};
const CudaProbe& probe() {
  static CudaProbe p;
  return p;
}
}  // namespace

int cuda_device_count() { return probe().count; }
std::string cuda_unavailable_reason() { return probe().why; }

std::vector<std::pair<std::string, std::string>> cuda_environment() {
  std::vector<std::pair<std::string, std::string>> env;
  auto ver = [](int v) {  // 12040 -> "12.4"
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
  };
  env.emplace_back("cuda_toolkit", ver(CUDART_VERSION));
#ifdef AIM_CUDA_EMULATED
  env.emplace_back("device", "emulated: " + std::to_string(cuda_device_count()) +
                                 " devices (AIM_SIM_GPUS), own kernels on the SIMT emulator, "
                                 "no vendor libraries");
#else
  env.emplace_back("cudnn_headers", std::to_string(CUDNN_MAJOR) + "." +
                                        std::to_string(CUDNN_MINOR) + "." +
                                        std::to_string(CUDNN_PATCHLEVEL));
  env.emplace_back("cudnn", std::to_string(cudnnGetVersion()));
#endif
  env.emplace_back("nccl_headers", std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) +
                                       "." + std::to_string(NCCL_PATCH));
  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess) env.emplace_back("nccl", std::to_string(nccl));
  if (cuda_device_count() == 0) {
    env.emplace_back("gpu", "none (" + cuda_unavailable_reason() + ")");
    return env;
  }
  int v = 0;
  if (cudaDriverGetVersion(&v) == cudaSuccess) env.emplace_back("driver_cuda", ver(v));
  if (cudaRuntimeGetVersion(&v) == cudaSuccess) env.emplace_back("cuda_runtime", ver(v));
  for (int i = 0; i < cuda_device_count(); ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    env.emplace_back("gpu" + std::to_string(i),
                     std::string(p.name) + ", " + std::to_string(p.totalGlobalMem >> 20) +
                         " MiB, " + std::to_string(p.multiProcessorCount) + " SMs, sm_" +
                         std::to_string(p.major) + std::to_string(p.minor));
  }
  return env;
}

namespace {
thread_local std::map<int, StreamHandle> t_streams;

// On the emulated device, device memory is host memory that the emulator's kernels and copies
// touch: under ASan a cached block is poisoned as in the CPU allocator (tensor/asan.h), so a
// kernel or copy on a freed tensor is reported. Sound there because streams run their work when
// it is submitted (kernels/simt/device/README.md); blocks a captured graph replays on are never
// poisoned. On a real GPU the pointers are not host memory: nothing to do.
#if defined(AIM_CUDA_EMULATED) && defined(AIM_UNDER_ASAN)
constexpr bool kPoisonDevice = true;
void device_poison(void* p, size_t n) { AIM_ASAN_POISON(p, n); }
void device_unpoison(void* p, size_t n) { AIM_ASAN_UNPOISON(p, n); }
#else
constexpr bool kPoisonDevice = false;
void device_poison(void*, size_t) {}
void device_unpoison(void*, size_t) {}
#endif

// s itself when a graph capture on it is active, else null.
StreamHandle active_capture(StreamHandle s) {
  if (!s) return nullptr;
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(static_cast<cudaStream_t>(s), &cs) != cudaSuccess ||
      cs != cudaStreamCaptureStatusActive)
    return nullptr;
  return s;
}

// Stream-aware caching: a block freed by work on stream S is reused only for allocations on S,
// so no cross-stream synchronisation is needed (a block used on another stream must be kept
// alive by its user until that stream is done).
class CudaCachingAllocator final : public Allocator {
 public:
  explicit CudaCachingAllocator(int device) : device_(device) {}
  void* allocate(size_t nbytes) override {
    const size_t size = allocator_round_size(nbytes);
    const StreamHandle s = current_stream(device_);
    // A block taken while a graph is captured may hold tensors of other sizes in the replays.
    const bool capturing = kPoisonDevice && active_capture(s);
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.alloc_count;
    void* p = nullptr;
    auto& pool = free_[{s, size}];
    if (!pool.empty()) {
      p = pool.back();
      pool.pop_back();
      ++stats_.cache_hits;
      device_unpoison(p, size);
    } else {
      int prev = 0;
      AIM_CUDA_CHECK(cudaGetDevice(&prev));
      AIM_CUDA_CHECK(cudaSetDevice(device_));
      cudaError_t e = cudaMalloc(&p, size);
      if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        release_cached_locked();
        e = cudaMalloc(&p, size);
      }
      cudaSetDevice(prev);
      if (e != cudaSuccess) {
        cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        AIM_FAIL("[cuda allocator] out of memory on cuda:", device_, " allocating ", nbytes,
                 " bytes", allocation_context(), " (", cudaGetErrorString(e), "); device free ",
                 free_b, " of ", total_b, " B; allocator: ", stats_.str());
      }
      ++stats_.system_allocs;
      stats_.reserved_bytes += int64_t(size);
    }
    if (!capturing && !graph_pools_.count(s))
      device_poison(static_cast<char*>(p) + nbytes, size - nbytes);  // the rounding slack
    owner_[p] = s;
    stats_.current_bytes += int64_t(size);
    if (stats_.current_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.current_bytes;
    return p;
  }
  void deallocate(void* p, size_t nbytes) override {
    if (!p) return;
    const size_t size = allocator_round_size(nbytes);
#ifdef AIM_CUDA_EMULATED
    simt::device::check_block_free(p, size);  // no incomplete collective may still use it
#endif
    // A block freed while this thread captures a graph on another stream may be read by the
    // graph's replays: it joins the capturing stream's pool, which only the graph uses.
    const StreamHandle capturing = active_capture(current_stream(device_));
    std::lock_guard<std::mutex> lock(mu_);
    auto it = owner_.find(p);
    StreamHandle s = it == owner_.end() ? nullptr : it->second;
    if (it != owner_.end()) owner_.erase(it);
    if (capturing) s = capturing;
    device_unpoison(p, size);  // the slack, until the whole block is poisoned below
    if (!capturing && !graph_pools_.count(s)) device_poison(p, size);
    free_[{s, size}].push_back(p);
    stats_.current_bytes -= int64_t(size);
  }
  AllocatorStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void reset_peak() override {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.peak_bytes = stats_.current_bytes;
  }
  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mu_);
    release_cached_locked();
  }
  // A stream that captured a graph: its cached blocks are the graph's memory, never released.
  void keep_pool(StreamHandle s) {
    std::lock_guard<std::mutex> lock(mu_);
    graph_pools_.insert(s);
    if (kPoisonDevice)  // its free blocks become graph memory
      for (auto& [key, blocks] : free_)
        if (key.first == s)
          for (void* p : blocks) device_unpoison(p, key.second);
  }

 private:
  void release_cached_locked() {
    cudaDeviceSynchronize();
    for (auto& [key, blocks] : free_) {
      if (graph_pools_.count(key.first)) continue;
      for (void* p : blocks) {
        device_unpoison(p, key.second);  // the emulator may map the next block here
        cudaFree(p);
      }
      stats_.reserved_bytes -= int64_t(key.second * blocks.size());
      blocks.clear();
    }
  }
  int device_;
  mutable std::mutex mu_;
  std::map<std::pair<StreamHandle, size_t>, std::vector<void*>> free_;
  std::map<void*, StreamHandle> owner_;
  std::set<StreamHandle> graph_pools_;
  AllocatorStats stats_;
};
}  // namespace

Allocator& cuda_allocator(int device) {
  static std::mutex mu;
  // Never destroyed, the map too: tensors freed by static destructors at exit still find their
  // allocator, and LeakSanitizer sees the allocators reachable (a static map's destructor at exit
  // dropped the last pointers: every cached block was reported as leaked).
  static auto* allocators = new std::map<int, CudaCachingAllocator*>;
  std::lock_guard<std::mutex> lock(mu);
  AIM_CHECK(device >= 0 && device < cuda_device_count(), "cuda:", device, " is not available (",
            cuda_device_count(), " CUDA devices",
            cuda_unavailable_reason().empty() ? "" : "; " + cuda_unavailable_reason(), ")");
  auto& a = (*allocators)[device];
  if (!a) a = new CudaCachingAllocator(device);
  return *a;
}

namespace {
class PinnedHostAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    const size_t size = allocator_round_size(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.alloc_count;
    reclaim_locked();
    void* p = nullptr;
    auto& pool = free_[size];
    if (!pool.empty()) {
      p = pool.back();
      pool.pop_back();
      ++stats_.cache_hits;
    } else {
      const cudaError_t e = cudaHostAlloc(&p, size, cudaHostAllocPortable);  // every device's
      if (e != cudaSuccess) {
        cudaGetLastError();
        AIM_FAIL("[pinned host allocator] cudaHostAlloc of ", nbytes,
                 " bytes failed: ", cudaGetErrorString(e), "; allocator: ", stats_.str());
      }
      ++stats_.system_allocs;
      stats_.reserved_bytes += int64_t(size);
    }
    live_[uintptr_t(p)] = Block{size, {}};
    stats_.current_bytes += int64_t(size);
    stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.current_bytes);
    return p;
  }
  void deallocate(void* p, size_t) override {
    if (!p) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(uintptr_t(p));
    AIM_CHECK(it != live_.end(), "[pinned host allocator] freeing ", p, ", not a live block");
    Block b = std::move(it->second);
    live_.erase(it);
    stats_.current_bytes -= int64_t(b.size);
    if (b.events.empty())
      free_[b.size].push_back(p);
    else
      pending_.push_back({p, std::move(b)});
  }
  // A copy queued on `stream` reads the block holding `p` (when p is pinned memory of ours).
  void record_use(const void* p, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.upper_bound(uintptr_t(p));
    if (it == live_.begin()) return;
    --it;
    if (uintptr_t(p) >= it->first + it->second.size) return;
    cudaEvent_t e = nullptr;
    AIM_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    AIM_CUDA_CHECK(cudaEventRecord(e, stream));
    it->second.events.push_back(e);
  }
  AllocatorStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void reset_peak() override {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.peak_bytes = stats_.current_bytes;
  }
  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mu_);
    reclaim_locked();
    for (auto& [size, blocks] : free_) {
      for (void* p : blocks) cudaFreeHost(p);
      stats_.reserved_bytes -= int64_t(size * blocks.size());
      blocks.clear();
    }
  }

 private:
  struct Block {
    size_t size = 0;
    std::vector<cudaEvent_t> events;  // copies reading it; reusable when all have completed
  };
  // Freed blocks whose copies have all run go back to the cache (a query, never a wait).
  void reclaim_locked() {
    for (size_t i = 0; i < pending_.size();) {
      Block& b = pending_[i].second;
      while (!b.events.empty() && cudaEventQuery(b.events.back()) == cudaSuccess) {
        cudaEventDestroy(b.events.back());
        b.events.pop_back();
      }
      cudaGetLastError();  // cudaErrorNotReady is not an error here
      if (b.events.empty()) {
        free_[b.size].push_back(pending_[i].first);
        pending_[i] = std::move(pending_.back());
        pending_.pop_back();
      } else {
        ++i;
      }
    }
  }
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  std::map<uintptr_t, Block> live_;
  std::vector<std::pair<void*, Block>> pending_;
  AllocatorStats stats_;
};
PinnedHostAllocator& pinned() {
  static PinnedHostAllocator* a = new PinnedHostAllocator();  // never destroyed
  return *a;
}
thread_local int64_t t_captured_uploads = 0;
}  // namespace

Allocator& pinned_host_allocator() { return pinned(); }
int64_t captured_uploads() { return t_captured_uploads; }

void stream_wait(int device, StreamHandle waiter, StreamHandle waitee) {
  if (waiter == waitee) return;
  DeviceGuard g(cuda_device(device));
  cudaEvent_t e = nullptr;
  AIM_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  AIM_CUDA_CHECK(cudaEventRecord(e, static_cast<cudaStream_t>(waitee)));
  AIM_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(waiter), e, 0));
  AIM_CUDA_CHECK(cudaEventDestroy(e));  // released once the wait is satisfied
}

StreamHandle current_stream(int device) {
  auto it = t_streams.find(device);
  return it == t_streams.end() ? nullptr : it->second;
}
void set_current_stream(int device, StreamHandle s) { t_streams[device] = s; }

// Host synchronisations and device-to-host traffic of aim's own wrappers (copy_bytes,
// synchronize*), per device. The emulated runtime counts every call instead, its own included.
namespace {
struct SyncCounts {
  std::atomic<int64_t> syncs{0}, d2h_bytes{0}, d2h_copies{0};
};
SyncCounts& sync_counts(int device) {
  static SyncCounts counts[64];
  AIM_CHECK(device >= 0 && device < 64, "cuda:", device, ": device index out of range");
  return counts[device];
}
void count_sync(int device) { sync_counts(device).syncs.fetch_add(1); }
}  // namespace

DeviceSyncCounters device_sync_counters(Device d) {
  DeviceSyncCounters c;
  if (!d.is_cuda()) return c;
#ifdef AIM_CUDA_EMULATED
  const simt::device::Counters e = simt::device::counters(d.index);
  c.host_syncs = e.host_syncs;
  c.d2h_bytes = e.d2h_bytes;
  c.d2h_copies = e.d2h_copies;
  c.launches = e.launches;
#else
  const SyncCounts& s = sync_counts(d.index);
  c.host_syncs = s.syncs.load();
  c.d2h_bytes = s.d2h_bytes.load();
  c.d2h_copies = s.d2h_copies.load();
#endif
  return c;
}

DeviceGuard::DeviceGuard(Device d) {
  if (!d.is_cuda()) return;
  AIM_CHECK(d.index >= 0 && d.index < cuda_device_count(), d.str(), " is not available (",
            cuda_device_count(), " CUDA devices",
            cuda_unavailable_reason().empty() ? "" : "; " + cuda_unavailable_reason(), ")");
  AIM_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != d.index) {
    AIM_CUDA_CHECK(cudaSetDevice(d.index));
    changed_ = true;
  }
}
DeviceGuard::~DeviceGuard() {
  if (changed_) cudaSetDevice(previous_);  // no throwing from a destructor
}
void set_current_device(Device d) {
  if (d.is_cuda()) AIM_CUDA_CHECK(cudaSetDevice(d.index));
}

// Only a device-to-host copy waits: the host reads the bytes next. A host-to-device copy from
// pageable memory is staged before cudaMemcpyAsync returns, so the source may be reused at once;
// device-to-device copies are ordered on the stream like kernels.
void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t n) {
  if (n == 0) return;
  if (dst_dev.is_cpu() && src_dev.is_cpu()) {
    std::memcpy(dst, src, n);
    return;
  }
  const Device d = dst_dev.is_cuda() ? dst_dev : src_dev;
  const cudaMemcpyKind kind = dst_dev.is_cpu()   ? cudaMemcpyDeviceToHost
                              : src_dev.is_cpu() ? cudaMemcpyHostToDevice
                                                 : cudaMemcpyDeviceToDevice;
  DeviceGuard g(d);
  const auto stream = static_cast<cudaStream_t>(current_stream(d.index));
  if (kind == cudaMemcpyHostToDevice) {
    // Inside a graph capture a copy from pageable memory is illegal: an op's host-made plan
    // (lengths, offsets) is staged in pinned memory the process keeps, and every replay uploads
    // those same bytes — a plan computed at capture is frozen into the graph, as in any CUDA
    // graph. Outside a capture the pageable copy is staged by the driver.
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    AIM_CUDA_CHECK(cudaStreamIsCapturing(stream, &cs));
    if (cs == cudaStreamCaptureStatusActive) {
      ++t_captured_uploads;
      void* pinned = nullptr;
      AIM_CUDA_CHECK(cudaHostAlloc(&pinned, n, cudaHostAllocDefault));
      std::memcpy(pinned, src, n);
      static std::mutex mu;
      static std::vector<void*>* kept = new std::vector<void*>();  // until the process ends
      std::lock_guard<std::mutex> lock(mu);
      kept->push_back(pinned);
      src = pinned;
    }
  }
  AIM_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, kind, stream));
  if (kind == cudaMemcpyHostToDevice) pinned().record_use(src, stream);  // reuse after the copy
  if (kind == cudaMemcpyDeviceToHost) {
    SyncCounts& c = sync_counts(d.index);
    c.d2h_copies.fetch_add(1);
    c.d2h_bytes.fetch_add(int64_t(n));
    c.syncs.fetch_add(1);
    AIM_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
}

StreamHandle create_stream(int device) {
  DeviceGuard g(cuda_device(device));
  cudaStream_t s = nullptr;
  AIM_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

void destroy_stream(int device, StreamHandle s) {
  DeviceGuard g(cuda_device(device));
  AIM_CUDA_CHECK(cudaStreamDestroy(static_cast<cudaStream_t>(s)));
}

void begin_capture(int device, StreamHandle s) {
  DeviceGuard g(cuda_device(device));
  static_cast<CudaCachingAllocator&>(cuda_allocator(device)).keep_pool(s);
  AIM_CUDA_CHECK(
      cudaStreamBeginCapture(static_cast<cudaStream_t>(s), cudaStreamCaptureModeRelaxed));
}

GraphHandle end_capture(int device, StreamHandle s) {
  DeviceGuard g(cuda_device(device));
  cudaGraph_t graph = nullptr;
  const cudaError_t e = cudaStreamEndCapture(static_cast<cudaStream_t>(s), &graph);
  if (e != cudaSuccess) {
    cudaGetLastError();
    AIM_FAIL("CUDA graph capture failed: ", cudaGetErrorString(e),
             " (the captured step must not synchronise with the host or use another stream)");
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t ie = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (ie != cudaSuccess) {
    cudaGetLastError();
    AIM_FAIL("CUDA graph instantiation failed: ", cudaGetErrorString(ie));
  }
  return exec;
}

void launch_graph(GraphHandle g, StreamHandle s) {
  AIM_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(g), static_cast<cudaStream_t>(s)));
}

void destroy_graph(GraphHandle g) {
  AIM_CUDA_CHECK(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(g)));
}

void synchronize_stream(int device, StreamHandle s) {
  DeviceGuard g(cuda_device(device));
  count_sync(device);
  AIM_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(s)));
}

void synchronize(Device d) {
  if (!d.is_cuda()) return;
  DeviceGuard g(d);
  count_sync(d.index);
  AIM_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(current_stream(d.index))));
}

}  // namespace aim
