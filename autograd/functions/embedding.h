// Differentiable embedding (kernels/embedding), PyTorch semantics
// (torch.nn.functional.embedding). indices are a plain tensor (no gradient), moved to the
// table's device when they differ; the table's gradient is accumulated (+=) through g.accum
// (node.h).
#pragma once
#include "autograd/variable.h"

namespace aim::autograd {

// weight [V, C]; indices (i32/i64, any shape) -> [..., C]. padding_idx in [0, V): that row gets
// no gradient; < 0: none (the layer converts PyTorch's negative padding_idx before calling).
Variable embedding(const Variable& weight, const Tensor& indices, int64_t padding_idx = -1);

}  // namespace aim::autograd
