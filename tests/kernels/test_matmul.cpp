// matmul beyond the registry-driven comparison: the convention on a hand-computed example,
// that beta == 0 never reads c, and that bad arguments fail naming shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/matmul/matmul.h"
#include "kernels/registry.h"
#include "kernels/testing.h"

namespace aim::kernels {
namespace {

// The CPU variants that take f32 (cpu.widen is 16-bit only).
std::vector<std::string> cpu_variants() {
  std::vector<std::string> r;
  for (const VariantInfo& v : registry().find("matmul")->variant_infos())
    if (v.backend == Backend::CPU &&
        std::find(v.dtypes.begin(), v.dtypes.end(), DType::f32) != v.dtypes.end())
      r.push_back(v.name);
  return r;
}

// A [2,3] = [[1,2,3],[4,5,6]], B [3,2] = [[1,0],[0,1],[1,1]]: A B = [[4,5],[10,11]].
TEST(Matmul, HandComputedExampleEveryCpuVariant) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const std::string& v : cpu_variants()) {
    SCOPED_TRACE(v);
    for (bool trans : {false, true}) {
      MatmulArgs a;
      a.a = trans ? Tensor::from_vector<float>({1, 4, 2, 5, 3, 6}, {3, 2})
                  : Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
      a.b = trans ? Tensor::from_vector<float>({1, 0, 1, 0, 1, 1}, {2, 3})
                  : Tensor::from_vector<float>({1, 0, 0, 1, 1, 1}, {3, 2});
      a.trans_a = a.trans_b = trans;
      a.c = Tensor::full({2, 2}, nan);  // beta == 0: must not be read
      a.bias = Tensor::from_vector<float>({100, 200}, {2});
      a.alpha = 2;
      ScopedVariant sv("matmul", v);
      matmul(a);
      EXPECT_EQ(a.c.to_vector<float>(), (std::vector<float>{108, 210, 120, 222}));
      a.beta = 0.5f;  // c = 2 A B + 0.5 c + bias
      matmul(a);
      EXPECT_EQ(a.c.to_vector<float>(), (std::vector<float>{162, 315, 180, 333}));
    }
  }
}

TEST(Matmul, SharedOperandInABatch) {
  MatmulArgs a;
  a.a = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 1, 2});  // two 1x2 rows
  a.b = Tensor::from_vector<float>({1, 0, 0, 1}, {2, 2});     // shared identity
  a.c = Tensor::empty({2, 1, 2});
  for (const std::string& v : cpu_variants()) {
    ScopedVariant sv("matmul", v);
    matmul(a);
    EXPECT_EQ(a.c.to_vector<float>(), (std::vector<float>{1, 2, 3, 4})) << v;
  }
}

std::string error_of(const MatmulArgs& a) {
  try {
    matmul(a);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Matmul, BadArgumentsNameShapes) {
  MatmulArgs a;
  a.a = Tensor::zeros({4, 3});
  a.b = Tensor::zeros({5, 6});
  a.c = Tensor::zeros({4, 6});
  std::string e = error_of(a);
  EXPECT_NE(e.find("[matmul] shapes do not match"), std::string::npos) << e;
  EXPECT_NE(e.find("[5, 6]"), std::string::npos) << e;

  a.b = Tensor::zeros({6, 3}).transpose(0, 1);  // a [3,6] view, not contiguous
  e = error_of(a);
  EXPECT_NE(e.find("b must be contiguous"), std::string::npos) << e;
  EXPECT_NE(e.find("strides [1, 3]"), std::string::npos) << e;

  a.b = Tensor::zeros({3, 6});
  a.bias = Tensor::zeros({5});
  e = error_of(a);
  EXPECT_NE(e.find("bias must be a contiguous [N] = [6], got [5]"), std::string::npos) << e;

  a.bias = Tensor();
  a.b = Tensor::zeros({3, 6}, DType::f64);
  e = error_of(a);
  EXPECT_NE(e.find("share one dtype"), std::string::npos) << e;

  a.b = Tensor::zeros({2, 3, 6});  // batched b with a 2-D c
  e = error_of(a);
  EXPECT_NE(e.find("b must be 2-D"), std::string::npos) << e;
}

// A weight packed once (matmul_pack_b, what aim-infer keeps for large Linear weights): every CPU
// variant gives its own bits without it (cpu.avx512 reads the panels, the others read b); a
// packed tensor of the wrong size or on a batched b is refused naming the expected size.
TEST(Matmul, PackedWeightEveryCpuVariantSameBits) {
  MatmulArgs a;
  a.a = random_tensor({16, 2048}, DType::f32, 1);
  a.b = random_tensor({300, 2048}, DType::f32, 2);  // Linear's weight [N, K]
  a.trans_b = true;
  a.bias = random_tensor({300}, DType::f32, 3);
  a.c = Tensor::empty({16, 300});
  const bool reads = matmul_reads_packed_b(a.b, true, 16);
  const Tensor packed = matmul_pack_b(a.b, true);
  for (const std::string& v : cpu_variants()) {
    SCOPED_TRACE(v);
    ScopedVariant sv("matmul", v);
    a.b_packed = Tensor();
    matmul(a);
    const auto plain = a.c.to_vector<float>();
    a.b_packed = packed;
    matmul(a);
    EXPECT_EQ(a.c.to_vector<float>(), plain) << (reads ? "panels read" : "panels not read");
  }
  a.b_packed = Tensor::zeros({packed.numel() - 48});
  std::string e = error_of(a);
  EXPECT_NE(e.find("b_packed must be a contiguous f32 [" + std::to_string(packed.numel()) + "]"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("[300, 2048] transposed"), std::string::npos) << e;
}

}  // namespace
}  // namespace aim::kernels
