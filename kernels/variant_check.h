// Checking a variant against cpu.ref on one test case: the core of the registry-driven test
// (tests/kernels/test_variants.cpp) and of aim-bench's check-before-and-after-timing.
#pragma once
#include "kernels/registry.h"

namespace aim::kernels {

enum class CheckStatus { Pass, Fail, Unsupported };

struct CheckResult {
  CheckStatus status = CheckStatus::Pass;
  std::string message;  // the failure (output, index, got, expected) or why unsupported
};

// Device a variant of backend b runs on (CPU for CPU and SIMT variants).
Device device_for(Backend b);

// Moves a case's inputs to `d` preserving their views (offset, strides) and gives every output
// guard bytes on both sides. Floating tensors are cast to `float_dtype` unless it is nullopt-like
// (pass the case's own dtype to keep them).
TestCase transfer_case(const TestCase& c, Device d, bool cast_floats, DType float_dtype,
                       bool guard_outputs);

// Runs cpu.ref and `variant` on the case built from (shape, dtype, seed), compares every output
// within the op's tolerance and checks the guard bytes.
CheckResult check_variant(OpBase& op, const std::string& variant, Backend b, const TestShape& s,
                          DType dtype, uint64_t seed);

}  // namespace aim::kernels
