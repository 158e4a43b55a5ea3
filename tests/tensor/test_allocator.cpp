#include <gtest/gtest.h>

#include <cstring>

#include "tensor/tensor.h"

namespace aim {

TEST(CpuAllocator, FreedBlocksAreReused) {
  Allocator& a = cpu_allocator();
  { Tensor warm = Tensor::empty({12345}); }
  const AllocatorStats s0 = a.stats();
  for (int i = 0; i < 10; ++i) Tensor t = Tensor::empty({12345});
  const AllocatorStats s1 = a.stats();
  EXPECT_EQ(s1.alloc_count - s0.alloc_count, 10);
  EXPECT_EQ(s1.cache_hits - s0.cache_hits, 10);
  EXPECT_EQ(s1.system_allocs, s0.system_allocs);
}

TEST(CpuAllocator, PeakAndEmptyCache) {
  Allocator& a = cpu_allocator();
  a.reset_peak();
  const int64_t base = a.stats().current_bytes;
  {
    Tensor t = Tensor::empty({1 << 20});  // 4 MiB
    EXPECT_GE(a.stats().current_bytes - base, 4 << 20);
  }
  EXPECT_EQ(a.stats().current_bytes, base);
  EXPECT_GE(a.stats().peak_bytes - base, 4 << 20);
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved_bytes, a.stats().current_bytes);
}

TEST(CpuAllocator, SizeClassesBoundWaste) {
  for (size_t n : {1ul, 63ul, 4097ul, 100000ul, 12345678ul}) {
    const size_t r = allocator_round_size(n);
    EXPECT_GE(r, n);
    EXPECT_LE(double(r), std::max(64.0, double(n) * 1.126)) << n;
  }
}

// Above 1 MiB blocks are carved from shared segments. DenseNet's pattern: each request a little
// larger than the last, the last one freed first. Per-size-class caching kept every size (the
// sum of all); here freed neighbours merge and serve the next size from the same segment.
TEST(CpuAllocator, GrowingRequestsReuseMergedBlocks) {
  auto a = new_cpu_caching_allocator();
  const size_t mib = size_t(1) << 20;
  void* keep = a->allocate(3 * mib);  // a live block before the growing ones
  void* prev = nullptr;
  size_t prev_n = 0;
  for (size_t n = 2 * mib; n <= 28 * mib; n += mib + 4096) {
    void* p = a->allocate(n);
    std::memset(p, 1, n);
    if (prev) a->deallocate(prev, prev_n);
    prev = p, prev_n = n;
  }
  a->deallocate(prev, prev_n);
  a->deallocate(keep, 3 * mib);
  const AllocatorStats s = a->stats();
  EXPECT_EQ(s.current_bytes, 0);
  // One segment served all (two under ASan's 64 MiB segments); a cache per size asked 27 times.
  EXPECT_LE(s.system_allocs, 2) << s.str();
  EXPECT_LE(s.peak_bytes, int64_t(3 * mib + 2 * 29 * mib)) << s.str();
  a->empty_cache();
  EXPECT_EQ(a->stats().reserved_bytes, 0);
}

TEST(CpuAllocator, FreedNeighboursMergeAndSplitAgain) {
  auto a = new_cpu_caching_allocator();
  const size_t mib = size_t(1) << 20;
  char* x = static_cast<char*>(a->allocate(4 * mib));
  char* y = static_cast<char*>(a->allocate(4 * mib));
  char* z = static_cast<char*>(a->allocate(4 * mib));
  ASSERT_EQ(y, x + 4 * mib);  // from one segment, in address order
  ASSERT_EQ(z, y + 4 * mib);
  a->deallocate(x, 4 * mib);
  a->deallocate(y, 4 * mib);                             // merges with x
  char* big = static_cast<char*>(a->allocate(8 * mib));  // exactly the merged block
  EXPECT_EQ(big, x);
  a->deallocate(big, 8 * mib);
  char* small = static_cast<char*>(a->allocate(2 * mib));  // the 8 MiB hole (touched pages), split
  EXPECT_EQ(small, x);
  a->deallocate(small, 2 * mib);
  a->deallocate(z, 4 * mib);  // everything free again: one whole segment
  EXPECT_EQ(a->stats().system_allocs, 1);
  a->empty_cache();
  EXPECT_EQ(a->stats().reserved_bytes, 0);
  // A request larger than a segment (1 GiB, 64 MiB under ASan) gets its own, released whole.
#if defined(__SANITIZE_ADDRESS__)
  const size_t huge_n = 70 * mib;
#else
  const size_t huge_n = 1100 * mib;
#endif
  void* huge = a->allocate(huge_n);
  EXPECT_EQ(a->stats().reserved_bytes, int64_t(huge_n));
  a->deallocate(huge, huge_n);
  a->empty_cache();
  EXPECT_EQ(a->stats().reserved_bytes, 0);
}

TEST(CpuAllocator, ForeignOrDoubleFreeIsAnError) {
  auto a = new_cpu_caching_allocator();
  void* p = a->allocate(2 << 20);
  a->deallocate(p, 2 << 20);
  try {
    a->deallocate(p, 2 << 20);
    FAIL() << "a second free was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("freed twice"), std::string::npos) << e.what();
  }
}

#if defined(__SANITIZE_ADDRESS__)
// The ASan build (tools/sanitize.sh) sees reads past a tensor's bytes into the size class's slack
// and reads of a block back in the cache, which the caching allocator would otherwise hide.
TEST(CpuAllocatorDeathTest, AsanSeesTheSlackAndCachedBlocks) {
  Allocator& a = cpu_allocator();
  char* p = static_cast<char*>(a.allocate(100));
  p[99] = 1;
  EXPECT_DEATH({ (void)*static_cast<volatile char*>(p + 100); }, "use-after-poison");
  a.deallocate(p, 100);
  EXPECT_DEATH({ (void)*static_cast<volatile char*>(p); }, "use-after-poison");
  char* q = static_cast<char*>(a.allocate(100));  // the same block, usable again
  ASSERT_EQ(q, p);
  q[0] = q[99] = 2;
  a.deallocate(q, 100);
}

// The same for a block carved from a segment: the slack and a freed block are poisoned.
TEST(CpuAllocatorDeathTest, AsanSeesSegmentSlackAndFreedBlocks) {
  auto a = new_cpu_caching_allocator();
  const size_t n = (size_t(2) << 20) + 10;
  char* p = static_cast<char*>(a->allocate(n));
  p[n - 1] = 1;
  EXPECT_DEATH({ (void)*static_cast<volatile char*>(p + n); }, "use-after-poison");
  char* q = static_cast<char*>(a->allocate(n));  // its neighbour
  a->deallocate(p, n);
  EXPECT_DEATH({ (void)*static_cast<volatile char*>(p + 5); }, "use-after-poison");
  q[0] = q[n - 1] = 2;
  a->deallocate(q, n);
}
#endif

TEST(CudaAllocator, UnavailableDeviceNamesTheReason) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present";
  try {
    Tensor::empty({4}, DType::f32, cuda_device(0));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
}

TEST(CudaAllocator, CachesAndReportsStats) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  Allocator& a = cuda_allocator(0);
  { Tensor t = Tensor::empty({1000}, DType::f32, cuda_device(0)); }
  const AllocatorStats s0 = a.stats();
  { Tensor t = Tensor::empty({1000}, DType::f32, cuda_device(0)); }
  const AllocatorStats s1 = a.stats();
  EXPECT_EQ(s1.cache_hits - s0.cache_hits, 1);
  EXPECT_EQ(s1.system_allocs, s0.system_allocs);
  // Out of memory names the size and the allocator's state.
  try {
    Tensor::empty({int64_t(1) << 45}, DType::f32, cuda_device(0));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }
}

}  // namespace aim
