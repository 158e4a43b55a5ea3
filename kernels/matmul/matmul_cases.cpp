// The test cases of matmul (matmul_cpu.h): shapes, case maker, tolerance.
#include <algorithm>
#include <cmath>

#include "kernels/matmul/matmul_cpu.h"

namespace aim::kernels::matmul_cpu {
namespace {

// TestShape: {Bt, M, N, K, trans_a, trans_b, with_beta, with_bias, shared}.
// Bt == 0: plain 2-D call; Bt >= 1: c is [Bt,M,N]. shared: 0 both operands batched, 1 a is a
// shared 2-D matrix, 2 b is. with_beta: alpha 0.5, beta 0.75 and c filled with values (else
// alpha 1, beta 0 and c poisoned with NaN, which must not leak).
enum ShapeField { kBt, kM, kN, kK, kTransA, kTransB, kWithBeta, kWithBias, kShared };

}  // namespace

std::vector<std::string> matmul_shape_fields() {
  return {"Bt", "M", "N", "K", "trans_a", "trans_b", "with_beta", "with_bias", "shared"};
}

std::vector<TestShape> matmul_test_shapes() {
  return {
      {0, 1, 1, 1, 0, 0, 0, 0, 0},
      {0, 31, 32, 33, 0, 0, 0, 0, 0},
      {0, 33, 31, 32, 1, 0, 0, 0, 0},
      {0, 32, 33, 31, 0, 1, 0, 0, 0},
      {0, 31, 33, 32, 1, 1, 1, 0, 0},
      {0, 97, 61, 89, 0, 0, 0, 1, 0},
      {0, 61, 89, 97, 0, 1, 1, 1, 0},
      {0, 64, 64, 64, 0, 0, 0, 0, 0},
      {3, 17, 19, 23, 0, 0, 0, 0, 0},
      {3, 17, 19, 23, 1, 0, 1, 0, 1},
      {3, 17, 19, 23, 0, 1, 1, 1, 2},
      {2, 5, 1, 37, 1, 1, 0, 1, 0},
      // Multiples of 4 (float4 paths of cuda.tiled in every layout) and several block tiles.
      {0, 64, 32, 40, 1, 0, 1, 1, 0},
      {2, 36, 44, 20, 1, 1, 0, 1, 0},
      {0, 130, 136, 24, 0, 0, 1, 1, 0},
      {0, 256, 384, 320, 0, 1, 0, 1, 0},
      // Skinny M (sgemm_avx512's unpacked paths: op(B) = B blocks; op(B) = B^T with K >= 1024).
      {0, 16, 2100, 140, 0, 0, 1, 1, 0},
      {0, 9, 70, 1030, 1, 1, 0, 1, 0},
  };
}

TestCase make_matmul_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t Bt = s[kBt], M = s[kM], N = s[kN], K = s[kK];
  const bool ta = s[kTransA] != 0, tb = s[kTransB] != 0;
  auto with_batch = [&](Shape m, bool batched) {
    if (Bt > 0 && batched) m.insert(m.begin(), Bt);
    return m;
  };
  MatmulArgs a;
  a.a = random_tensor(with_batch(ta ? Shape{K, M} : Shape{M, K}, s[kShared] != 1), t, seed);
  a.b = random_tensor(with_batch(tb ? Shape{N, K} : Shape{K, N}, s[kShared] != 2), t, seed + 1);
  if (s[kWithBias]) a.bias = random_tensor({N}, t, seed + 3);
  const Shape cs = with_batch({M, N}, true);
  a.c = s[kWithBeta] ? random_tensor(cs, t, seed + 2) : poison_tensor(cs, t);
  a.trans_a = ta;
  a.trans_b = tb;
  a.alpha = s[kWithBeta] ? 0.5f : 1.0f;
  a.beta = s[kWithBeta] ? 0.75f : 0.0f;
  return to_case(a);
}

// Inputs are uniform in [-1, 1): the accumulation error grows like sqrt(K).
Tolerance matmul_tolerance(DType t, const TestShape& s) {
  const double r = std::sqrt(double(std::max<int64_t>(s[kK], 1)));
  switch (t) {
    case DType::f64:
      return {1e-12 * r, 1e-10};
    case DType::f32:
      return {1e-5 * r, 1e-5 * r};
    case DType::f16:
      return {1e-3 * r, 2e-3};
    case DType::bf16:
      return {8e-3 * r, 1.6e-2};
    default:
      return {0, 0};
  }
}

// The emulator runs every CUDA thread as a fiber: keep its GEMMs to ~64^3 work.
bool matmul_small_enough_for_simt(const TestShape& s) {
  return std::max<int64_t>(s[kBt], 1) * s[kM] * s[kN] * s[kK] <= 600000;
}

}  // namespace aim::kernels::matmul_cpu
