// Reductions over any set of dims: sum, mean, max, min, prod, var, std, p-norm.
// Shapes: x any shape (any strides); y = reduced_shape(x, dims): x's shape with the reduced dims
// of size 1 (keepdim; callers view it as they like), contiguous, dtype of x; indices (optional,
// i64, y's shape, contiguous): argmax/argmin along the one reduced dim for max/min.
// Math, PyTorch equivalents and the variants: kernels/reduce/README.md
#pragma once
#include <vector>

#include "kernels/op.h"

namespace aim::kernels {

enum class ReduceKind {
  sum,
  mean,
  max,
  min,
  prod,
  var,
  std,
  norm /* p-norm: p=1,2,inf or any p>0 */
};
const char* reduce_kind_name(ReduceKind k);

struct ReduceArgs {
  Tensor x;  // input: any shape, any strides, float dtype
  Tensor y;  // output: reduced_shape(x, dims), contiguous, x's dtype
  ReduceKind kind = ReduceKind::sum;
  std::vector<int64_t> dims;  // any set, any order, negative allowed; empty = all dims
  double correction = 1;      // var/std: divisor max(0, n - correction), PyTorch's `correction`
  double p = 2;               // norm: p > 0 or +inf
  Tensor indices;             // optional output (i64, y's shape): max/min over exactly one dim
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.out("y", s.y), f.out_opt("indices", s.indices);
    f.param("kind", s.kind), f.list("dims", s.dims), f.param("correction", s.correction);
    f.param("p", s.p);
  }
};

// The reduced dims of a tensor of shape s, wrapped to [0, rank) and sorted; all dims when `dims`
// is empty. Throws on out-of-range or repeated dims.
std::vector<int64_t> normalize_reduce_dims(const Shape& s, const std::vector<int64_t>& dims);
// x's shape with the reduced dims set to 1 (keepdim).
Shape reduced_shape(const Shape& s, const std::vector<int64_t>& dims);

// x seen as a contiguous [outer, R, inner] block: y[o, i] reduces x[o, :, i]. Size-1 dims are
// dropped and neighbouring dims of the same kind merged; when the reduced dims do not form one
// block after that (e.g. dims {0, 2} of [A, B, C]), or x is not contiguous, x is copied with its
// kept dims first and its reduced dims last (inner = 1). y's contiguous layout is [outer, inner].
struct ReduceView {
  Tensor x;  // contiguous
  int64_t outer = 1, R = 1, inner = 1;
  bool copied = false;
};
ReduceView reduce_view(const Tensor& x, const std::vector<int64_t>& dims);

// Validates a's tensors and scalars (shapes, dtypes, kind-specific rules); throws with `who` as
// the prefix ("[reduce] ..." or "[reduce] cuda.rows ...").
void check_reduce_args(const ReduceArgs& a, const char* who);

// Compulsory work: one pass over x (two for var/std), one write of y (and indices).
inline Cost reduce_cost(const ReduceArgs& a) {
  const double n = double(a.x.numel()), e = double(dtype_size(a.x.dtype()));
  const bool two_pass = a.kind == ReduceKind::var || a.kind == ReduceKind::std;
  return Cost{/*flops=*/two_pass ? 3 * n : n,
              /*bytes_read=*/n * e,
              /*bytes_written=*/double(a.y.numel()) * e +
                  (a.indices.defined() ? double(a.indices.numel()) * 8 : 0.0)};
}

void reduce(const ReduceArgs& a);  // runs the selected variant

}  // namespace aim::kernels
