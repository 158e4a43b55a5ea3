// SpMM: y = A x with A a CSR sparse matrix and x dense (torch.sparse.mm(A, x)).
// Shapes: A [M, K] as row_ptr [M+1] i32, col_idx [nnz] i32, values [nnz]; x [K, N]; y [M, N],
// row-major, contiguous; values, x and y share one dtype (f32 or f64).
// The gradient to x is A^T dy: the same op run on the transposed CSR (kernels/sparse/csr.h
// csr_transpose, built once per matrix on the host) — no scatter, no atomics, deterministic.
// The gradient to A's values (dvalues[e] = dy[row(e), :] . x[col(e), :]) is spmm_dvalues.
// Math: kernels/sparse/README.md
#pragma once
#include "kernels/op.h"

namespace aim::kernels {

struct SpmmArgs {
  Tensor row_ptr, col_idx, values;  // A [M, K]: row_ptr [M+1] i32, col_idx [nnz] i32, values [nnz]
  Tensor x;                         // [K, N]
  Tensor y;                         // [M, N]: written
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("row_ptr", s.row_ptr), f.in("col_idx", s.col_idx), f.in("values", s.values);
    f.in("x", s.x), f.out("y", s.y);
  }
};

// dvalues[e] += sum_n dy[row(e), n] * x[col(e), n] for every stored entry e of A (sampled dense
// product, SDDMM, on A's pattern): the gradient to A's values.
struct SpmmDvaluesArgs {
  Tensor row_ptr, col_idx;  // A's pattern, as SpmmArgs
  Tensor dy, x;             // dy [M, N], x [K, N]
  Tensor dvalues;           // [nnz]: accumulated (+=)
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("row_ptr", s.row_ptr), f.in("col_idx", s.col_idx), f.in("dy", s.dy), f.in("x", s.x);
    f.out("dvalues", s.dvalues);
  }
};

// Compulsory work: one multiply-add per (stored entry, column). Bytes: the CSR once, x once (its
// rows may be reread through the cache: not compulsory), y written once.
inline Cost spmm_cost(const SpmmArgs& a) {
  const double nnz = double(a.col_idx.numel()), N = double(a.x.size(1));
  const double e = double(dtype_size(a.x.dtype()));
  return Cost{2 * nnz * N, double(a.row_ptr.numel()) * 4 + nnz * (4 + e) + double(a.x.numel()) * e,
              double(a.y.numel()) * e};
}
inline Cost spmm_dvalues_cost(const SpmmDvaluesArgs& a) {
  const double nnz = double(a.col_idx.numel()), N = double(a.x.size(1));
  const double e = double(dtype_size(a.x.dtype()));
  return Cost{
      2 * nnz * N + nnz,
      double(a.row_ptr.numel()) * 4 + nnz * (4 + e) + double(a.x.numel() + a.dy.numel()) * e,
      nnz * e};
}

// Host-side shape/dtype validation shared by every variant (not the CSR's content: that is
// check_csr's, kernels/sparse/csr.h, run once when a matrix is built; the CPU variants check it
// again, the CUDA variants cannot read it).
void check_spmm_args(const SpmmArgs& a);
void check_spmm_dvalues_args(const SpmmDvaluesArgs& a);
// Content of a CSR on the host: row_ptr[0] == 0, non-decreasing, row_ptr[M] == nnz, every column
// in [0, K). Errors name `op`, the row or entry and the expected range.
void check_csr_content(const char* op, const int32_t* row_ptr, int64_t M, const int32_t* col_idx,
                       int64_t nnz, int64_t K);

void spmm(const SpmmArgs& a);
void spmm_dvalues(const SpmmDvaluesArgs& a);

}  // namespace aim::kernels
