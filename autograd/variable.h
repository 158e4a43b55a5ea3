// Variable: a Tensor with a gradient and the node that produced it (DESIGN §3).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace aim::autograd {

class Node;

struct VariableImpl {
  Tensor data;
  Tensor grad;  // accumulated by backward (leaves), undefined until then
  // zero_grad() ran and grad's storage was not zero-filled: its values are stale and logically
  // zero. The accessors fill it on first use; backward's accum_or_overwrite hands it to a kernel
  // that overwrites it instead (set_to_none's saving, the buffer kept).
  bool grad_stale = false;
  // Fills a stale grad with zeros (see grad_stale).
  void settle_grad() {
    if (grad_stale) {
      grad_stale = false;
      grad.zero_();
    }
  }
  std::shared_ptr<Node> grad_fn;  // null for leaves
  int output_nr = 0;              // which output of grad_fn this is
  bool requires_grad = false;
  std::string name;
  // Called once per backward, as soon as this leaf's gradient is final (data-parallel reducer).
  std::vector<std::function<void(VariableImpl&)>> grad_ready_hooks;
};

class Variable {
 public:
  Variable() = default;
  explicit Variable(Tensor t, bool requires_grad = false, std::string name = "");
  static Variable from_impl(std::shared_ptr<VariableImpl> impl);

  bool defined() const { return impl_ != nullptr; }
  const Tensor& data() const { return impl_->data; }
  Tensor& mutable_data() const { return impl_->data; }  // optimizer updates, loading weights
  const Tensor& grad() const {
    impl_->settle_grad();
    return impl_->grad;
  }
  Tensor& mutable_grad() const {
    impl_->settle_grad();
    return impl_->grad;
  }
  const std::shared_ptr<Node>& grad_fn() const { return impl_->grad_fn; }
  bool requires_grad() const { return impl_ && impl_->requires_grad; }
  void set_requires_grad(bool r) const { impl_->requires_grad = r; }
  bool is_leaf() const { return impl_->grad_fn == nullptr; }
  const std::string& name() const { return impl_->name; }
  void set_name(std::string n) const { impl_->name = std::move(n); }
  const std::shared_ptr<VariableImpl>& impl() const { return impl_; }

  // Shape passthroughs.
  const Shape& sizes() const { return data().sizes(); }
  int64_t size(int64_t d) const { return data().size(d); }
  int64_t dim() const { return data().dim(); }
  int64_t numel() const { return data().numel(); }
  DType dtype() const { return data().dtype(); }
  Device device() const { return data().device(); }

  // Backpropagate from this variable. `grad` defaults to ones for a one-element variable.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;
  void zero_grad() const;
  Variable detach() const { return Variable(data(), false, name()); }
  void add_grad_ready_hook(std::function<void(VariableImpl&)> h) const {
    impl_->grad_ready_hooks.push_back(std::move(h));
  }

 private:
  std::shared_ptr<VariableImpl> impl_;
};

// Grad mode: when off, differentiable functions record nothing (inference, optimizer steps).
bool grad_enabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace aim::autograd
