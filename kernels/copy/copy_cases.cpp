// The test cases of copy and fill (copy_cpu.h): shapes and case makers.
#include "kernels/copy/copy_cpu.h"

namespace aim::kernels::copy_cpu {

// Test shapes: {dst dtype (DType code), layout, d0, d1, d2}. layout 0: contiguous; 1: src
// transposed (dims 0 and 2); 2: src sliced with step 2 in the middle dim; 3: src broadcast along
// dim 1.
std::vector<std::string> copy_shape_fields() { return {"dst_dtype", "layout", "d0", "d1", "d2"}; }

std::vector<TestShape> copy_test_shapes() {
  std::vector<TestShape> shapes;
  for (DType dst : {DType::f32, DType::f16, DType::bf16, DType::i64, DType::boolean, DType::u8})
    for (int layout = 0; layout < 4; ++layout) {
      shapes.push_back({int64_t(dst), layout, 3, 5, 7});
      shapes.push_back({int64_t(dst), layout, 1, 33, 31});
    }
  shapes.push_back({int64_t(DType::f32), 0, 64, 129, 65});
  shapes.push_back({int64_t(DType::f32), 1, 17, 64, 67});
  return shapes;
}

TestCase make_copy_case(const TestShape& s, DType t, uint64_t seed) {
  const DType dst_t = DType(s[0]);
  const int layout = int(s[1]);
  const Shape shape{s[2], s[3], s[4]};
  CopyArgs a;
  if (layout == 0) {
    a.src = random_tensor(shape, t, seed, 0, 120);
  } else if (layout == 1) {
    a.src = random_tensor({s[4], s[3], s[2]}, t, seed, 0, 120).transpose(0, 2);
  } else if (layout == 2) {
    a.src = random_tensor({s[2], 2 * s[3], s[4]}, t, seed, 0, 120).slice(1, 0, 2 * s[3], 2);
  } else {
    a.src = random_tensor({s[2], 1, s[4]}, t, seed, 0, 120).expand(shape);
  }
  a.dst = poison_tensor(shape, dst_t);
  return to_case(a);
}

// Test shapes: {d0, d1}: dst [d0, d1].
std::vector<std::string> fill_shape_fields() { return {"d0", "d1"}; }

std::vector<TestShape> fill_test_shapes() { return {{1, 1}, {3, 31}, {17, 33}, {257, 129}}; }

TestCase make_fill_case(const TestShape& s, DType t, uint64_t) {
  FillArgs a;
  a.dst = poison_tensor({s[0], s[1]}, t);
  a.value = 3.0;
  return to_case(a);
}

}  // namespace aim::kernels::copy_cpu
