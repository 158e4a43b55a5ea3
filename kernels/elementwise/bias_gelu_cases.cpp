// The test cases of bias_gelu_fwd and bias_gelu_bwd (bias_gelu_cpu.h): shapes and their fields,
// case makers, tolerance, the emulator's budget.
#include "kernels/elementwise/bias_gelu_cpu.h"
#include "kernels/testing.h"

namespace aim::kernels::bias_gelu_cpu {

// Shapes: {N, C, tanh (0: erf form, 1: tanh form), dbias (backward: 1 = wanted)}. Rows 1, 7, 33
// and 64; columns 1, 31, 33 (two vectors and one lane), 768 and 3072 (BERT-base's hidden and
// intermediate sizes); the largest take the OpenMP paths.
std::vector<std::string> bias_gelu_shape_fields() { return {"N", "C", "tanh", "dbias"}; }

std::vector<TestShape> bias_gelu_test_shapes() {
  return {{1, 1, 0, 1},   {1, 31, 1, 1}, {7, 1, 1, 0},     {7, 31, 0, 1},
          {7, 768, 1, 1}, {33, 1, 0, 1}, {33, 31, 1, 0},   {33, 768, 0, 1},
          {1, 768, 0, 0}, {5, 33, 1, 1}, {64, 3072, 0, 1}, {64, 3072, 1, 0}};
}

bool bias_gelu_simt_small(const TestShape& s) { return s[0] * s[1] <= 32768; }

// x + bias spans [-5, 4]: both tails of gelu and its kink region.
TestCase make_bias_gelu_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t N = s[0], C = s[1];
  BiasGeluFwdArgs a;
  a.x = random_tensor({N, C}, t, seed, -4.0, 3.0);
  a.bias = random_tensor({C}, t, seed + 1, -1.0, 1.0);
  a.y = poison_tensor({N, C}, t);
  a.tanh = s[2] != 0;
  return to_case(a);
}

TestCase make_bias_gelu_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t N = s[0], C = s[1];
  BiasGeluBwdArgs a;
  a.x = random_tensor({N, C}, t, seed, -4.0, 3.0);
  a.bias = random_tensor({C}, t, seed + 1, -1.0, 1.0);
  a.dy = random_tensor({N, C}, t, seed + 2, -1.0, 1.0);
  a.dx = poison_tensor({N, C}, t);
  if (s[3]) a.dbias = random_tensor({C}, t, seed + 3, -1.0, 1.0);  // accumulated into
  a.tanh = s[2] != 0;
  return to_case(a);
}

// f32: the transcendentals in f32 (cpu.avx512: erf and exp approximations of ~2-3 ulp), and dbias
// a sum of up to 64 rows. 16-bit: the output's rounding.
Tolerance bias_gelu_tolerance(DType t, const TestShape&) {
  if (t == DType::f32) return {2e-5, 2e-5};
  if (t == DType::f16) return {2e-3, 2e-3};
  if (t == DType::bf16) return {1.6e-2, 1.6e-2};
  return default_tolerance(t);
}

}  // namespace aim::kernels::bias_gelu_cpu
