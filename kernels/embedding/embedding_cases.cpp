// The test cases of embedding_fwd / embedding_bwd (embedding_cpu.h): shapes, case makers,
// tolerance.
#include "kernels/embedding/embedding_cpu.h"

namespace aim::kernels::embedding_cpu {
namespace {

DType index_dtype(int64_t code) { return code ? DType::i64 : DType::i32; }

}  // namespace

// Shapes: {N, V, C, index dtype (0: i32, 1: i64), padding_idx (-1: none), gap}. N >> V gives
// many duplicates (stresses the scatter-add). gap > 0: the backward's dout is a column slice of a
// [N, C + gap] tensor (rows spaced, as embedding_cat's gradient); the forward's out stays a fresh
// contiguous tensor here (the registry test's outputs are), its spaced rows are tested in
// tests/kernels/test_embedding.cpp.
std::vector<std::string> shape_fields() {
  return {"N", "V", "C", "index_dtype", "padding_idx", "gap"};
}

std::vector<TestShape> test_shapes() {
  return {{1, 1, 1, 1, -1, 0},         {31, 17, 31, 0, -1, 0},    {32, 5, 32, 1, 2, 0},
          {33, 40, 33, 1, 0, 0},       {97, 3, 97, 0, 1, 0},      {200, 7, 33, 1, 3, 5},
          {256, 1, 8, 0, -1, 0},       {64, 1000, 37, 1, 999, 0}, {4096, 50, 65, 0, 7, 64},
          {1031, 20011, 128, 1, 5, 0}, {300, 9, 64, 1, -1, 64}};
}

TestCase make_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  EmbeddingFwdArgs a;
  a.weight = random_tensor({s[1], s[2]}, t, seed, -1.0, 1.0);
  a.indices = random_indices({s[0]}, s[1], index_dtype(s[3]), seed + 1);
  a.out = poison_tensor({s[0], s[2]}, t);
  a.padding_idx = s[4];
  return to_case(a);
}

TestCase make_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  EmbeddingBwdArgs a;
  const int64_t gap = s[5], lead = gap / 2;  // dout's columns sit inside a wider tensor
  a.dout = random_tensor({s[0], s[2] + gap}, t, seed, -1.0, 1.0).slice(1, lead, lead + s[2]);
  a.indices = random_indices({s[0]}, s[1], index_dtype(s[3]), seed + 1);
  a.dweight = random_tensor({s[1], s[2]}, t, seed + 2, -1.0, 1.0);
  a.padding_idx = s[4];
  return to_case(a);
}

// dweight rows sum up to ~N/V gradients: 16-bit outputs get a wider absolute tolerance.
Tolerance bwd_tolerance(DType t, const TestShape&) {
  if (t == DType::f16) return {8e-3, 4e-3};
  if (t == DType::bf16) return {6e-2, 1.6e-2};
  return default_tolerance(t);
}

bool simt_small(const TestShape& s) { return s[0] * s[2] <= 8192 && s[1] * s[2] <= 65536; }

}  // namespace aim::kernels::embedding_cpu
