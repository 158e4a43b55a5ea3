#include "train/optim.h"

#include <cmath>
#include <map>

#include "autograd/functions/elementwise.h"
#include "autograd/tensor_ops.h"
#include "kernels/optim/optim.h"

namespace aim::train {

using autograd::Variable;

// ---- Optimizer -------------------------------------------------------------------------------

Optimizer::Optimizer(NamedParameters params, double lr) : lr_(lr), params_(std::move(params)) {
  for (const auto& [name, p] : params_) {
    AIM_CHECK(p.defined(), "optimizer: parameter ", name, " is undefined");
    AIM_CHECK(is_floating(p.dtype()), "optimizer: parameter ", name, " has dtype ",
              dtype_name(p.dtype()), ", floating parameters only");
    slots_.push_back({name, p, {}, 0});
  }
}

void Optimizer::declare_state(std::vector<std::string> names, bool has_step) {
  has_step_ = has_step;
  for (Slot& s : slots_) {
    s.state.clear();
    for (const auto& n : names) s.state.push_back({n, Tensor()});
  }
}

Tensor& Optimizer::raw_state(Slot& s, const std::string& name) {
  for (auto& [n, t] : s.state)
    if (n == name) return t;
  AIM_FAIL("optimizer: no state ", name, " for ", s.name);
}

Tensor& Optimizer::state(Slot& s, const std::string& name) {
  Tensor& t = raw_state(s, name);
  if (!t.defined())
    t = Tensor::zeros(s.param.sizes(), kernels::optim_state_dtype(s.param.dtype()),
                      s.param.device());
  return t;
}

void Optimizer::set_lr(double lr) {
  lr_ = lr;
  if (capturable() && lr != hyper_lr_) write_hyper(lr, -1);
}

// Stream-ordered writes of the device {lr, step} (step < 0: left as it is).
void Optimizer::write_hyper(double lr, int64_t step) {
  autograd::NoGradGuard no_grad;
  if (step < 0) {
    hyper_.slice(0, 0, 1).copy_(Tensor::full({1}, lr, DType::f64));
  } else {
    hyper_.copy_(Tensor::from_vector(std::vector<double>{lr, double(step)}, {2}));
  }
  hyper_lr_ = lr;
}

int64_t Optimizer::device_step() const {
  return int64_t(std::llround(hyper_.slice(0, 1, 2).to(kCPU).to_vector<double>()[0]));
}

void Optimizer::set_capturable() {
  AIM_CHECK(!capturable(), "optimizer: capturable mode is already on");
  int64_t step = -1;
  Device dev = kCPU;
  std::string first;
  for (Slot& s : slots_) {
    if (!s.param.grad().defined()) continue;
    if (step < 0) {
      step = s.step;
      dev = s.param.device();
      first = s.name;
    }
    AIM_CHECK(s.step == step, "optimizer capturable mode: parameter ", s.name, " has taken ",
              s.step, " steps, ", first, " ", step,
              "; a captured step updates every parameter alike");
    AIM_CHECK(s.param.device() == dev, "optimizer capturable mode: parameters on ", dev.str(),
              " and ", s.param.device().str());
    s.counted_on_device = true;
  }
  AIM_CHECK(step >= 0,
            "optimizer capturable mode: no parameter has a gradient yet (take one "
            "eager step first: it creates the gradients and the optimizer state)");
  hyper_ = Tensor::empty({2}, DType::f64, dev);
  write_hyper(lr_, step);
}

std::vector<Optimizer::Slot*> Optimizer::begin_step() {
  std::vector<Slot*> r;
  for (Slot& s : slots_) {
    if (!s.param.grad().defined()) continue;
    AIM_CHECK(!capturable() || s.counted_on_device, "optimizer capturable mode: parameter ", s.name,
              " got a gradient after capturable mode started (a captured step updates a fixed "
              "set of parameters)");
    r.push_back(&s);
  }
  if (capturable() && !r.empty()) {
    autograd::NoGradGuard no_grad;
    const Tensor count = hyper_.slice(0, 1, 2);
    count.copy_(autograd::add(Variable(count), 1.0).data());  // on the device: no host step
  }
  return r;
}

void Optimizer::zero_grad() {
  for (const auto& [name, p] : params_) p.zero_grad();
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState r;
  const int64_t on_device = capturable() ? device_step() : 0;
  for (const Slot& s : slots_) {
    const int64_t step = s.counted_on_device ? on_device : s.step;
    bool any = false;
    for (const auto& [n, t] : s.state)
      if (t.defined()) {
        r.push_back({s.name + "." + n, t});
        any = true;
      }
    if (has_step_ && (any || step > 0))
      r.push_back({s.name + ".step", Tensor::from_vector(std::vector<int64_t>{step}, {})});
  }
  return r;
}

void Optimizer::load_state_dict(const OptimizerState& sd) {
  // Resolve and validate every key before writing anything.
  struct Target {
    Slot* slot;
    std::string state;  // "" for the step counter
  };
  std::map<std::string, Target> targets;
  for (Slot& s : slots_) {
    for (auto& [n, t] : s.state) targets[s.name + "." + n] = {&s, n};
    if (has_step_) targets[s.name + ".step"] = {&s, ""};
  }
  std::vector<std::pair<Target, Tensor>> plan;
  for (const auto& [key, t] : sd) {
    auto it = targets.find(key);
    AIM_CHECK(it != targets.end(), "optimizer load_state_dict: unexpected key ", key);
    const Target& tg = it->second;
    AIM_CHECK(t.defined(), "optimizer load_state_dict: ", key, " is undefined");
    if (tg.state.empty()) {
      AIM_CHECK(t.numel() == 1, "optimizer load_state_dict: ", key, " must hold one value, has ",
                to_string(t.sizes()));
    } else {
      const DType want = kernels::optim_state_dtype(tg.slot->param.dtype());
      AIM_CHECK(t.sizes() == tg.slot->param.sizes() && t.dtype() == want,
                "optimizer load_state_dict: ", key, " has shape ", to_string(t.sizes()), " ",
                dtype_name(t.dtype()), ", expected ", to_string(tg.slot->param.sizes()), " ",
                dtype_name(want));
    }
    plan.push_back({tg, t});
  }
  for (auto& [tg, t] : plan) {
    if (tg.state.empty()) {
      tg.slot->step = int64_t(std::llround(t.item()));
    } else {
      Tensor& dst = raw_state(*tg.slot, tg.state);
      if (!dst.defined()) dst = Tensor::empty(t.sizes(), t.dtype(), tg.slot->param.device());
      dst.copy_(t.to(dst.device()));
    }
  }
  if (capturable()) {  // the device count follows the loaded steps (one count for all)
    int64_t step = -1;
    for (const Slot& s : slots_) {
      if (!s.counted_on_device) continue;
      AIM_CHECK(step < 0 || s.step == step, "optimizer load_state_dict (capturable): parameter ",
                s.name, " has taken ", s.step, " steps, others ", step,
                "; a captured step updates every parameter alike");
      step = s.step;
    }
    if (step >= 0) write_hyper(lr_, step);
  }
}

namespace {
// The gradient as a contiguous tensor of the parameter's dtype (kernels need both).
Tensor grad_for(const Variable& p) {
  Tensor g = p.grad();
  if (g.dtype() != p.dtype()) g = g.to(p.dtype());
  return g.contiguous();
}
}  // namespace

// ---- SGD -------------------------------------------------------------------------------------

SGD::SGD(NamedParameters params, double lr, double momentum, double dampening, double weight_decay,
         bool nesterov)
    : Optimizer(std::move(params), lr),
      momentum_(momentum),
      dampening_(dampening),
      weight_decay_(weight_decay),
      nesterov_(nesterov) {
  AIM_CHECK(lr >= 0, "SGD: invalid learning rate ", lr);
  AIM_CHECK(momentum >= 0, "SGD: invalid momentum ", momentum);
  AIM_CHECK(!nesterov || (momentum > 0 && dampening == 0),
            "SGD: nesterov needs momentum > 0 and zero dampening");
  declare_state(
      momentum != 0 ? std::vector<std::string>{"momentum_buffer"} : std::vector<std::string>{},
      false);
}

void SGD::step() {
  autograd::NoGradGuard no_grad;
  for (Slot* sp : begin_step()) {
    Slot& s = *sp;
    kernels::SgdUpdateArgs a;
    a.param = s.param.data();
    a.grad = grad_for(s.param);
    set_step_scalars(s, a);
    a.momentum = momentum_;
    a.dampening = dampening_;
    a.weight_decay = weight_decay_;
    a.nesterov = nesterov_;
    if (momentum_ != 0) {
      Tensor& buf = raw_state(s, "momentum_buffer");
      AIM_CHECK(buf.defined() || !capturable(), "SGD capturable mode: ", s.name,
                " has no momentum buffer (its first step sets it: take that step eagerly)");
      a.first_step = !buf.defined();
      if (!buf.defined())
        buf = Tensor::empty(s.param.sizes(), kernels::optim_state_dtype(s.param.dtype()),
                            s.param.device());
      a.momentum_buf = buf;
    }
    kernels::sgd_update(a);
  }
}

// ---- Adam / AdamW ----------------------------------------------------------------------------

Adam::Adam(NamedParameters params, double lr, double beta1, double beta2, double eps,
           double weight_decay, bool decoupled)
    : Optimizer(std::move(params), lr),
      beta1_(beta1),
      beta2_(beta2),
      eps_(eps),
      weight_decay_(weight_decay),
      decoupled_(decoupled) {
  AIM_CHECK(lr >= 0 && eps >= 0, "Adam: invalid lr ", lr, " or eps ", eps);
  AIM_CHECK(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1, "Adam: invalid betas (", beta1,
            ", ", beta2, ")");
  declare_state({"exp_avg", "exp_avg_sq"}, true);
}

void Adam::step() {
  autograd::NoGradGuard no_grad;
  for (Slot* sp : begin_step()) {
    Slot& s = *sp;
    kernels::AdamUpdateArgs a;
    a.param = s.param.data();
    a.grad = grad_for(s.param);
    a.exp_avg = state(s, "exp_avg");
    a.exp_avg_sq = state(s, "exp_avg_sq");
    set_step_scalars(s, a);
    a.beta1 = beta1_;
    a.beta2 = beta2_;
    a.eps = eps_;
    a.weight_decay = weight_decay_;
    a.decoupled = decoupled_;
    kernels::adam_update(a);
  }
}

// ---- Lamb ------------------------------------------------------------------------------------

Lamb::Lamb(NamedParameters params, double lr, double beta1, double beta2, double eps,
           double weight_decay)
    : Optimizer(std::move(params), lr),
      beta1_(beta1),
      beta2_(beta2),
      eps_(eps),
      weight_decay_(weight_decay) {
  AIM_CHECK(lr >= 0 && eps >= 0 && weight_decay >= 0, "Lamb: invalid lr ", lr, ", eps ", eps,
            " or weight_decay ", weight_decay);
  AIM_CHECK(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1, "Lamb: invalid betas (", beta1,
            ", ", beta2, ")");
  declare_state({"exp_avg", "exp_avg_sq"}, true);
}

void Lamb::step() {
  autograd::NoGradGuard no_grad;
  const std::vector<Slot*> todo = begin_step();
  if (todo.empty()) return;
  // Every tensor's two squared norms, zeroed once per step (one fill per device in use).
  const Device dev = todo.front()->param.device();
  const Tensor norms = Tensor::zeros({int64_t(todo.size()), 2}, DType::f64, dev);
  for (size_t k = 0; k < todo.size(); ++k) {
    Slot& s = *todo[k];
    kernels::LambStage1Args a;
    a.param = s.param.data();
    a.grad = grad_for(s.param);
    a.exp_avg = state(s, "exp_avg");
    a.exp_avg_sq = state(s, "exp_avg_sq");
    a.update = Tensor::empty(s.param.sizes(), kernels::optim_state_dtype(s.param.dtype()),
                             s.param.device());
    a.norms = s.param.device() == dev ? norms.select(0, int64_t(k))
                                      : Tensor::zeros({2}, DType::f64, s.param.device());
    set_step_scalars(s, a);
    a.beta1 = beta1_;
    a.beta2 = beta2_;
    a.eps = eps_;
    a.weight_decay = weight_decay_;
    kernels::lamb_stage1(a);

    kernels::LambStage2Args b;
    b.param = a.param;
    b.update = a.update;
    b.norms = a.norms;
    b.lr = lr_;
    b.hyper = a.hyper;
    kernels::lamb_stage2(b);
  }
}

// ---- Adagrad ---------------------------------------------------------------------------------

Adagrad::Adagrad(NamedParameters params, double lr, double lr_decay, double weight_decay,
                 double eps, double initial_accumulator_value)
    : Optimizer(std::move(params), lr),
      lr_decay_(lr_decay),
      weight_decay_(weight_decay),
      eps_(eps),
      initial_accumulator_value_(initial_accumulator_value) {
  AIM_CHECK(lr >= 0 && lr_decay >= 0 && eps >= 0, "Adagrad: invalid lr ", lr, ", lr_decay ",
            lr_decay, " or eps ", eps);
  declare_state({"sum"}, true);
}

void Adagrad::step() {
  autograd::NoGradGuard no_grad;
  for (Slot* sp : begin_step()) {
    Slot& s = *sp;
    Tensor& sum = raw_state(s, "sum");
    if (!sum.defined())
      sum = Tensor::full(s.param.sizes(), initial_accumulator_value_,
                         kernels::optim_state_dtype(s.param.dtype()), s.param.device());
    kernels::AdagradUpdateArgs a;
    a.param = s.param.data();
    a.grad = grad_for(s.param);
    a.sum = sum;
    set_step_scalars(s, a);
    a.lr_decay = lr_decay_;
    a.weight_decay = weight_decay_;
    a.eps = eps_;
    kernels::adagrad_update(a);
  }
}

// ---- Ftrl ------------------------------------------------------------------------------------

Ftrl::Ftrl(NamedParameters params, double lr, double learning_rate_power,
           double initial_accumulator_value, double l1, double l2)
    : Optimizer(std::move(params), lr),
      power_(learning_rate_power),
      initial_accumulator_value_(initial_accumulator_value),
      l1_(l1),
      l2_(l2) {
  AIM_CHECK(lr > 0, "Ftrl: learning rate must be > 0, got ", lr);
  AIM_CHECK(learning_rate_power <= 0, "Ftrl: learning_rate_power must be <= 0, got ",
            learning_rate_power);
  AIM_CHECK(initial_accumulator_value > 0, "Ftrl: initial_accumulator_value must be > 0, got ",
            initial_accumulator_value);
  AIM_CHECK(l1 >= 0 && l2 >= 0, "Ftrl: l1 and l2 must be >= 0, got ", l1, " and ", l2);
  declare_state({"accum", "linear"}, true);
}

void Ftrl::step() {
  autograd::NoGradGuard no_grad;
  AIM_CHECK(lr_ > 0, "Ftrl: learning rate must be > 0, got ", lr_);
  for (Slot* sp : begin_step()) {
    Slot& s = *sp;
    const DType sdt = kernels::optim_state_dtype(s.param.dtype());
    Tensor& accum = raw_state(s, "accum");
    if (!accum.defined())
      accum = Tensor::full(s.param.sizes(), initial_accumulator_value_, sdt, s.param.device());
    kernels::FtrlUpdateArgs a;  // fused, on the parameter's device (kernels/optim)
    a.param = s.param.data();
    a.grad = grad_for(s.param);
    AIM_CHECK(a.grad.numel() == a.param.numel(), "Ftrl: gradient of ", s.name, " has ",
              a.grad.numel(), " elements, the parameter ", a.param.numel());
    a.accum = accum;
    a.linear = state(s, "linear");
    set_step_scalars(s, a);
    a.lr_power = power_;
    a.l1 = l1_;
    a.l2 = l2_;
    kernels::ftrl_update(a);
  }
}

// ---- GroupedOptimizer ------------------------------------------------------------------------

bool GroupedOptimizer::Group::matches(const std::string& name) const {
  if (name_contains.empty()) return name.rfind(prefix, 0) == 0;
  for (const std::string& part : name_contains)
    if (name.find(part) != std::string::npos) return true;
  return false;
}

std::string GroupedOptimizer::Group::label() const {
  if (name_contains.empty()) return "'" + prefix + "'";
  std::string r = "name contains";
  for (size_t i = 0; i < name_contains.size(); ++i)
    r += (i ? " | '" : " '") + name_contains[i] + "'";
  return r;
}

GroupedOptimizer::GroupedOptimizer(NamedParameters params, double lr, std::vector<Group> groups)
    : Optimizer(params, lr), lr0_(lr) {
  AIM_CHECK(lr > 0, "GroupedOptimizer: reference learning rate must be > 0, got ", lr);
  AIM_CHECK(!groups.empty(), "GroupedOptimizer: no groups");
  std::string labels;
  for (const Group& g : groups) {
    AIM_CHECK(g.name_contains.empty() || g.prefix.empty(), "GroupedOptimizer: group '", g.prefix,
              "' has both a prefix and name_contains (a group matches by one of them)");
    labels += (labels.empty() ? "" : ", ") + g.label();
  }
  std::vector<NamedParameters> parts(groups.size());
  for (auto& [name, p] : params) {
    size_t g = 0;
    while (g < groups.size() && !groups[g].matches(name)) ++g;
    AIM_CHECK(g < groups.size(), "GroupedOptimizer: parameter ", name,
              " matches no group (groups: ", labels, ")");
    parts[g].push_back({name, p});
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    if (parts[g].empty()) {
      subs_.push_back(nullptr);
      sub_lr0_.push_back(0);
      continue;
    }
    AIM_CHECK(groups[g].make, "GroupedOptimizer: group ", groups[g].label(), " has no factory");
    subs_.push_back(groups[g].make(std::move(parts[g])));
    sub_lr0_.push_back(subs_.back()->lr());
  }
}

void GroupedOptimizer::step() {
  for (auto& o : subs_)
    if (o) o->step();
}

void GroupedOptimizer::set_lr(double lr) {
  lr_ = lr;
  for (size_t g = 0; g < subs_.size(); ++g)
    if (subs_[g]) subs_[g]->set_lr(sub_lr0_[g] * lr / lr0_);
}

void GroupedOptimizer::set_capturable() {
  for (auto& o : subs_)
    if (o) o->set_capturable();
}

OptimizerState GroupedOptimizer::state_dict() const {
  OptimizerState r;
  for (const auto& o : subs_)
    if (o)
      for (auto& kv : o->state_dict()) r.push_back(std::move(kv));
  return r;
}

void GroupedOptimizer::load_state_dict(const OptimizerState& sd) {
  std::map<std::string, size_t> owner;
  for (size_t g = 0; g < subs_.size(); ++g)
    if (subs_[g])
      for (const auto& [name, p] : subs_[g]->parameters()) owner[name] = g;
  std::vector<OptimizerState> parts(subs_.size());
  for (const auto& [key, t] : sd) {
    const size_t dot = key.rfind('.');
    auto it = dot == std::string::npos ? owner.end() : owner.find(key.substr(0, dot));
    AIM_CHECK(it != owner.end(), "optimizer load_state_dict: unexpected key ", key);
    parts[it->second].push_back({key, t});
  }
  // Every key has an owner here; each group then checks its part's shapes and dtypes before it
  // writes that part.
  for (size_t g = 0; g < subs_.size(); ++g)
    if (subs_[g] && !parts[g].empty()) subs_[g]->load_state_dict(parts[g]);
}

// ---- clipping --------------------------------------------------------------------------------

Tensor clip_grad_norm_device(const NamedParameters& params, double max_norm) {
  autograd::NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const auto& [name, p] : params)
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  const Device d = grads.empty() ? kCPU : grads.front().device();
  // Sum of squares of every gradient into one f64 scalar on the device, in parameter order.
  Tensor acc = Tensor::zeros({1}, DType::f64, d);
  for (const Tensor& g : grads) {
    AIM_CHECK(g.device() == d, "clip_grad_norm: gradients on ", d.str(), " and ", g.device().str(),
              "; one device per call");
    kernels::GradSqSumArgs a;
    a.x = g.contiguous();
    a.acc = acc;
    kernels::grad_sq_sum(a);
  }
  const Tensor norm = autograd::sqrt(Variable(acc)).data();  // [1] f64 on d
  for (const Tensor& g : grads) {
    kernels::GradClipScaleArgs a;
    a.x = g.is_contiguous() ? g : g.contiguous();
    a.norm = norm;
    a.max_norm = max_norm;
    kernels::grad_clip_scale(a);
    if (a.x.storage() != g.storage()) g.copy_(a.x);  // a strided gradient: scaled copy back
  }
  return norm.view({});
}

double clip_grad_norm(const NamedParameters& params, double max_norm) {
  return clip_grad_norm_device(params, max_norm).item();  // the one read, for the caller
}

// ---- schedules -------------------------------------------------------------------------------

double LRSchedule::lr(int64_t t) const {
  constexpr double kPi = 3.14159265358979323846;
  switch (kind) {
    case Kind::Constant:
      return base;
    case Kind::Step:
      return base * std::pow(gamma, double(t / step_size));
    case Kind::Poly: {
      const double f = 1.0 - double(std::min(t, total)) / double(total);
      return base * std::pow(f, power);
    }
    case Kind::WarmupLinear:
    case Kind::WarmupCosine: {
      if (t < warmup) return base * double(t) / double(std::max<int64_t>(1, warmup));
      const double span = double(std::max<int64_t>(1, total - warmup));
      if (kind == Kind::WarmupLinear) return base * std::max(0.0, double(total - t) / span);
      const double progress = double(t - warmup) / span;
      return base * std::max(0.0, 0.5 * (1.0 + std::cos(kPi * progress)));
    }
  }
  return base;
}

LRSchedule LRSchedule::constant(double base) {
  LRSchedule s;
  s.base = base;
  return s;
}
LRSchedule LRSchedule::step(double base, int64_t step_size, double gamma) {
  AIM_CHECK(step_size > 0, "LRSchedule::step: step_size must be > 0, got ", step_size);
  LRSchedule s;
  s.kind = Kind::Step;
  s.base = base;
  s.step_size = step_size;
  s.gamma = gamma;
  return s;
}
LRSchedule LRSchedule::poly(double base, int64_t total, double power) {
  AIM_CHECK(total > 0, "LRSchedule::poly: total must be > 0, got ", total);
  LRSchedule s;
  s.kind = Kind::Poly;
  s.base = base;
  s.total = total;
  s.power = power;
  return s;
}
LRSchedule LRSchedule::warmup_linear(double base, int64_t warmup, int64_t total) {
  AIM_CHECK(warmup >= 0 && total >= warmup, "LRSchedule::warmup_linear: need 0 <= warmup (", warmup,
            ") <= total (", total, ")");
  LRSchedule s;
  s.kind = Kind::WarmupLinear;
  s.base = base;
  s.warmup = warmup;
  s.total = total;
  return s;
}
LRSchedule LRSchedule::warmup_cosine(double base, int64_t warmup, int64_t total) {
  LRSchedule s = warmup_linear(base, warmup, total);
  s.kind = Kind::WarmupCosine;
  return s;
}

}  // namespace aim::train
