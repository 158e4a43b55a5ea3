#include "train/batch_feed.h"

#include "tensor/check.h"

namespace aim::train {

BatchFeed::BatchFeed(data::BatchSource& source, int rank, int ranks, int64_t batch, int64_t count,
                     int64_t prefetch, bool pin)
    : src_(source),
      batch_(batch),
      count_(std::max<int64_t>(0, count)),
      start_position_(source.position()),
      pin_(pin) {
  if (ranks > 1) shard_.emplace(src_, rank, ranks, batch_, src_.position());
  if (prefetch > 0)
    prefetcher_ =
        std::make_unique<data::Prefetcher<Fetched>>([this] { return produce(); }, prefetch);
}

std::optional<Fetched> BatchFeed::produce() {
  if (produced_ == count_) return std::nullopt;
  ++produced_;
  Fetched f;
  if (shard_) {
    f.batch = shard_->next();
    f.position = shard_->global_position();
  } else {
    f.batch = src_.next(batch_);
    f.position = src_.position();
  }
  // Page-locked on the loader thread, so the step's host-to-device copies are asynchronous.
  if (pin_)
    for (auto& [k, t] : f.batch) t = t.pin_memory();
  return f;
}

Fetched BatchFeed::next(int64_t step) {
  std::optional<Fetched> f = prefetcher_ ? prefetcher_->next() : produce();
  AIM_CHECK(f.has_value(), "train: the loader ended early at step ", step);
  return std::move(*f);
}

double BatchFeed::wait_seconds() const { return prefetcher_ ? prefetcher_->wait_seconds() : 0; }

void BatchFeed::stop() { prefetcher_.reset(); }

}  // namespace aim::train
