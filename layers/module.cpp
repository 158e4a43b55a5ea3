#include "layers/module.h"

#include <set>

#include "tensor/check.h"

namespace aim::layers {

Variable Module::forward(const Variable&) {
  AIM_FAIL(type_name(), " has no unary forward(const Variable&)");
}

Shape Module::count_flops(const Shape&, double&) const {
  AIM_FAIL(type_name(), " has no analytic FLOP count (count_flops)");
}

void Module::check_new_name(const std::string& name) const {
  AIM_CHECK(!name.empty() && name.find('.') == std::string::npos,
            "module attribute names must be non-empty and contain no '.', got \"", name, "\"");
  for (const auto& p : params_) AIM_CHECK(p.first != name, "duplicate parameter name ", name);
  for (const auto& b : buffers_) AIM_CHECK(b.first != name, "duplicate buffer name ", name);
  for (const auto& c : children_) AIM_CHECK(c.first != name, "duplicate child name ", name);
}

Parameter Module::param(const std::string& name, Tensor t) {
  check_new_name(name);
  if (!t.defined()) return Parameter();
  Parameter p(std::move(t), /*requires_grad=*/true, name);
  params_.emplace_back(name, p);
  return p;
}

Tensor& Module::buffer(const std::string& name, Tensor t) {
  check_new_name(name);
  AIM_CHECK(t.defined(), "buffer ", name, " is undefined");
  buffers_.emplace_back(name, std::move(t));
  return buffers_.back().second;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  check_new_name(name);
  AIM_CHECK(m != nullptr, "child ", name, " is null");
  AIM_CHECK(m.get() != this, "a module cannot be its own child");
  m->train(training_);
  children_.emplace_back(name, std::move(m));
}

void Module::walk(const std::string& prefix,
                  const std::function<void(const std::string&, Parameter&)>& on_param,
                  const std::function<void(const std::string&, Tensor&)>& on_buffer) const {
  if (on_param)
    for (auto& p : params_) on_param(prefix + p.first, p.second);
  if (on_buffer)
    for (auto& b : buffers_) on_buffer(prefix + b.first, b.second);
  for (const auto& c : children_) c.second->walk(prefix + c.first + ".", on_param, on_buffer);
}

void Module::train(bool on) {
  training_ = on;
  for (auto& c : children_) c.second->train(on);
}

std::vector<Parameter> Module::parameters() const {
  std::vector<Parameter> out;
  walk(
      "", [&](const std::string&, Parameter& p) { out.push_back(p); }, nullptr);
  return out;
}

std::vector<std::pair<std::string, Parameter>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Parameter>> out;
  walk(
      "", [&](const std::string& n, Parameter& p) { out.emplace_back(n, p); }, nullptr);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  walk("", nullptr, [&](const std::string& n, Tensor& t) { out.emplace_back(n, t); });
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

void Module::zero_grad() {
  for (const auto& p : parameters()) p.zero_grad();
}

StateDict Module::state_dict() const {
  // PyTorch order: a module's own parameters, then its own buffers, then its children's entries.
  StateDict out;
  std::function<void(const Module&, const std::string&)> rec = [&](const Module& m,
                                                                   const std::string& prefix) {
    for (const auto& p : m.params_) out.emplace_back(prefix + p.first, p.second.data());
    for (const auto& b : m.buffers_) out.emplace_back(prefix + b.first, b.second);
    for (const auto& c : m.children_) rec(*c.second, prefix + c.first + ".");
  };
  rec(*this, "");
  return out;
}

void Module::load_state_dict(const StateDict& sd, bool strict) {
  std::map<std::string, Tensor> m;
  for (const auto& kv : sd) {
    AIM_CHECK(m.emplace(kv.first, kv.second).second, "load_state_dict: duplicate key ", kv.first);
  }
  load_state_dict(m, strict);
}

void Module::load_state_dict(const std::map<std::string, Tensor>& sd, bool strict) {
  // Targets in state_dict order; a Tensor* to the parameter's data or the buffer slot.
  std::vector<std::pair<std::string, Tensor*>> targets;
  walk(
      "", [&](const std::string& n, Parameter& p) { targets.emplace_back(n, &p.mutable_data()); },
      [&](const std::string& n, Tensor& t) { targets.emplace_back(n, &t); });

  std::vector<std::string> missing, unexpected;
  std::set<std::string> known;
  for (const auto& t : targets) {
    known.insert(t.first);
    auto it = sd.find(t.first);
    if (it == sd.end()) {
      missing.push_back(t.first);
      continue;
    }
    const Tensor& src = it->second;
    AIM_CHECK(src.defined(), "load_state_dict: ", t.first, " is undefined in the checkpoint");
    if (src.sizes() != t.second->sizes()) {
      AIM_FAIL("load_state_dict: ", t.first, " has shape ", to_string(t.second->sizes()),
               ", checkpoint has ", to_string(src.sizes()));
    }
    if (src.dtype() != t.second->dtype()) {
      AIM_FAIL("load_state_dict: ", t.first, " has dtype ", dtype_name(t.second->dtype()),
               ", checkpoint has ", dtype_name(src.dtype()));
    }
  }
  for (const auto& kv : sd)
    if (!known.count(kv.first)) unexpected.push_back(kv.first);
  if (strict && (!missing.empty() || !unexpected.empty())) {
    auto join = [](const std::vector<std::string>& v) {
      std::string s;
      for (const auto& k : v) s += (s.empty() ? "" : ", ") + k;
      return s;
    };
    std::string msg = "load_state_dict:";
    if (!missing.empty()) msg += " missing keys: " + join(missing);
    if (!missing.empty() && !unexpected.empty()) msg += ";";
    if (!unexpected.empty()) msg += " unexpected keys: " + join(unexpected);
    AIM_FAIL(msg);
  }
  for (const auto& t : targets) {
    auto it = sd.find(t.first);
    if (it == sd.end()) continue;
    t.second->copy_(it->second.to(t.second->device()));
  }
  std::function<void(Module&)> notify = [&](Module& m) {
    m.parameters_written();
    for (const auto& c : m.children_) notify(*c.second);
  };
  notify(*this);
}

void Module::to(Device d) {
  walk(
      "",
      [&](const std::string&, Parameter& p) {
        p.mutable_data() = p.data().to(d);
        if (p.grad().defined()) p.mutable_grad() = p.grad().to(d);
      },
      [&](const std::string&, Tensor& t) { t = t.to(d); });
}

void Module::to(DType dt) {
  AIM_CHECK(is_floating(dt), "Module::to: ", dtype_name(dt), " is not a floating-point dtype");
  walk(
      "",
      [&](const std::string&, Parameter& p) {
        if (!is_floating(p.dtype())) return;
        p.mutable_data() = p.data().to(dt);
        p.mutable_grad() = Tensor();
      },
      [&](const std::string&, Tensor& t) {
        if (is_floating(t.dtype())) t = t.to(dt);
      });
}

}  // namespace aim::layers
