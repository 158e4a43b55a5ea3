// The test cases of the pooling ops (pool2d_cpu.h): shapes and their fields, case makers, the
// emulator's budget.
#include <algorithm>
#include <vector>

#include "kernels/pool/pool2d_cpu.h"
#include "kernels/testing.h"

namespace aim::kernels::pool2d_cpu {

// Window shapes: {N, C, H, W, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_bottom,
// pad_left, pad_right, ceil_mode, flag}; the output extent is pool2d_out_size of each axis.
// flag: count_include_pad (average pooling), indices wanted (maxpool2d_fwd; the backward always
// has them). Adaptive shapes: {N, C, H, W, P, Q}.

namespace {

enum WinField { kN, kC, kH, kW, kKh, kKw, kSh, kSw, kPt, kPb, kPl, kPr, kCeil, kFlag };

// The emulator runs one fiber per output (or input) element: keep its cases small.
constexpr int64_t kSimtMaxElements = int64_t(1) << 16;

Pool2dParams params_of(const TestShape& s) {
  Pool2dParams p;
  p.kernel_h = s[kKh];
  p.kernel_w = s[kKw];
  p.stride_h = s[kSh];
  p.stride_w = s[kSw];
  p.pad_top = s[kPt];
  p.pad_bottom = s[kPb];
  p.pad_left = s[kPl];
  p.pad_right = s[kPr];
  p.count_include_pad = s[kFlag] != 0;
  return p;
}
Shape x_shape(const TestShape& s) { return {s[kN], s[kC], s[kH], s[kW]}; }
Shape y_shape(const TestShape& s) {
  return {s[kN], s[kC], pool2d_out_size(s[kH], s[kKh], s[kSh], s[kPt], s[kPb], s[kCeil] != 0),
          pool2d_out_size(s[kW], s[kKw], s[kSw], s[kPl], s[kPr], s[kCeil] != 0)};
}

}  // namespace

std::vector<std::string> pool2d_window_shape_fields(const std::string& flag) {
  return {"N", "C", "H", "W", "kh", "kw", "sh", "sw", "pt", "pb", "pl", "pr", "ceil", flag};
}

std::vector<TestShape> pool2d_window_test_shapes() {
  // {N, C, H, W, kh, kw, sh, sw, pt, pb, pl, pr, ceil, flag}
  return {
      {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1},      // 1x1 plane, 1x1 window
      {2, 3, 1, 1, 3, 3, 2, 2, 1, 1, 1, 1, 0, 1},      // 1x1 plane inside a padded 3x3 window
      {2, 3, 7, 7, 3, 3, 2, 2, 1, 1, 1, 1, 0, 1},      // ResNet stem pool on a small plane
      {1, 5, 13, 13, 2, 2, 2, 2, 0, 0, 0, 0, 0, 1},    // 2x2/2, odd plane: last row dropped
      {2, 3, 31, 33, 3, 3, 1, 1, 1, 1, 1, 1, 0, 0},    // 3x3/1 SAME (GoogLeNet inception branch)
      {1, 2, 9, 10, 3, 3, 1, 1, 0, 0, 0, 0, 0, 1},     // 3x3/1 unpadded
      {2, 2, 5, 6, 3, 3, 1, 1, 0, 1, 1, 0, 1, 1},      // 3x3/1 one-sided padding, ceil
      {1, 3, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 0, 1},      // 3x3/1 SAME on a 2x2 plane: 2-row windows
      {2, 3, 14, 32, 3, 3, 2, 2, 0, 1, 0, 1, 0, 0},    // TF SAME 3x3/2: pad 0 before, 1 after
      {2, 4, 14, 16, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1},    // Caffe ceil_mode: last windows hang over
      {1, 3, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},      // ceil_mode dropping a padding-only window
      {3, 2, 6, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},      // ceil + padding: window past the padding
      {3, 2, 6, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0},      // the same, padding not counted
      {3, 2, 11, 17, 2, 3, 1, 2, 1, 0, 1, 1, 0, 0},    // non-square kernel, stride and padding
      {1, 3, 31, 31, 5, 5, 3, 3, 2, 2, 2, 2, 1, 1},    // 5x5/3, ceil
      {2, 7, 7, 7, 7, 7, 1, 1, 0, 0, 0, 0, 0, 1},      // window = whole plane
      {2, 3, 33, 31, 2, 2, 2, 2, 0, 0, 0, 0, 1, 0},    // 2x2/2 ceil on odd sizes
      {4, 64, 56, 56, 3, 3, 2, 2, 1, 1, 1, 1, 0, 1}};  // ResNet-sized (too big for the emulator)
}

std::vector<TestShape> maxpool2d_fwd_test_shapes() {
  std::vector<TestShape> v = pool2d_window_test_shapes();
  TestShape s = v[4];  // inference: no indices
  s[kFlag] = 0;
  v.push_back(s);
  return v;
}

bool pool2d_window_simt_small(const TestShape& s) {
  return s[kN] * s[kC] * s[kH] * s[kW] <= kSimtMaxElements;
}

std::vector<std::string> adaptive_avgpool2d_shape_fields() {
  return {"N", "C", "H", "W", "P", "Q"};
}

std::vector<TestShape> adaptive_avgpool2d_test_shapes() {
  // {N, C, H, W, P, Q}
  return {{1, 1, 1, 1, 1, 1},    {2, 3, 7, 7, 1, 1},   {8, 64, 7, 7, 1, 1},  {2, 3, 13, 13, 7, 7},
          {1, 2, 3, 5, 7, 11},   {2, 5, 31, 33, 3, 4}, {1, 3, 33, 31, 5, 5}, {3, 2, 1, 1, 2, 3},
          {4, 64, 56, 56, 7, 7}, {4, 64, 56, 56, 1, 1}};
}

bool adaptive_avgpool2d_simt_small(const TestShape& s) {
  return s[0] * s[1] * std::max(s[2] * s[3], s[4] * s[5]) <= kSimtMaxElements;
}

TestCase make_maxpool2d_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  MaxPool2dFwdArgs a;
  a.x = random_tensor(x_shape(s), t, seed, -2.0, 2.0);
  a.y = poison_tensor(y_shape(s), t);
  if (s[kFlag]) a.indices = poison_tensor(y_shape(s), DType::i32);
  a.p = params_of(s);
  return to_case(a);
}

// Indices from a real forward (cpu.ref on the random x), so the gradient case is realistic.
TestCase make_maxpool2d_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  MaxPool2dFwdArgs f;
  f.x = random_tensor(x_shape(s), t, seed, -2.0, 2.0);
  f.y = Tensor::empty(y_shape(s), t);
  f.indices = Tensor::empty(y_shape(s), DType::i32);
  f.p = params_of(s);
  maxpool2d_fwd_cpu_ref(f);
  MaxPool2dBwdArgs a;
  a.dy = random_tensor(y_shape(s), t, seed + 1, -1.0, 1.0);
  a.indices = f.indices;
  a.dx = poison_tensor(x_shape(s), t);
  a.p = f.p;
  return to_case(a);
}

TestCase make_avgpool2d_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  AvgPool2dFwdArgs a;
  a.x = random_tensor(x_shape(s), t, seed, -2.0, 2.0);
  a.y = poison_tensor(y_shape(s), t);
  a.p = params_of(s);
  return to_case(a);
}

TestCase make_avgpool2d_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  AvgPool2dBwdArgs a;
  a.dy = random_tensor(y_shape(s), t, seed, -1.0, 1.0);
  a.dx = poison_tensor(x_shape(s), t);
  a.p = params_of(s);
  return to_case(a);
}

TestCase make_adaptive_avgpool2d_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  AdaptiveAvgPool2dFwdArgs a;
  a.x = random_tensor({s[0], s[1], s[2], s[3]}, t, seed, -2.0, 2.0);
  a.y = poison_tensor({s[0], s[1], s[4], s[5]}, t);
  return to_case(a);
}

TestCase make_adaptive_avgpool2d_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  AdaptiveAvgPool2dBwdArgs a;
  a.dy = random_tensor({s[0], s[1], s[4], s[5]}, t, seed, -1.0, 1.0);
  a.dx = poison_tensor({s[0], s[1], s[2], s[3]}, t);
  return to_case(a);
}

}  // namespace aim::kernels::pool2d_cpu
