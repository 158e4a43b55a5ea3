// aim-train --cuda-graph: the training step (train/step.h) captured once on a private stream and
// replayed at every later step. The eager stream and the graph's hand over with stream waits (no
// host synchronisation): each batch is padded to the captured shapes (Model::pad_batch) and
// copied into the graph's input tensors before a replay; the optimizer reads the learning rate
// and its step count from the device (Optimizer::set_capturable). A batch that outgrows the
// captured shapes makes a new capture. Blocks the capture allocated are the graph's
// (tensor/cuda_runtime.cpp: the capturing stream's pool is kept, nothing else allocates there).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>

#include "train/step.h"

namespace aim::train {

class GraphStep {
 public:
  // `ctx` and `name` (the model's, for messages) must outlive this object.
  GraphStep(StepContext& ctx, Device dev, std::string name, std::ostream& log);
  ~GraphStep();
  GraphStep(const GraphStep&) = delete;
  GraphStep& operator=(const GraphStep&) = delete;

  // Step `step_number` on `host_batch` (capturing first when needed); returns the batch as the
  // graph read it (its input tensors). The step's loss is then loss().
  const TensorMap& run(const TensorMap& host_batch, int64_t step_number);
  const Tensor& loss() const;
  double capture_ms() const { return capture_ms_; }
  int64_t captures() const { return captures_; }

 private:
  struct Captured;
  void capture(const TensorMap& batch, int64_t step_number);
  void replay(const TensorMap& batch, int64_t step_number);

  StepContext& ctx_;
  Device dev_;
  std::string name_;
  std::ostream& log_;
  std::unique_ptr<Captured> captured_;
  std::map<std::string, Shape> shapes_;  // of the batch tensors the graph was captured with
  bool capturable_optimizer_ = false;
  double capture_ms_ = 0;
  int64_t captures_ = 0;
};

}  // namespace aim::train
