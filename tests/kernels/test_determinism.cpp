// Thread-count invariance of the CPU kernels (docs/determinism.md): a CPU variant's outputs are
// bit-identical at 1, 2 and 3 OpenMP threads. The sweep runs every CPU variant on its registered
// test shapes; the targeted tests use shapes large enough to cross the kernels' parallel
// thresholds, where a split that followed the team size used to change the sums.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/conv/conv2d.h"
#include "kernels/math_mode.h"
#include "kernels/registry.h"
#include "kernels/variant_check.h"

namespace aim::kernels {
namespace {

class Threads {
 public:
  explicit Threads(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~Threads() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

// Runs `variant` on the same case at each thread count; "" when every output is bit-identical to
// the first run's, else which output differs where. `unsupported` is set when the variant does
// not take the case.
std::string thread_variance(OpBase& op, const std::string& variant, const TestCase& base,
                            const std::vector<int>& threads, bool* unsupported = nullptr) {
  std::vector<TestCase> runs;
  for (int n : threads) {
    TestCase c = transfer_case(base, kCPU, false, DType::f32, false);
    const Threads t(n);
    const std::string why = op.run_case(variant, Backend::CPU, c);
    if (!why.empty()) {
      if (unsupported) *unsupported = true;
      return "";
    }
    runs.push_back(std::move(c));
  }
  for (size_t r = 1; r < runs.size(); ++r)
    for (size_t o = 0; o < runs[0].outputs.size(); ++o) {
      const Tensor& a = runs[0].outputs[o].tensor;
      const Tensor& b = runs[r].outputs[o].tensor;
      if (!a.defined()) continue;
      const size_t n = size_t(a.nbytes()), e = size_t(dtype_size(a.dtype()));
      const auto* pa = static_cast<const unsigned char*>(a.raw_data());
      const auto* pb = static_cast<const unsigned char*>(b.raw_data());
      for (size_t i = 0; i < n; i += e)
        if (std::memcmp(pa + i, pb + i, e) != 0) {
          const std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
          return str("output '", runs[0].outputs[o].name, "' ", to_string(a.sizes()),
                     " differs at flat index ", i / e, ": ", va[i / e], " at ", threads[0],
                     " threads, ", vb[i / e], " at ", threads[r]);
        }
    }
  return "";
}

std::string thread_variance(const std::string& op_name, const std::string& variant,
                            const TestShape& s, DType t = DType::f32, uint64_t seed = 99) {
  OpBase* op = registry().find(op_name);
  AIM_CHECK(op, "no op ", op_name);
  bool unsupported = false;
  const std::string d =
      thread_variance(*op, variant, op->make_case(s, t, seed), {1, 2, 3}, &unsupported);
  AIM_CHECK(!unsupported, op_name, " ", variant, " does not take shape {", shape_str(s), "}");
  return d;
}

// Every CPU variant on every registered test shape and dtype. Most shapes are below the parallel
// thresholds, so this mostly guards against per-thread state (scratch reuse, thread-indexed
// partials); the targeted tests below cross the thresholds.
TEST(ThreadInvariance, EveryCpuVariantOnItsTestShapes) {
  int cases = 0;
  for (OpBase* op : registry().ops())
    for (const VariantInfo& v : op->variant_infos()) {
      if (v.backend != Backend::CPU) continue;
      // Registered as depending on the team size: --deterministic replaces it (tested below).
      if (op->nondeterministic().count(v.name)) continue;
      // One dtype per variant (f32 where it takes it): the splits do not depend on the dtype,
      // and the sweep stays within seconds.
      uint64_t seed = 7;
      const bool has_f32 =
          std::find(v.dtypes.begin(), v.dtypes.end(), DType::f32) != v.dtypes.end();
      for (DType t : {has_f32 ? DType::f32 : v.dtypes.front()})
        for (const TestShape& s : op->test_shapes) {
          bool unsupported = false;
          const std::string d =
              thread_variance(*op, v.name, op->make_case(s, t, seed++), {1, 3}, &unsupported);
          if (unsupported) continue;
          ++cases;
          EXPECT_EQ(d, "") << op->name() << " " << v.name << " " << dtype_name(t) << " {"
                           << shape_str(s) << "} " << op->describe_shape(s);
        }
    }
  EXPECT_GT(cases, 100);
}

// reduce cpu.omp: a column sum over many rows ([B, C] -> [C], bias gradients) and a row sum of
// one long row were cut into chunks by the team size (4 x threads tasks).
TEST(ThreadInvariance, ReduceSplitsFollowTheShapeOnly) {
  for (const TestShape& s : std::vector<TestShape>{
           {0, 2, 1, 6000, 48}, {0, 2, 3, 2000, 7}, {0, 0, 1, 1, 200000}, {2, 1, 4, 9000, 3}})
    EXPECT_EQ(thread_variance("reduce", "cpu.omp", s), "") << shape_str(s);
}

// attention_bwd cpu.flash: with fewer heads than threads the key blocks of a head were split by
// the team size, and dq summed over the splits.
TEST(ThreadInvariance, FlashAttentionBackwardSplitFollowsTheShapeOnly) {
  // 10 and 18 key blocks of 64: 2 and 4 splits per head whatever the team (>= 4 blocks each).
  for (const TestShape& s :
       std::vector<TestShape>{{1, 1, 100, 600, 64, 0, 0, 0}, {1, 2, 70, 1100, 32, 1, 1, 0}})
    EXPECT_EQ(thread_variance("attention_bwd", "cpu.flash", s), "") << shape_str(s);
}

// conv2d_bwd_filter: the *_ordered variants (--deterministic) give the same bits at any team
// size, on shapes where the default variants split the images over the threads.
TEST(ThreadInvariance, OrderedConvFilterGradients) {
  const std::vector<TestShape> shapes = {
      {8, 16, 8, 8, 16, 3, 3, 1, 1, 1, 1, 1},   // 3x3, small images grouped: winograd
      {6, 8, 12, 12, 16, 1, 1, 1, 0, 1, 1, 1},  // 1x1 pointwise
      {4, 3, 32, 32, 8, 7, 7, 2, 3, 1, 1, 1},   // the stem
      {16, 16, 4, 4, 32, 3, 3, 2, 1, 1, 1, 0},  // stride 2, tiny images: many per GEMM
      {8, 16, 9, 9, 16, 5, 5, 1, 2, 1, 1, 1}};  // 5x5, images grouped: winograd_5x5
  int split = 0;  // shapes where the default variant's bits do follow the team size
  for (const TestShape& s : shapes) {
    split += !thread_variance("conv2d_bwd_filter", "cpu.im2col", s).empty();
    EXPECT_EQ(thread_variance("conv2d_bwd_filter", "cpu.im2col_ordered", s), "") << shape_str(s);
    if (s[5] == 3 && s[7] == 1 && s[9] == 1) {
      for (const char* v : {"cpu.winograd_ordered", "cpu.winograd4_ordered"}) {
        EXPECT_EQ(thread_variance("conv2d_bwd_filter", v, s), "") << v << " " << shape_str(s);
      }
    }
    if (s[5] == 5) {
      EXPECT_EQ(thread_variance("conv2d_bwd_filter", "cpu.winograd_5x5_ordered", s), "")
          << shape_str(s);
    }
    EXPECT_EQ(thread_variance("conv2d_bwd_filter", "cpu.widen_ordered", s, DType::bf16), "")
        << shape_str(s);
  }
  EXPECT_GT(split, 0) << "no shape crosses the threads split: the test would prove nothing";
}

// The forward and input-gradient convolutions group images by the team size too, but each
// output element is one GEMM dot product whatever the grouping.
TEST(ThreadInvariance, ConvForwardAndDataGradient) {
  const std::vector<TestShape> shapes = {{8, 16, 8, 8, 16, 3, 3, 1, 1, 1, 1, 1},
                                         {6, 8, 12, 12, 16, 1, 1, 1, 0, 1, 1, 1},
                                         {4, 3, 32, 32, 8, 7, 7, 2, 3, 1, 1, 1},
                                         {16, 16, 4, 4, 32, 3, 3, 2, 1, 1, 1, 0},
                                         {16, 32, 2, 2, 32, 3, 3, 1, 1, 1, 1, 1},
                                         // SSD's fc6: 19 x 19, dilation 6, one image per
                                         // thread at 2 threads, two per block at one
                                         {2, 64, 19, 19, 32, 3, 3, 1, 6, 6, 1, 1},
                                         {8, 16, 9, 9, 16, 5, 5, 1, 2, 1, 1, 1}};
  for (const char* op : {"conv2d_fwd", "conv2d_bwd_data"})
    for (const TestShape& s : shapes) {
      EXPECT_EQ(thread_variance(op, "cpu.im2col", s), "") << op << " " << shape_str(s);
      if (s[5] == 3 && s[7] == 1 && s[9] == 1) {
        for (const char* v : {"cpu.winograd", "cpu.winograd4"}) {
          EXPECT_EQ(thread_variance(op, v, s), "") << op << " " << v << " " << shape_str(s);
        }
      }
      if (s[5] == 5) {
        EXPECT_EQ(thread_variance(op, "cpu.winograd_5x5", s), "") << op << " " << shape_str(s);
      }
    }
}

// Every variant registered as not deterministic names an alternative that exists on the same
// backend, or none (CUDA ops without a deterministic kernel yet: --deterministic warns).
TEST(ThreadInvariance, NondeterministicVariantsNameTheirAlternative) {
  int cpu = 0;
  for (const NondeterministicVariant& n : nondeterministic_variants()) {
    OpBase* op = registry().find(n.op);
    ASSERT_TRUE(op);
    const std::vector<VariantInfo> infos = op->variant_infos();
    const VariantInfo* v = nullptr;
    const VariantInfo* alt = nullptr;
    for (const VariantInfo& i : infos) {
      if (i.name == n.variant) v = &i;
      if (i.name == n.alternative) alt = &i;
    }
    ASSERT_TRUE(v) << n.op << " " << n.variant << " is not registered";
    EXPECT_FALSE(n.why.empty()) << n.op << " " << n.variant;
    if (v->backend == Backend::CPU) {
      ++cpu;
      ASSERT_TRUE(alt) << n.op << " " << n.variant << ": a CPU variant needs an alternative";
      EXPECT_EQ(alt->backend, v->backend);
      EXPECT_EQ(alt->dtypes, v->dtypes);
    } else if (!n.alternative.empty()) {
      ASSERT_TRUE(alt) << n.op << " " << n.alternative << " is not registered";
    }
  }
  // conv2d_bwd_filter cpu.im2col, cpu.widen, cpu.winograd, cpu.winograd4, cpu.winograd_5x5
  EXPECT_EQ(cpu, 5);
}

// The own CUDA variants registered as not deterministic, with their alternatives (docs/
// determinism.md lists the same): each has a deterministic alternative. A new one without
// (alternative "") would make --deterministic warn; it belongs in that table too. Registered as
// CUDA (nvcc, emulated device) or SIMT variants.
TEST(ThreadInvariance, CudaVariantsAndTheirAlternatives) {
  std::vector<std::string> got;
  for (const NondeterministicVariant& n : nondeterministic_variants()) {
    OpBase* op = registry().find(n.op);
    ASSERT_TRUE(op);
    bool cpu = false;
    for (const VariantInfo& i : op->variant_infos())
      if (i.name == n.variant) cpu = i.backend == Backend::CPU;
    if (!cpu) got.push_back(n.op + " " + n.variant + " -> " + n.alternative);
  }
  if (got.empty()) GTEST_SKIP() << "no CUDA or SIMT variants in this build";
  std::sort(got.begin(), got.end());
  const std::vector<std::string> want = {
      "embedding_bwd cuda.atomic -> cuda.sorted", "grad_sq_sum cuda.block_atomic -> cuda.two_pass",
      "index_add cuda.atomic -> cuda.sorted",     "lamb_stage1 cuda.fused -> cuda.two_pass",
      "roi_align_bwd cuda.atomic -> cuda.gather", "roi_pool_bwd cuda.atomic -> cuda.sorted",
      "scatter_add cuda.atomic -> cuda.sorted",   "spmm cuda.merge -> cuda.warp_row"};
  EXPECT_EQ(got, want);
}

// Under --deterministic the selection runs the alternative, and an explicit --kernels choice of a
// non-deterministic variant is an error naming the alternative.
TEST(ThreadInvariance, DeterministicModeSelectsTheOrderedVariant) {
  auto& op = registry().op<Conv2dBwdFilterArgs>("conv2d_bwd_filter");
  const TestCase c = op.make_case({2, 4, 6, 6, 4, 1, 1, 1, 0, 1, 1, 1}, DType::f32, 3);
  Conv2dBwdFilterArgs a = bind_case<Conv2dBwdFilterArgs>(
      transfer_case(c, kCPU, false, DType::f32, false), "conv2d_bwd_filter");
  EXPECT_EQ(op.select(a).name, "cpu.im2col");
  set_deterministic(true);
  EXPECT_EQ(op.select(a).name, "cpu.im2col_ordered");
  set_kernel_selection("conv2d_bwd_filter=cpu.im2col", false);
  try {
    op.select(a);
    ADD_FAILURE() << "an explicit non-deterministic choice was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cpu.im2col_ordered"), std::string::npos) << e.what();
  }
  set_kernel_selection("", false);
  set_deterministic(false);
  EXPECT_EQ(op.select(a).name, "cpu.im2col");
}

}  // namespace
}  // namespace aim::kernels
