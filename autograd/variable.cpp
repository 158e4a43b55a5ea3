#include "autograd/variable.h"

#include "autograd/engine.h"

namespace aim::autograd {

namespace {
thread_local bool t_grad_enabled = true;
}

bool grad_enabled() { return t_grad_enabled; }
NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }

Variable::Variable(Tensor t, bool requires_grad, std::string name)
    : impl_(std::make_shared<VariableImpl>()) {
  impl_->data = std::move(t);
  impl_->requires_grad = requires_grad;
  impl_->name = std::move(name);
}

Variable Variable::from_impl(std::shared_ptr<VariableImpl> impl) {
  Variable v;
  v.impl_ = std::move(impl);
  return v;
}

void Variable::backward(const Tensor& grad, bool retain_graph) const {
  autograd::backward({*this}, {grad}, retain_graph);
}

// Lazily: the gradient's first use fills it, or backward's first kernel overwrites it (a weight
// gradient GEMM with beta 0 instead of a fill and a beta-1 read of C).
void Variable::zero_grad() const {
  if (impl_->grad.defined()) impl_->grad_stale = true;
}

}  // namespace aim::autograd
