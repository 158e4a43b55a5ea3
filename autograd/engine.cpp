#include "autograd/engine.h"

#include <deque>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "autograd/tensor_ops.h"
#include "profiler/profiler.h"

namespace aim::autograd {

const Tensor& Grads::dy(int i) {
  Tensor& t = dys_[size_t(i)];
  if (!t.defined()) {
    const Device d = node_.input_devices.empty() ? kCPU : node_.input_devices[0];
    t = Tensor::zeros(node_.output_sizes[size_t(i)], node_.output_dtypes[size_t(i)], d);
  }
  return t;
}

Tensor Grads::out(int j) {
  const size_t k = size_t(j);
  AIM_CHECK(!produced_[k].t.defined(), "[", node_.name(), "] gradient of input ", j,
            " requested twice");
  produced_[k].t =
      Tensor::empty(node_.input_sizes[k], node_.input_dtypes[k], node_.input_devices[k]);
  return produced_[k].t;
}

Tensor Grads::accum(int j) {
  float beta = 1.0f;
  Tensor t = accum_or_overwrite(j, beta);
  if (beta == 0.0f) t.zero_();
  return t;
}

Tensor Grads::accum_or_overwrite(int j, float& beta) {
  const size_t k = size_t(j);
  AIM_CHECK(!produced_[k].t.defined(), "[", node_.name(), "] gradient of input ", j,
            " requested twice");
  const Edge& e = node_.next[k];
  beta = 1.0f;
  if (e.leaf) {
    VariableImpl& leaf = *e.leaf;
    if (!leaf.grad.defined()) {
      leaf.grad = Tensor::empty(leaf.data.sizes(), leaf.data.dtype(), leaf.data.device());
      beta = 0.0f;
    } else if (leaf.grad_stale) {
      leaf.grad_stale = false;  // the caller writes every element
      beta = 0.0f;
    }
    produced_[k] = {leaf.grad, true};
    return leaf.grad;
  }
  produced_[k].t =
      Tensor::empty(node_.input_sizes[k], node_.input_dtypes[k], node_.input_devices[k]);
  beta = 0.0f;
  return produced_[k].t;
}

void Grads::set(int j, Tensor t) {
  const size_t k = size_t(j);
  AIM_CHECK(!produced_[k].t.defined(), "[", node_.name(), "] gradient of input ", j,
            " requested twice");
  AIM_CHECK(t.sizes() == node_.input_sizes[k], "[", node_.name(), "] gradient of input ", j,
            " has shape ", to_string(t.sizes()), ", input has ", to_string(node_.input_sizes[k]));
  produced_[k].t = std::move(t);
}

bool needs_grad(std::initializer_list<const Variable*> inputs) {
  if (!grad_enabled()) return false;
  for (const Variable* v : inputs)
    if (v && v->defined() && (v->requires_grad() || v->grad_fn())) return true;
  return false;
}

bool needs_grad(const std::vector<Variable>& inputs) {
  if (!grad_enabled()) return false;
  for (const Variable& v : inputs)
    if (v.defined() && (v.requires_grad() || v.grad_fn())) return true;
  return false;
}

std::vector<Variable> attach(const std::shared_ptr<Node>& node, const std::vector<Variable>& inputs,
                             const std::vector<Tensor>& outputs) {
  if (profiler::enabled()) node->layer = profiler::current_layer();
  for (const Variable& v : inputs) {
    Edge e;
    if (v.defined()) {
      if (v.grad_fn()) {
        e.node = v.grad_fn();
        e.output_nr = v.impl()->output_nr;
      } else if (v.requires_grad()) {
        e.leaf = v.impl();
      }
      node->input_sizes.push_back(v.sizes());
      node->input_dtypes.push_back(v.dtype());
      node->input_devices.push_back(v.device());
    } else {
      node->input_sizes.push_back({});
      node->input_dtypes.push_back(DType::f32);
      node->input_devices.push_back(kCPU);
    }
    node->next.push_back(std::move(e));
  }
  node->num_outputs = int(outputs.size());
  std::vector<Variable> r;
  for (size_t i = 0; i < outputs.size(); ++i) {
    node->output_sizes.push_back(outputs[i].sizes());
    node->output_dtypes.push_back(outputs[i].dtype());
    Variable v(outputs[i], true);
    v.impl()->grad_fn = node;
    v.impl()->output_nr = int(i);
    r.push_back(v);
  }
  return r;
}

Variable attach1(const std::shared_ptr<Node>& node, const std::vector<Variable>& inputs,
                 const Tensor& output) {
  return attach(node, inputs, {output})[0];
}

namespace {

void accumulate_leaf(VariableImpl& leaf, const Tensor& g) {
  if (!leaf.grad.defined()) {
    // A fresh buffer owned by this leaf from now on (g may be shared with others: copy).
    leaf.grad = g.clone();
  } else if (leaf.grad_stale) {
    leaf.grad_stale = false;
    leaf.grad.copy_(g);
  } else {
    add_into(leaf.grad, g);
  }
}

}  // namespace

void backward(const std::vector<Variable>& roots, const std::vector<Tensor>& grads,
              bool retain_graph) {
  AIM_CHECK(roots.size() == grads.size(), "backward: ", roots.size(), " roots but ", grads.size(),
            " gradients");
  NoGradGuard no_grad;  // gradient computations are not recorded (no create_graph)

  // Seed gradients.
  std::vector<Tensor> seeds(roots.size());
  for (size_t i = 0; i < roots.size(); ++i) {
    const Variable& r = roots[i];
    AIM_CHECK(r.requires_grad() || r.grad_fn(), "backward: root ", i,
              " does not require grad (no graph recorded: all inputs were constants, or grad mode "
              "was off)");
    if (grads[i].defined()) {
      AIM_CHECK(grads[i].sizes() == r.sizes(), "backward: gradient ", to_string(grads[i].sizes()),
                " for root ", to_string(r.sizes()));
      seeds[i] = grads[i];
    } else {
      AIM_CHECK(r.numel() == 1, "backward: root of shape ", to_string(r.sizes()),
                " needs an explicit gradient (only one-element roots default to ones)");
      seeds[i] = Tensor::ones(r.sizes(), r.dtype(), r.device());
    }
  }

  // Discover the graph: dependency counts of nodes, pending edge counts of leaves.
  std::unordered_map<Node*, int> deps;
  std::unordered_map<VariableImpl*, int> leaf_pending;
  std::unordered_map<Node*, std::shared_ptr<Node>> owner;
  std::vector<Node*> stack;
  for (const Variable& r : roots) {
    if (Node* n = r.grad_fn().get()) {
      if (!owner.count(n)) {
        owner[n] = r.grad_fn();
        deps[n];
        stack.push_back(n);
      }
    }
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    AIM_CHECK(
        !n->released, "backward through node ", n->name(),
        " whose saved tensors were already freed: pass retain_graph=true to the first backward");
    for (const Edge& e : n->next) {
      if (e.leaf) ++leaf_pending[e.leaf.get()];
      if (!e.node) continue;
      Node* m = e.node.get();
      if (!owner.count(m)) {
        owner[m] = e.node;
        deps[m] = 0;
        stack.push_back(m);
      }
      ++deps[m];
    }
  }

  std::unordered_map<Node*, std::vector<Tensor>> pending;
  auto route_to_node = [&](Node* m, int output_nr, const Tensor& g) {
    auto& buf = pending[m];
    if (buf.empty()) buf.resize(size_t(m->num_outputs));
    Tensor& slot = buf[size_t(output_nr)];
    // Out of place: the first gradient may alias another tensor (Grads::set).
    slot = slot.defined() ? add(slot, g) : g;
  };
  auto leaf_done = [&](VariableImpl* leaf) {
    if (--leaf_pending[leaf] == 0)
      for (auto& h : leaf->grad_ready_hooks) h(*leaf);
  };

  std::deque<Node*> ready;
  for (size_t i = 0; i < roots.size(); ++i) {
    if (Node* n = roots[i].grad_fn().get()) {
      route_to_node(n, roots[i].impl()->output_nr, seeds[i]);
    } else {
      accumulate_leaf(*roots[i].impl(), seeds[i]);
      for (auto& h : roots[i].impl()->grad_ready_hooks) h(*roots[i].impl());
    }
  }
  for (auto& [n, d] : deps)
    if (d == 0) ready.push_back(n);

  while (!ready.empty()) {
    Node* n = ready.front();
    ready.pop_front();
    auto& dys = pending[n];
    if (dys.empty()) dys.resize(size_t(n->num_outputs));
    for (Tensor& t : dys)
      if (t.defined() && !n->takes_strided_dy()) t = t.contiguous();
    Grads g(*n, dys);
    {
      std::optional<profiler::Scope> layer_scope;
      if (profiler::enabled() && !n->layer.empty())
        layer_scope.emplace(n->layer, profiler::ScopeKind::Layer);
      n->backward(g);
    }
    auto& produced = g.produced();
    for (size_t j = 0; j < n->next.size(); ++j) {
      const Edge& e = n->next[j];
      const Grads::Produced& p = produced[j];
      if (e.leaf) {
        if (p.t.defined() && !p.into_leaf_grad) accumulate_leaf(*e.leaf, p.t);
        leaf_done(e.leaf.get());
      } else if (e.node) {
        if (p.t.defined()) route_to_node(e.node.get(), e.output_nr, p.t);
        if (--deps[e.node.get()] == 0) ready.push_back(e.node.get());
      }
    }
    pending.erase(n);
    if (!retain_graph) {
      n->release();
      n->released = true;
    }
  }
}

}  // namespace aim::autograd
