// Differentiable index ops (kernels/index), PyTorch semantics: torch.cat, torch.index_select,
// torch.gather, Tensor.scatter_add (out of place), F.pad in constant mode and F.one_hot. Index
// tensors are i32 or i64 on the data's device (made contiguous here); they carry no gradient.
// Outputs are contiguous.
#pragma once
#include <vector>

#include "autograd/variable.h"

namespace aim::autograd {

// torch.cat(xs, dim): same dtype and device, same sizes except at dim; inputs may be views.
// Backward: each input's gradient is a copy of its slice of dy.
Variable concat(const std::vector<Variable>& xs, int64_t dim);

// x.index_select(dim, index), index 1-d (a 0-d index counts as one element).
// Backward: dx = 0; dx.index_add_(dim, index, dy) (repeated indices accumulate).
Variable index_select(const Variable& x, int64_t dim, const Tensor& index);

// torch.gather(x, dim, index): y has index's shape. Backward: dx = 0; dx.scatter_add_(dim,
// index, dy).
Variable gather(const Variable& x, int64_t dim, const Tensor& index);

// base.scatter_add(dim, index, src), out of place: y = base.clone(); y.scatter_add_(dim, index,
// src). Gradients: dbase = dy, dsrc = dy.gather(dim, index) (0 outside index's extent).
Variable scatter_add(const Variable& base, int64_t dim, const Tensor& index, const Variable& src);

// F.pad(x, pads, mode="constant", value): pads are (before, after) pairs from the last dim
// backwards; negative entries crop. Backward: pad_bwd (cropped elements get no gradient).
Variable pad(const Variable& x, const std::vector<int64_t>& pads, double value = 0);

// F.one_hot(indices, num_classes) in `dtype`: indices [N...] -> [N..., num_classes]. No gradient.
Tensor one_hot(const Tensor& indices, int64_t num_classes, DType dtype = DType::f32);

}  // namespace aim::autograd
