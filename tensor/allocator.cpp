#include "tensor/allocator.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tensor/host_memory.h"

// Under ASan (tools/sanitize.sh) a cached block is poisoned while it sits in the cache and the
// rounding slack past the requested bytes while it is handed out: without it a tensor's
// use-after-free or overflow lands in memory ASan believes live and goes unseen.
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define AIM_ASAN_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define AIM_ASAN_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define AIM_ASAN_POISON(p, n) ((void)(p), (void)(n))
#define AIM_ASAN_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

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

std::string format_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

namespace {
std::atomic<uint64_t> g_limit_override{0};
}  // namespace

void set_host_memory_limit(uint64_t bytes) { g_limit_override = bytes; }

uint64_t host_memory_limit() {
  if (const uint64_t o = g_limit_override.load(std::memory_order_relaxed)) return o;
  static const uint64_t limit = [] {
    if (const char* e = std::getenv("AIM_CPU_MEMORY_LIMIT"); e && *e) {
      char* end = nullptr;
      const double v = std::strtod(e, &end);
      const std::string unit = end ? end : "";
      const double mul = unit.empty()  ? 1
                         : unit == "K" ? 1024.0
                         : unit == "M" ? 1024.0 * 1024
                         : unit == "G" ? 1024.0 * 1024 * 1024
                                       : -1;
      AIM_CHECK(v > 0 && mul > 0, "AIM_CPU_MEMORY_LIMIT='", e,
                "': expected a positive number of bytes, optionally with K, M or G");
      return uint64_t(v * mul);
    }
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : ~uint64_t(0);
  }();
  return limit;
}

namespace {
std::string (*g_context_source)() = nullptr;
}  // namespace

std::string allocation_context() { return g_context_source ? g_context_source() : std::string(); }
void set_allocation_context_source(std::string (*source)()) { g_context_source = source; }

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
      if (uint64_t(stats_.current_bytes) + size > host_memory_limit()) {
        // Refused before the system is asked: past physical memory the OOM killer would end the
        // process without a word.
        release_cached_locked();
        AIM_FAIL("[cpu allocator] a tensor of ", format_bytes(double(nbytes)), allocation_context(),
                 " would take the live tensors from ", format_bytes(double(stats_.current_bytes)),
                 " above the host memory limit of ", format_bytes(double(host_memory_limit())),
                 " (this machine's memory; AIM_CPU_MEMORY_LIMIT sets it): a smaller --batch-size "
                 "or model configuration is needed; ",
                 stats_.str());
      }
      p = std::aligned_alloc(64, size);
      if (!p) {
        release_cached_locked();
        p = std::aligned_alloc(64, size);
      }
      AIM_CHECK(p != nullptr, "[cpu allocator] out of memory allocating ", nbytes, " bytes",
                allocation_context(), "; ", stats_.str());
      ++stats_.system_allocs;
      stats_.reserved_bytes += int64_t(size);
    }
    stats_.current_bytes += int64_t(size);
    if (stats_.current_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.current_bytes;
    AIM_ASAN_UNPOISON(p, nbytes);
    AIM_ASAN_POISON(static_cast<char*>(p) + nbytes, size - nbytes);
    return p;
  }
  void deallocate(void* p, size_t nbytes) override {
    if (!p) return;
    const size_t size = allocator_round_size(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    AIM_ASAN_POISON(p, size);
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
      for (void* p : blocks) {
        AIM_ASAN_UNPOISON(p, size);
        std::free(p);
      }
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
