// Post-training INT8 inference (DESIGN §5, infer/quantize.h): while an int8::Mode is alive on a
// thread, linear and conv2d consult it first.
//   - calibrating: each call shows its input to the observer (keyed by the weight), then runs in
//     f32 as usual;
//   - quantized: a call whose weight has a QuantLayer runs as int8 — the input quantized per
//     tensor with the calibrated scale, the weight per output channel (done once), int32
//     accumulation, bias and the rescale fused in the kernel (kernels/quant qlinear, qconv2d),
//     f32 output. Other calls (weights kept in higher precision, or never calibrated) run in f32.
// Inference only: with grad mode on, quantized calls are an error.
#pragma once
#include <optional>
#include <unordered_map>

#include "autograd/variable.h"
#include "kernels/conv/conv2d.h"
#include "kernels/quant/quant.h"

namespace aim::autograd::int8 {

struct QuantLayer {
  kernels::QuantizedWeight w;  // int8 [out, ...] + per-output-channel scales
  float x_scale = 0;           // per-tensor input scale (calibrated)
  int64_t calls = 0;           // int8 calls made (report)
};

class Observer {
 public:
  virtual ~Observer() = default;
  virtual void observe(const VariableImpl* weight, const Tensor& x) = 0;
};

struct State {
  Observer* observer = nullptr;                                           // calibrating
  std::unordered_map<const VariableImpl*, QuantLayer>* layers = nullptr;  // quantized
};

namespace detail {
extern thread_local State* current;
std::optional<Variable> linear(const Variable& x, const Variable& w, const Variable& b);
std::optional<Variable> conv2d(const Variable& x, const Variable& w, const Variable& b,
                               const kernels::Conv2dParams& p);
}  // namespace detail

class Mode {
 public:
  explicit Mode(Observer* observer);
  explicit Mode(std::unordered_map<const VariableImpl*, QuantLayer>* layers);
  ~Mode();
  Mode(const Mode&) = delete;
  Mode& operator=(const Mode&) = delete;

 private:
  State state_;
  State* previous_;
};

// Whether an int8::Mode (calibrating or quantized) is alive on this thread.
inline bool active() { return detail::current != nullptr; }

// At the top of linear / conv2d: the int8 result, or nullopt to go on in floating point.
inline std::optional<Variable> linear(const Variable& x, const Variable& w, const Variable& b) {
  if (!detail::current) return std::nullopt;
  return detail::linear(x, w, b);
}
inline std::optional<Variable> conv2d(const Variable& x, const Variable& w, const Variable& b,
                                      const kernels::Conv2dParams& p) {
  if (!detail::current) return std::nullopt;
  return detail::conv2d(x, w, b, p);
}

}  // namespace aim::autograd::int8
