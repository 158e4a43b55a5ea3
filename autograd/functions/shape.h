// Differentiable views and conversions.
#pragma once
#include "autograd/variable.h"

namespace aim::autograd {

Variable reshape(const Variable& x, const Shape& sizes);
Variable permute(const Variable& x, const std::vector<int64_t>& dims);
Variable transpose(const Variable& x, int64_t a, int64_t b);
Variable slice(const Variable& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Variable select(const Variable& x, int64_t dim, int64_t index);
Variable expand(const Variable& x, const Shape& sizes);
Variable unsqueeze(const Variable& x, int64_t dim);
Variable squeeze(const Variable& x, int64_t dim);
Variable contiguous(const Variable& x);
Variable cast(const Variable& x, DType t);  // gradient flows back cast to x's dtype
// Splits along dim into pieces of the given sizes (views; their gradients are assembled).
std::vector<Variable> split(const Variable& x, const std::vector<int64_t>& sizes, int64_t dim);

}  // namespace aim::autograd
