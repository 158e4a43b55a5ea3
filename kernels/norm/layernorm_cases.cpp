// The test cases of layernorm_fwd and layernorm_bwd (layernorm_cpu.h): shapes and their fields,
// case makers, tolerance, the emulator's budget.
#include <cmath>
#include <vector>

#include "kernels/norm/layernorm_cpu.h"
#include "kernels/testing.h"

namespace aim::kernels::layernorm_cpu {

// Shapes: {N, C, affine (0/1)}. Backward adds dgamma/dbeta wanted (affine 1: both, 2: dgamma
// only, 0: neither, no gamma).
std::vector<std::string> layernorm_shape_fields() { return {"N", "C", "affine"}; }

std::vector<TestShape> layernorm_test_shapes() {
  return {{1, 1, 1},    {3, 31, 1},   {4, 32, 0},   {5, 33, 1},  {7, 97, 2},
          {13, 128, 1}, {2, 1031, 1}, {64, 768, 1}, {9, 4100, 0}};
}

bool layernorm_simt_small(const TestShape& s) { return s[0] * s[1] <= 4096; }

Tensor layernorm_stat_from(const Tensor& x, bool want_rstd, DType s, float eps) {
  const int64_t N = x.size(0), C = x.size(1);
  const std::vector<double> v = x.to_vector<double>();
  std::vector<double> out(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    double sum = 0, sq = 0;
    for (int64_t c = 0; c < C; ++c) sum += v[size_t(n * C + c)];
    const double m = sum / double(C);
    for (int64_t c = 0; c < C; ++c) sq += (v[size_t(n * C + c)] - m) * (v[size_t(n * C + c)] - m);
    out[size_t(n)] = want_rstd ? 1.0 / std::sqrt(sq / double(C) + eps) : m;
  }
  return Tensor::from_vector(out, Shape{N}).to(s);
}

TestCase make_layernorm_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t N = s[0], C = s[1];
  LayerNormFwdArgs a;
  a.x = random_tensor({N, C}, t, seed, -2.0, 3.0);
  if (s[2]) {
    a.gamma = random_tensor({C}, t, seed + 1, 0.5, 1.5);
    a.beta = random_tensor({C}, t, seed + 2, -0.5, 0.5);
  }
  a.y = poison_tensor({N, C}, t);
  a.mean = poison_tensor({N}, layernorm_stat_dtype(t));
  a.rstd = poison_tensor({N}, layernorm_stat_dtype(t));
  a.eps = 1e-5f;
  return to_case(a);
}

TestCase make_layernorm_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t N = s[0], C = s[1];
  const DType st = layernorm_stat_dtype(t);
  LayerNormBwdArgs a;
  a.x = random_tensor({N, C}, t, seed, -2.0, 3.0);
  a.dy = random_tensor({N, C}, t, seed + 3, -1.0, 1.0);
  if (s[2]) a.gamma = random_tensor({C}, t, seed + 1, 0.5, 1.5);
  a.mean = layernorm_stat_from(a.x, false, st, 1e-5f);
  a.rstd = layernorm_stat_from(a.x, true, st, 1e-5f);
  a.dx = poison_tensor({N, C}, t);
  if (s[2]) a.dgamma = random_tensor({C}, t, seed + 4, -1.0, 1.0);
  if (s[2] == 1) a.dbeta = random_tensor({C}, t, seed + 5, -1.0, 1.0);
  return to_case(a);
}

// Sums over N of f16/bf16 products: allow for the rounding of the inputs at larger C and N.
Tolerance layernorm_tolerance(DType t, const TestShape&) {
  if (t == DType::f16) return {4e-3, 4e-3};
  if (t == DType::bf16) return {3e-2, 2e-2};
  if (t == DType::f32) return {1e-4, 1e-4};
  return default_tolerance(t);
}

}  // namespace aim::kernels::layernorm_cpu
