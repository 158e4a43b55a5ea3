// Optimizers (torch.optim semantics) over named parameters, gradient clipping and learning-rate
// schedules. Each optimizer's step() runs one fused in-place kernel per parameter
// (kernels/optim: sgd_update, adam_update, adagrad_update, ftrl_update; LAMB two,
// lamb_stage1/2) on the parameter's device; parameters without a gradient are skipped, as in
// PyTorch.
//
// State for checkpoints: state_dict() lists per-parameter tensors named
// "<parameter name>.<state>" (SGD: momentum_buffer; Adam and Lamb: exp_avg, exp_avg_sq, step;
// Adagrad: sum, step; Ftrl: accum, linear, step), step as a 0-d i64 tensor. load_state_dict()
// copies them back (onto the parameter's device) and continues identically.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/variable.h"

namespace aim::train {

using NamedParameters = std::vector<std::pair<std::string, autograd::Variable>>;
using OptimizerState = std::vector<std::pair<std::string, Tensor>>;

namespace detail {
template <class A, class = void>
struct HasStep : std::false_type {};  // update args with a step number (Adam, Adagrad, LAMB 1)
template <class A>
struct HasStep<A, std::void_t<decltype(std::declval<A&>().step)>> : std::true_type {};
template <class A, class = void>
struct HasLr : std::false_type {};  // update args with a learning rate (all but LAMB stage 1)
template <class A>
struct HasLr<A, std::void_t<decltype(std::declval<A&>().lr)>> : std::true_type {};
}  // namespace detail

class Optimizer {
 public:
  Optimizer(NamedParameters params, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual void step() = 0;  // one update of every parameter that has a gradient
  void zero_grad();         // zeroes every parameter's gradient (kept allocated)
  double lr() const { return lr_; }
  virtual void set_lr(double lr);  // e.g. from an LRSchedule before each step()
  const NamedParameters& parameters() const { return params_; }

  // "<param>.<state>" -> tensor, in parameter order; tensors share storage with the optimizer.
  virtual OptimizerState state_dict() const;
  // Copies every entry into the optimizer's state (allocating it where absent). Unknown names,
  // or shapes/dtypes that do not match, are errors naming the key; nothing is written then.
  virtual void load_state_dict(const OptimizerState& sd);

  // Capturable mode (CUDA graphs, aim-train --cuda-graph; PyTorch's capturable=True): the
  // learning rate and the step count live in one device tensor {lr, step} (kernels/optim
  // `hyper`). step() adds 1 to the count on the device and every update reads both there, so a
  // captured step() replays correctly at every later step; set_lr() writes the rate with a
  // stream-ordered copy when it changes. Turned on after a first eager step: the parameters
  // that have a gradient then (and their state) are the ones a captured step updates; they must
  // have taken the same number of steps. A parameter that gets a gradient later is an error.
  virtual void set_capturable();
  bool capturable() const { return hyper_.defined(); }

 protected:
  struct Slot {
    std::string name;
    autograd::Variable param;
    OptimizerState state;            // this optimizer's state names, undefined until the first step
    int64_t step = 0;                // steps taken by this parameter (capturable: hyper_'s count)
    bool counted_on_device = false;  // capturable: its steps are hyper_'s count
  };
  // The parameters to update this step (those with a gradient). Capturable: adds 1 to the
  // device step count first and checks each against the capturable set.
  std::vector<Slot*> begin_step();
  // Fills the update's lr/step/hyper: the host values, or the device's in capturable mode
  // (the host step count is then not advanced; state_dict reads the device's).
  template <class Args>
  void set_step_scalars(Slot& s, Args& a) {
    if constexpr (detail::HasLr<Args>::value) a.lr = lr_;
    if (capturable())
      a.hyper = hyper_;
    else
      ++s.step;
    if constexpr (detail::HasStep<Args>::value) a.step = s.step;
  }
  // Declares the per-parameter state tensors (same shape as the parameter, state dtype) and
  // whether a step counter is saved.
  void declare_state(std::vector<std::string> names, bool has_step);
  Tensor& state(Slot& s, const std::string& name);             // allocates zeros when undefined
  static Tensor& raw_state(Slot& s, const std::string& name);  // may be undefined
  std::vector<Slot>& slots() { return slots_; }

  double lr_;

 private:
  int64_t device_step() const;  // capturable: the device's step count (reads it: syncs)
  void write_hyper(double lr, int64_t step);

  NamedParameters params_;
  std::vector<Slot> slots_;
  bool has_step_ = false;
  Tensor hyper_;         // capturable: {lr, step} f64 on the parameters' device
  double hyper_lr_ = 0;  // the rate hyper_ holds
};

class SGD : public Optimizer {
 public:
  SGD(NamedParameters params, double lr, double momentum = 0, double dampening = 0,
      double weight_decay = 0, bool nesterov = false);
  void step() override;

 private:
  double momentum_, dampening_, weight_decay_;
  bool nesterov_;
};

class Adam : public Optimizer {
 public:
  Adam(NamedParameters params, double lr, double beta1 = 0.9, double beta2 = 0.999,
       double eps = 1e-8, double weight_decay = 0, bool decoupled = false);
  void step() override;

 private:
  double beta1_, beta2_, eps_, weight_decay_;
  bool decoupled_;
};

// torch.optim.AdamW (decoupled weight decay; PyTorch's default weight_decay is 0.01).
class AdamW : public Adam {
 public:
  AdamW(NamedParameters params, double lr, double beta1 = 0.9, double beta2 = 0.999,
        double eps = 1e-8, double weight_decay = 0.01)
      : Adam(std::move(params), lr, beta1, beta2, eps, weight_decay, true) {}
};

// LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning"), as NVIDIA apex
// FusedLAMB(bias_correction=True, adam_w_mode=True, grad_averaging=True) without its internal
// gradient clipping (use clip_grad_norm / --clip-norm) and with the trust ratio on every tensor
// (apex's use_nvlamb=True; plain apex skips it where weight_decay == 0). Per parameter tensor w,
// with t its step count from 1 (state exp_avg m, exp_avg_sq v, step):
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   m_hat = m / (1 - b1^t);  v_hat = v / (1 - b2^t)
//   u = m_hat / (sqrt(v_hat) + eps) + weight_decay * w
//   r = ||w|| / ||u|| when both norms are > 0, else 1
//   w = w - lr * r * u
// Two kernels per tensor (kernels/optim lamb_stage1, lamb_stage2): the norms stay on the
// parameter's device (no host read), so a step can be captured (set_capturable).
class Lamb : public Optimizer {
 public:
  Lamb(NamedParameters params, double lr, double beta1 = 0.9, double beta2 = 0.999,
       double eps = 1e-6, double weight_decay = 0.01);
  void step() override;

 private:
  double beta1_, beta2_, eps_, weight_decay_;
};

class Adagrad : public Optimizer {
 public:
  Adagrad(NamedParameters params, double lr = 0.01, double lr_decay = 0, double weight_decay = 0,
          double eps = 1e-10, double initial_accumulator_value = 0);
  void step() override;

 private:
  double lr_decay_, weight_decay_, eps_, initial_accumulator_value_;
};

// tf.compat.v1.train.FtrlOptimizer (FTRL-Proximal, McMahan et al. 2013) with l2_shrinkage 0.
// Per element, with n the accumulator (state "accum", initially initial_accumulator_value),
// z the linear term (state "linear", initially 0), p = learning_rate_power (-0.5: square root):
//   n' = n + g^2
//   z += g - (n'^(-p) - n^(-p)) / lr * w
//   w  = |z| > l1 ? (sign(z) * l1 - z) / (n'^(-p) / lr + 2 * l2) : 0
//   n  = n'
// TF's defaults: learning_rate_power -0.5, initial_accumulator_value 0.1, l1 = l2 = 0. One fused
// update per parameter on its device (kernels/optim ftrl_update, in double).
class Ftrl : public Optimizer {
 public:
  Ftrl(NamedParameters params, double lr, double learning_rate_power = -0.5,
       double initial_accumulator_value = 0.1, double l1 = 0, double l2 = 0);
  void step() override;

 private:
  double power_, initial_accumulator_value_, l1_, l2_;
};

// Routes parameters by name to sub-optimizers: each parameter goes to the first group it matches.
// A group matches by name prefix ("" matches every name, so put it last), or, when its
// name_contains list is non-empty, the names that contain any of its strings (Hugging Face's
// no-decay rule: {"bias", "LayerNorm.weight"}; the prefix must then be ""). Every parameter
// must match a group (else an error naming it). step() steps every group; set_lr(x) sets each
// group's learning rate to its own initial rate * x / lr0, where lr0 = the `lr` given here (so a
// constant schedule at lr0 keeps each group's rate; other schedules scale every group alike).
// state_dict() is the union of the groups' (parameter names are unique); load_state_dict() routes
// each key to the group owning its parameter: an unknown key fails before anything is written; a
// shape or dtype mismatch fails in its group before that group writes (earlier groups are then
// loaded).
class GroupedOptimizer : public Optimizer {
 public:
  using Make = std::function<std::unique_ptr<Optimizer>(NamedParameters)>;
  struct Group {
    std::string prefix;
    Make make;  // builds the group's optimizer over its parameters (not called when it has none)
    std::vector<std::string> name_contains = {};  // non-empty: match by substring, not prefix
    bool matches(const std::string& name) const;
    std::string label() const;  // for messages: 'prefix' or name contains 'a' | 'b'
  };
  GroupedOptimizer(NamedParameters params, double lr, std::vector<Group> groups);
  void step() override;
  void set_lr(double lr) override;
  OptimizerState state_dict() const override;
  void load_state_dict(const OptimizerState& sd) override;
  void set_capturable() override;
  // The optimizer of group i (nullptr when no parameter fell into it).
  Optimizer* group(size_t i) const { return subs_[i].get(); }

 private:
  double lr0_;
  std::vector<std::unique_ptr<Optimizer>> subs_;
  std::vector<double> sub_lr0_;
};

// torch.nn.utils.clip_grad_norm_ (L2): total = sqrt(sum over all gradients of ||g||^2); when
// total > max_norm every gradient is scaled in place by max_norm / (total + 1e-6). Parameters
// without a gradient are skipped. Returns the total norm before clipping.
double clip_grad_norm(const NamedParameters& params, double max_norm);
// The same on the gradients' device without any host read (CUDA training: no synchronisation):
// the squares are summed into a device f64 scalar (kernels grad_sq_sum, one per gradient), the
// clip factor is computed from it on the device (grad_clip_scale). Returns the total norm as a
// 0-d f64 tensor on that device, for logging. All gradients must be on one device.
Tensor clip_grad_norm_device(const NamedParameters& params, double max_norm);

// Learning rate as a function of the number of optimizer steps already taken (0 for the first).
//   constant:       base
//   step:           base * gamma^floor(step / step_size)                       (StepLR)
//   poly:           base * (1 - min(step, total) / total)^power                 (PolynomialLR)
//   warmup_linear:  base * step / warmup while step < warmup, then
//                   base * max(0, (total - step) / (total - warmup))
//                   (get_linear_schedule_with_warmup)
//   warmup_cosine:  base * step / warmup while step < warmup, then
//                   base * max(0, 0.5 * (1 + cos(pi * (step - warmup) / (total - warmup))))
//                   (transformers' get_cosine_schedule_with_warmup)
struct LRSchedule {
  enum class Kind { Constant, Step, Poly, WarmupLinear, WarmupCosine };
  Kind kind = Kind::Constant;
  double base = 0;
  int64_t step_size = 1, total = 1, warmup = 0;
  double gamma = 1, power = 1;

  double lr(int64_t t) const;  // t: optimizer steps already taken

  static LRSchedule constant(double base);
  static LRSchedule step(double base, int64_t step_size, double gamma);
  static LRSchedule poly(double base, int64_t total, double power = 1.0);
  static LRSchedule warmup_linear(double base, int64_t warmup, int64_t total);
  static LRSchedule warmup_cosine(double base, int64_t warmup, int64_t total);
};

}  // namespace aim::train
