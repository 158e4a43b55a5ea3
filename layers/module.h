// Module: the base of every layer and model (DESIGN §2 layers/). A module owns named parameters
// (leaf Variables with requires_grad), named buffers (plain tensors: running statistics, step
// counters) and named children, all kept in registration order so that named_parameters() and
// state_dict() give PyTorch's dotted keys in PyTorch's order ("mlp.0.weight": own parameters,
// then own buffers, then each child's entries, recursively).
//
// Parameters are Variable handles: a layer keeps a copy of the handle returned by param(), and
// to() / load_state_dict() replace or overwrite the tensor inside the shared VariableImpl, so the
// layer's handle stays valid. Buffers live in the module; buffer() returns a reference that stays
// valid for the module's lifetime (to() replaces the tensor in that same slot).
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"

namespace aim::layers {

using autograd::Variable;
using Parameter = autograd::Variable;
// Ordered (name, tensor) pairs: state_dict() order is PyTorch's key order.
using StateDict = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The unary forward used by Sequential. Layers with other signatures (models, Embedding's
  // index tensor) add their own overloads; the default throws naming the module type.
  virtual Variable forward(const Variable& x);
  virtual std::string type_name() const { return "Module"; }
  // Analytic work of forward() on an input of shape `in` (in the current train/eval mode): adds
  // the FLOPs the kernels' cost models count to `flops` and returns the output shape. Models sum
  // it into their forward_flops(); the profiler's measured total is tested against it. The
  // default throws naming the module type.
  virtual Shape count_flops(const Shape& in, double& flops) const;

  // What training asks of a layer, so that train/ never names a layer type:
  // uses_batch_statistics(): in training mode it normalises with statistics of the current batch
  // (BatchNorm unless frozen or fixed, Dice): a model with one is not batch-split invariant under
  // data parallelism (--sync-bn). freeze_batch_statistics(): from now on it normalises with its
  // running statistics in training too (--freeze-bn); false when it has none to freeze.
  // is_embedding_table(): its `weight` is a lookup table whose gradient touches only the rows a
  // batch looks up (--embedding-comm sparse).
  virtual bool uses_batch_statistics() const { return false; }
  virtual bool freeze_batch_statistics() { return false; }
  virtual bool is_embedding_table() const { return false; }
  // What inference asks of a layer: allow_prepack(): from the next eval-mode forward without
  // autograd on, it may keep a weight also laid out for the CPU kernel that reads it (Linear:
  // kernels::matmul_pack_b), at the cost of that memory; false when it has nothing to pack.
  // prepacked_bytes(): the memory so kept now.
  virtual bool allow_prepack(bool /*on*/) { return false; }
  virtual int64_t prepacked_bytes() const { return 0; }

  // ---- mode (recursive) -------------------------------------------------------------------
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // ---- parameters, buffers, children ------------------------------------------------------
  std::vector<Parameter> parameters() const;
  std::vector<std::pair<std::string, Parameter>> named_parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const {
    return children_;
  }
  int64_t num_parameters() const;  // total elements of all parameters
  void zero_grad();                // zeroes the accumulated gradient of every parameter

  // ---- checkpoints ------------------------------------------------------------------------
  // Parameters and buffers, dotted keys, PyTorch order. Tensors share storage with the module.
  StateDict state_dict() const;
  // Copies every tensor of `sd` into the matching parameter or buffer (onto its device). Shape
  // and dtype must match exactly; strict also requires the key sets to be equal. Everything is
  // validated before anything is written; errors name the keys:
  //   "load_state_dict: fc1.weight has shape [4, 3], checkpoint has [3, 4]"
  //   "load_state_dict: missing keys: fc2.bias; unexpected keys: fc3.weight"
  void load_state_dict(const std::map<std::string, Tensor>& sd, bool strict = true);
  void load_state_dict(const StateDict& sd, bool strict = true);

  // ---- placement (recursive) --------------------------------------------------------------
  // Moves parameters (data and any gradient) and buffers to `d`.
  void to(Device d);
  // Casts floating-point parameters and buffers to `t` (integer buffers such as
  // num_batches_tracked keep their dtype); gradients are dropped.
  void to(DType t);

 protected:
  // Registers a parameter (a leaf requiring grad) named `name`; an undefined tensor registers
  // nothing and returns an undefined Variable (PyTorch's bias=False).
  Parameter param(const std::string& name, Tensor t);
  // Registers a buffer; the reference stays valid for the module's lifetime.
  Tensor& buffer(const std::string& name, Tensor t);
  template <class M>
  std::shared_ptr<M> child(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }
  void add_child(const std::string& name, std::shared_ptr<Module> m);
  // Called on every module of the tree after load_state_dict wrote into its tensors in place: a
  // layer that keeps something derived from its parameters drops it (Linear's packed weight).
  virtual void parameters_written() {}

 private:
  void check_new_name(const std::string& name) const;
  // Visits own parameters, own buffers, then each child recursively, with dotted names.
  void walk(const std::string& prefix,
            const std::function<void(const std::string&, Parameter&)>& on_param,
            const std::function<void(const std::string&, Tensor&)>& on_buffer) const;

  bool training_ = true;
  // mutable: walk() hands out references for to() and load_state_dict() on a const traversal.
  mutable std::vector<std::pair<std::string, Parameter>> params_;
  mutable std::deque<std::pair<std::string, Tensor>>
      buffers_;  // deque: buffer() references stay valid
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

}  // namespace aim::layers
