// The registry-driven kernel test: every op x every variant x every dtype it claims x the op's
// test shapes, against cpu.ref, with guard bytes around outputs. Adding a variant adds its tests.
// Built twice: aim_kernel_tests (CPU variants, and CUDA variants when a GPU is present) and,
// with AIM_TEST_SIMT, aim_simt_tests (own CUDA variants run by the CPU emulator).
// Ends with the coverage table: op, variant, dtypes, cases passed, and why anything was skipped.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "kernels/registry.h"
#include "kernels/variant_check.h"

namespace aim::kernels {
#ifdef AIM_TEST_SIMT
void register_simt_ops(Registry& r);
constexpr bool kSimtBuild = true;
#else
constexpr bool kSimtBuild = false;
#endif

namespace {

struct Coverage {
  std::string op, variant, backend, provider, dtypes;
  int passed = 0, failed = 0, unsupported = 0, skipped = 0;
  std::string skip_reason, unsupported_example;
};
std::vector<Coverage> g_coverage;

bool tested_here(Backend b) { return kSimtBuild ? b == Backend::SIMT : b != Backend::SIMT; }

std::string skip_reason(Backend b) {
  if (b == Backend::CUDA && cuda_device_count() == 0) return "no GPU: " + cuda_unavailable_reason();
  return "";
}

class VariantTest : public ::testing::Test {
 public:
  VariantTest(OpBase* op, VariantInfo v, size_t cov) : op_(op), v_(std::move(v)), cov_(cov) {}
  void TestBody() override {
    Coverage& c = g_coverage[cov_];
    if (std::string why = skip_reason(v_.backend); !why.empty()) {
      c.skip_reason = why;
      GTEST_SKIP() << why;
    }
    uint64_t seed = 1234;
    for (DType t : v_.dtypes) {
      for (const TestShape& s : op_->test_shapes) {
        if (v_.backend == Backend::SIMT && op_->small_enough_for_simt &&
            !op_->small_enough_for_simt(s)) {
          ++c.skipped;
          c.skip_reason = "shapes too large for the emulator skipped";
          continue;
        }
        SCOPED_TRACE(op_->name() + " " + v_.name + " " + dtype_name(t) + " shape {" + shape_str(s) +
                     "} " + op_->describe_shape(s));
        CheckResult r;
        try {
          r = check_variant(*op_, v_.name, v_.backend, s, t, seed++);
        } catch (const std::exception& e) {
          r = {CheckStatus::Fail, std::string("threw: ") + e.what()};
        }
        if (r.status == CheckStatus::Pass) {
          ++c.passed;
        } else if (r.status == CheckStatus::Unsupported) {
          ++c.unsupported;
          if (c.unsupported_example.empty()) c.unsupported_example = r.message;
        } else {
          ++c.failed;
          ADD_FAILURE() << r.message;
        }
      }
    }
    EXPECT_GT(c.passed, 0) << op_->name() << " " << v_.name
                           << " ran on none of its test shapes: registered but untested ("
                           << c.unsupported_example << ")";
  }

 private:
  OpBase* op_;
  VariantInfo v_;
  size_t cov_;
};

void print_coverage() {
  std::printf("\n%-22s %-22s %-7s %-7s %-28s %6s %6s %6s %6s  %s\n", "op", "variant", "backend",
              "by", "dtypes", "pass", "fail", "unsup", "skip", "note");
  for (const Coverage& c : g_coverage) {
    std::string note = c.skip_reason;
    if (c.variant == "cpu.ref")
      note = "the oracle (gradcheck, parity)";
    else if (c.unsupported && note.empty())
      note = "unsupported cases, e.g.: " + c.unsupported_example;
    std::printf("%-22s %-22s %-7s %-7s %-28s %6d %6d %6d %6d  %s\n", c.op.c_str(),
                c.variant.c_str(), c.backend.c_str(), c.provider.c_str(), c.dtypes.c_str(),
                c.passed, c.failed, c.unsupported, c.skipped, note.substr(0, 110).c_str());
  }
}

}  // namespace
}  // namespace aim::kernels

int main(int argc, char** argv) {
  using namespace aim::kernels;
  ::testing::InitGoogleTest(&argc, argv);
  Registry& r = registry();
#ifdef AIM_TEST_SIMT
  register_simt_ops(r);
#endif
  int variants = 0, tested = 0;
  for (OpBase* op : r.ops()) {
    for (const VariantInfo& v : op->variant_infos()) {
      ++variants;
      Coverage c;
      c.op = op->name();
      c.variant = v.name;
      c.backend = backend_name(v.backend);
      c.provider = provider_name(v.provider);
      for (aim::DType t : v.dtypes)
        c.dtypes += std::string(c.dtypes.empty() ? "" : ",") + aim::dtype_name(t);
      if (!tested_here(v.backend)) continue;
      g_coverage.push_back(c);
      if (v.name == "cpu.ref") continue;  // the oracle itself
      ++tested;
      const size_t idx = g_coverage.size() - 1;
      const std::string suite = std::string(kSimtBuild ? "Simt_" : "Variant_") + op->name();
      std::string test = v.name;
      for (char& ch : test)
        if (ch == '.') ch = '_';
      ::testing::RegisterTest(
          suite.c_str(), test.c_str(), nullptr, nullptr, __FILE__, __LINE__,
          [op, v, idx]() -> ::testing::Test* { return new VariantTest(op, v, idx); });
    }
  }
  const int rc = RUN_ALL_TESTS();
  print_coverage();
  std::printf("\n%d variants registered, %d tested by this binary%s\n", variants, tested,
              kSimtBuild ? " (SIMT emulator)" : "");
  return rc;
}
