// Prefetcher: order, end, exception propagation, destruction with a full queue, wait accounting.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "data/prefetch.h"

namespace aim::data {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Producer of 0, 1, ..., n-1 then the end.
std::function<std::optional<int>()> counter(int n, std::atomic<int>* calls = nullptr) {
  auto next = std::make_shared<int>(0);
  return [=]() -> std::optional<int> {
    if (calls) ++*calls;
    if (*next == n) return std::nullopt;
    return (*next)++;
  };
}

TEST(Prefetch, ItemsComeOutInOrderThenEnd) {
  for (int depth : {1, 2, 5}) {
    std::atomic<int> calls{0};
    Prefetcher<int> p(counter(100, &calls), depth);
    for (int i = 0; i < 100; ++i) {
      std::optional<int> v = p.next();
      ASSERT_TRUE(v.has_value()) << "depth " << depth << " item " << i;
      EXPECT_EQ(*v, i);
    }
    EXPECT_FALSE(p.next().has_value());
    EXPECT_FALSE(p.next().has_value());  // stays at the end
    EXPECT_EQ(calls.load(), 101);        // never called again after nullopt
  }
}

TEST(Prefetch, EmptyProducer) {
  Prefetcher<std::string> p([]() -> std::optional<std::string> { return std::nullopt; });
  EXPECT_FALSE(p.next().has_value());
}

TEST(Prefetch, MoveOnlyItems) {
  auto n = std::make_shared<int>(0);
  Prefetcher<std::unique_ptr<int>> p([n]() -> std::optional<std::unique_ptr<int>> {
    if (*n == 3) return std::nullopt;
    return std::make_unique<int>((*n)++);
  });
  for (int i = 0; i < 3; ++i) EXPECT_EQ(**p.next(), i);
  EXPECT_FALSE(p.next().has_value());
}

TEST(Prefetch, ExceptionIsRethrownAfterEarlierItems) {
  auto n = std::make_shared<int>(0);
  Prefetcher<int> p(
      [n]() -> std::optional<int> {
        if (*n == 3) throw std::runtime_error("bad record 3");
        return (*n)++;
      },
      4);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(*p.next(), i);
  for (int k = 0; k < 2; ++k) {  // sticky: a second call does not mistake it for the end
    try {
      p.next();
      FAIL() << "expected the producer's exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "bad record 3");
    }
  }
}

TEST(Prefetch, DestroyWhileProducerBlockedOnFullQueue) {
  const int depth = 2;
  std::atomic<int> calls{0};
  {
    Prefetcher<int> p(counter(1 << 30, &calls), depth);  // never ends by itself
    // Full queue: depth items queued and one more made, waiting for room.
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (calls.load() < depth + 1 && Clock::now() < deadline)
      std::this_thread::sleep_for(milliseconds(1));
    std::this_thread::sleep_for(milliseconds(30));
    EXPECT_EQ(calls.load(), depth + 1);  // bounded: the producer does not run ahead
    EXPECT_EQ(*p.next(), 0);
    EXPECT_EQ(*p.next(), 1);
  }  // the destructor must wake the blocked producer and join; a hang fails the test by timeout
  EXPECT_LE(calls.load(), depth + 3);
}

TEST(Prefetch, DestroyBeforeAnyNext) { Prefetcher<int> p(counter(1 << 30), 1); }

TEST(Prefetch, SlowProducerCountsWaitTime) {
  const int n = 20;
  auto i = std::make_shared<int>(0);
  const auto t0 = Clock::now();
  Prefetcher<int> p([i]() -> std::optional<int> {
    if (*i == n) return std::nullopt;
    std::this_thread::sleep_for(milliseconds(5));
    return (*i)++;
  });
  for (int k = 0; k < n; ++k) EXPECT_EQ(*p.next(), k);
  EXPECT_FALSE(p.next().has_value());
  const double total = std::chrono::duration<double>(Clock::now() - t0).count();
  // Items cannot arrive faster than 5 ms each, and the consumer does nothing else: it waited for
  // nearly all of the >= 100 ms.
  EXPECT_GE(total, 0.1);
  EXPECT_GE(p.wait_seconds(), 0.05);
  EXPECT_LE(p.wait_seconds(), total);
}

TEST(Prefetch, SlowConsumerHardlyWaits) {
  const int n = 20;
  Prefetcher<int> p(counter(n), 2);
  const auto t0 = Clock::now();
  for (int k = 0; k < n; ++k) {
    EXPECT_EQ(*p.next(), k);
    std::this_thread::sleep_for(milliseconds(5));  // the "training step"
  }
  EXPECT_FALSE(p.next().has_value());
  const double total = std::chrono::duration<double>(Clock::now() - t0).count();
  // The producer refills the queue during each 5 ms step, so next() almost never blocks.
  EXPECT_LT(p.wait_seconds(), 0.5 * total);
}

TEST(Prefetch, BadArguments) {
  EXPECT_THROW(Prefetcher<int>(counter(1), 0), Error);
  EXPECT_THROW(Prefetcher<int>(nullptr), Error);
}

}  // namespace
}  // namespace aim::data
