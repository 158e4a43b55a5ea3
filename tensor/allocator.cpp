#include "tensor/allocator.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace aim {

std::string AllocatorStats::str() const {
  return aim::str("current ", current_bytes, " B, peak ", peak_bytes, " B, reserved ",
                  reserved_bytes, " B, allocations ", alloc_count, ", cache hits ", cache_hits,
                  ", system allocations ", system_allocs);
}

size_t allocator_round_size(size_t n) {
  if (n == 0) return 64;
  if (n <= 4096) return (n + 63) & ~size_t(63);
  // Above 4 KiB: 8 classes per power of two (at most 12.5% waste).
  size_t p = 4096;
  while (p * 2 < n) p *= 2;
  const size_t step = p / 8;
  return (n + step - 1) / step * step;
}

namespace {

class CpuCachingAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    const size_t size = allocator_round_size(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.alloc_count;
    void* p = nullptr;
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      ++stats_.cache_hits;
    } else {
      p = std::aligned_alloc(64, size);
      if (!p) {
        release_cached_locked();
        p = std::aligned_alloc(64, size);
      }
      AIM_CHECK(p != nullptr, "[cpu allocator] out of memory allocating ", nbytes, " bytes; ",
                stats_.str());
      ++stats_.system_allocs;
      stats_.reserved_bytes += int64_t(size);
    }
    stats_.current_bytes += int64_t(size);
    if (stats_.current_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.current_bytes;
    return p;
  }
  void deallocate(void* p, size_t nbytes) override {
    if (!p) return;
    const size_t size = allocator_round_size(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    free_[size].push_back(p);
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

 private:
  void release_cached_locked() {
    for (auto& [size, blocks] : free_) {
      for (void* p : blocks) std::free(p);
      stats_.reserved_bytes -= int64_t(size * blocks.size());
      blocks.clear();
    }
  }
  mutable std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  AllocatorStats stats_;
};

}  // namespace

Allocator& cpu_allocator() {
  static CpuCachingAllocator* a = new CpuCachingAllocator();  // never destroyed: outlives tensors
  return *a;
}

}  // namespace aim
