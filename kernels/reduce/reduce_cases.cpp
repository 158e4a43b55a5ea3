// The test cases of reduce (reduce_cpu.h): shapes, case maker, tolerance.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/reduce/reduce_cpu.h"

namespace aim::kernels::reduce_cpu {
namespace {

// Test shape: {kind code, dims code, d0, d1, d2}: x [d0, d1, d2]; the codes index the tables
// below (a kind with its p and correction; a set of dims).
struct KindCode {
  ReduceKind kind;
  double p, correction;
};
const KindCode kKindCodes[] = {
    {ReduceKind::sum, 2, 1},  {ReduceKind::mean, 2, 1},
    {ReduceKind::max, 2, 1},  {ReduceKind::min, 2, 1},
    {ReduceKind::prod, 2, 1}, {ReduceKind::var, 2, 1},
    {ReduceKind::std, 2, 1},  {ReduceKind::norm, 2, 1},
    {ReduceKind::norm, 1, 1}, {ReduceKind::norm, std::numeric_limits<double>::infinity(), 1},
    {ReduceKind::norm, 3, 1}, {ReduceKind::var, 2, 0},
    {ReduceKind::std, 2, 0}};
constexpr int kNumKindCodes = int(sizeof(kKindCodes) / sizeof(kKindCodes[0]));
const std::vector<int64_t> kDimCodes[] = {{-1}, {0}, {1}, {0, 2}, {}, {-1, -3}, {2, 1}};
constexpr int kNumDimCodes = int(sizeof(kDimCodes) / sizeof(kDimCodes[0]));

int64_t case_R(const TestShape& s) {
  const Shape x{s[2], s[3], s[4]};
  int64_t R = 1;
  for (int64_t d : normalize_reduce_dims(x, kDimCodes[s[1]])) R *= x[size_t(d)];
  return R;
}

}  // namespace

std::vector<std::string> reduce_shape_fields() {
  return {"kind_code", "dims_code", "d0", "d1", "d2"};
}

std::vector<TestShape> reduce_test_shapes() {
  std::vector<TestShape> shapes;
  for (int k = 0; k < kNumKindCodes; ++k) {
    for (int d = 0; d < kNumDimCodes; ++d) shapes.push_back({k, d, 2, 31, 33});
    shapes.insert(
        shapes.end(),
        {{k, 0, 1, 1, 1}, {k, 4, 1, 1, 1}, {k, 2, 5, 97, 32}, {k, 1, 33, 3, 7}, {k, 0, 4, 3, 32}});
  }
  // Columns with many streams along R (few blocks, R >= 256).
  for (int k : {0, 2, 5}) shapes.push_back({k, 2, 3, 300, 40});
  // One larger shape per path (rows, columns, middle, permuted, all), skipped under SIMT.
  for (int k : {0, 1, 2, 5, 7})
    for (int d : {0, 1, 2, 3, 4}) shapes.push_back({k, d, 3, 257, 515});
  return shapes;
}

TestCase make_reduce_case(const TestShape& s, DType t, uint64_t seed) {
  const KindCode k = kKindCodes[s[0]];
  const std::vector<int64_t>& dims = kDimCodes[s[1]];
  const Shape x{s[2], s[3], s[4]};
  ReduceArgs a;
  // prod: values near 1 so that products of many values neither vanish nor overflow too fast.
  if (k.kind == ReduceKind::prod)
    a.x = random_tensor(x, t, seed, 0.5, 1.5);
  else
    a.x = random_tensor(x, t, seed, -1, 1);
  a.y = poison_tensor(reduced_shape(x, dims), t);
  if ((k.kind == ReduceKind::max || k.kind == ReduceKind::min) &&
      normalize_reduce_dims(x, dims).size() == 1)
    a.indices = poison_tensor(reduced_shape(x, dims), DType::i64);
  a.kind = k.kind;
  a.dims = dims;
  a.correction = k.correction;
  a.p = k.p;
  return to_case(a);
}

// Accumulated rounding grows like sqrt(n) for sums of n terms (brief: rtol ~1e-5 sqrt(n) in f32).
Tolerance reduce_tolerance(DType t, const TestShape& s) {
  const double g = std::sqrt(double(std::max<int64_t>(case_R(s), 1)));
  const Tolerance d = default_tolerance(t);
  if (t == DType::f32 || t == DType::f64) return {d.atol * g, d.rtol * g};
  return {d.atol + 1e-5 * g, d.rtol};
}

bool reduce_small_enough_for_simt(const TestShape& s) { return s[2] * s[3] * s[4] <= 40000; }

}  // namespace aim::kernels::reduce_cpu
