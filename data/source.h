// BatchSource: where aim-train and aim-infer get batches of a model (DESIGN §2 data/). A source
// has an endless training stream, read in order (position() counts samples consumed, seek()
// restores it on resume), and a fixed evaluation set read by index. Batches are CPU tensors
// named as the model's input_specs() and label_specs(), plus what evaluation needs (DIN: uid).
//
// next() may run on the prefetching thread (data/prefetch.h) while eval_batch() runs on the
// caller's: eval_batch() must not touch the stream state.
#pragma once
#include <cstdint>
#include <string>

#include "tensor/tensor.h"

namespace aim::data {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // One line for logs and results: "din-synthetic seed 1 (full)", "din-export /data/din".
  virtual std::string describe() const = 0;
  // Identity of the data for checkpoints: resuming on other data is refused.
  virtual std::string fingerprint() const = 0;

  // Next training batch of batch_size samples; advances position() by batch_size.
  virtual TensorMap next(int64_t batch_size) = 0;
  virtual int64_t position() const = 0;
  virtual void seek(int64_t position) = 0;
  // Samples in one epoch (steps per epoch = epoch_size() / batch size, the last partial batch is
  // skipped, as the DIN reference does).
  virtual int64_t epoch_size() const = 0;

  virtual int64_t eval_size() const = 0;
  // Samples [start, start + count) of the evaluation set (within eval_size()).
  virtual TensorMap eval_batch(int64_t start, int64_t count) const = 0;
};

}  // namespace aim::data
