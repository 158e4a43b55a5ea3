// Index ops (autograd/functions/index.h). Forward runs the kernels of kernels/index; backward
// uses their pairs (index_select <-> index_add, gather <-> scatter_add, pad <-> pad_bwd) and
// slice copies of dy for concat. Gradients of tables read by index_select / gather are accumulated
// straight into the leaf's .grad (Grads::accum), like an embedding's.
#include "autograd/functions/index.h"

#include "autograd/amp.h"
#include "autograd/node.h"
#include "autograd/tensor_ops.h"
#include "kernels/index/index.h"

namespace aim::autograd {
namespace {

// Index tensors: i32/i64 on the data's device, contiguous (the kernels require it).
Tensor prepare_index(const char* op, const Tensor& index, const Tensor& data) {
  AIM_CHECK(index.defined(), "[", op, "] index is undefined");
  AIM_CHECK(index.dtype() == DType::i32 || index.dtype() == DType::i64, "[", op,
            "] index must be i32 or i64, got ", dtype_name(index.dtype()));
  AIM_CHECK(index.device() == data.device(), "[", op, "] index on ", index.device().str(),
            " but the data on ", data.device().str());
  return index.contiguous();
}

// acc += (the result of `add_kernel` writing into a zeroed tensor shaped like acc). The
// accumulating kernels need a contiguous target; acc is one unless someone replaced a leaf's
// .grad by a view.
template <class F>
void accumulate_with(const Tensor& acc, F add_kernel) {
  if (acc.is_contiguous()) {
    add_kernel(acc);
    return;
  }
  Tensor tmp = zeros_like(acc);
  add_kernel(tmp);
  add_into(acc, tmp);
}

// ---- concat ---------------------------------------------------------------------------------

struct ConcatNode final : Node {
  int64_t dim = 0;  // wrapped
  const char* name() const override { return "Concat"; }
  bool takes_strided_dy() const override { return true; }  // narrows it
  void backward(Grads& g) override {
    const Tensor& dy = g.dy();
    int64_t at = 0;
    for (size_t k = 0; k < next.size(); ++k) {
      const int64_t n = input_sizes[k][size_t(dim)];
      // A view, not a copy: consumers that need contiguous gradients make them so (DIN's
      // [B, T, 2H] attention input: two 13 MB copies per step saved).
      if (g.needs(int(k))) g.set(int(k), dy.narrow(dim, at, n));
      at += n;
    }
  }
};

// ---- index_select ---------------------------------------------------------------------------

struct IndexSelectNode final : Node {
  Tensor index;
  int64_t dim = 0;
  const char* name() const override { return "IndexSelect"; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    accumulate_with(g.accum(0), [&](const Tensor& dx) {
      kernels::IndexAddArgs a;
      a.src = g.dy();
      a.index = index;
      a.y = dx;
      a.dim = dim;
      kernels::index_add(a);
    });
  }
  void release() override { index = Tensor(); }
};

// ---- gather / scatter_add -------------------------------------------------------------------

Tensor gather_tensor(const Tensor& x, int64_t dim, const Tensor& index) {
  kernels::GatherArgs a;
  a.x = x;
  a.index = index;
  a.y = Tensor::empty(index.sizes(), x.dtype(), x.device());
  a.dim = dim;
  kernels::gather(a);
  return a.y;
}

struct GatherNode final : Node {
  Tensor index;
  int64_t dim = 0;
  const char* name() const override { return "Gather"; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    accumulate_with(g.accum(0), [&](const Tensor& dx) {
      kernels::ScatterAddArgs a;
      a.src = g.dy();
      a.index = index;
      a.y = dx;
      a.dim = dim;
      kernels::scatter_add(a);
    });
  }
  void release() override { index = Tensor(); }
};

struct ScatterAddNode final : Node {
  Tensor index;
  int64_t dim = 0;
  const char* name() const override { return "ScatterAdd"; }
  void backward(Grads& g) override {
    if (g.needs(0)) g.set(0, g.dy());
    if (!g.needs(1)) return;
    const Tensor picked = gather_tensor(g.dy(), dim, index);  // index's shape
    if (picked.sizes() == input_sizes[1]) {
      g.set(1, picked);
      return;
    }
    // index smaller than src: src elements outside index's extent did not reach y.
    Tensor dsrc = g.out(1);
    dsrc.zero_();
    Tensor view = dsrc;
    for (int64_t d = 0; d < index.dim(); ++d) view = view.narrow(d, 0, index.size(d));
    view.copy_(picked);
  }
  void release() override { index = Tensor(); }
};

// ---- pad ------------------------------------------------------------------------------------

struct PadNode final : Node {
  std::vector<int64_t> pads;
  const char* name() const override { return "Pad"; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    kernels::PadBwdArgs a;
    a.dy = g.dy();
    a.dx = g.out(0);
    a.pads = pads;
    kernels::pad_bwd(a);
  }
};

}  // namespace

// Promotes by hand below: a list of parts, each cast to f32 when they are mixed.
constexpr amp::Declaration kConcatAmp{"concat", amp::OpClass::promote, amp::kWhyPromote};
Variable concat(const std::vector<Variable>& xs, int64_t dim) {
  static_assert(kConcatAmp.cls == amp::OpClass::promote, "the parts are promoted here");
  if (amp::active()) {
    // promote: concat of mixed 16-bit/f32 parts runs in f32.
    bool mixed = false;
    for (const Variable& x : xs) mixed |= x.defined() && x.dtype() != xs[0].dtype();
    if (mixed) {
      std::vector<Variable> ys;
      for (const Variable& x : xs) {
        auto c = amp::autocast(amp::OpClass::fp32, {&x});
        ys.push_back(c ? (*c)[0] : x);
      }
      return concat(ys, dim);
    }
  }
  AIM_CHECK(!xs.empty(), "[concat] needs at least one input, got none");
  for (size_t k = 0; k < xs.size(); ++k)
    AIM_CHECK(xs[k].defined(), "[concat] input ", k, " is undefined");
  const Tensor& x0 = xs[0].data();
  AIM_CHECK(x0.dim() >= 1, "[concat] inputs must have at least one dim, got ",
            to_string(x0.sizes()));
  const int64_t d = x0.wrap_dim(dim);
  Shape out = x0.sizes();
  out[size_t(d)] = 0;
  kernels::ConcatArgs a;
  for (size_t k = 0; k < xs.size(); ++k) {
    const Tensor& x = xs[k].data();
    AIM_CHECK(x.dim() == x0.dim(), "[concat] input ", k, " ", to_string(x.sizes()), " and input 0 ",
              to_string(x0.sizes()), " differ in rank");
    out[size_t(d)] += x.size(d);
    a.xs.push_back(x);
  }
  a.y = Tensor::empty(out, x0.dtype(), x0.device());
  a.dim = d;
  kernels::concat(a);
  if (!needs_grad(xs)) return Variable(a.y);
  auto n = std::make_shared<ConcatNode>();
  n->dim = d;
  return attach1(n, xs, a.y);
}

constexpr amp::Declaration kIndexSelectAmp{"index_select", amp::OpClass::native,
                                           amp::kWhyDataMovement};
Variable index_select(const Variable& x, int64_t dim, const Tensor& index) {
  Tensor idx = prepare_index("index_select", index, x.data());
  if (idx.dim() == 0) idx = idx.reshape({1});
  AIM_CHECK(idx.dim() == 1, "[index_select] index must be 1-d, got ", to_string(idx.sizes()));
  const int64_t d = x.data().wrap_dim(dim);
  Shape out = x.sizes();
  out[size_t(d)] = idx.size(0);
  kernels::IndexSelectArgs a;
  a.x = x.data();
  a.index = idx;
  a.y = Tensor::empty(out, x.dtype(), x.device());
  a.dim = d;
  kernels::index_select(a);
  if (!needs_grad({&x})) return Variable(a.y);
  auto n = std::make_shared<IndexSelectNode>();
  n->index = idx;
  n->dim = d;
  return attach1(n, {x}, a.y);
}

constexpr amp::Declaration kGatherAmp{"gather", amp::OpClass::native, amp::kWhyDataMovement};
Variable gather(const Variable& x, int64_t dim, const Tensor& index) {
  const Tensor idx = prepare_index("gather", index, x.data());
  const int64_t d = x.data().wrap_dim(dim);
  const Tensor y = gather_tensor(x.data(), d, idx);
  if (!needs_grad({&x})) return Variable(y);
  auto n = std::make_shared<GatherNode>();
  n->index = idx;
  n->dim = d;
  return attach1(n, {x}, y);
}

constexpr amp::Declaration kScatterAddAmp{"scatter_add", amp::OpClass::promote, amp::kWhyPromote};
Variable scatter_add(const Variable& base, int64_t dim, const Tensor& index, const Variable& src) {
  if (auto c = amp::autocast(kScatterAddAmp, {&base, &src}))
    return scatter_add((*c)[0], dim, index, (*c)[1]);
  const Tensor idx = prepare_index("scatter_add", index, base.data());
  const int64_t d = base.data().wrap_dim(dim);
  kernels::ScatterAddArgs a;
  a.src = src.data().contiguous();
  a.index = idx;
  a.y = base.data().clone();  // a fresh contiguous tensor
  a.dim = d;
  kernels::scatter_add(a);
  if (!needs_grad({&base, &src})) return Variable(a.y);
  auto n = std::make_shared<ScatterAddNode>();
  n->index = idx;
  n->dim = d;
  return attach1(n, {base, src}, a.y);
}

constexpr amp::Declaration kPadAmp{"pad", amp::OpClass::native, amp::kWhyDataMovement};
Variable pad(const Variable& x, const std::vector<int64_t>& pads, double value) {
  const int64_t nd = x.dim();
  AIM_CHECK(pads.size() % 2 == 0 && int64_t(pads.size()) <= 2 * nd,
            "[pad] pads must be (before, after) pairs for at most ", nd, " dims, got ", pads.size(),
            " values");
  Shape out = x.sizes();
  for (size_t pair = 0; 2 * pair < pads.size(); ++pair) {
    const size_t dim = size_t(nd) - 1 - pair;
    out[dim] += pads[2 * pair] + pads[2 * pair + 1];
    AIM_CHECK(out[dim] >= 0, "[pad] pads (", pads[2 * pair], ", ", pads[2 * pair + 1],
              ") crop dim ", dim, " of ", to_string(x.sizes()), " below zero");
  }
  kernels::PadArgs a;
  a.x = x.data();
  a.y = Tensor::empty(out, x.dtype(), x.device());
  a.pads = pads;
  a.value = value;
  kernels::pad(a);
  if (!needs_grad({&x})) return Variable(a.y);
  auto n = std::make_shared<PadNode>();
  n->pads = pads;
  return attach1(n, {x}, a.y);
}

Tensor one_hot(const Tensor& indices, int64_t num_classes, DType dtype) {
  AIM_CHECK(num_classes >= 0, "[one_hot] num_classes must be >= 0, got ", num_classes);
  AIM_CHECK(indices.dtype() == DType::i32 || indices.dtype() == DType::i64,
            "[one_hot] indices must be i32 or i64, got ", dtype_name(indices.dtype()));
  Shape out = indices.sizes();
  out.push_back(num_classes);
  kernels::OneHotArgs a;
  a.indices = indices.contiguous();
  a.y = Tensor::empty(out, dtype, indices.device());
  kernels::one_hot(a);
  return a.y;
}

void amp::declarations_index(std::vector<amp::Declaration>& out) {
  out.insert(out.end(), {kConcatAmp, kScatterAddAmp, kGatherAmp, kIndexSelectAmp, kPadAmp});
}

}  // namespace aim::autograd
