// matmul on the CPU.
// cpu.ref: the oracle. Triple loop per batch element, double accumulation, one rounding at the
//   output; every float dtype (f64 for gradcheck, f16/bf16 for mixed precision).
// cpu.blas: OpenBLAS cblas_sgemm/cblas_dgemm per batch element (OpenBLAS 0.3.21 has no
//   cblas_sgemm_batch). Runs OpenBLAS's AVX2 kernels in the standard environment (MACHINE.md).
// cpu.avx512: the own packed AVX-512 SGEMM (gemm_avx512.h) per batch element; f32.
// cpu.widen: f16/bf16 widened to f32 for cpu.avx512 (or cpu.blas), one rounding of C.
// Both fast variants add the bias by pre-filling C (C = beta*C + bias, or bias when beta == 0)
// and running the GEMM with beta = 1: one extra pass over C, only when there is a bias.
// Test cases: matmul_cases.cpp.
#include "kernels/matmul/matmul_cpu.h"

#include <cblas.h>
#include <omp.h>

#include <climits>
#include <cmath>

#include "kernels/matmul/gemm_avx512.h"
#include "kernels/matmul/matmul.h"
#include "kernels/registry.h"

namespace aim::kernels {

MatmulDims matmul_check(const MatmulArgs& a) {
  AIM_CHECK(a.a.defined() && a.b.defined() && a.c.defined(),
            "[matmul] a, b and c must all be given");
  const DType t = a.c.dtype();
  AIM_CHECK(is_floating(t), "[matmul] expected a float dtype, got ", dtype_name(t));
  AIM_CHECK(a.a.dtype() == t && a.b.dtype() == t, "[matmul] a, b and c must share one dtype, got ",
            dtype_name(a.a.dtype()), ", ", dtype_name(a.b.dtype()), ", ", dtype_name(t));
  AIM_CHECK(a.a.device() == a.c.device() && a.b.device() == a.c.device(),
            "[matmul] a, b and c must be on one device, got ", a.a.device().str(), ", ",
            a.b.device().str(), ", ", a.c.device().str());
  const int64_t cd = a.c.dim();
  AIM_CHECK(cd == 2 || cd == 3, "[matmul] c must be [M,N] or [Bt,M,N], got ",
            to_string(a.c.sizes()));
  AIM_CHECK(a.a.dim() == 2 || a.a.dim() == cd, "[matmul] a must be 2-D or ", cd, "-D like c ",
            to_string(a.c.sizes()), ", got ", to_string(a.a.sizes()));
  AIM_CHECK(a.b.dim() == 2 || a.b.dim() == cd, "[matmul] b must be 2-D or ", cd, "-D like c ",
            to_string(a.c.sizes()), ", got ", to_string(a.b.sizes()));
  MatmulDims d;
  d.batch = cd == 3 ? a.c.size(0) : 1;
  d.M = a.c.size(-2);
  d.N = a.c.size(-1);
  d.a_batched = a.a.dim() == 3;
  d.b_batched = a.b.dim() == 3;
  d.K = a.trans_a ? a.a.size(-2) : a.a.size(-1);
  const int64_t a_m = a.trans_a ? a.a.size(-1) : a.a.size(-2);
  const int64_t b_k = a.trans_b ? a.b.size(-1) : a.b.size(-2);
  const int64_t b_n = a.trans_b ? a.b.size(-2) : a.b.size(-1);
  AIM_CHECK(a_m == d.M && b_k == d.K && b_n == d.N, "[matmul] shapes do not match: a ",
            to_string(a.a.sizes()), a.trans_a ? " (transposed)" : "", ", b ",
            to_string(a.b.sizes()), a.trans_b ? " (transposed)" : "", ", c ",
            to_string(a.c.sizes()), "; expected op(a) [M,K], op(b) [K,N], c [M,N] with M=", d.M,
            " N=", d.N);
  AIM_CHECK(!d.a_batched || a.a.size(0) == d.batch, "[matmul] a ", to_string(a.a.sizes()),
            " has a batch of ", a.a.size(0), ", c ", to_string(a.c.sizes()), " has ", d.batch);
  AIM_CHECK(!d.b_batched || a.b.size(0) == d.batch, "[matmul] b ", to_string(a.b.sizes()),
            " has a batch of ", a.b.size(0), ", c ", to_string(a.c.sizes()), " has ", d.batch);
  auto check_contiguous = [](const char* name, const Tensor& x) {
    AIM_CHECK(x.is_contiguous(), "[matmul] ", name,
              " must be contiguous in its stored layout, got ", to_string(x.sizes()),
              " with strides ", to_string(x.strides()),
              " (use trans_a/trans_b instead of transposed views)");
  };
  check_contiguous("a", a.a);
  check_contiguous("b", a.b);
  check_contiguous("c", a.c);
  if (a.bias.defined()) {
    AIM_CHECK(a.bias.dim() == 1 && a.bias.size(0) == d.N && a.bias.is_contiguous(),
              "[matmul] bias must be a contiguous [N] = [", d.N, "], got ",
              to_string(a.bias.sizes()), " with strides ", to_string(a.bias.strides()));
    AIM_CHECK(a.bias.dtype() == t && a.bias.device() == a.c.device(), "[matmul] bias must be ",
              dtype_name(t), " on ", a.c.device().str(), ", got ", dtype_name(a.bias.dtype()),
              " on ", a.bias.device().str());
  }
  if (a.b_packed.defined()) {
    AIM_CHECK(a.c.device().is_cpu() && t == DType::f32 && !d.b_batched,
              "[matmul] b_packed is for a shared f32 b on the CPU, got b ", to_string(a.b.sizes()),
              " ", dtype_name(t), " on ", a.c.device().str());
    const int64_t n = sgemm_avx512_packed_b_floats(d.N, d.K);
    AIM_CHECK(a.b_packed.dim() == 1 && a.b_packed.size(0) == n && a.b_packed.is_contiguous() &&
                  a.b_packed.dtype() == DType::f32 && a.b_packed.device().is_cpu(),
              "[matmul] b_packed must be a contiguous f32 [", n, "] (matmul_pack_b of b ",
              to_string(a.b.sizes()), a.trans_b ? " transposed" : "", "), got ",
              to_string(a.b_packed.sizes()), " ", dtype_name(a.b_packed.dtype()));
  }
  return d;
}

bool matmul_reads_packed_b(const Tensor& b, bool trans_b, int64_t M) {
  if (b.dim() != 2 || !b.device().is_cpu() || b.dtype() != DType::f32 || !cpu_has_avx512())
    return false;
  const int64_t K = trans_b ? b.size(1) : b.size(0), N = trans_b ? b.size(0) : b.size(1);
  return sgemm_avx512_uses_packed_b(false, trans_b, M, N, K);
}

Tensor matmul_pack_b(const Tensor& b, bool trans_b) {
  AIM_CHECK(b.dim() == 2 && b.device().is_cpu() && b.dtype() == DType::f32,
            "matmul_pack_b: b must be a 2-D f32 CPU tensor, got ", to_string(b.sizes()), " ",
            dtype_name(b.dtype()), " on ", b.device().str());
  const int64_t K = trans_b ? b.size(1) : b.size(0), N = trans_b ? b.size(0) : b.size(1);
  const Tensor bc = b.contiguous();
  Tensor p = Tensor::empty({sgemm_avx512_packed_b_floats(N, K)}, DType::f32);
  sgemm_avx512_pack_b(trans_b, N, K, bc.data<float>(), trans_b ? K : N, p.data<float>());
  return p;
}

namespace {

// cpu.ref ---------------------------------------------------------------------------------------

template <class T>
void matmul_ref_typed(const MatmulArgs& args, const MatmulDims& d) {
  const T* A = args.a.data<T>();
  const T* B = args.b.data<T>();
  T* C = args.c.data<T>();
  const T* bias = args.bias.defined() ? args.bias.data<T>() : nullptr;
  const int64_t M = d.M, N = d.N, K = d.K;
  for (int64_t z = 0; z < d.batch; ++z) {
    const T* Az = A + (d.a_batched ? z * M * K : 0);
    const T* Bz = B + (d.b_batched ? z * K * N : 0);
    T* Cz = C + z * M * N;
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0.0;
        for (int64_t k = 0; k < K; ++k) {
          const double x = double(args.trans_a ? Az[k * M + i] : Az[i * K + k]);
          const double y = double(args.trans_b ? Bz[j * K + k] : Bz[k * N + j]);
          acc += x * y;
        }
        double v = double(args.alpha) * acc;
        if (args.beta != 0) v += double(args.beta) * double(Cz[i * N + j]);  // beta 0: unread
        if (bias) v += double(bias[j]);
        Cz[i * N + j] = T(v);
      }
    }
  }
}

void matmul_cpu_ref(const MatmulArgs& a) {
  const MatmulDims d = matmul_check(a);
  AIM_DISPATCH_FLOAT_TYPES(a.c.dtype(), T, { matmul_ref_typed<T>(a, d); });
}

// Shared by the fast variants ------------------------------------------------------------------

// C = beta*C + bias (beta == 0: C = bias, C unread), so the GEMM can then run with beta = 1.
template <class T>
void prefill_bias(T* C, const T* bias, int64_t rows, int64_t N, T beta) {
#pragma omp parallel for schedule(static) if (rows * N > (int64_t(1) << 16))
  for (int64_t i = 0; i < rows; ++i) {
    T* r = C + i * N;
    if (beta == T(0)) {
      for (int64_t j = 0; j < N; ++j) r[j] = bias[j];
    } else {
      for (int64_t j = 0; j < N; ++j) r[j] = beta * r[j] + bias[j];
    }
  }
}

// Calls gemm(A_z, B_z, C_z, beta) for every batch element, after folding the bias into C.
template <class T, class Gemm>
void run_batched(const MatmulArgs& args, const MatmulDims& d, Gemm gemm) {
  const T* A = args.a.data<T>();
  const T* B = args.b.data<T>();
  T* C = args.c.data<T>();
  if (d.M == 0 || d.N == 0 || d.batch == 0) return;
  T beta = T(args.beta);
  if (args.bias.defined()) {
    prefill_bias<T>(C, args.bias.data<T>(), d.batch * d.M, d.N, beta);
    beta = T(1);
  }
  auto one = [&](int64_t z) {
    gemm(A + (d.a_batched ? z * d.M * d.K : 0), B + (d.b_batched ? z * d.K * d.N : 0),
         C + z * d.M * d.N, beta);
  };
  // Many small products (attention's [1,T] x [T,H] per row): one per thread, each GEMM then
  // runs single-threaded (it sees omp_in_parallel); large ones parallelise inside the GEMM.
  // (Not `parallel for if(...)`: an inactive outer region makes every inner GEMM region start
  // a fresh thread team.)
  const double flops_each = 2.0 * double(d.M) * double(d.N) * double(d.K);
  if (d.batch > 1 && flops_each < 4.0e6 && !omp_in_parallel()) {
#pragma omp parallel for schedule(static)
    for (int64_t z = 0; z < d.batch; ++z) one(z);
  } else {
    for (int64_t z = 0; z < d.batch; ++z) one(z);
  }
}

// Leading dimensions of the stored (row-major) operands; at least 1 as BLAS requires.
int64_t lda_of(const MatmulArgs& a, const MatmulDims& d) {
  return std::max<int64_t>(1, a.trans_a ? d.M : d.K);
}
int64_t ldb_of(const MatmulArgs& a, const MatmulDims& d) {
  return std::max<int64_t>(1, a.trans_b ? d.K : d.N);
}

// cpu.blas --------------------------------------------------------------------------------------

std::string blas_supports(const MatmulArgs& a) {
  const MatmulDims d = matmul_check(a);
  const int64_t biggest = std::max({d.M, d.N, d.K});
  if (biggest > INT_MAX) return str("needs M, N, K <= ", INT_MAX, " (blasint), got ", biggest);
  return "";
}

void matmul_cpu_blas(const MatmulArgs& a) {
  const MatmulDims d = matmul_check(a);
  const CBLAS_TRANSPOSE ta = a.trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = a.trans_b ? CblasTrans : CblasNoTrans;
  const blasint M = blasint(d.M), N = blasint(d.N), K = blasint(d.K);
  const blasint lda = blasint(lda_of(a, d)), ldb = blasint(ldb_of(a, d));
  const blasint ldc = std::max<blasint>(1, N);
  if (a.c.dtype() == DType::f32) {
    run_batched<float>(a, d, [&](const float* A, const float* B, float* C, float beta) {
      cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, a.alpha, A, lda, B, ldb, beta, C, ldc);
    });
  } else if (a.c.dtype() == DType::f64) {
    run_batched<double>(a, d, [&](const double* A, const double* B, double* C, double beta) {
      cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, double(a.alpha), A, lda, B, ldb, beta, C, ldc);
    });
  } else {
    AIM_FAIL("[matmul] cpu.blas takes f32 and f64, got ", dtype_name(a.c.dtype()));
  }
}

// cpu.avx512 ------------------------------------------------------------------------------------

std::string avx512_supports(const MatmulArgs& a) {
  matmul_check(a);
  return cpu_has_avx512() ? "" : "CPU lacks AVX-512";
}

void matmul_cpu_avx512(const MatmulArgs& a) {
  const MatmulDims d = matmul_check(a);
  AIM_CHECK(cpu_has_avx512(), "[matmul] cpu.avx512: CPU lacks AVX-512");
  const int64_t lda = lda_of(a, d), ldb = ldb_of(a, d), ldc = std::max<int64_t>(1, d.N);
  run_batched<float>(a, d, [&](const float* A, const float* B, float* C, float beta) {
    sgemm_avx512(a.trans_a, a.trans_b, d.M, d.N, d.K, a.alpha, A, lda, B, ldb, beta, C, ldc, false,
                 {}, a.b_packed.defined() ? a.b_packed.data<float>() : nullptr);
  });
}

// cpu.widen -------------------------------------------------------------------------------------
// f16/bf16: operands widened to f32, the f32 fast GEMM, C rounded once to 16 bits — the rounding
// points of a tensor-core GEMM with f32 accumulation, at the speed of the f32 path (the widening
// is O(MK + KN + MN) against the GEMM's O(MNK)).

bool widen_supports_any() {
#ifdef AIM_HAVE_OPENBLAS
  return true;
#else
  return cpu_has_avx512();
#endif
}

std::string widen_supports(const MatmulArgs& a) {
  matmul_check(a);
#ifdef AIM_HAVE_OPENBLAS
  return "";
#else
  return cpu_has_avx512() ? "" : "needs AVX-512 or an OpenBLAS build for its f32 GEMM";
#endif
}

void matmul_cpu_widen(const MatmulArgs& a) {
  matmul_check(a);
  auto f32 = [](const Tensor& t) { return t.defined() ? t.to(DType::f32) : Tensor(); };
  MatmulArgs w = a;
  w.a = f32(a.a);
  w.b = f32(a.b);
  w.bias = f32(a.bias);
  w.c = a.beta != 0 ? f32(a.c) : Tensor::empty(a.c.sizes(), DType::f32);
#ifdef AIM_HAVE_OPENBLAS
  if (!cpu_has_avx512()) {
    matmul_cpu_blas(w);
    a.c.copy_(w.c);
    return;
  }
#endif
  matmul_cpu_avx512(w);
  a.c.copy_(w.c);
}

}  // namespace

void matmul(const MatmulArgs& a) { AIM_DISPATCH_OP(MatmulArgs, "matmul", a); }

void register_matmul_cpu(Registry& r) {
  auto& op = r.op<MatmulArgs>("matmul");
  op.description = "C = alpha*op(A)*op(B) + beta*C (+ bias), row-major, optionally batched";
  op.add({"cpu.ref",
          Backend::CPU,
          Provider::Own,
          matmul_cpu_ref,
          {DType::f32, DType::f64, DType::f16, DType::bf16}});
  op.add({"cpu.blas",
          Backend::CPU,
          Provider::Vendor,
          matmul_cpu_blas,
          {DType::f32, DType::f64},
          blas_supports});
  op.add({"cpu.avx512",
          Backend::CPU,
          Provider::Own,
          matmul_cpu_avx512,
          {DType::f32},
          avx512_supports});
  op.add({"cpu.widen",
          Backend::CPU,
          Provider::Own,
          matmul_cpu_widen,
          {DType::f16, DType::bf16},
          widen_supports});
  // OpenBLAS runs its AVX2 kernels in the standard environment (MACHINE.md, lesson 3): the own
  // AVX-512 SGEMM is the fast path wherever the CPU has AVX-512.
  // Per dtype: f64 through OpenBLAS; 16-bit widened to the f32 path (cpu.widen).
#ifdef AIM_HAVE_OPENBLAS
  op.set_default(Backend::CPU, cpu_has_avx512() ? "cpu.avx512" : "cpu.blas", {DType::f32});
  op.set_default(Backend::CPU, "cpu.blas", {DType::f64});
#else
  op.set_default(Backend::CPU, cpu_has_avx512() ? "cpu.avx512" : "cpu.ref", {DType::f32});
  op.set_default(Backend::CPU, "cpu.ref", {DType::f64});
#endif
  op.set_default(Backend::CPU, widen_supports_any() ? "cpu.widen" : "cpu.ref",
                 {DType::f16, DType::bf16});
  op.set_cost(matmul_cost);
  op.make_case = matmul_cpu::make_matmul_case;
  op.tolerance = matmul_cpu::matmul_tolerance;
  op.set_shape_fields(matmul_cpu::matmul_shape_fields());
  op.add_test_shapes(matmul_cpu::matmul_test_shapes());
  op.small_enough_for_simt = matmul_cpu::matmul_small_enough_for_simt;
}

}  // namespace aim::kernels
