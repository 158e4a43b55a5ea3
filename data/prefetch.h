// Prefetcher<T>: runs a producer on one background thread and hands its items to the consumer in
// production order through a bounded queue, so the next batch is built while the current step
// runs.
//
//   Prefetcher<RecBatch> p([&]() -> std::optional<RecBatch> { ... nullopt at the end ... });
//   while (std::optional<RecBatch> b = p.next()) step(*b);
//   log("data wait ", p.wait_seconds(), " s");
//
// - The producer returns std::nullopt once, at the end; it is not called again afterwards.
// - An exception thrown by the producer ends production; next() first returns every item made
//   before it, then rethrows it (and rethrows it again on every later call): it is never lost.
// - At most `depth` finished items wait in the queue; the producer then blocks until next() takes
//   one. The destructor stops and joins the thread, also while the producer is blocked on a full
//   queue; it cannot interrupt a producer call already running, so it waits for that call to
//   return (its item is dropped).
// - next() and wait_seconds() are for one consumer thread.
// - The producer runs on a plain std::thread: it must not open OpenMP parallel regions (the
//   trainer's kernels own the cores; a second OpenMP team would oversubscribe them). Building a
//   DIN batch (collate, the synthetic generator, the export reader) is single-threaded already.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "tensor/check.h"

namespace aim::data {

template <class T>
class Prefetcher {
 public:
  using Producer = std::function<std::optional<T>()>;

  explicit Prefetcher(Producer producer, int64_t depth = 2)
      : producer_(std::move(producer)), depth_(depth) {
    AIM_CHECK(depth_ >= 1, "Prefetcher: depth must be >= 1, got ", depth_);
    AIM_CHECK(bool(producer_), "Prefetcher: empty producer function");
    thread_ = std::thread([this] { run(); });  // every other member is initialised by now
  }

  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  ~Prefetcher() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    not_full_.notify_all();
    thread_.join();
  }

  // The next item in production order; blocks until it is ready. std::nullopt once the producer
  // has finished and the queue is empty. Rethrows the producer's exception (see top of file).
  std::optional<T> next() {
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mu_);
    not_empty_.wait(lock, [this] { return !queue_.empty() || finished_; });
    wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!queue_.empty()) {
      std::optional<T> item(std::move(queue_.front()));
      queue_.pop_front();
      lock.unlock();
      not_full_.notify_one();
      return item;
    }
    if (error_) std::rethrow_exception(error_);
    return std::nullopt;
  }

  // Total time next() spent blocked waiting for the producer, in seconds.
  double wait_seconds() const {
    std::lock_guard<std::mutex> lock(mu_);
    return wait_s_;
  }

 private:
  void run() {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;  // destroyed while the queue had room: make nothing more
      }
      std::optional<T> item;
      try {
        item = producer_();
      } catch (...) {
        finish(std::current_exception());
        return;
      }
      if (!item) {
        finish(nullptr);
        return;
      }
      std::unique_lock<std::mutex> lock(mu_);
      not_full_.wait(lock, [this] { return int64_t(queue_.size()) < depth_ || stop_; });
      if (stop_) return;
      queue_.push_back(std::move(*item));
      lock.unlock();
      not_empty_.notify_one();
    }
  }

  void finish(std::exception_ptr error) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = std::move(error);
      finished_ = true;
    }
    not_empty_.notify_all();
  }

  Producer producer_;
  const int64_t depth_;
  mutable std::mutex mu_;
  std::condition_variable not_full_, not_empty_;
  std::deque<T> queue_;
  bool finished_ = false;  // the producer returned nullopt or threw
  bool stop_ = false;      // the destructor asks the thread to leave
  std::exception_ptr error_;
  double wait_s_ = 0.0;
  std::thread thread_;  // last: starts only after the members above exist
};

}  // namespace aim::data
