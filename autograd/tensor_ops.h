// Plain-tensor helpers used by the engine and the differentiable functions (no graph).
#pragma once
#include "tensor/tensor.h"

namespace aim::autograd {

Tensor zeros_like(const Tensor& t);
Tensor empty_like(const Tensor& t);
void add_into(const Tensor& acc, const Tensor& t);  // acc += t (same shape)
Tensor add(const Tensor& a, const Tensor& b);       // broadcasting
Tensor mul(const Tensor& a, const Tensor& b);       // broadcasting
Tensor scale(const Tensor& a, double s);
// Sum `g` down to `shape` (undo broadcasting): sums leading dims and dims where shape has 1.
Tensor sum_to(const Tensor& g, const Shape& shape);
// A plain tensor (index, target) moved to `like`'s device (and cast to its dtype when cast is
// set), contiguous; undefined stays undefined.
Tensor conform(const Tensor& t, const Tensor& like, bool cast);

}  // namespace aim::autograd
