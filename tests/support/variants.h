// The registry-driven check (kernels/variant_check.h) from an op's own test file: every variant
// this process can run, on shapes beside the ones the op registers.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/registry.h"
#include "kernels/variant_check.h"

namespace aim::testing {

// The variants of `op` this binary can run: CPU ones, and CUDA ones where a (possibly emulated)
// device exists.
inline std::vector<kernels::VariantInfo> runnable_variants(const std::string& op) {
  std::vector<kernels::VariantInfo> r;
  for (const kernels::VariantInfo& v : kernels::registry().find(op)->variant_infos())
    if (v.backend == kernels::Backend::CPU ||
        (v.backend == kernels::Backend::CUDA && cuda_device_count() > 0))
      r.push_back(v);
  return r;
}

// Every runnable variant but cpu.ref, every dtype it takes, on `shapes` (the op's shape fields)
// against cpu.ref, as tests/kernels/test_variants.cpp checks the registered shapes. Variants
// that do not take a case (supports() gives a reason) are skipped; at least one case must run.
inline void expect_variants_match_reference(const std::string& op,
                                            const std::vector<kernels::TestShape>& shapes,
                                            uint64_t seed) {
  kernels::OpBase& o = *kernels::registry().find(op);
  int ran = 0;
  for (const kernels::VariantInfo& v : runnable_variants(op)) {
    if (v.name == "cpu.ref") continue;
    for (DType t : v.dtypes)
      for (const kernels::TestShape& s : shapes) {
        SCOPED_TRACE(op + " " + v.name + " " + dtype_name(t) + " " + o.describe_shape(s));
        const kernels::CheckResult r = kernels::check_variant(o, v.name, v.backend, s, t, seed);
        if (r.status == kernels::CheckStatus::Unsupported) continue;
        EXPECT_EQ(r.status, kernels::CheckStatus::Pass) << r.message;
        ++ran;
      }
  }
  EXPECT_GT(ran, 0) << op << ": no variant ran";
}

}  // namespace aim::testing
