// The backward engine: topological order (Kahn, by dependency counts), fan-out accumulation,
// grad-ready hooks fired as soon as a leaf's gradient is final, retain_graph.
#pragma once
#include <vector>

#include "autograd/node.h"

namespace aim::autograd {

// Backpropagates from `roots` with seed gradients `grads` (undefined: ones, for one-element
// roots). Leaves' gradients accumulate into their .grad.
void backward(const std::vector<Variable>& roots, const std::vector<Tensor>& grads,
              bool retain_graph = false);

}  // namespace aim::autograd
