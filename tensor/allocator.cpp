#include "tensor/allocator.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "tensor/asan.h"
#include "tensor/host_memory.h"

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

// Two pools. Blocks up to kSmallMax bytes: a cache per size class (allocator_round_size), the
// fast path for parameters, optimizer state and small activations. Larger blocks are carved from
// segments of at least kSegmentBytes: a request takes the free block that touches the fewest
// pages never touched before (then the smallest, then the lowest address), split when the
// remainder is worth keeping, and a freed block merges with its free neighbours. A segment's
// untouched tail costs address space, not memory (the kernel maps a page at its first touch, at
// ~12 us per 4 KiB here: MACHINE.md), so the resident memory is what was ever handed out.
// A per-class cache alone kept one block per distinct size: DenseNet's growing concatenations
// cached a block at nearly every layer (1.45 GB resident for < 250 MiB of live tensors).
// Peak resident memory at batch 16, 224 px, old -> new (PyTorch 1.13), MiB: inference ResNet-50
// 727 -> 476 (582), DenseNet-121 1459 -> 264 (653), SynNet 3617 -> 960 (1123); a training step
// ResNet-50 2013 -> 1724 (1916), DenseNet-121 2981 -> 2149 (2388), SynNet 5666 -> 3606 (4928).
// Tried and measured worse: address-ordered first fit (ResNet-50 training 2190), best fit
// (SynNet inference 1239-1757), smaller segments (64-256 MiB: SynNet's 147 MiB tensors).
class CpuCachingAllocator final : public Allocator {
 public:
  static constexpr size_t kSmallMax = size_t(1) << 20;
#if defined(AIM_UNDER_ASAN)
  // A new segment is poisoned whole: 1 GiB would write 128 MiB of shadow per process.
  static constexpr size_t kSegmentBytes = size_t(64) << 20;
#else
  static constexpr size_t kSegmentBytes = size_t(1024) << 20;
#endif
  static constexpr size_t kLargeAlign = 4096;             // large requests round to whole pages
  static constexpr size_t kMinSplit = size_t(256) << 10;  // smaller remainders stay with the block

  ~CpuCachingAllocator() override { release_cached_locked(); }

  void* allocate(size_t nbytes) override {
    const size_t size = pool_size(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.alloc_count;
    void* p = size <= kSmallMax ? allocate_small(size, nbytes) : allocate_large(size, nbytes);
    if (stats_.current_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.current_bytes;
    return p;
  }
  void deallocate(void* p, size_t nbytes) override {
    if (!p) return;
    const size_t size = pool_size(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    if (size <= kSmallMax) {
      AIM_ASAN_POISON(p, size);
      small_free_[size].push_back(p);
      stats_.current_bytes -= int64_t(size);
    } else {
      deallocate_large(p);
    }
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
  struct Segment {
    char* touched;  // the end of the bytes ever handed out: the pages the process has touched
  };
  // A piece of a segment; prev/next are its neighbours by address (null at the segment's ends),
  // so a block with neither is a whole segment.
  struct Block {
    char* ptr;
    size_t size;
    bool free;
    Block* prev;
    Block* next;
    Segment* seg;
  };
  struct ByAddress {
    bool operator()(const Block* a, const Block* b) const { return a->ptr < b->ptr; }
  };

  static size_t pool_size(size_t nbytes) {
    const size_t r = allocator_round_size(nbytes);
    return r <= kSmallMax ? r : (nbytes + kLargeAlign - 1) / kLargeAlign * kLargeAlign;
  }

  void* allocate_small(size_t size, size_t nbytes) {
    void* p = nullptr;
    auto it = small_free_.find(size);
    if (it != small_free_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      ++stats_.cache_hits;
    } else {
      p = system_alloc(size, nbytes);
    }
    stats_.current_bytes += int64_t(size);
    AIM_ASAN_UNPOISON(p, nbytes);
    AIM_ASAN_POISON(static_cast<char*>(p) + nbytes, size - nbytes);
    return p;
  }

  void* allocate_large(size_t size, size_t nbytes) {
    Block* b = nullptr;
    // The free block that would touch the fewest new pages (resident memory and first-touch
    // time), then the smallest (best fit), then the lowest address.
    auto best = large_free_.end();
    size_t best_new = 0;
    for (auto it = large_free_.begin(); it != large_free_.end(); ++it) {
      const Block* c = *it;
      if (c->size < size) continue;
      const char* end = c->ptr + size;
      const size_t fresh = end <= c->seg->touched      ? 0
                           : c->ptr >= c->seg->touched ? size
                                                       : size_t(end - c->seg->touched);
      if (best == large_free_.end() || fresh < best_new ||
          (fresh == best_new && c->size < (*best)->size)) {
        best = it;
        best_new = fresh;
      }
    }
    if (best != large_free_.end()) {
      b = *best;
      large_free_.erase(best);
      ++stats_.cache_hits;
    } else {
      size_t seg = std::max(size, kSegmentBytes);
      char* p = static_cast<char*>(system_alloc(seg, nbytes, size));
      if (!p) {  // no room for a whole segment: one of the request's size
        seg = size;
        p = static_cast<char*>(system_alloc(seg, nbytes));
      }
      b = new Block{p, seg, true, nullptr, nullptr, new Segment{p}};
    }
    if (b->size - size >= kMinSplit) {  // the rest stays free for later requests
      Block* rest = new Block{b->ptr + size, b->size - size, true, b, b->next, b->seg};
      if (b->next) b->next->prev = rest;
      b->next = rest;
      b->size = size;
      large_free_.insert(rest);
    }
    b->free = false;
    b->seg->touched = std::max(b->seg->touched, b->ptr + b->size);
    live_large_.emplace(b->ptr, b);
    stats_.current_bytes += int64_t(b->size);
    AIM_ASAN_UNPOISON(b->ptr, nbytes);
    AIM_ASAN_POISON(b->ptr + nbytes, b->size - nbytes);
    return b->ptr;
  }

  void deallocate_large(void* p) {
    auto it = live_large_.find(p);
    AIM_CHECK(it != live_large_.end(), "[cpu allocator] freeing ", p,
              ", which it did not hand out (or freed twice)");
    Block* b = it->second;
    live_large_.erase(it);
    stats_.current_bytes -= int64_t(b->size);
    AIM_ASAN_POISON(b->ptr, b->size);
    b->free = true;
    if (Block* n = b->next; n && n->free) {  // merge the free neighbour after
      large_free_.erase(n);
      b->size += n->size;
      b->next = n->next;
      if (b->next) b->next->prev = b;
      delete n;
    }
    if (Block* q = b->prev; q && q->free) {  // and before
      large_free_.erase(q);
      q->size += b->size;
      q->next = b->next;
      if (q->next) q->next->prev = q;
      delete b;
      b = q;
    }
    large_free_.insert(b);
  }

  // From the system, under the host memory limit (checked on the live bytes plus `need`, the
  // bytes the request itself takes); null only when `need` < size and malloc fails (a segment
  // larger than the request: the caller retries with the request's size).
  void* system_alloc(size_t size, size_t nbytes, size_t need = 0) {
    if (need == 0) need = size;
    if (uint64_t(stats_.current_bytes) + need > host_memory_limit()) {
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
    void* p = std::aligned_alloc(64, size);
    if (!p) {
      release_cached_locked();
      p = std::aligned_alloc(64, size);
    }
    if (!p && need < size) return nullptr;
    AIM_CHECK(p != nullptr, "[cpu allocator] out of memory allocating ", nbytes, " bytes",
              allocation_context(), "; ", stats_.str());
    ++stats_.system_allocs;
    stats_.reserved_bytes += int64_t(size);
    AIM_ASAN_POISON(p, size);
    return p;
  }

  void release_cached_locked() {
    for (auto& [size, blocks] : small_free_) {
      for (void* p : blocks) {
        AIM_ASAN_UNPOISON(p, size);
        std::free(p);
      }
      stats_.reserved_bytes -= int64_t(size * blocks.size());
      blocks.clear();
    }
    for (auto it = large_free_.begin(); it != large_free_.end();) {
      Block* b = *it;
      if (b->prev || b->next) {  // part of a segment still in use
        ++it;
        continue;
      }
      AIM_ASAN_UNPOISON(b->ptr, b->size);
      std::free(b->ptr);
      stats_.reserved_bytes -= int64_t(b->size);
      delete b->seg;
      delete b;
      it = large_free_.erase(it);
    }
  }

  mutable std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> small_free_;
  std::set<Block*, ByAddress> large_free_;
  std::unordered_map<void*, Block*> live_large_;
  AllocatorStats stats_;
};

}  // namespace

std::unique_ptr<Allocator> new_cpu_caching_allocator() {
  return std::make_unique<CpuCachingAllocator>();
}

Allocator& cpu_allocator() {
  static CpuCachingAllocator* a = new CpuCachingAllocator();  // never destroyed: outlives tensors
  return *a;
}

}  // namespace aim
