// Differentiable reductions: sum, mean, max/min (with argmax/argmin), var, std, p-norm.
// dims: any set of dims, negative allowed; empty = all dims. keepdim keeps the reduced dims as
// size 1 (else they are removed; reducing every dim without keepdim gives a 0-d tensor).
// Kernels: kernels/reduce/reduce.h.
#pragma once
#include <utility>
#include <vector>

#include "autograd/variable.h"

namespace aim::autograd {

Variable sum(const Variable& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Variable mean(const Variable& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// Values (differentiable: the gradient goes to the argmax/argmin position, the first occurrence
// on ties) and the i64 indices along `dim`, both of the output shape.
std::pair<Variable, Tensor> max(const Variable& x, int64_t dim, bool keepdim = false);
std::pair<Variable, Tensor> min(const Variable& x, int64_t dim, bool keepdim = false);
// Divisor max(0, n - correction), PyTorch's `correction`. The gradient of std is 0 where std is 0.
Variable var(const Variable& x, const std::vector<int64_t>& dims = {}, double correction = 1,
             bool keepdim = false);
Variable std(const Variable& x, const std::vector<int64_t>& dims = {}, double correction = 1,
             bool keepdim = false);
// (sum |x|^p)^(1/p) for p > 0, max |x| for p = inf. The gradient is 0 where the norm is 0 (and,
// for p < 1, at x = 0); for p = inf it is shared evenly among the tied maxima, as in PyTorch.
Variable norm(const Variable& x, double p = 2, const std::vector<int64_t>& dims = {},
              bool keepdim = false);

}  // namespace aim::autograd
