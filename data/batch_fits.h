// Refusing a batch that cannot fit before it is built: a --batch-size of 99999999 would otherwise
// grow the data loader's vectors until the kernel's OOM killer ends the run without a message.
#pragma once
#include <cstdint>
#include <string>

#include "data/source.h"

namespace aim::data {

// The input bytes of one sample of `src` (its evaluation samples' tensors, averaged over two).
double bytes_per_sample(const BatchSource& src);

// `batches_held` batches of `batch` samples (the one being used and those the loader prepares)
// must fit in the host memory limit (tensor/allocator.h host_memory_limit); else an aim::Error
// naming `flag`, the bytes, the limit and the largest batch that fits.
void check_batch_fits(const BatchSource& src, int64_t batch, int64_t batches_held,
                      const std::string& flag);

}  // namespace aim::data
