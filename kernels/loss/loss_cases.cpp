// The test cases of the losses (loss_cpu.h): shapes and their field names, case makers, tolerance.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/loss/loss_cpu.h"

namespace aim::kernels::loss_cpu {

namespace {

Reduction reduction_of(int64_t code) { return Reduction(int(code)); }
Shape reduced_shape(Reduction r, const Shape& none_shape) {
  return r == Reduction::none ? none_shape : Shape{};
}

// Cross entropy shapes: {N, V, target dtype (0: i32, 1: i64), reduction (0 none, 1 mean, 2 sum),
// smoothing (0: 0, 1: 0.1), ignored (0: none, 1: every 5th sample from the 3rd, 2: all)}.
Tensor ce_targets(const TestShape& s, uint64_t seed) {
  const int64_t N = s[0];
  Tensor t = random_indices({N}, s[1], DType::i64, seed);
  int64_t* p = t.data<int64_t>();
  for (int64_t n = 0; n < N; ++n)
    if (s[5] == 2 || (s[5] == 1 && n % 5 == 2)) p[n] = -100;
  return t.to(s[2] ? DType::i64 : DType::i32);
}

}  // namespace

std::vector<TestShape> cross_entropy_shapes() {
  return {{1, 1, 1, 1, 0, 0},  {31, 33, 1, 1, 1, 1},  {32, 31, 0, 0, 0, 1},  {33, 32, 1, 2, 1, 0},
          {97, 5, 0, 1, 0, 1}, {5, 97, 1, 0, 1, 1},   {13, 17, 1, 1, 1, 2},  {9, 11, 0, 2, 0, 2},
          {6, 7, 1, 0, 0, 2},  {3, 1031, 0, 1, 1, 1}, {64, 5003, 1, 1, 1, 1}};
}

// Codes as ce_targets: target_i64 0/1; reduction 0 none, 1 mean, 2 sum; smoothing 0: 0, 1: 0.1;
// ignored 0: none, 1: every 5th sample from the 3rd, 2: all.
std::vector<std::string> cross_entropy_shape_fields() {
  return {"N", "V", "target_i64", "reduction", "smoothing", "ignored"};
}

TestCase make_cross_entropy_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  CrossEntropyFwdArgs a;
  a.reduction = reduction_of(s[3]);
  a.logits = random_tensor({s[0], s[1]}, t, seed, -4.0, 4.0);
  a.target = ce_targets(s, seed + 1);
  a.loss = poison_tensor(reduced_shape(a.reduction, {s[0]}), loss_dtype(t));
  a.lse = poison_tensor({s[0]}, loss_dtype(t));
  a.label_smoothing = s[4] ? 0.1f : 0.0f;
  a.ignore_index = -100;
  return to_case(a);
}

TestCase make_cross_entropy_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  CrossEntropyBwdArgs a;
  a.reduction = reduction_of(s[3]);
  a.logits = random_tensor({s[0], s[1]}, t, seed, -4.0, 4.0);
  // lse consistent with the logits (as the forward saves it), computed in double.
  const std::vector<double> lv = a.logits.to_vector<double>();
  std::vector<double> lse(static_cast<size_t>(s[0]));
  for (int64_t n = 0; n < s[0]; ++n) {
    double mx = -std::numeric_limits<double>::infinity(), se = 0;
    for (int64_t v = 0; v < s[1]; ++v) mx = std::max(mx, lv[size_t(n * s[1] + v)]);
    for (int64_t v = 0; v < s[1]; ++v) se += std::exp(lv[size_t(n * s[1] + v)] - mx);
    lse[size_t(n)] = mx + std::log(se);
  }
  a.dloss = random_tensor(reduced_shape(a.reduction, {s[0]}), loss_dtype(t), seed + 2, 0.5, 2.0);
  a.target = ce_targets(s, seed + 1);
  a.lse = Tensor::from_vector(lse, Shape{s[0]}).to(loss_dtype(t));
  a.dlogits = poison_tensor({s[0], s[1]}, t);
  a.label_smoothing = s[4] ? 0.1f : 0.0f;
  a.ignore_index = -100;
  return to_case(a);
}

std::vector<TestShape> pointwise_shapes(int64_t extra_values) {
  std::vector<TestShape> s;
  const std::vector<std::pair<int64_t, int64_t>> dims = {{1, 1},  {1, 31}, {4, 32},
                                                         {3, 33}, {7, 97}, {311, 1031}};
  int64_t i = 0;
  for (const auto& [rows, C] : dims)
    for (int64_t r = 0; r < 3; ++r) s.push_back({rows, C, r, (i++) % extra_values});
  return s;
}

// Pointwise shapes: {rows, C, reduction (0 none, 1 mean, 2 sum), extra}; extra: bce: pos_weight
// (0/1); smooth_l1: beta (0: 0 = L1, 1: 1.0, 2: 0.5); mse: unused (always 0).
std::vector<std::string> pointwise_shape_fields(PointwiseKind k) {
  return {"rows", "C", "reduction",
          k == PointwiseKind::bce_with_logits ? "pos_weight"
          : k == PointwiseKind::smooth_l1     ? "beta"
                                              : "unused"};
}

namespace {

// The tensors and parameters of a pointwise loss's case, before they go into the op's Args.
struct PointwiseCase {
  Reduction reduction;
  Tensor dloss;  // backward only
  Tensor x, target, pos_weight;
  Tensor out;  // forward: loss; backward: dx
  float beta = 0;
};

PointwiseCase pointwise_case(PointwiseKind k, bool backward, const TestShape& s, DType t,
                             uint64_t seed) {
  PointwiseCase c;
  c.reduction = reduction_of(s[2]);
  const Shape shape{s[0], s[1]};
  if (backward)
    c.dloss = random_tensor(reduced_shape(c.reduction, shape), loss_dtype(t), seed + 2, 0.5, 2.0);
  if (k == PointwiseKind::bce_with_logits) {
    c.x = random_tensor(shape, t, seed, -8.0, 8.0);
    c.target = random_tensor(shape, t, seed + 1, 0.0, 1.0);
    if (s[3]) c.pos_weight = random_tensor({s[1]}, t, seed + 3, 0.5, 3.0);
  } else {
    c.x = random_tensor(shape, t, seed, -2.0, 2.0);
    c.target = random_tensor(shape, t, seed + 1, -2.0, 2.0);
  }
  c.out = backward ? poison_tensor(shape, t)
                   : poison_tensor(reduced_shape(c.reduction, shape), loss_dtype(t));
  if (k == PointwiseKind::smooth_l1) c.beta = s[3] == 0 ? 0.0f : s[3] == 1 ? 1.0f : 0.5f;
  return c;
}

}  // namespace

TestCase make_bce_with_logits_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  const PointwiseCase c = pointwise_case(PointwiseKind::bce_with_logits, false, s, t, seed);
  BceWithLogitsFwdArgs a;
  a.logits = c.x;
  a.target = c.target;
  a.pos_weight = c.pos_weight;
  a.loss = c.out;
  a.reduction = c.reduction;
  return to_case(a);
}

TestCase make_bce_with_logits_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  const PointwiseCase c = pointwise_case(PointwiseKind::bce_with_logits, true, s, t, seed);
  BceWithLogitsBwdArgs a;
  a.dloss = c.dloss;
  a.logits = c.x;
  a.target = c.target;
  a.pos_weight = c.pos_weight;
  a.dlogits = c.out;
  a.reduction = c.reduction;
  return to_case(a);
}

TestCase make_mse_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  const PointwiseCase c = pointwise_case(PointwiseKind::mse, false, s, t, seed);
  MseFwdArgs a;
  a.input = c.x;
  a.target = c.target;
  a.loss = c.out;
  a.reduction = c.reduction;
  return to_case(a);
}

TestCase make_mse_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  const PointwiseCase c = pointwise_case(PointwiseKind::mse, true, s, t, seed);
  MseBwdArgs a;
  a.dloss = c.dloss;
  a.input = c.x;
  a.target = c.target;
  a.dinput = c.out;
  a.reduction = c.reduction;
  return to_case(a);
}

TestCase make_smooth_l1_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  const PointwiseCase c = pointwise_case(PointwiseKind::smooth_l1, false, s, t, seed);
  SmoothL1FwdArgs a;
  a.input = c.x;
  a.target = c.target;
  a.loss = c.out;
  a.reduction = c.reduction;
  a.beta = c.beta;
  return to_case(a);
}

TestCase make_smooth_l1_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  const PointwiseCase c = pointwise_case(PointwiseKind::smooth_l1, true, s, t, seed);
  SmoothL1BwdArgs a;
  a.dloss = c.dloss;
  a.input = c.x;
  a.target = c.target;
  a.dinput = c.out;
  a.reduction = c.reduction;
  a.beta = c.beta;
  return to_case(a);
}

// Loss values are sums of many f32 terms: allow for float vs double accumulation order.
Tolerance loss_tolerance(DType t, const TestShape&) {
  if (t == DType::f32) return {2e-5, 2e-5};
  return default_tolerance(t);
}

bool loss_simt_small(const TestShape& s) { return s[0] * s[1] <= 4096; }

}  // namespace aim::kernels::loss_cpu
