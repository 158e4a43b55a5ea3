// Reductions. The kernels produce the keepdim shape; without keepdim the output is a view of it
// with the reduced dims removed, and backward views dy back as the keepdim shape.
// Backward: sum/mean broadcast dy over the reduced dims; max/min scatter dy to the saved
// indices; var/std/norm by their formulas, composed from elementwise and reduce kernels.
#include "autograd/functions/reduce.h"

#include <algorithm>
#include <cmath>

#include "autograd/amp.h"
#include "autograd/node.h"
#include "autograd/tensor_ops.h"
#include "kernels/elementwise/binary.h"
#include "kernels/elementwise/unary.h"
#include "kernels/index/index.h"
#include "kernels/reduce/reduce.h"

namespace aim::autograd {
namespace {

using kernels::BinaryKind;
using kernels::ReduceKind;
using kernels::UnaryKind;

// ---- plain-tensor helpers (no graph) -------------------------------------------------------

// Reduces x over dims (already normalized) into a fresh keepdim-shaped tensor.
Tensor reduce_keep(const Tensor& x, ReduceKind kind, const std::vector<int64_t>& dims,
                   double correction = 1, double p = 2, const Tensor& indices = Tensor()) {
  kernels::ReduceArgs a;
  a.x = x;
  a.y = Tensor::empty(kernels::reduced_shape(x.sizes(), dims), x.dtype(), x.device());
  a.kind = kind;
  a.dims = dims;
  a.correction = correction;
  a.p = p;
  a.indices = indices;
  kernels::reduce(a);
  return a.y;
}

// x's shape with the reduced dims removed (kept as 1 with keepdim).
Shape output_shape(const Shape& s, const std::vector<int64_t>& dims, bool keepdim) {
  if (keepdim) return kernels::reduced_shape(s, dims);
  Shape r;
  for (int64_t d = 0; d < int64_t(s.size()); ++d)
    if (!std::binary_search(dims.begin(), dims.end(), d)) r.push_back(s[size_t(d)]);
  return r;
}

int64_t reduced_count(const Shape& s, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= s[size_t(d)];
  return n;
}

Tensor scalar_like(double v, const Tensor& like) {
  return Tensor::full({}, v, like.dtype(), like.device());
}

Tensor binary(const Tensor& a, const Tensor& b, BinaryKind kind) {
  kernels::BinaryArgs args;
  args.a = a;
  args.b = b;
  args.kind = kind;
  args.y = Tensor::empty(broadcast_shapes(a.sizes(), b.sizes()),
                         kernels::is_comparison(kind) ? DType::boolean : a.dtype(), a.device());
  kernels::binary(args);
  return args.y;
}

Tensor unary(const Tensor& x, UnaryKind kind) {
  kernels::UnaryArgs args;
  args.x = x;
  args.y = Tensor::empty(x.sizes(), x.dtype(), x.device());
  args.kind = kind;
  kernels::unary(args);
  return args.y;
}

// cond ? a : b, broadcast.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  kernels::WhereArgs args;
  args.cond = cond;
  args.a = a;
  args.b = b;
  args.y = Tensor::empty(broadcast_shapes(cond.sizes(), broadcast_shapes(a.sizes(), b.sizes())),
                         a.dtype(), a.device());
  kernels::where(args);
  return args.y;
}

// t, with 0 where `zero_at` == 0 (zero_at broadcastable to t).
Tensor zero_where_zero(const Tensor& t, const Tensor& zero_at) {
  const Tensor z = scalar_like(0, t);
  return where(binary(zero_at, z, BinaryKind::eq), z, t);
}

// ---- nodes ---------------------------------------------------------------------------------

// sum (scale 1) and mean (scale 1/n): dx = scale * dy, broadcast over the reduced dims.
struct SumNode final : Node {
  Shape keep;  // keepdim shape of the output
  double scale = 1;
  bool is_mean = false;
  const char* name() const override { return is_mean ? "Mean" : "Sum"; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    Tensor d = g.dy().reshape(keep);
    if (scale != 1) d = autograd::scale(d, scale);
    g.out(0).copy_(d);  // copy_ expands d to x's shape
  }
};

// max / min over one dim: dy lands at the saved argmax / argmin, zero elsewhere.
struct ArgReduceNode final : Node {
  Shape keep;
  Tensor indices;  // i64, keepdim shape
  int64_t dim = 0;
  bool is_max = true;
  const char* name() const override { return is_max ? "Max" : "Min"; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    Tensor dx = g.out(0);
    dx.zero_();
    kernels::ScatterAddArgs a;
    a.src = g.dy().reshape(keep);
    a.index = indices;
    a.y = dx;
    a.dim = dim;
    kernels::scatter_add(a);
  }
  void release() override { indices = Tensor(); }
};

// var: dx = dy * 2 (x - mean) / d;  std: dx = dy * (x - mean) / (d * std), 0 where std = 0;
// d = max(0, n - correction).
struct VarNode final : Node {
  Shape keep;
  Tensor x, mean, stdev;  // mean, stdev: keepdim shape; stdev only for std
  double divisor = 1;
  bool is_std = false;
  const char* name() const override { return is_std ? "Std" : "Var"; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    const Tensor dy = g.dy().reshape(keep);
    Tensor f;
    if (is_std) {
      f = binary(dy, scale(stdev, divisor), BinaryKind::div);
      f = zero_where_zero(f, stdev);
    } else {
      f = scale(dy, 2 / divisor);
    }
    g.set(0, binary(binary(x, mean, BinaryKind::sub), f, BinaryKind::mul));
  }
  void release() override { x = mean = stdev = Tensor(); }
};

// p-norm y = (sum |x|^p)^(1/p):  dx = dy * sign(x) |x|^(p-1) / y^(p-1)  (0 where y = 0);
// p = 2: dy * x / y;  p = 1: dy * sign(x);  p = inf: dy * sign(x) [|x| = y] / #ties.
struct NormNode final : Node {
  Shape keep;
  std::vector<int64_t> dims;  // normalized
  Tensor x, y;                // y: keepdim shape
  double p = 2;
  const char* name() const override { return "Norm"; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    const Tensor dy = g.dy().reshape(keep);
    Tensor dx;
    if (p == 1) {
      dx = binary(unary(x, UnaryKind::sign), dy, BinaryKind::mul);
    } else if (p == 2) {
      const Tensor f = zero_where_zero(binary(dy, y, BinaryKind::div), y);
      dx = binary(x, f, BinaryKind::mul);
    } else if (std::isinf(p)) {
      const Tensor at_max = binary(unary(x, UnaryKind::abs), y, BinaryKind::eq).to(x.dtype());
      const Tensor ties = reduce_keep(at_max, ReduceKind::sum, dims);
      const Tensor f = binary(dy, ties, BinaryKind::div);
      dx = binary(binary(unary(x, UnaryKind::sign), at_max, BinaryKind::mul), f, BinaryKind::mul);
    } else {
      const Tensor pm1 = scalar_like(p - 1, x);
      Tensor a = binary(binary(unary(x, UnaryKind::abs), pm1, BinaryKind::pow),
                        unary(x, UnaryKind::sign), BinaryKind::mul);
      if (p < 1) a = zero_where_zero(a, x);  // sign(0) * 0^(p-1) = 0 * inf
      const Tensor f =
          zero_where_zero(binary(dy, binary(y, pm1, BinaryKind::pow), BinaryKind::div), y);
      dx = binary(a, f, BinaryKind::mul);
    }
    g.set(0, dx);
  }
  void release() override { x = y = Tensor(); }
};

Variable sum_or_mean(const Variable& x, const std::vector<int64_t>& dims, bool keepdim, bool mean) {
  const std::vector<int64_t> rd = kernels::normalize_reduce_dims(x.sizes(), dims);
  const Tensor y = reduce_keep(x.data(), mean ? ReduceKind::mean : ReduceKind::sum, rd);
  const Tensor out = y.reshape(output_shape(x.sizes(), rd, keepdim));
  if (!needs_grad({&x})) return Variable(out);
  auto n = std::make_shared<SumNode>();
  n->keep = y.sizes();
  n->is_mean = mean;
  if (mean) n->scale = 1.0 / double(reduced_count(x.sizes(), rd));
  return attach1(n, {x}, out);
}

std::pair<Variable, Tensor> arg_reduce(const Variable& x, int64_t dim, bool keepdim, bool is_max) {
  const int64_t d = x.data().wrap_dim(dim);
  const std::vector<int64_t> rd{d};
  const Tensor idx = Tensor::empty(kernels::reduced_shape(x.sizes(), rd), DType::i64, x.device());
  const Tensor y = reduce_keep(x.data(), is_max ? ReduceKind::max : ReduceKind::min, rd, 1, 2, idx);
  const Shape os = output_shape(x.sizes(), rd, keepdim);
  const Tensor out = y.reshape(os);
  if (!needs_grad({&x})) return {Variable(out), idx.reshape(os)};
  auto n = std::make_shared<ArgReduceNode>();
  n->keep = y.sizes();
  n->indices = idx;
  n->dim = d;
  n->is_max = is_max;
  return {attach1(n, {x}, out), idx.reshape(os)};
}

Variable var_or_std(const Variable& x, const std::vector<int64_t>& dims, double correction,
                    bool keepdim, bool is_std) {
  const std::vector<int64_t> rd = kernels::normalize_reduce_dims(x.sizes(), dims);
  const Tensor y =
      reduce_keep(x.data(), is_std ? ReduceKind::std : ReduceKind::var, rd, correction);
  const Tensor out = y.reshape(output_shape(x.sizes(), rd, keepdim));
  if (!needs_grad({&x})) return Variable(out);
  auto n = std::make_shared<VarNode>();
  n->keep = y.sizes();
  n->x = x.data();
  n->mean = reduce_keep(x.data(), ReduceKind::mean, rd);
  if (is_std) n->stdev = y;
  n->divisor = std::max(0.0, double(reduced_count(x.sizes(), rd)) - correction);
  n->is_std = is_std;
  return attach1(n, {x}, out);
}

}  // namespace

// The reason several of this file's declarations share.
constexpr char kWhyReduction[] = "reductions: rounding of long sums";

constexpr amp::Declaration kSumAmp{"sum", amp::OpClass::fp32, kWhyReduction};
Variable sum(const Variable& x, const std::vector<int64_t>& dims, bool keepdim) {
  if (auto c = amp::autocast(kSumAmp, {&x})) return sum((*c)[0], dims, keepdim);
  return sum_or_mean(x, dims, keepdim, /*mean=*/false);
}

constexpr amp::Declaration kMeanAmp{"mean", amp::OpClass::fp32, kWhyReduction};
Variable mean(const Variable& x, const std::vector<int64_t>& dims, bool keepdim) {
  if (auto c = amp::autocast(kMeanAmp, {&x})) return mean((*c)[0], dims, keepdim);
  return sum_or_mean(x, dims, keepdim, /*mean=*/true);
}

std::pair<Variable, Tensor> max(const Variable& x, int64_t dim, bool keepdim) {
  return arg_reduce(x, dim, keepdim, /*is_max=*/true);
}

std::pair<Variable, Tensor> min(const Variable& x, int64_t dim, bool keepdim) {
  return arg_reduce(x, dim, keepdim, /*is_max=*/false);
}

constexpr amp::Declaration kVarAmp{"var", amp::OpClass::fp32, kWhyReduction};
Variable var(const Variable& x, const std::vector<int64_t>& dims, double correction, bool keepdim) {
  if (auto c = amp::autocast(kVarAmp, {&x})) return var((*c)[0], dims, correction, keepdim);
  return var_or_std(x, dims, correction, keepdim, /*is_std=*/false);
}

constexpr amp::Declaration kStdAmp{"std", amp::OpClass::fp32, kWhyReduction};
Variable std(const Variable& x, const std::vector<int64_t>& dims, double correction, bool keepdim) {
  if (auto c = amp::autocast(kStdAmp, {&x})) return std((*c)[0], dims, correction, keepdim);
  return var_or_std(x, dims, correction, keepdim, /*is_std=*/true);
}

constexpr amp::Declaration kNormAmp{"norm", amp::OpClass::fp32, kWhyReduction};
Variable norm(const Variable& x, double p, const std::vector<int64_t>& dims, bool keepdim) {
  if (auto c = amp::autocast(kNormAmp, {&x})) return norm((*c)[0], p, dims, keepdim);
  const std::vector<int64_t> rd = kernels::normalize_reduce_dims(x.sizes(), dims);
  const Tensor y = reduce_keep(x.data(), ReduceKind::norm, rd, 1, p);
  const Tensor out = y.reshape(output_shape(x.sizes(), rd, keepdim));
  if (!needs_grad({&x})) return Variable(out);
  auto n = std::make_shared<NormNode>();
  n->keep = y.sizes();
  n->dims = rd;
  n->x = x.data();
  n->y = y;
  n->p = p;
  return attach1(n, {x}, out);
}

void amp::declarations_reduce(std::vector<amp::Declaration>& out) {
  out.insert(out.end(), {kSumAmp, kMeanAmp, kVarAmp, kStdAmp, kNormAmp});
}

}  // namespace aim::autograd
