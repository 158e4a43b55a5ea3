// The test cases of lrn_fwd and lrn_bwd (lrn_cpu.h): shapes and their fields, case makers,
// tolerance, the emulator's budget.
#include <vector>

#include "kernels/norm/lrn_cpu.h"
#include "kernels/testing.h"

namespace aim::kernels::lrn_cpu {

// Shapes {N, C, H, W, size, params}: x is [N, C] when H = 0, [N, C, H] when W = 0, else
// [N, C, H, W]. params 0: AlexNet's (alpha 1e-4, beta 0.75, k 2); 1: alpha 0.3, beta 0.6, k 1.5
// (large alpha: the window sum matters; general pow); 2: GoogLeNet's (alpha 1e-4, beta 0.75, k 1)
// with alpha large enough to matter (0.5).
std::vector<std::string> lrn_shape_fields() { return {"N", "C", "H", "W", "size", "params"}; }

std::vector<TestShape> lrn_test_shapes() {
  // {N, C, H, W, size, params}: window larger than C, even and odd sizes, size 1, [N, C],
  // a column count that is not a multiple of the omp block, AlexNet's first LRN (reduced N).
  return {{2, 3, 0, 0, 5, 1},   {3, 7, 4, 0, 1, 1},   {2, 6, 3, 5, 2, 1},    {2, 9, 5, 5, 3, 1},
          {1, 5, 2, 3, 4, 1},   {2, 11, 7, 3, 5, 2},  {1, 16, 17, 19, 5, 0}, {2, 8, 300, 0, 6, 1},
          {4, 13, 0, 0, 13, 2}, {2, 96, 55, 55, 5, 0}};
}

namespace {

Shape case_x_shape(const TestShape& s) {
  if (s[2] == 0) return {s[0], s[1]};
  if (s[3] == 0) return {s[0], s[1], s[2]};
  return {s[0], s[1], s[2], s[3]};
}

LrnParams params_of(const TestShape& s) {
  static const double kParams[3][3] = {{1e-4, 0.75, 2.0}, {0.3, 0.6, 1.5}, {0.5, 0.75, 1.0}};
  const double* q = kParams[s[5]];
  LrnParams p;
  p.size = s[4];
  p.alpha = q[0];
  p.beta = q[1];
  p.k = q[2];
  return p;
}

}  // namespace

TestCase make_lrn_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  const Shape xs = case_x_shape(s);
  LrnFwdArgs a;
  a.x = random_tensor(xs, t, seed, -2.0, 2.0);
  a.y = poison_tensor(xs, t);
  a.p = params_of(s);
  return to_case(a);
}

TestCase make_lrn_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  const Shape xs = case_x_shape(s);
  LrnBwdArgs a;
  a.dy = random_tensor(xs, t, seed + 1, -1.0, 1.0);
  a.x = random_tensor(xs, t, seed, -2.0, 2.0);
  a.dx = poison_tensor(xs, t);
  a.p = params_of(s);
  return to_case(a);
}

Tolerance lrn_tolerance(DType t, const TestShape&) {
  if (t == DType::f16) return {4e-3, 4e-3};
  if (t == DType::bf16) return {3e-2, 2e-2};
  if (t == DType::f32) return {2e-5, 2e-5};
  return default_tolerance(t);
}

bool lrn_simt_small(const TestShape& s) { return shape_numel(case_x_shape(s)) <= 8192; }

}  // namespace aim::kernels::lrn_cpu
