// The test cases of interpolate (interpolate_cpu.h): shapes and their fields, case makers, the
// emulator's budget.
#include <algorithm>

#include "kernels/interpolate/interpolate_cpu.h"
#include "kernels/testing.h"

namespace aim::kernels::interpolate_cpu {
namespace {

enum Field { kN, kC, kH, kW, kP, kQ, kMode, kAlign, kScaleH, kScaleW };

// The emulator runs one fiber per output (forward) or input (backward) element.
constexpr int64_t kSimtMaxElements = int64_t(1) << 17;

InterpolateParams params_of(const TestShape& s) {
  InterpolateParams p;
  p.mode = s[kMode] ? InterpMode::bilinear : InterpMode::nearest;
  p.align_corners = s[kAlign] != 0;
  p.scale_h = double(s[kScaleH]) / 100.0;
  p.scale_w = double(s[kScaleW]) / 100.0;
  return p;
}

}  // namespace

// {N, C, H, W, P, Q, mode (0 nearest, 1 bilinear), align_corners, scale_h and scale_w in % (0:
// from the sizes; else P = floor(H * scale_h), as F.interpolate's scale_factor)}: single pixels,
// one output (align_corners' zero scale), doubling (nearest's shift rule), identity (the copy
// rule), odd up- and downsampling, scale factors that are not in / out, FPN's 2x top-down step.
std::vector<std::string> interpolate_shape_fields() {
  return {"N", "C", "H", "W", "P", "Q", "mode", "align", "scale_h_pct", "scale_w_pct"};
}
std::vector<TestShape> interpolate_shapes() {
  std::vector<TestShape> v;
  const std::vector<TestShape> sizes = {
      // {N, C, H, W, P, Q, scale_h_pct, scale_w_pct}
      {1, 1, 1, 1, 1, 1, 0, 0},      {2, 3, 4, 5, 8, 10, 0, 0},      {2, 3, 5, 7, 11, 13, 0, 0},
      {1, 2, 13, 11, 5, 4, 0, 0},    {2, 3, 7, 7, 7, 7, 0, 0},       {1, 2, 1, 1, 3, 4, 0, 0},
      {1, 2, 5, 6, 1, 1, 0, 0},      {1, 2, 6, 9, 15, 20, 250, 225}, {1, 3, 10, 10, 3, 7, 30, 70},
      {1, 2, 7, 9, 7, 13, 110, 150}, {2, 16, 25, 34, 50, 68, 0, 0},  {4, 64, 28, 28, 56, 56, 0, 0}};
  for (const TestShape& z : sizes) {
    v.push_back({z[0], z[1], z[2], z[3], z[4], z[5], 0, 0, z[6], z[7]});  // nearest
    for (int64_t align : {0, 1})                                          // bilinear
      v.push_back({z[0], z[1], z[2], z[3], z[4], z[5], 1, align, z[6], z[7]});
  }
  return v;
}
bool interpolate_simt_small(const TestShape& s) {
  return s[kN] * s[kC] * std::max(s[kH] * s[kW], s[kP] * s[kQ]) <= kSimtMaxElements;
}

TestCase make_interpolate_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  InterpolateFwdArgs a;
  a.x = random_tensor({s[kN], s[kC], s[kH], s[kW]}, t, seed, -2.0, 2.0);
  a.y = poison_tensor({s[kN], s[kC], s[kP], s[kQ]}, t);
  a.p = params_of(s);
  return to_case(a);
}

TestCase make_interpolate_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  InterpolateBwdArgs a;
  a.dy = random_tensor({s[kN], s[kC], s[kP], s[kQ]}, t, seed, -1.0, 1.0);
  a.dx = poison_tensor({s[kN], s[kC], s[kH], s[kW]}, t);
  a.p = params_of(s);
  return to_case(a);
}

}  // namespace aim::kernels::interpolate_cpu
