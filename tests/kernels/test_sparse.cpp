// kernels/sparse beyond the registry loop: COO -> CSR (sorted, duplicates summed), the transpose,
// the CSR content checks and the argument errors of spmm; spmm on a hand-computed product.
#include <gtest/gtest.h>

#include "kernels/registry.h"
#include "kernels/sparse/csr.h"
#include "kernels/sparse/spmm.h"
#include "tests/support/common.h"

namespace aim::kernels {
namespace {

// A = [[0, 2, 0], [0, 0, 0], [1, 0, 3], [0, 4, 0]] given unsorted, with (0, 1) split in two.
Csr example() {
  return csr_from_coo(4, 3, {2, 0, 3, 2, 0}, {2, 1, 1, 0, 1}, {3.0, 1.5, 4.0, 1.0, 0.5});
}

TEST(SparseCsr, FromCooSortsAndSumsDuplicates) {
  const Csr a = example();
  EXPECT_EQ(a.row_ptr.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 1, 3, 4}));
  EXPECT_EQ(a.col_idx.to_vector<int32_t>(), (std::vector<int32_t>{1, 0, 2, 1}));
  EXPECT_EQ(a.values.to_vector<float>(), (std::vector<float>{2, 1, 3, 4}));
  EXPECT_EQ(a.nnz(), 4);
}

TEST(SparseCsr, TransposeTwiceIsTheMatrix) {
  const Csr a = example();
  const Csr t = csr_transpose(a);
  EXPECT_EQ(t.rows, 3);
  EXPECT_EQ(t.cols, 4);
  // A^T = [[0, 0, 1, 0], [2, 0, 0, 4], [0, 0, 3, 0]]
  EXPECT_EQ(t.row_ptr.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 3, 4}));
  EXPECT_EQ(t.col_idx.to_vector<int32_t>(), (std::vector<int32_t>{2, 0, 3, 2}));
  EXPECT_EQ(t.values.to_vector<float>(), (std::vector<float>{1, 2, 4, 3}));
  const Csr tt = csr_transpose(t);
  EXPECT_EQ(tt.row_ptr.to_vector<int32_t>(), a.row_ptr.to_vector<int32_t>());
  EXPECT_EQ(tt.col_idx.to_vector<int32_t>(), a.col_idx.to_vector<int32_t>());
  EXPECT_EQ(tt.values.to_vector<float>(), a.values.to_vector<float>());
}

TEST(SparseCsr, BadInputsNameTheEntry) {
  AIM_EXPECT_ERROR(csr_from_coo(2, 2, {0, 2}, {0, 1}, {1, 1}, DType::f32, "graph"),
                   "graph: entry 1 at (2, 1) is outside the 2 x 2 matrix");
  AIM_EXPECT_ERROR(csr_from_coo(2, 2, {0}, {0, 1}, {1}), "expected equal lengths");
  Csr a = example();
  a.col_idx.data<int32_t>()[2] = 7;
  AIM_EXPECT_ERROR(check_csr(a, "adj"), "column 7 of entry 2 (row 2) is out of range for K = 3");
  a = example();
  a.row_ptr.data<int32_t>()[2] = 0;
  AIM_EXPECT_ERROR(check_csr(a, "adj"), "row_ptr must be non-decreasing: row 1");
}

TEST(SparseSpmm, HandComputedProductEveryCpuVariant) {
  const Csr a = example();
  // x [3, 2] = [[1, 2], [3, 4], [5, 6]] -> y = A x = [[6, 8], [0, 0], [16, 20], [12, 16]]
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  for (const char* v : {"cpu.ref", "cpu.omp"}) {
    SCOPED_TRACE(v);
    ScopedVariant pick("spmm", v);
    SpmmArgs k;
    k.row_ptr = a.row_ptr;
    k.col_idx = a.col_idx;
    k.values = a.values;
    k.x = x;
    k.y = Tensor::full({4, 2}, 99.0);
    spmm(k);
    EXPECT_EQ(k.y.to_vector<float>(), (std::vector<float>{6, 8, 0, 0, 16, 20, 12, 16}));
  }
}

TEST(SparseSpmm, ArgumentErrors) {
  const Csr a = example();
  SpmmArgs k;
  k.row_ptr = a.row_ptr;
  k.col_idx = a.col_idx;
  k.values = a.values;
  k.x = Tensor::zeros({2, 2});  // K = 2: A's column 2 is out of range
  k.y = Tensor::zeros({4, 2});
  AIM_EXPECT_ERROR(spmm(k), "[spmm] column 2 of entry 2 (row 2) is out of range for K = 2");
  k.x = Tensor::zeros({3, 2});
  k.y = Tensor::zeros({3, 2});
  AIM_EXPECT_ERROR(spmm(k), "[spmm] y must be a contiguous [4, 2] f32");
  k.y = Tensor::zeros({4, 2});
  k.x = Tensor::zeros({3, 2}, DType::f16);
  AIM_EXPECT_ERROR(spmm(k), "[spmm] cpu.omp: takes dtypes {f32 f64}, got f16");
}

}  // namespace
}  // namespace aim::kernels
