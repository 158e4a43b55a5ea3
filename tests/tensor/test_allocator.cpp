#include <gtest/gtest.h>

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
