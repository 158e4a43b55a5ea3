// CSR construction on the host (csr.h).
#include "kernels/sparse/csr.h"

#include <algorithm>
#include <numeric>

#include "kernels/sparse/spmm.h"
#include "tensor/check.h"

namespace aim::kernels {

Csr Csr::to(Device d) const {
  Csr r = *this;
  r.row_ptr = row_ptr.to(d);
  r.col_idx = col_idx.to(d);
  r.values = values.to(d);
  return r;
}

Csr csr_from_coo(int64_t rows, int64_t cols, const std::vector<int64_t>& row,
                 const std::vector<int64_t>& col, const std::vector<double>& value, DType dtype,
                 const std::string& where) {
  AIM_CHECK(row.size() == col.size() && row.size() == value.size(), where, ": COO arrays of ",
            row.size(), " rows, ", col.size(), " columns and ", value.size(),
            " values (expected equal lengths)");
  AIM_CHECK(rows >= 0 && cols >= 0 && rows < (int64_t(1) << 31) && cols < (int64_t(1) << 31), where,
            ": matrix ", rows, " x ", cols, " (expected sizes in [0, 2^31))");
  AIM_CHECK(dtype == DType::f32 || dtype == DType::f64, where, ": values must be f32 or f64, got ",
            dtype_name(dtype));
  for (size_t e = 0; e < row.size(); ++e)
    AIM_CHECK(row[e] >= 0 && row[e] < rows && col[e] >= 0 && col[e] < cols, where, ": entry ", e,
              " at (", row[e], ", ", col[e], ") is outside the ", rows, " x ", cols,
              " matrix (expected 0 <= row < ", rows, ", 0 <= col < ", cols, ")");
  std::vector<size_t> order(row.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t p, size_t q) {
    return row[p] != row[q] ? row[p] < row[q] : col[p] < col[q];
  });
  std::vector<int32_t> rp(size_t(rows) + 1, 0), ci;
  std::vector<double> v;
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t e = order[k];
    if (k > 0 && row[e] == row[order[k - 1]] && col[e] == col[order[k - 1]]) {
      v.back() += value[e];  // duplicate position: summed
      continue;
    }
    AIM_CHECK(ci.size() < size_t(0x7fffffff), where, ": more than 2^31 - 1 entries (i32 CSR)");
    ci.push_back(int32_t(col[e]));
    v.push_back(value[e]);
    ++rp[size_t(row[e]) + 1];
  }
  for (int64_t r = 0; r < rows; ++r) rp[size_t(r) + 1] += rp[size_t(r)];
  Csr a;
  a.rows = rows;
  a.cols = cols;
  a.row_ptr = Tensor::from_vector(rp, {rows + 1});
  a.col_idx = Tensor::from_vector(ci, {int64_t(ci.size())});
  a.values = Tensor::from_vector(v, {int64_t(v.size())}).to(dtype);
  return a;
}

void check_csr(const Csr& a, const std::string& where) {
  AIM_CHECK(a.row_ptr.defined() && a.col_idx.defined() && a.values.defined(), where,
            ": undefined CSR tensors");
  AIM_CHECK(a.row_ptr.device().is_cpu(), where, ": check_csr reads the CSR on the host, it is on ",
            a.row_ptr.device().str());
  AIM_CHECK(a.row_ptr.dtype() == DType::i32 && a.row_ptr.dim() == 1 &&
                a.row_ptr.numel() == a.rows + 1 && a.row_ptr.is_contiguous(),
            where, ": row_ptr must be a contiguous [", a.rows + 1, "] i32, got ",
            to_string(a.row_ptr.sizes()), " ", dtype_name(a.row_ptr.dtype()));
  AIM_CHECK(a.col_idx.dtype() == DType::i32 && a.col_idx.dim() == 1 && a.col_idx.is_contiguous(),
            where, ": col_idx must be a contiguous [nnz] i32, got ", to_string(a.col_idx.sizes()),
            " ", dtype_name(a.col_idx.dtype()));
  AIM_CHECK(
      a.values.dim() == 1 && a.values.numel() == a.col_idx.numel() && a.values.is_contiguous(),
      where, ": values must be a contiguous [", a.col_idx.numel(), "], got ",
      to_string(a.values.sizes()));
  check_csr_content(where.c_str(), a.row_ptr.data<int32_t>(), a.rows, a.col_idx.data<int32_t>(),
                    a.nnz(), a.cols);
}

Csr csr_transpose(const Csr& a) {
  check_csr(a, "csr_transpose");
  const int64_t M = a.rows, K = a.cols, nnz = a.nnz();
  const int32_t* rp = a.row_ptr.data<int32_t>();
  const int32_t* ci = a.col_idx.data<int32_t>();
  std::vector<int32_t> trp(size_t(K) + 1, 0), tci(static_cast<size_t>(nnz));
  for (int64_t e = 0; e < nnz; ++e) ++trp[size_t(ci[e]) + 1];
  for (int64_t k = 0; k < K; ++k) trp[size_t(k) + 1] += trp[size_t(k)];
  std::vector<int32_t> cursor(trp.begin(), trp.end() - 1);
  std::vector<int64_t> src(static_cast<size_t>(nnz));  // transposed slot -> original entry
  // Rows in increasing order: each transposed row's columns come out sorted.
  for (int64_t m = 0; m < M; ++m)
    for (int64_t e = rp[m]; e < rp[m + 1]; ++e) {
      const int32_t slot = cursor[size_t(ci[e])]++;
      tci[size_t(slot)] = int32_t(m);
      src[size_t(slot)] = e;
    }
  Csr t;
  t.rows = K;
  t.cols = M;
  t.row_ptr = Tensor::from_vector(trp, {K + 1});
  t.col_idx = Tensor::from_vector(tci, {nnz});
  t.values = Tensor::empty({nnz}, a.values.dtype());
  AIM_DISPATCH_FLOAT_TYPES(a.values.dtype(), T, {
    const T* v = a.values.data<T>();
    T* tv = t.values.data<T>();
    for (int64_t s = 0; s < nnz; ++s) tv[s] = v[src[size_t(s)]];
  });
  return t;
}

}  // namespace aim::kernels
