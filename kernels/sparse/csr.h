// A CSR sparse matrix on one device, and its construction on the host: from COO triplets
// (sorted by row then column, duplicates summed, as scipy's tocsr / torch's coalesce) and its
// transpose (built once, the operand of spmm's gradient to x). Content checks name the entry.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace aim::kernels {

struct Csr {
  int64_t rows = 0, cols = 0;
  Tensor row_ptr, col_idx, values;  // [rows+1] i32, [nnz] i32, [nnz] f32/f64
  int64_t nnz() const { return col_idx.defined() ? col_idx.numel() : 0; }
  Device device() const { return values.device(); }
  Csr to(Device d) const;  // explicit transfer of the three tensors
};

// CSR of a rows x cols matrix from COO triplets: entries sorted by (row, col) with equal
// positions summed in input order. A row or column outside the matrix is an error naming
// `where`, the entry and the range.
Csr csr_from_coo(int64_t rows, int64_t cols, const std::vector<int64_t>& row,
                 const std::vector<int64_t>& col, const std::vector<double>& value,
                 DType dtype = DType::f32, const std::string& where = "csr_from_coo");
// The transpose (cols x rows), on the host; each row's columns sorted.
Csr csr_transpose(const Csr& a);
// Validates a host CSR: sizes, dtypes, monotone row_ptr, columns in range.
void check_csr(const Csr& a, const std::string& where);

}  // namespace aim::kernels
