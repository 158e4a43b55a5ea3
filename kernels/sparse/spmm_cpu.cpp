// cpu.ref: the oracle. Checks the CSR's content, then each y[m, n] is summed over row m's entries
// in storage order in double.
// cpu.omp: OpenMP over rows, dynamic chunks (a heavy row does not stall a static share); each row
// accumulates scaled rows of x into its y row, the inner loop over the N columns vectorised (omp
// simd). Accumulates in T (f32 for f32), in storage order: deterministic, independent of threads.
// Threads only from kParallelWork multiply-adds (nnz N) on: GCN's products (Cora: ~13k entries x
// 16 or 7 columns, ~0.15 ms on one core) cost less than waking the second thread on a shared
// 2-core machine (aim-bench op spmm: median 2-13 ms with two threads, 0.17 ms with one).
// spmm_dvalues: cpu.ref (double dot products) and cpu.omp (rows in parallel, vectorised dot).
// Test cases: spmm_cases.cpp.
#include "kernels/sparse/spmm_cpu.h"

#include <vector>

namespace aim::kernels {

void check_csr_content(const char* op, const int32_t* row_ptr, int64_t M, const int32_t* col_idx,
                       int64_t nnz, int64_t K) {
  AIM_CHECK(row_ptr[0] == 0, "[", op, "] row_ptr[0] must be 0, got ", row_ptr[0]);
  for (int64_t m = 0; m < M; ++m)
    AIM_CHECK(row_ptr[m + 1] >= row_ptr[m], "[", op, "] row_ptr must be non-decreasing: row ", m,
              " has row_ptr[", m, "] = ", row_ptr[m], " > row_ptr[", m + 1, "] = ", row_ptr[m + 1]);
  AIM_CHECK(row_ptr[M] == nnz, "[", op, "] row_ptr[M = ", M, "] must equal nnz = ", nnz, ", got ",
            row_ptr[M]);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t e = row_ptr[m]; e < row_ptr[m + 1]; ++e)
      AIM_CHECK(col_idx[e] >= 0 && col_idx[e] < K, "[", op, "] column ", col_idx[e], " of entry ",
                e, " (row ", m, ") is out of range for K = ", K, " (expected 0 <= column < ", K,
                ")");
}

namespace {

void check_pattern(const char* op, const Tensor& row_ptr, const Tensor& col_idx) {
  AIM_CHECK(row_ptr.dim() == 1 && row_ptr.dtype() == DType::i32 && row_ptr.is_contiguous() &&
                row_ptr.numel() >= 1,
            "[", op, "] row_ptr must be a contiguous [M+1] i32, got ", to_string(row_ptr.sizes()),
            " ", dtype_name(row_ptr.dtype()));
  AIM_CHECK(col_idx.dim() == 1 && col_idx.dtype() == DType::i32 && col_idx.is_contiguous(), "[", op,
            "] col_idx must be a contiguous [nnz] i32, got ", to_string(col_idx.sizes()), " ",
            dtype_name(col_idx.dtype()));
  AIM_CHECK(col_idx.device() == row_ptr.device(), "[", op, "] row_ptr and col_idx on ",
            row_ptr.device().str(), " and ", col_idx.device().str());
}

void check_dense(const char* op, const char* name, const Tensor& t, const Shape& want, DType dt,
                 Device d) {
  AIM_CHECK(t.sizes() == want && t.dtype() == dt && t.is_contiguous() && t.device() == d, "[", op,
            "] ", name, " must be a contiguous ", to_string(want), " ", dtype_name(dt), " on ",
            d.str(), ", got ", to_string(t.sizes()), " ", dtype_name(t.dtype()), " on ",
            t.device().str());
}

}  // namespace

void check_spmm_args(const SpmmArgs& a) {
  check_pattern("spmm", a.row_ptr, a.col_idx);
  AIM_CHECK(a.x.dim() == 2, "[spmm] x must be [K, N], got ", to_string(a.x.sizes()));
  AIM_CHECK(a.x.dtype() == DType::f32 || a.x.dtype() == DType::f64, "[spmm] takes f32 or f64, got ",
            dtype_name(a.x.dtype()));
  const int64_t M = a.row_ptr.numel() - 1, K = a.x.size(0), N = a.x.size(1);
  const Device d = a.x.device();
  AIM_CHECK(a.row_ptr.device() == d, "[spmm] the CSR is on ", a.row_ptr.device().str(), ", x on ",
            d.str());
  check_dense("spmm", "x", a.x, {K, N}, a.x.dtype(), d);
  check_dense("spmm", "values", a.values, {a.col_idx.numel()}, a.x.dtype(), d);
  check_dense("spmm", "y", a.y, {M, N}, a.x.dtype(), d);
  AIM_CHECK(a.col_idx.numel() < (int64_t(1) << 31), "[spmm] nnz must be < 2^31 (i32 row_ptr), got ",
            a.col_idx.numel());
}

void check_spmm_dvalues_args(const SpmmDvaluesArgs& a) {
  check_pattern("spmm_dvalues", a.row_ptr, a.col_idx);
  AIM_CHECK(a.x.dim() == 2, "[spmm_dvalues] x must be [K, N], got ", to_string(a.x.sizes()));
  AIM_CHECK(a.x.dtype() == DType::f32 || a.x.dtype() == DType::f64,
            "[spmm_dvalues] takes f32 or f64, got ", dtype_name(a.x.dtype()));
  const int64_t M = a.row_ptr.numel() - 1, K = a.x.size(0), N = a.x.size(1);
  const Device d = a.x.device();
  AIM_CHECK(a.row_ptr.device() == d, "[spmm_dvalues] the CSR is on ", a.row_ptr.device().str(),
            ", x on ", d.str());
  check_dense("spmm_dvalues", "x", a.x, {K, N}, a.x.dtype(), d);
  check_dense("spmm_dvalues", "dy", a.dy, {M, N}, a.x.dtype(), d);
  check_dense("spmm_dvalues", "dvalues", a.dvalues, {a.col_idx.numel()}, a.x.dtype(), d);
}

namespace {

constexpr int64_t kParallelWork = int64_t(1) << 20;

void check_content(const char* op, const Tensor& row_ptr, const Tensor& col_idx, int64_t K) {
  check_csr_content(op, row_ptr.data<int32_t>(), row_ptr.numel() - 1, col_idx.data<int32_t>(),
                    col_idx.numel(), K);
}

// ---- cpu.ref --------------------------------------------------------------------------------

template <class T>
void spmm_ref(const SpmmArgs& a) {
  const int64_t M = a.row_ptr.numel() - 1, N = a.x.size(1);
  const int32_t* rp = a.row_ptr.data<int32_t>();
  const int32_t* ci = a.col_idx.data<int32_t>();
  const T* v = a.values.data<T>();
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0.0;
      for (int64_t e = rp[m]; e < rp[m + 1]; ++e) s += double(v[e]) * double(x[ci[e] * N + n]);
      y[m * N + n] = T(s);
    }
}

template <class T>
void dvalues_ref(const SpmmDvaluesArgs& a) {
  const int64_t M = a.row_ptr.numel() - 1, N = a.x.size(1);
  const int32_t* rp = a.row_ptr.data<int32_t>();
  const int32_t* ci = a.col_idx.data<int32_t>();
  const T* dy = a.dy.data<T>();
  const T* x = a.x.data<T>();
  T* dv = a.dvalues.data<T>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t e = rp[m]; e < rp[m + 1]; ++e) {
      double s = 0.0;
      for (int64_t n = 0; n < N; ++n) s += double(dy[m * N + n]) * double(x[ci[e] * N + n]);
      dv[e] = T(double(dv[e]) + s);
    }
}

void spmm_cpu_ref(const SpmmArgs& a) {
  check_spmm_args(a);
  check_content("spmm", a.row_ptr, a.col_idx, a.x.size(0));
  if (a.x.dtype() == DType::f32)
    spmm_ref<float>(a);
  else
    spmm_ref<double>(a);
}

void dvalues_cpu_ref(const SpmmDvaluesArgs& a) {
  check_spmm_dvalues_args(a);
  check_content("spmm_dvalues", a.row_ptr, a.col_idx, a.x.size(0));
  if (a.x.dtype() == DType::f32)
    dvalues_ref<float>(a);
  else
    dvalues_ref<double>(a);
}

// ---- cpu.omp --------------------------------------------------------------------------------

template <class T>
void spmm_omp(const SpmmArgs& a) {
  const int64_t M = a.row_ptr.numel() - 1, N = a.x.size(1);
  const int32_t* rp = a.row_ptr.data<int32_t>();
  const int32_t* ci = a.col_idx.data<int32_t>();
  const T* v = a.values.data<T>();
  const T* x = a.x.data<T>();
  T* y = a.y.data<T>();
  const int64_t work = a.col_idx.numel() * N + M * N;
#pragma omp parallel for schedule(dynamic, 32) if (work >= kParallelWork)
  for (int64_t m = 0; m < M; ++m) {
    T* yr = y + m * N;
#pragma omp simd
    for (int64_t n = 0; n < N; ++n) yr[n] = T(0);
    for (int64_t e = rp[m]; e < rp[m + 1]; ++e) {
      const T w = v[e];
      const T* xr = x + int64_t(ci[e]) * N;
#pragma omp simd
      for (int64_t n = 0; n < N; ++n) yr[n] += w * xr[n];
    }
  }
}

template <class T>
void dvalues_omp(const SpmmDvaluesArgs& a) {
  const int64_t M = a.row_ptr.numel() - 1, N = a.x.size(1);
  const int32_t* rp = a.row_ptr.data<int32_t>();
  const int32_t* ci = a.col_idx.data<int32_t>();
  const T* dy = a.dy.data<T>();
  const T* x = a.x.data<T>();
  T* dv = a.dvalues.data<T>();
  const int64_t work = a.col_idx.numel() * N;
#pragma omp parallel for schedule(dynamic, 32) if (work >= kParallelWork)
  for (int64_t m = 0; m < M; ++m) {
    const T* g = dy + m * N;
    for (int64_t e = rp[m]; e < rp[m + 1]; ++e) {
      const T* xr = x + int64_t(ci[e]) * N;
      T s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t n = 0; n < N; ++n) s += g[n] * xr[n];
      dv[e] += s;
    }
  }
}

void spmm_cpu_omp(const SpmmArgs& a) {
  check_spmm_args(a);
  check_content("spmm", a.row_ptr, a.col_idx, a.x.size(0));  // O(nnz), against O(nnz N) work
  if (a.x.dtype() == DType::f32)
    spmm_omp<float>(a);
  else
    spmm_omp<double>(a);
}

void dvalues_cpu_omp(const SpmmDvaluesArgs& a) {
  check_spmm_dvalues_args(a);
  check_content("spmm_dvalues", a.row_ptr, a.col_idx, a.x.size(0));
  if (a.x.dtype() == DType::f32)
    dvalues_omp<float>(a);
  else
    dvalues_omp<double>(a);
}

const std::vector<DType> kTypes = {DType::f32, DType::f64};

}  // namespace

void spmm(const SpmmArgs& a) { AIM_DISPATCH_OP(SpmmArgs, "spmm", a); }
void spmm_dvalues(const SpmmDvaluesArgs& a) { AIM_DISPATCH_OP(SpmmDvaluesArgs, "spmm_dvalues", a); }

void register_spmm_cpu(Registry& r) {
  const std::vector<TestShape> shapes = spmm_cpu::test_shapes();

  auto& f = r.op<SpmmArgs>("spmm");
  f.description = "CSR sparse x dense product (torch.sparse.mm)";
  f.add({"cpu.ref", Backend::CPU, Provider::Own, spmm_cpu_ref, kTypes});
  f.add({"cpu.omp", Backend::CPU, Provider::Own, spmm_cpu_omp, kTypes});
  f.set_default(Backend::CPU, "cpu.omp");
  f.set_cost(spmm_cost);
  f.make_case = spmm_cpu::make_spmm_case;
  f.set_shape_fields(spmm_cpu::shape_fields());
  f.add_test_shapes(shapes);
  f.tolerance = spmm_cpu::tolerance;
  f.small_enough_for_simt = spmm_cpu::simt_small;

  auto& d = r.op<SpmmDvaluesArgs>("spmm_dvalues");
  d.description = "gradient of spmm to the CSR values (dy . x on A's pattern, accumulated)";
  d.add({"cpu.ref", Backend::CPU, Provider::Own, dvalues_cpu_ref, kTypes});
  d.add({"cpu.omp", Backend::CPU, Provider::Own, dvalues_cpu_omp, kTypes});
  d.set_default(Backend::CPU, "cpu.omp");
  d.set_cost(spmm_dvalues_cost);
  d.make_case = spmm_cpu::make_dvalues_case;
  d.set_shape_fields(spmm_cpu::shape_fields());
  d.add_test_shapes(shapes);
  d.tolerance = spmm_cpu::tolerance;
  d.small_enough_for_simt = spmm_cpu::simt_small;
}

}  // namespace aim::kernels
