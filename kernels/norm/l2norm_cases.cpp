// The test cases of l2norm_fwd and l2norm_bwd (l2norm_cpu.h): shapes and their fields, case
// makers, tolerance, the emulator's budget.
#include <vector>

#include "kernels/norm/l2norm_cpu.h"
#include "kernels/testing.h"

namespace aim::kernels::l2norm_cpu {

// Shapes {N, C, H, W, scale (0: none, 1: learned), zero (1: one column of zeros, r = 0 < eps;
// backward: dscale wanted when scale is)}: x is [N, C] when H = 0, [N, C, H] when W = 0. One
// channel, odd channel and column counts (not multiples of the omp block of 64 columns), SSD's
// conv4_3 at reduced N ([1, 512, 38, 38]).
std::vector<std::string> l2norm_shape_fields() { return {"N", "C", "H", "W", "scale", "zero"}; }

std::vector<TestShape> l2norm_test_shapes() {
  return {{1, 1, 0, 0, 1, 0}, {2, 3, 0, 0, 0, 0},    {3, 7, 4, 0, 1, 0},   {2, 5, 3, 5, 1, 1},
          {2, 9, 9, 9, 0, 1}, {1, 16, 17, 19, 1, 0}, {2, 33, 65, 0, 1, 0}, {1, 512, 38, 38, 1, 0}};
}

namespace {

Shape case_x_shape(const TestShape& s) {
  if (s[2] == 0) return {s[0], s[1]};
  if (s[3] == 0) return {s[0], s[1], s[2]};
  return {s[0], s[1], s[2], s[3]};
}

// x in [-2, 2]; with zero = 1 the first column (n = 0, s = 0) is all zeros (r = 0: d = eps), in
// f32 and f64 only: there dx = scale dy / eps ~ 1e12, beyond the 16-bit types' range.
Tensor case_x(const TestShape& s, DType t, uint64_t seed) {
  const Shape xs = case_x_shape(s);
  Tensor x = random_tensor(xs, DType::f64, seed, -2.0, 2.0);
  if (s[5] && (t == DType::f32 || t == DType::f64)) {
    const int64_t S = shape_numel(xs) / (s[0] * s[1]);
    for (int64_t c = 0; c < s[1]; ++c) x.data<double>()[c * S] = 0.0;
  }
  return x.to(t);
}

}  // namespace

TestCase make_l2norm_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  const Shape xs = case_x_shape(s);
  L2NormFwdArgs a;
  a.x = case_x(s, t, seed);
  if (s[4]) a.scale = random_tensor({s[1]}, t, seed + 2, 0.5, 20.0);
  a.y = poison_tensor(xs, t);
  return to_case(a);
}

TestCase make_l2norm_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  const Shape xs = case_x_shape(s);
  L2NormBwdArgs a;
  a.dy = random_tensor(xs, t, seed + 1, -1.0, 1.0);
  a.x = case_x(s, t, seed);
  a.dx = poison_tensor(xs, t);
  if (s[4]) {
    a.scale = random_tensor({s[1]}, t, seed + 2, 0.5, 20.0);
    a.dscale = random_tensor({s[1]}, t, seed + 3, -1.0, 1.0);  // accumulated into
  }
  return to_case(a);
}

// f32: sums over up to 512 channels (forward) and up to N*S = 2888 columns (dscale); 16-bit: the
// output's rounding (scale up to 20 makes y up to ~20).
Tolerance l2norm_tolerance(DType t, const TestShape&) {
  if (t == DType::f16) return {1e-2, 4e-3};
  if (t == DType::bf16) return {8e-2, 2e-2};
  if (t == DType::f32) return {5e-5, 5e-5};
  return default_tolerance(t);
}

bool l2norm_simt_small(const TestShape& s) { return shape_numel(case_x_shape(s)) <= 8192; }

}  // namespace aim::kernels::l2norm_cpu
