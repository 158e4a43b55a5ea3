// spmm: forward by the spmm kernel on A, backward by the same kernel on the saved transpose.
#include "autograd/functions/sparse.h"

#include "autograd/amp.h"
#include "autograd/node.h"
#include "kernels/sparse/spmm.h"

namespace aim::autograd {
namespace {

void run_spmm(const kernels::Csr& a, const Tensor& x, const Tensor& y) {
  kernels::SpmmArgs k;
  k.row_ptr = a.row_ptr;
  k.col_idx = a.col_idx;
  k.values = a.values;
  k.x = x;
  k.y = y;
  kernels::spmm(k);
}

struct SpmmNode final : Node {
  kernels::Csr a_t;  // A^T: dx = A^T dy
  const char* name() const override { return "Spmm"; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    run_spmm(a_t, g.dy(), g.out(0));
  }
  void release() override { a_t = kernels::Csr(); }
};

}  // namespace

// f32 sums of products of a normalised adjacency: spmm takes f32/f64 only (16-bit inputs cast up).
constexpr amp::Declaration kSpmmAmp{"spmm", amp::OpClass::fp32, "sparse products (f32/f64 only)"};
Variable spmm(const kernels::Csr& a, const kernels::Csr& a_t, const Variable& x) {
  if (auto c = amp::autocast(kSpmmAmp, {&x})) return spmm(a, a_t, (*c)[0]);
  AIM_CHECK(x.defined() && x.dim() == 2, "spmm: x must be [K, N]");
  AIM_CHECK(a.cols == x.size(0), "spmm: A is ", a.rows, " x ", a.cols, ", x has ", x.size(0),
            " rows (expected ", a.cols, ")");
  AIM_CHECK(a_t.rows == a.cols && a_t.cols == a.rows && a_t.nnz() == a.nnz(),
            "spmm: a_t must be A's transpose (", a.cols, " x ", a.rows, ", ", a.nnz(),
            " entries), got ", a_t.rows, " x ", a_t.cols, " with ", a_t.nnz());
  AIM_CHECK(a.values.dtype() == x.dtype(), "spmm: A's values are ", dtype_name(a.values.dtype()),
            ", x is ", dtype_name(x.dtype()));
  const Tensor xc = x.data().contiguous();
  const Tensor y = Tensor::empty({a.rows, x.size(1)}, xc.dtype(), xc.device());
  run_spmm(a, xc, y);
  if (!needs_grad({&x})) return Variable(y);
  auto n = std::make_shared<SpmmNode>();
  n->a_t = a_t;
  return attach1(n, {x}, y);
}

void amp::declarations_sparse(std::vector<amp::Declaration>& out) {
  out.insert(out.end(), {kSpmmAmp});
}

}  // namespace aim::autograd
