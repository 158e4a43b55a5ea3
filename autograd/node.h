// Node: one recorded op of the graph, holding (by name) the tensors its backward needs.
//
// THE CONTRACT (DESIGN §3), written once here:
//   * A node's backward reads the gradients of its outputs (g.dy(i)) and produces gradients for
//     its inputs through Grads:
//       g.out(j)   -> a fresh, uninitialised tensor shaped like input j: the node WRITES (=) it.
//                     Use for activation gradients.
//       g.accum(j) -> a tensor the node ACCUMULATES (+=) into: the leaf's own .grad when input j is
//                     a leaf (zero-filled on first use), else a zeroed temporary. Use for
//                     parameter gradients (weights, biases, embedding tables), so kernels can add
//                     straight into the parameter's gradient buffer.
//       g.accum_or_overwrite(j, beta) -> the same tensor, with beta = 0 when it holds no
//                     gradient yet (a fresh or zero_grad()-ed buffer, left unfilled): the node
//                     then WRITES it (a GEMM's beta), else beta = 1 and it accumulates.
//       g.set(j, t) -> pass an existing tensor (e.g. a reshaped view of dy) as the gradient.
//   * g.dy(i) is contiguous.
//   * Where a value fans out to several consumers, the engine sums their gradients.
//   * g.needs(j) is false when input j does not require grad: skip that work.
//   * Saved tensors are released after backward unless retain_graph is set; a second backward
//     through a released node is an error naming the node.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "autograd/variable.h"

namespace aim::autograd {

struct Edge {
  std::shared_ptr<Node> node;          // the producer of input j (non-leaf), or
  std::shared_ptr<VariableImpl> leaf;  // the leaf variable requiring grad; both null: no grad
  int output_nr = 0;                   // which output of `node`
  bool needs_grad() const { return node || leaf; }
};

class Grads;

class Node {
 public:
  virtual ~Node() = default;
  virtual const char* name() const = 0;
  virtual void backward(Grads& g) = 0;
  virtual void release() {}  // drop saved tensors (override: reset them)
  // True where backward reads g.dy() through its strides: the engine then hands over a view (the
  // slices Concat's backward makes) as it is instead of copying it contiguous first.
  virtual bool takes_strided_dy() const { return false; }

  // Filled by attach(): one edge and one input description per input.
  std::vector<Edge> next;
  std::vector<Shape> input_sizes;
  std::vector<DType> input_dtypes;
  std::vector<Device> input_devices;
  int num_outputs = 1;
  std::vector<Shape> output_sizes;
  std::vector<DType> output_dtypes;
  bool released = false;
  // The layer scope open when the node was created (profiler on only): backward runs in
  // "bwd/<layer>" so the profiler attributes gradient ops to layers.
  std::string layer;
};

class Grads {
 public:
  Grads(Node& n, std::vector<Tensor>& dys) : node_(n), dys_(dys), produced_(n.next.size()) {}
  // Gradient of output i (zeros when no gradient reached that output).
  const Tensor& dy(int i = 0);
  bool needs(int j) const { return node_.next[size_t(j)].needs_grad(); }
  Tensor out(int j);
  Tensor accum(int j);
  Tensor accum_or_overwrite(int j, float& beta);
  // Hand over an existing tensor (a view of dy, a reshape) as input j's gradient: no copy.
  // The engine never writes into it.
  void set(int j, Tensor t);

  // For the engine.
  struct Produced {
    Tensor t;
    bool into_leaf_grad = false;  // accum() handed out the leaf's own .grad
  };
  std::vector<Produced>& produced() { return produced_; }

 private:
  Node& node_;
  std::vector<Tensor>& dys_;
  std::vector<Produced> produced_;
};

// True when grad mode is on and any input requires grad: record a node.
bool needs_grad(std::initializer_list<const Variable*> inputs);
bool needs_grad(const std::vector<Variable>& inputs);

// Wires `node` to its inputs (edges, shapes) and wraps the outputs as Variables with grad_fn.
std::vector<Variable> attach(const std::shared_ptr<Node>& node, const std::vector<Variable>& inputs,
                             const std::vector<Tensor>& outputs);
Variable attach1(const std::shared_ptr<Node>& node, const std::vector<Variable>& inputs,
                 const Tensor& output);

}  // namespace aim::autograd
