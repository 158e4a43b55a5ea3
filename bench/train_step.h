// A small training step (MLP forward, cross-entropy, backward, SGD update) used to show that
// after the first step every allocation is served by the caching allocator.
#pragma once
#include <vector>

#include "tensor/tensor.h"

namespace aim::bench {

struct TrainStepAllocStats {
  std::vector<int64_t> allocs_per_step, cache_hits_per_step, system_allocs_per_step;
};

TrainStepAllocStats train_step_allocations(Device d, int steps);

}  // namespace aim::bench
