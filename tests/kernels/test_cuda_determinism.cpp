// Run-to-run determinism of the CUDA variants that --deterministic selects (docs/determinism.md):
// every deterministic alternative of a non-deterministic CUDA variant runs twice on each of its
// op's registered test shapes and must give the same bits. On the emulated CUDA device
// (AIM_CUDA_EMULATED) the second run uses the SIMT scheduler's reverse thread order (and the
// blocks go to the OpenMP team in whatever order its threads take them): the adversary an
// atomic variant fails, as the control test shows for index_add cuda.atomic. On a GPU: two
// plain runs. Built only where CUDA variants exist (AIM_CUDA, real or emulated).
#include <gtest/gtest.h>

#include "tensor/device.h"

#if defined(AIM_CUDA)
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/index/index.h"
#include "kernels/registry.h"
#include "kernels/variant_check.h"
#if defined(AIM_CUDA_EMULATED)
#include "kernels/simt/simt.h"
#endif

namespace aim::kernels {
namespace {

// Sets the emulator's thread order for a scope (nothing on a GPU).
class Order {
 public:
  explicit Order(bool reverse) {
#if defined(AIM_CUDA_EMULATED)
    saved_ = simt::schedule();
    simt::set_schedule(reverse ? simt::Schedule::Reverse : simt::Schedule::Forward);
#else
    (void)reverse;
#endif
  }
  ~Order() {
#if defined(AIM_CUDA_EMULATED)
    simt::set_schedule(saved_);
#endif
  }

 private:
#if defined(AIM_CUDA_EMULATED)
  simt::Schedule saved_;
#endif
};

// Runs `variant` on a copy of `base` on the GPU; the outputs back on the CPU. Empty when the
// variant does not take the case.
std::vector<Tensor> run_on_gpu(OpBase& op, const std::string& variant, const TestCase& base,
                               bool reverse) {
  TestCase c = transfer_case(base, cuda_device(0), false, DType::f32, false);
  const Order order(reverse);
  if (!op.run_case(variant, Backend::CUDA, c).empty()) return {};
  std::vector<Tensor> r;
  for (const NamedTensor& o : c.outputs)
    r.push_back(o.tensor.defined() ? o.tensor.to(kCPU) : o.tensor);
  return r;
}

// "" when every output is bit-identical, else the first difference.
std::string first_difference(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return "different output counts";
  for (size_t o = 0; o < a.size(); ++o) {
    if (!a[o].defined()) continue;
    const size_t n = size_t(a[o].nbytes()), e = size_t(dtype_size(a[o].dtype()));
    const auto* pa = static_cast<const unsigned char*>(a[o].raw_data());
    const auto* pb = static_cast<const unsigned char*>(b[o].raw_data());
    for (size_t i = 0; i < n; i += e)
      if (std::memcmp(pa + i, pb + i, e) != 0) {
        const std::vector<double> va = a[o].to_vector<double>(), vb = b[o].to_vector<double>();
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.17g then %.17g", va[i / e], vb[i / e]);
        return str("output ", o, " ", to_string(a[o].sizes()), " differs at flat index ", i / e,
                   ": ", buf);
      }
  }
  return "";
}

TEST(CudaDeterminism, AlternativesAreBitwiseReproducible) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  int cases = 0, alternatives = 0;
  for (const NondeterministicVariant& n : nondeterministic_variants()) {
    OpBase* op = registry().find(n.op);
    ASSERT_TRUE(op);
    bool on_cuda = false;
    for (const VariantInfo& i : op->variant_infos())
      on_cuda |= i.name == n.alternative && i.backend == Backend::CUDA;
    if (!on_cuda) continue;
    ++alternatives;
    uint64_t seed = 77;
    for (const TestShape& s : op->test_shapes) {
      SCOPED_TRACE(n.op + " " + n.alternative + " shape {" + shape_str(s) + "}");
      const TestCase base = op->make_case(s, DType::f32, seed++);
      const std::vector<Tensor> first = run_on_gpu(*op, n.alternative, base, false);
      if (first.empty()) continue;  // the variant does not take this shape
      EXPECT_EQ(first_difference(first, run_on_gpu(*op, n.alternative, base, true)), "");
      ++cases;
    }
  }
  // embedding_bwd, spmm, grad_sq_sum, lamb_stage1, index_add, scatter_add, roi_align_bwd,
  // roi_pool_bwd.
  EXPECT_EQ(alternatives, 8);
  EXPECT_GT(cases, 30);
}

// index_add of 255 ones and then 1e8 into one f32 element, in one block: in source order the
// ones add up to 255 first (1e8 + 255 rounds to 100000256); from the other end each 1 is lost
// against 1e8. cuda.sorted adds in source order, as cpu.ref does, whatever the thread order.
TEST(CudaDeterminism, IndexAddOrderMatters) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  std::vector<float> v(256, 1.0f);
  v.back() = 1e8f;
  IndexAddArgs a;
  a.src = Tensor::from_vector(v, {256});
  a.index = Tensor::zeros({256}, DType::i64);
  a.y = Tensor::zeros({1}, DType::f32);
  TestCase c = to_case(a);
  OpBase* op = registry().find("index_add");
  ASSERT_TRUE(op);
  TestCase ref = transfer_case(c, kCPU, false, DType::f32, false);
  ASSERT_EQ(op->run_case("cpu.ref", Backend::CPU, ref), "");
  EXPECT_EQ(ref.outputs[0].tensor.to_vector<float>()[0], 100000256.0f);
  for (const bool reverse : {false, true}) {
    const std::vector<Tensor> got = run_on_gpu(*op, "cuda.sorted", c, reverse);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].to_vector<float>()[0], 100000256.0f) << "reverse " << reverse;
  }
#if defined(AIM_CUDA_EMULATED)
  // The adversary is real: the atomic variant's sum follows the thread order.
  EXPECT_NE(first_difference(run_on_gpu(*op, "cuda.atomic", c, false),
                             run_on_gpu(*op, "cuda.atomic", c, true)),
            "");
#endif
}

}  // namespace
}  // namespace aim::kernels
#endif  // AIM_CUDA
