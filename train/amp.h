// Mixed-precision training (DESIGN §5, autograd/amp.h): the dynamic loss scaler of fp16 runs.
//
// fp16 has 5 exponent bits: gradients below 6e-8 flush to zero. The loss is multiplied by a scale
// (initially 2^16) before backward so small gradients stay representable; after backward every
// f32 master gradient is divided by it (kernels/optim amp_unscale, which also flags Inf/NaN).
// An overflow skips the optimizer step and halves the scale; growth_interval clean steps in a row
// double it. bf16 has f32's exponent range and needs no scaling.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "train/optim.h"

namespace aim::train {

struct LossScalerOptions {
  double init_scale = 65536;    // 2^16
  double growth_factor = 2;     // after growth_interval clean steps
  double backoff_factor = 0.5;  // after an overflow
  int64_t growth_interval = 2000;
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerOptions& o = {});

  double scale() const { return scale_; }
  // Divides every gradient of params by scale() in place, without a host read: the found-inf
  // flags of every gradient dtype are reduced on the device into one f32 [1] flag (1 = some
  // gradient was Inf or NaN: the step must be skipped) on the gradients' device (f32 on the CPU
  // when no parameter has a gradient). All gradients must be on one device. The caller reads it
  // when it has to decide (the trainer: in the step's one read). Parameters without a gradient
  // are left alone.
  Tensor unscale_flag(const NamedParameters& params);
  // After the step (or the skip): backoff on overflow, growth after growth_interval clean steps.
  void update(bool found_inf);

  int64_t skipped_steps() const { return skipped_; }  // overflows seen
  int64_t clean_steps() const { return clean_; }      // clean steps since the last change

  // Checkpoint metadata: amp_scale, amp_clean_steps, amp_skipped_steps.
  std::map<std::string, std::string> state() const;
  // Restores state() (missing keys are an error naming them: the checkpoint was not an fp16 run).
  void load_state(const std::map<std::string, std::string>& meta, const std::string& where);

 private:
  LossScalerOptions o_;
  double scale_;
  int64_t clean_ = 0, skipped_ = 0;
};

}  // namespace aim::train
