// The test cases of the index ops (index_cpu.h): shapes, case makers, tolerance.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/index/index_cpu.h"

namespace aim::kernels::index_cpu {
namespace {

constexpr int64_t kSimtLimit = 4096;  // elements per case under the emulator

DType index_dtype(int64_t code) { return code ? DType::i64 : DType::i32; }

Tensor random_data(const Shape& s, DType t, uint64_t seed) {
  return is_floating(t) ? random_tensor(s, t, seed) : random_tensor(s, t, seed, -100, 100);
}

// A tensor of `shape` in one of three layouts: 0 contiguous, 1 a transpose of dims 0 and 2,
// 2 a step-2 slice of the last dim.
Tensor layout_tensor(const Shape& shape, int64_t layout, DType t, uint64_t seed) {
  if (layout == 1) return random_data({shape[2], shape[1], shape[0]}, t, seed).transpose(0, 2);
  if (layout == 2)
    return random_data({shape[0], shape[1], 2 * shape[2]}, t, seed).slice(2, 0, 2 * shape[2], 2);
  return random_data(shape, t, seed);
}

// Large shapes (the last of each list) are skipped under the emulator.
bool small_case(const TestShape& s, int64_t first, int64_t last, int64_t limit) {
  int64_t n = 1;
  for (int64_t i = first; i <= last; ++i) n *= std::max<int64_t>(1, s[size_t(i)]);
  return n <= limit;
}

// gather / scatter_add: the index is [a, b, c] with K at dim, every other dim reduced by
// `shrink` (at least 1).
Shape gather_index_shape(const TestShape& s) {
  Shape is{s[1], s[2], s[3]};
  for (size_t d = 0; d < 3; ++d) is[d] = std::max<int64_t>(1, is[d] - s[6]);
  is[size_t(s[0])] = s[4];
  return is;
}

// pad / pad_bwd: the pads of a test shape, and pad's output shape.
constexpr int64_t kMaxPairs = 3;
std::vector<int64_t> case_pads(const TestShape& s) {
  AIM_CHECK(s[4] >= 0 && s[4] <= kMaxPairs, "[pad] test shape: pairs must be in [0, 3], got ",
            s[4]);
  for (int64_t i = 2 * s[4]; i < 2 * kMaxPairs; ++i)
    AIM_CHECK(s[size_t(5 + i)] == 0, "[pad] test shape: p", i, " given past pairs = ", s[4]);
  return std::vector<int64_t>(s.begin() + 5, s.begin() + 5 + 2 * s[4]);
}
Shape padded_shape(const TestShape& s) {
  Shape y{s[0], s[1], s[2]};
  const auto p = case_pads(s);
  for (size_t i = 0; i < p.size() / 2; ++i) y[2 - i] += p[2 * i] + p[2 * i + 1];
  return y;
}

}  // namespace

// concat: {count, dim, a, b, c, layout}: input k is [a, b, c] with size(dim) + k at dim; odd
// inputs take the layout.
std::vector<std::string> concat_shape_fields() { return {"count", "dim", "a", "b", "c", "layout"}; }

std::vector<TestShape> concat_test_shapes() {
  return {{1, 0, 3, 5, 7, 0},  {2, 0, 1, 1, 1, 0},  {2, 1, 3, 31, 5, 1}, {3, 2, 4, 5, 32, 2},
          {5, 1, 2, 33, 3, 1}, {3, 0, 97, 3, 2, 2}, {2, 2, 1, 7, 97, 1}, {3, 1, 64, 128, 65, 1}};
}

TestCase make_concat_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t count = s[0], dim = s[1];
  ConcatArgs a;
  Shape ys{s[2], s[3], s[4]};
  ys[size_t(dim)] = 0;
  for (int64_t k = 0; k < count; ++k) {
    Shape xs{s[2], s[3], s[4]};
    xs[size_t(dim)] += k;
    ys[size_t(dim)] += xs[size_t(dim)];
    a.xs.push_back(layout_tensor(xs, k % 2 ? s[5] : 0, t, seed + 7 * k));
  }
  a.y = poison_tensor(ys, t);
  a.dim = dim;
  return to_case(a);
}

bool concat_small_enough_for_simt(const TestShape& s) { return small_case(s, 2, 4, 1024); }

// index_select: {dim, a, b, c, K, index dtype (0 i32, 1 i64), layout of x}.
std::vector<std::string> index_select_shape_fields() {
  return {"dim", "a", "b", "c", "K", "index_dtype", "layout"};
}

std::vector<TestShape> index_select_test_shapes() {
  return {{0, 1, 1, 1, 1, 1, 0},     {0, 31, 3, 5, 40, 0, 0},  {1, 3, 32, 5, 17, 1, 1},
          {2, 4, 5, 33, 33, 0, 2},   {1, 2, 97, 3, 200, 1, 0}, {2, 3, 7, 97, 31, 1, 1},
          {0, 512, 4, 65, 700, 1, 1}};
}

TestCase make_index_select_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t dim = s[0];
  const Shape xs{s[1], s[2], s[3]};
  Shape ys = xs;
  ys[size_t(dim)] = s[4];
  IndexSelectArgs a;
  a.x = layout_tensor(xs, s[6], t, seed);
  a.index = random_indices({s[4]}, xs[size_t(dim)], index_dtype(s[5]), seed + 1);
  a.y = poison_tensor(ys, t);
  a.dim = dim;
  return to_case(a);
}

// index_add: {dim, a, b, c, K, index dtype}: y [a, b, c] (initial values kept), src with K at
// dim; K > size(dim) repeats indices.
std::vector<std::string> index_add_shape_fields() {
  return {"dim", "a", "b", "c", "K", "index_dtype"};
}

std::vector<TestShape> index_add_test_shapes() {
  return {{0, 1, 1, 1, 1, 0},       {0, 31, 3, 5, 40, 1},  {1, 3, 32, 5, 70, 0},
          {2, 4, 5, 33, 33, 1},     {1, 2, 97, 3, 200, 0}, {2, 3, 2, 7, 97, 1},
          {0, 300, 1, 600, 1000, 1}};
}

TestCase make_index_add_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t dim = s[0];
  const Shape ys{s[1], s[2], s[3]};
  Shape ss = ys;
  ss[size_t(dim)] = s[4];
  IndexAddArgs a;
  a.src = random_tensor(ss, t, seed);
  a.index = random_indices({s[4]}, ys[size_t(dim)], index_dtype(s[5]), seed + 1);
  a.y = random_tensor(ys, t, seed + 2);
  a.dim = dim;
  return to_case(a);
}

// gather / scatter_add: {dim, a, b, c, K, index dtype, shrink, layout of x (gather)}: the
// index is [a, b, c] with K at dim, every other dim reduced by `shrink` (at least 1).
std::vector<std::string> gather_shape_fields() {
  return {"dim", "a", "b", "c", "K", "index_dtype", "shrink", "layout"};
}

std::vector<TestShape> gather_test_shapes() {
  return {{0, 1, 1, 1, 1, 0, 0, 0},      {0, 31, 3, 5, 40, 1, 0, 0}, {1, 3, 32, 5, 33, 0, 1, 1},
          {2, 4, 5, 33, 31, 1, 0, 2},    {2, 3, 2, 97, 97, 0, 1, 0}, {1, 2, 97, 3, 5, 1, 1, 1},
          {1, 64, 256, 65, 300, 1, 1, 1}};
}

TestCase make_gather_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t dim = s[0];
  const Shape xs{s[1], s[2], s[3]};
  const Shape is = gather_index_shape(s);
  GatherArgs a;
  a.x = layout_tensor(xs, s[7], t, seed);
  a.index = random_indices(is, xs[size_t(dim)], index_dtype(s[5]), seed + 1);
  a.y = poison_tensor(is, t);
  a.dim = dim;
  return to_case(a);
}

std::vector<std::string> scatter_add_shape_fields() {
  return {"dim", "a", "b", "c", "K", "index_dtype", "shrink"};
}

std::vector<TestShape> scatter_add_test_shapes() {
  return {{0, 1, 1, 1, 1, 0, 0},      {0, 31, 3, 5, 40, 1, 0}, {1, 3, 32, 5, 33, 0, 1},
          {2, 4, 5, 33, 70, 1, 0},    {2, 3, 2, 97, 97, 0, 1}, {1, 2, 97, 3, 31, 1, 1},
          {1, 64, 256, 65, 300, 1, 1}};
}

TestCase make_scatter_add_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t dim = s[0];
  const Shape ys{s[1], s[2], s[3]};
  Shape is = gather_index_shape(s);
  Shape ss = is;
  for (auto& e : ss) e += s[6];  // src at least as large as index in every dim
  ScatterAddArgs a;
  a.src = random_tensor(ss, t, seed);
  a.index = random_indices(is, ys[size_t(dim)], index_dtype(s[5]), seed + 1);
  a.y = random_tensor(ys, t, seed + 2);
  a.dim = dim;
  return to_case(a);
}

// one_hot: {a, b, C, index dtype}.
std::vector<std::string> one_hot_shape_fields() { return {"a", "b", "C", "index_dtype"}; }

std::vector<TestShape> one_hot_test_shapes() {
  return {{1, 1, 1, 0},   {3, 31, 5, 1}, {2, 32, 32, 0},
          {1, 33, 33, 1}, {5, 7, 97, 0}, {64, 128, 301, 1}};
}

TestCase make_one_hot_case(const TestShape& s, DType t, uint64_t seed) {
  OneHotArgs a;
  a.indices = random_indices({s[0], s[1]}, s[2], index_dtype(s[3]), seed);
  a.y = poison_tensor({s[0], s[1], s[2]}, t);
  return to_case(a);
}

// pad / pad_bwd: {a, b, c, layout of the input, pairs, p0, ..., p5}: the input is [a, b, c];
// pads (p0, p1) for dim 2, (p2, p3) for dim 1, (p4, p5) for dim 0, the first `pairs` of them
// given (the rest must be 0).
std::vector<std::string> pad_shape_fields() {
  return {"a", "b", "c", "layout", "pairs", "p0", "p1", "p2", "p3", "p4", "p5"};
}

std::vector<TestShape> pad_test_shapes() {
  return {{1, 1, 1, 0, 1, 1, 1, 0, 0, 0, 0},    {3, 5, 31, 0, 1, 2, 0, 0, 0, 0, 0},
          {2, 32, 33, 1, 2, 1, 2, 3, 0, 0, 0},  {4, 33, 5, 2, 3, 0, 1, -1, 2, 1, 1},
          {2, 3, 97, 0, 2, -3, 5, 2, -1, 0, 0}, {3, 7, 5, 1, 2, -2, -2, 0, -6, 0, 0},
          {8, 130, 257, 0, 2, 3, 4, 5, 6, 0, 0}};
}

TestCase make_pad_case(const TestShape& s, DType t, uint64_t seed) {
  PadArgs a;
  a.x = layout_tensor({s[0], s[1], s[2]}, s[3], t, seed);
  a.y = poison_tensor(padded_shape(s), t);
  a.pads = case_pads(s);
  a.value = 1.5;
  return to_case(a);
}

TestCase make_pad_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  PadBwdArgs a;
  a.dy = layout_tensor(padded_shape(s), s[3], t, seed);
  a.dx = poison_tensor({s[0], s[1], s[2]}, t);
  a.pads = case_pads(s);
  return to_case(a);
}

// 16-bit accumulations round at every addition (cpu.omp keeps cpu.ref's order in the case's
// dtype; CUDA atomics add in any order) while the reference adds in f32.
Tolerance accumulate_tolerance(DType t, const TestShape&) {
  if (t == DType::f16) return {1e-2, 1e-2};
  if (t == DType::bf16) return {6e-2, 3e-2};
  return default_tolerance(t);
}

bool abc_small_enough_for_simt(const TestShape& s) { return small_case(s, 1, 3, kSimtLimit); }
bool leading_small_enough_for_simt(const TestShape& s) { return small_case(s, 0, 2, kSimtLimit); }

}  // namespace aim::kernels::index_cpu
