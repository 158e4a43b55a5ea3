#include "train/readback.h"

#include <cstring>

#include "kernels/error_flag.h"
#include "tensor/check.h"

namespace aim::train {
namespace {
constexpr int64_t kFlagSlot = kernels::kDeviceErrorWords, kLossSlot = kFlagSlot + 1;
}  // namespace

StepReadBack::StepReadBack(Device dev, int64_t capacity) : dev_(dev), capacity_(capacity) {
  Tensor all = Tensor::zeros({kLossSlot + capacity}, DType::f64, dev);
  words_ = Tensor::from_storage(all.storage(), 0, {kFlagSlot}, {1}, DType::i64);
  flag_ = all.slice(0, kFlagSlot, kLossSlot);
  losses_ = all.slice(0, kLossSlot, kLossSlot + capacity);
}

void StepReadBack::file_loss(const Tensor& loss, int64_t step) {
  const int64_t at = int64_t(steps_.size());
  AIM_CHECK(at < capacity_, "train: more than ", capacity_, " losses filed between reads");
  losses_.slice(0, at, at + 1).copy_(loss);
  steps_.push_back(step);
}

void StepReadBack::file_flag(const Tensor& flag) { flag_.copy_(flag); }

StepReadBack::Values StepReadBack::read() {
  Values v;
  if (steps_.empty()) return v;
  const bool errors = dev_.is_cuda();  // on the CPU a bad index throws in its op
  if (errors) words_.copy_(kernels::device_error_words(dev_));
  const Tensor all = Tensor::from_storage(words_.storage(), 0, {kLossSlot + int64_t(steps_.size())},
                                          {1}, DType::i64);
  const std::vector<int64_t> w = all.to(kCPU).to_vector<int64_t>();  // syncs
  if (errors) kernels::throw_device_error(w.data(), dev_);
  auto as_f64 = [&](int64_t i) {
    double d;
    std::memcpy(&d, &w[size_t(i)], sizeof d);
    return d;
  };
  v.flag = as_f64(kFlagSlot);
  for (size_t i = 0; i < steps_.size(); ++i)
    v.losses.push_back({steps_[i], as_f64(kLossSlot + int64_t(i))});
  steps_.clear();
  return v;
}

}  // namespace aim::train
