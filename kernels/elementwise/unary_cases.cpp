// The test cases of unary / unary_bwd (unary_cpu.h): shapes, case makers, tolerance.
#include <utility>

#include "kernels/elementwise/unary_cpu.h"

namespace aim::kernels::unary_cpu {
namespace {

// Inputs inside each kind's domain, away from its kinks where the test would be ill-posed.
std::pair<double, double> unary_domain(UnaryKind k) {
  switch (k) {
    case UnaryKind::log:
    case UnaryKind::sqrt:
    case UnaryKind::rsqrt:
    case UnaryKind::reciprocal:
      return {0.1, 4.0};
    case UnaryKind::log1p:
      return {-0.5, 3.0};
    case UnaryKind::exp:
    case UnaryKind::expm1:
      return {-3.0, 3.0};
    case UnaryKind::gelu_erf:
    case UnaryKind::gelu_tanh:
    case UnaryKind::sigmoid:
    case UnaryKind::tanh:
    case UnaryKind::sin:
    case UnaryKind::cos:
      return {-4.0, 4.0};
    default:
      return {-2.0, 2.0};
  }
}

double unary_alpha(UnaryKind k) {
  return k == UnaryKind::leaky_relu ? 0.1 : k == UnaryKind::clamp ? -0.5 : 0.0;
}
double unary_beta(UnaryKind k) { return k == UnaryKind::clamp ? 0.7 : 0.0; }

// Layouts: 0 contiguous; 1 transposed view; 2 broadcast along dim 0; 3 contiguous, one element
// past an aligned start (misaligned for vector loads).
Tensor unary_input(int layout, int64_t d0, int64_t d1, DType t, uint64_t seed, double lo,
                   double hi) {
  switch (layout) {
    case 1:
      return random_tensor({d1, d0}, t, seed, lo, hi).transpose(0, 1);
    case 2:
      return random_tensor({1, d1}, t, seed, lo, hi).expand({d0, d1});
    case 3:
      return random_tensor({d0 * d1 + 1}, t, seed, lo, hi).slice(0, 1, d0 * d1 + 1).view({d0, d1});
    default:
      return random_tensor({d0, d1}, t, seed, lo, hi);
  }
}

}  // namespace

// Test shape: {kind (UnaryKind), layout (as unary_input), d0, d1}.
std::vector<std::string> unary_shape_fields() { return {"kind", "layout", "d0", "d1"}; }

TestCase make_unary_case(const TestShape& s, DType t, uint64_t seed) {
  const UnaryKind k = UnaryKind(s[0]);
  const auto [lo, hi] = unary_domain(k);
  UnaryArgs a;
  a.x = unary_input(int(s[1]), s[2], s[3], t, seed, lo, hi);
  a.y = poison_tensor({s[2], s[3]}, t);
  a.kind = k;
  a.alpha = float(unary_alpha(k));
  a.beta = float(unary_beta(k));
  return to_case(a);
}

// y is f(x) computed here in f64 from the rounded x, so x and y agree as a forward pass left them.
TestCase make_unary_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  const UnaryKind k = UnaryKind(s[0]);
  const auto [lo, hi] = unary_domain(k);
  const int layout = int(s[1]);
  const Tensor x = unary_input(layout, s[2], s[3], t, seed, lo, hi);
  const Tensor y64 = Tensor::empty({s[2], s[3]}, DType::f64);
  unary_ref(UnaryArgs{x.to(DType::f64), y64, k, float(unary_alpha(k)), float(unary_beta(k))});
  UnaryBwdArgs a;
  a.dy = unary_input(layout, s[2], s[3], t, seed + 7919, -1.0, 1.0);
  a.x = x;
  a.y = y64.to(t);
  a.dx = poison_tensor({s[2], s[3]}, t);
  a.kind = k;
  a.alpha = float(unary_alpha(k));
  a.beta = float(unary_beta(k));
  return to_case(a);
}

std::vector<TestShape> unary_test_shapes() {
  std::vector<TestShape> shapes;
  for (int k = 0; k < kNumUnaryKinds; ++k) {
    shapes.push_back({k, 0, 1, 1});
    shapes.push_back({k, 0, 1, 33});
    shapes.push_back({k, 0, 4, 32});
    shapes.push_back({k, 1, 5, 31});
    shapes.push_back({k, 2, 3, 97});
    shapes.push_back({k, 3, 1, 97});
  }
  for (UnaryKind k : {UnaryKind::relu, UnaryKind::gelu_tanh, UnaryKind::exp, UnaryKind::sigmoid})
    shapes.push_back({int64_t(k), 0, 331, 313});  // ~100k elements: OpenMP path
  shapes.push_back({int64_t(UnaryKind::gelu_erf), 1, 257, 401});
  return shapes;
}

bool unary_small_enough_for_simt(const TestShape& s) { return s[2] * s[3] <= 4096; }

// Transcendentals in f32 against the f64 reference: a few ulps more than the default.
Tolerance unary_tolerance(DType t, const TestShape&) {
  return t == DType::f32 ? Tolerance{2e-5, 2e-5} : default_tolerance(t);
}

}  // namespace aim::kernels::unary_cpu
