// Views and casts. Backward of a view is the inverse view of dy (no copy where possible);
// slice/select scatter dy into zeros; expand sums over the broadcast dims.
#include "autograd/functions/shape.h"

#include "autograd/amp.h"
#include "autograd/node.h"
#include "autograd/tensor_ops.h"

namespace aim::autograd {
namespace {

struct ReshapeNode final : Node {
  const char* name() const override { return "Reshape"; }
  void backward(Grads& g) override { g.set(0, g.dy().reshape(input_sizes[0])); }
};

struct PermuteNode final : Node {
  std::vector<int64_t> inverse;
  const char* name() const override { return "Permute"; }
  void backward(Grads& g) override { g.set(0, g.dy().permute(inverse)); }
};

// Slice and select: dy lands in a zero tensor at the viewed positions.
struct SliceNode final : Node {
  int64_t dim = 0, start = 0, end = 0, step = 1;
  bool select = false;
  const char* name() const override { return select ? "Select" : "Slice"; }
  void backward(Grads& g) override {
    Tensor dx = g.out(0);
    dx.zero_();
    Tensor view = select ? dx.select(dim, start) : dx.slice(dim, start, end, step);
    view.copy_(g.dy());
  }
};

struct ExpandNode final : Node {
  const char* name() const override { return "Expand"; }
  void backward(Grads& g) override { g.set(0, sum_to(g.dy(), input_sizes[0])); }
};

struct CastNode final : Node {
  const char* name() const override { return "Cast"; }
  void backward(Grads& g) override { g.set(0, g.dy().to(input_dtypes[0])); }
};

struct IdentityNode final : Node {  // contiguous(): gradient passes through
  const char* name() const override { return "Contiguous"; }
  void backward(Grads& g) override { g.set(0, g.dy()); }
};

Variable record(std::shared_ptr<Node> n, const Variable& x, const Tensor& y) {
  if (!needs_grad({&x})) return Variable(y);
  return attach1(n, {x}, y);
}

}  // namespace

// Every view and copy of this file (not cast: it is what autocast calls).
constexpr amp::Declaration kViewsAmp{"views", amp::OpClass::native, amp::kWhyDataMovement};
Variable reshape(const Variable& x, const Shape& sizes) {
  return record(std::make_shared<ReshapeNode>(), x, x.data().reshape(sizes));
}

Variable permute(const Variable& x, const std::vector<int64_t>& dims) {
  auto n = std::make_shared<PermuteNode>();
  n->inverse.resize(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    n->inverse[size_t(x.data().wrap_dim(dims[i]))] = int64_t(i);
  return record(n, x, x.data().permute(dims));
}

Variable transpose(const Variable& x, int64_t a, int64_t b) {
  std::vector<int64_t> dims(size_t(x.dim()));
  for (size_t i = 0; i < dims.size(); ++i) dims[i] = int64_t(i);
  std::swap(dims[size_t(x.data().wrap_dim(a))], dims[size_t(x.data().wrap_dim(b))]);
  return permute(x, dims);
}

Variable slice(const Variable& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  const int64_t d = x.data().wrap_dim(dim);
  const int64_t n = x.size(d);
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  auto node = std::make_shared<SliceNode>();
  node->dim = d;
  node->start = start;
  node->end = end;
  node->step = step;
  return record(node, x, x.data().slice(d, start, end, step));
}

Variable select(const Variable& x, int64_t dim, int64_t index) {
  const int64_t d = x.data().wrap_dim(dim);
  auto node = std::make_shared<SliceNode>();
  node->dim = d;
  node->start = index < 0 ? index + x.size(d) : index;
  node->select = true;
  return record(node, x, x.data().select(d, index));
}

Variable expand(const Variable& x, const Shape& sizes) {
  return record(std::make_shared<ExpandNode>(), x, x.data().expand(sizes));
}

Variable unsqueeze(const Variable& x, int64_t dim) {
  return record(std::make_shared<ReshapeNode>(), x, x.data().unsqueeze(dim));
}

Variable squeeze(const Variable& x, int64_t dim) {
  return record(std::make_shared<ReshapeNode>(), x, x.data().squeeze(dim));
}

Variable contiguous(const Variable& x) {
  if (x.data().is_contiguous()) return x;
  return record(std::make_shared<IdentityNode>(), x, x.data().contiguous());
}

Variable cast(const Variable& x, DType t) {
  if (x.dtype() == t) return x;
  return record(std::make_shared<CastNode>(), x, x.data().to(t));
}

std::vector<Variable> split(const Variable& x, const std::vector<int64_t>& sizes, int64_t dim) {
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  AIM_CHECK(total == x.size(dim), "split: sizes sum to ", total, " but dim ", dim, " has ",
            x.size(dim));
  std::vector<Variable> r;
  int64_t at = 0;
  for (int64_t s : sizes) {
    r.push_back(slice(x, dim, at, at + s));
    at += s;
  }
  return r;
}

void amp::declarations_shape(std::vector<amp::Declaration>& out) {
  out.insert(out.end(), {kViewsAmp});
}

}  // namespace aim::autograd
