// The test cases of spmm / spmm_dvalues (spmm_cpu.h): random CSR patterns with odd sizes, empty
// rows and one dense ("heavy") row, which is what separates row-split from nnz-balanced variants.
#include <algorithm>

#include "kernels/sparse/spmm_cpu.h"

namespace aim::kernels::spmm_cpu {
namespace {

struct Pattern {
  Tensor row_ptr, col_idx;
  int64_t nnz = 0;
};

// Entry (r, k) is stored when a Philox uniform draw is below density; row `heavy` stores every
// column; rows r with r % empty_every == 1 store none.
Pattern make_pattern(const TestShape& s, uint64_t seed) {
  const int64_t M = s[0], K = s[1], heavy = s[4], empty_every = s[5];
  const double density = double(s[3]) / 1000.0;
  const std::vector<float> u = random_tensor({M, K}, DType::f32, seed, 0.0, 1.0).to_vector<float>();
  std::vector<int32_t> rp(size_t(M) + 1, 0), ci;
  for (int64_t r = 0; r < M; ++r) {
    const bool empty = empty_every > 0 && r % empty_every == 1;
    for (int64_t k = 0; k < K && !empty; ++k)
      if (r == heavy || u[size_t(r * K + k)] < density) ci.push_back(int32_t(k));
    rp[size_t(r) + 1] = int32_t(ci.size());
  }
  Pattern p;
  p.nnz = int64_t(ci.size());
  p.row_ptr = Tensor::from_vector(rp, {M + 1});
  p.col_idx = Tensor::from_vector(ci, {p.nnz});
  return p;
}

}  // namespace

// {M, K, N, density in 1/1000, heavy row (-1: none), empty_every (0: no forced empty rows)}.
std::vector<std::string> shape_fields() {
  return {"M", "K", "N", "density_pm", "heavy_row", "empty_every"};
}

std::vector<TestShape> test_shapes() {
  return {{1, 1, 1, 1000, -1, 0},     {7, 5, 3, 300, -1, 2},      {33, 31, 17, 100, 5, 3},
          {64, 64, 32, 50, -1, 0},    {100, 257, 65, 20, 0, 7},   {513, 129, 16, 10, 200, 0},
          {300, 300, 7, 5, 3, 11},    {31, 2000, 130, 30, 30, 4}, {5, 9, 40, 0, -1, 0},
          {2000, 64, 1, 40, 1999, 5}, {40, 1000, 8, 5, 7, 0},  // one row over ~8 merge segments
          {1500, 700, 96, 20, 3, 9}};  // ~2M multiply-adds: cpu.omp's threaded path
}

TestCase make_spmm_case(const TestShape& s, DType t, uint64_t seed) {
  const Pattern p = make_pattern(s, seed);
  SpmmArgs a;
  a.row_ptr = p.row_ptr;
  a.col_idx = p.col_idx;
  a.values = random_tensor({p.nnz}, t, seed + 1, -1.0, 1.0);
  a.x = random_tensor({s[1], s[2]}, t, seed + 2, -1.0, 1.0);
  a.y = poison_tensor({s[0], s[2]}, t);
  return to_case(a);
}

TestCase make_dvalues_case(const TestShape& s, DType t, uint64_t seed) {
  const Pattern p = make_pattern(s, seed);
  SpmmDvaluesArgs a;
  a.row_ptr = p.row_ptr;
  a.col_idx = p.col_idx;
  a.dy = random_tensor({s[0], s[2]}, t, seed + 1, -1.0, 1.0);
  a.x = random_tensor({s[1], s[2]}, t, seed + 2, -1.0, 1.0);
  a.dvalues = random_tensor({p.nnz}, t, seed + 3, -1.0, 1.0);
  return to_case(a);
}

// A heavy row sums K products of values in [-1, 1): f32 error grows like sqrt(K) eps.
Tolerance tolerance(DType t, const TestShape&) {
  if (t == DType::f32) return {2e-5, 2e-5};
  return default_tolerance(t);
}

bool simt_small(const TestShape& s) { return s[0] * s[2] <= 20000 && s[1] * s[2] <= 40000; }

}  // namespace aim::kernels::spmm_cpu
