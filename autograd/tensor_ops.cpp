#include "autograd/tensor_ops.h"

#include "kernels/elementwise/binary.h"
#include "kernels/reduce/reduce.h"

namespace aim::autograd {

Tensor zeros_like(const Tensor& t) { return Tensor::zeros(t.sizes(), t.dtype(), t.device()); }
Tensor empty_like(const Tensor& t) { return Tensor::empty(t.sizes(), t.dtype(), t.device()); }

namespace {
Tensor binary(const Tensor& a, const Tensor& b, kernels::BinaryKind kind, const Tensor& out) {
  kernels::BinaryArgs args;
  args.a = a;
  args.b = b;
  args.y = out;
  args.kind = kind;
  kernels::binary(args);
  return out;
}
}  // namespace

void add_into(const Tensor& acc, const Tensor& t) {
  AIM_CHECK(acc.sizes() == t.sizes(), "gradient accumulation: ", to_string(acc.sizes()),
            " += ", to_string(t.sizes()));
  binary(acc, t.dtype() == acc.dtype() ? t : t.to(acc.dtype()), kernels::BinaryKind::add, acc);
}

Tensor add(const Tensor& a, const Tensor& b) {
  return binary(a, b, kernels::BinaryKind::add,
                Tensor::empty(broadcast_shapes(a.sizes(), b.sizes()), a.dtype(), a.device()));
}

Tensor mul(const Tensor& a, const Tensor& b) {
  return binary(a, b, kernels::BinaryKind::mul,
                Tensor::empty(broadcast_shapes(a.sizes(), b.sizes()), a.dtype(), a.device()));
}

Tensor scale(const Tensor& a, double s) {
  return mul(a, Tensor::full({}, s, a.dtype(), a.device()));
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.sizes() == shape) return g;
  const int64_t lead = g.dim() - int64_t(shape.size());
  AIM_CHECK(lead >= 0, "sum_to: cannot reduce ", to_string(g.sizes()), " to ", to_string(shape));
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < g.dim(); ++i)
    if (i < lead || (shape[size_t(i - lead)] == 1 && g.size(i) != 1)) dims.push_back(i);
  if (dims.empty()) return g.reshape(shape);
  kernels::ReduceArgs r;
  r.x = g;
  r.y = Tensor::empty(kernels::reduced_shape(g.sizes(), dims), g.dtype(), g.device());
  r.kind = kernels::ReduceKind::sum;
  r.dims = dims;
  kernels::reduce(r);
  return r.y.reshape(shape);
}

Tensor conform(const Tensor& t, const Tensor& like, bool cast) {
  if (!t.defined()) return t;
  Tensor r = t.to(like.device());
  if (cast) r = r.to(like.dtype());
  return r.contiguous();
}

}  // namespace aim::autograd
