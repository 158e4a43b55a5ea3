// Differentiable SpMM (kernels/sparse): y = A x with A a constant CSR matrix (torch.sparse.mm
// with a sparse A that does not require grad, as GCN's normalised adjacency). The gradient to x
// is A^T dy, computed by the same spmm kernel on `a_t`, the transpose of A built once by the
// caller (kernels::csr_transpose) and kept with it — for a symmetric A, A itself.
#pragma once
#include "autograd/variable.h"
#include "kernels/sparse/csr.h"

namespace aim::autograd {

// a [M, K] and a_t [K, M] (CSR, on x's device, values of x's dtype); x [K, N] -> [M, N].
Variable spmm(const kernels::Csr& a, const kernels::Csr& a_t, const Variable& x);

}  // namespace aim::autograd
