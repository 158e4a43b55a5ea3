// The test cases of binary and where (binary_cpu.h): shapes, case makers, tolerance.
#include <functional>
#include <tuple>
#include <utility>

#include "kernels/elementwise/binary_cpu.h"

namespace aim::kernels::binary_cpu {
namespace {

Tensor random_of(const Shape& s, DType t, uint64_t seed, double lo, double hi, bool integer) {
  return integer && is_floating(t) ? random_tensor(s, DType::i32, seed, lo, hi).to(t)
                                   : random_tensor(s, t, seed, lo, hi);
}

// Operand layouts (bc): 0 same shape; 1 b one value [1]; 2 row broadcast, b [d2]; 3 column
// broadcast, b [d0, d1, 1]; 4 both sides, a [d0, 1, d2] and b [d1, 1]; 5 strided views: a
// transposed, b sliced with step 2; 6 a a 0-dim scalar; 7 contiguous, one element past an
// aligned start (misaligned vector loads).
std::pair<Tensor, Tensor> binary_operands(int bc, int64_t d0, int64_t d1, int64_t d2,
                                          const std::function<Tensor(const Shape&, int)>& gen) {
  const Shape full{d0, d1, d2};
  switch (bc) {
    case 1:
      return {gen(full, 0), gen({1}, 1)};
    case 2:
      return {gen(full, 0), gen({d2}, 1)};
    case 3:
      return {gen(full, 0), gen({d0, d1, 1}, 1)};
    case 4:
      return {gen({d0, 1, d2}, 0), gen({d1, 1}, 1)};
    case 5:
      return {gen({d2, d1, d0}, 0).transpose(0, 2),
              gen({d0, 2 * d1, d2}, 1).slice(1, 0, 2 * d1, 2)};
    case 6:
      return {gen({}, 0), gen(full, 1)};
    case 7: {
      const int64_t n = d0 * d1 * d2;
      return {gen({n + 1}, 0).slice(0, 1, n + 1).view(full),
              gen({n + 1}, 1).slice(0, 1, n + 1).view(full)};
    }
    default:
      return {gen(full, 0), gen(full, 1)};
  }
}

}  // namespace

// Test shape: {kind (BinaryKind), bc (operand layout, as binary_operands), d0, d1, d2}.
std::vector<std::string> binary_shape_fields() { return {"kind", "bc", "d0", "d1", "d2"}; }

// Inputs inside each kind's domain: divisors away from 0, pow bases positive (floats),
// comparisons on small integers so that equal pairs occur.
TestCase make_binary_case(const TestShape& s, DType t, uint64_t seed) {
  const BinaryKind k = BinaryKind(s[0]);
  const bool integer = is_integral(t);
  auto gen = [&](const Shape& shape, int which) {
    const uint64_t sd = seed + uint64_t(which) * 7919;
    if (is_comparison(k)) return random_of(shape, t, sd, -3, 4, true);
    if (k == BinaryKind::div && which == 1)
      return integer ? random_tensor(shape, t, sd, 1, 8) : random_tensor(shape, t, sd, 0.5, 2);
    if (k == BinaryKind::pow)
      return integer ? random_tensor(shape, t, sd, which ? -2 : -3, which ? 5 : 4)
                     : random_tensor(shape, t, sd, which ? -2 : 0.5, 2);
    return integer ? random_tensor(shape, t, sd, -50, 50) : random_tensor(shape, t, sd, -2, 2);
  };
  BinaryArgs a;
  std::tie(a.a, a.b) = binary_operands(int(s[1]), s[2], s[3], s[4], gen);
  a.y = poison_tensor({s[2], s[3], s[4]}, is_comparison(k) ? DType::boolean : t);
  a.kind = k;
  a.alpha = k == BinaryKind::sub ? (integer ? 2.0f : 0.5f) : 1.0f;
  return to_case(a);
}

std::vector<TestShape> binary_test_shapes() {
  std::vector<TestShape> shapes;
  for (int k = 0; k < kNumBinaryKinds; ++k)
    for (int bc = 0; bc < 8; ++bc) shapes.push_back({k, bc, 2, 3, 33});
  const int64_t add = int64_t(BinaryKind::add);
  for (int64_t n : {1, 31, 32, 97}) shapes.push_back({add, 0, 1, 1, n});
  shapes.push_back({add, 1, 1, 1, 1});
  shapes.push_back({int64_t(BinaryKind::mul), 2, 5, 7, 31});
  shapes.push_back({int64_t(BinaryKind::prelu), 3, 2, 13, 17});
  // ~100k elements: the OpenMP path (skipped under SIMT).
  shapes.push_back({add, 0, 4, 160, 161});
  shapes.push_back({add, 2, 4, 160, 161});
  shapes.push_back({int64_t(BinaryKind::mul), 3, 4, 160, 161});
  shapes.push_back({int64_t(BinaryKind::lt), 5, 4, 160, 161});
  return shapes;
}

bool binary_small_enough_for_simt(const TestShape& s) { return s[2] * s[3] * s[4] <= 4096; }

// pow in f32 against the f64 reference: a few ulps more than the default.
Tolerance binary_tolerance(DType t, const TestShape&) {
  return t == DType::f32 ? Tolerance{1e-5, 2e-5} : default_tolerance(t);
}

// Test shape: {bc, d0, d1, d2}. bc: 0 all full; 1 a one value; 2 cond a row [d2], b a column
// [d0, d1, 1]; 3 cond and a transposed views; 4 cond [d0, 1, d2], a [d1, 1], b 0-dim.
std::vector<std::string> where_shape_fields() { return {"bc", "d0", "d1", "d2"}; }

TestCase make_where_case(const TestShape& s, DType t, uint64_t seed) {
  const Shape full{s[1], s[2], s[3]};
  auto cond = [&](const Shape& sh) { return random_tensor(sh, DType::boolean, seed, 0, 1); };
  auto val = [&](const Shape& sh, int w) {
    return random_tensor(sh, t, seed + uint64_t(w) * 7919, is_floating(t) ? -2 : 0, 100);
  };
  WhereArgs a;
  switch (s[0]) {
    case 1:
      a.cond = cond(full), a.a = val({1}, 1), a.b = val(full, 2);
      break;
    case 2:
      a.cond = cond({s[3]}), a.a = val(full, 1), a.b = val({s[1], s[2], 1}, 2);
      break;
    case 3:
      a.cond = cond({s[3], s[2], s[1]}).transpose(0, 2);
      a.a = val({s[3], s[2], s[1]}, 1).transpose(0, 2);
      a.b = val(full, 2);
      break;
    case 4:
      a.cond = cond({s[1], 1, s[3]}), a.a = val({s[2], 1}, 1), a.b = val({}, 2);
      break;
    default:
      a.cond = cond(full), a.a = val(full, 1), a.b = val(full, 2);
  }
  a.y = poison_tensor(full, t);
  return to_case(a);
}

std::vector<TestShape> where_test_shapes() {
  std::vector<TestShape> shapes;
  for (int bc = 0; bc < 5; ++bc) {
    shapes.push_back({bc, 2, 3, 33});
    shapes.push_back({bc, 1, 1, 1});
    shapes.push_back({bc, 3, 5, 31});
  }
  shapes.push_back({0, 1, 1, 97});
  shapes.push_back({0, 4, 160, 161});
  shapes.push_back({2, 4, 160, 161});
  return shapes;
}

bool where_small_enough_for_simt(const TestShape& s) { return s[1] * s[2] * s[3] <= 4096; }

}  // namespace aim::kernels::binary_cpu
