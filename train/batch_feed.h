// The training loop's batches: the source's next batch (this rank's share under data
// parallelism, RankShard), page-locked when the step runs on a GPU so its host-to-device copies
// are asynchronous, prepared `prefetch` batches ahead on a loader thread (data/prefetch.h; 0:
// inline). Each batch carries the stream position after it, so a checkpoint records where the
// *consumed* stream stands, not the prefetched one.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>

#include "data/prefetch.h"
#include "data/source.h"
#include "train/data_parallel.h"

namespace aim::train {

struct Fetched {
  TensorMap batch;
  int64_t position = 0;  // stream position after this batch (the global one under ranks)
};

class BatchFeed {
 public:
  // `count` batches of `batch` samples from `source`'s current position (rank `rank` of `ranks`).
  BatchFeed(data::BatchSource& source, int rank, int ranks, int64_t batch, int64_t count,
            int64_t prefetch, bool pin);
  BatchFeed(const BatchFeed&) = delete;
  BatchFeed& operator=(const BatchFeed&) = delete;

  Fetched next(int64_t step);  // an error when the loader ends before `count` batches
  int64_t start_position() const { return start_position_; }  // global, before the first batch
  double wait_seconds() const;  // time next() waited for the loader thread
  void stop();                  // ends the loader thread

 private:
  std::optional<Fetched> produce();

  data::BatchSource& src_;
  int64_t batch_, count_, produced_ = 0, start_position_;
  bool pin_;
  std::optional<RankShard> shard_;
  std::unique_ptr<data::Prefetcher<Fetched>> prefetcher_;
};

}  // namespace aim::train
