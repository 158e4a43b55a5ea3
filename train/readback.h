// What the host reads of the training steps, in one buffer and one copy (on a GPU the step's
// only host synchronisation): the device error record (kernels/error_flag.h: a bad index or
// target flagged by a kernel), the fp16 overflow flag, and the losses filed since the last read
// (f64). The trainer reads it once per log interval on a GPU (every step with fp16, since the
// overflow decides whether the optimizer steps; every step on the CPU, where errors throw in the
// op itself).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace aim::train {

class StepReadBack {
 public:
  // `capacity`: losses held between reads (the log interval when reads are deferred, else 1).
  StepReadBack(Device dev, int64_t capacity);
  void file_loss(const Tensor& loss, int64_t step);  // [1] on the device, stream-ordered copy
  void file_flag(const Tensor& flag);                // [1]: > 0 when an fp16 gradient overflowed
  bool empty() const { return steps_.empty(); }
  struct Values {
    double flag = 0;                                 // 0 without a flag filed
    std::vector<std::pair<int64_t, double>> losses;  // (step, loss) in filing order
  };
  // One device-to-host copy of everything filed (a host synchronisation on a GPU); a kernel's
  // flagged error is thrown here, naming the op. Empties the buffer.
  Values read();

 private:
  Device dev_;
  int64_t capacity_;
  Tensor words_, losses_, flag_;  // one storage: [error words | flag | losses]
  std::vector<int64_t> steps_;    // the step of each filed loss
};

}  // namespace aim::train
