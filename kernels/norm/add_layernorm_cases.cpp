// The test cases of add_layernorm_fwd and add_layernorm_bwd (add_layernorm_cpu.h): shapes and
// their fields, case makers, tolerance, the emulator's budget.
#include "kernels/norm/add_layernorm_cpu.h"
#include "kernels/norm/layernorm_cpu.h"
#include "kernels/testing.h"

namespace aim::kernels::add_layernorm_cpu {

// Shapes: {N, C, bias (0/1: the bias given; backward: dbias wanted), affine (forward: 0 none,
// else gamma and beta; backward: 1 gamma with dgamma and dbeta wanted, 2 gamma with dgamma only,
// 0 no gamma)}. Rows 1, 7, 33, 64; columns 1, 31, 33, 768 (BERT-base), 4100.
std::vector<std::string> add_layernorm_shape_fields() { return {"N", "C", "bias", "affine"}; }

std::vector<TestShape> add_layernorm_test_shapes() {
  return {{1, 1, 1, 1},   {1, 31, 0, 1}, {7, 1, 1, 0},    {7, 31, 1, 2},
          {7, 768, 1, 1}, {33, 1, 0, 1}, {33, 31, 1, 1},  {33, 768, 1, 1},
          {1, 768, 1, 0}, {5, 33, 0, 2}, {64, 768, 1, 1}, {9, 4100, 1, 0}};
}

bool add_layernorm_simt_small(const TestShape& s) { return s[0] * s[1] <= 32768; }

TestCase make_add_layernorm_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t N = s[0], C = s[1];
  const DType st = layernorm_stat_dtype(t);
  AddLayerNormFwdArgs a;
  a.x = random_tensor({N, C}, t, seed, -2.0, 2.0);
  if (s[2]) a.bias = random_tensor({C}, t, seed + 1, -0.5, 1.0);
  a.residual = random_tensor({N, C}, t, seed + 2, -1.0, 2.0);
  if (s[3]) {
    a.gamma = random_tensor({C}, t, seed + 3, 0.5, 1.5);
    a.beta = random_tensor({C}, t, seed + 4, -0.5, 0.5);
  }
  a.h = poison_tensor({N, C}, t);
  a.y = poison_tensor({N, C}, t);
  a.mean = poison_tensor({N}, st);
  a.rstd = poison_tensor({N}, st);
  a.eps = 1e-5f;
  return to_case(a);
}

// h as a forward would have left it, with its statistics computed in f64.
TestCase make_add_layernorm_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t N = s[0], C = s[1];
  const DType st = layernorm_stat_dtype(t);
  AddLayerNormBwdArgs a;
  a.h = random_tensor({N, C}, t, seed, -2.0, 3.0);
  a.dy = random_tensor({N, C}, t, seed + 5, -1.0, 1.0);
  if (s[3]) a.gamma = random_tensor({C}, t, seed + 3, 0.5, 1.5);
  a.mean = layernorm_cpu::layernorm_stat_from(a.h, false, st, 1e-5f);
  a.rstd = layernorm_cpu::layernorm_stat_from(a.h, true, st, 1e-5f);
  a.dh = poison_tensor({N, C}, t);
  if (s[3]) a.dgamma = random_tensor({C}, t, seed + 6, -1.0, 1.0);  // accumulated into
  if (s[3] == 1) a.dbeta = random_tensor({C}, t, seed + 7, -1.0, 1.0);
  if (s[2]) a.dbias = random_tensor({C}, t, seed + 8, -1.0, 1.0);
  return to_case(a);
}

// layernorm's (sums over rows of 16-bit products); 16-bit h is rounded before it is normalised,
// the f32 reference's is not.
Tolerance add_layernorm_tolerance(DType t, const TestShape& s) {
  return layernorm_cpu::layernorm_tolerance(t, s);
}

}  // namespace aim::kernels::add_layernorm_cpu
