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

// torch.cat([embedding(weights[k], indices[k], padding_idx[k]) for k], -1): each table's rows
// are gathered straight into its columns of the result, and its gradient read back from them
// (no separate gathers and concatenation copy; DIN's and DIEN's [item, category] features).
// The indices share one shape; the tables one dtype and device. padding_idx: one per table.
Variable embedding_cat(const std::vector<Variable>& weights, const std::vector<Tensor>& indices,
                       const std::vector<int64_t>& padding_idx);

}  // namespace aim::autograd
