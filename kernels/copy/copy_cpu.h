// What the CPU copy files share (copy_cpu.cpp: cpu.ref, cpu.fast and the registration of copy
// and fill; copy_cases.cpp: the test cases). Internal to kernels/copy.
#pragma once
#include <string>
#include <vector>

#include "kernels/copy/copy.h"
#include "kernels/registry.h"
#include "kernels/testing.h"

namespace aim::kernels::copy_cpu {

// Test cases (copy_cases.cpp).
std::vector<std::string> copy_shape_fields();
std::vector<TestShape> copy_test_shapes();
TestCase make_copy_case(const TestShape& s, DType t, uint64_t seed);

std::vector<std::string> fill_shape_fields();
std::vector<TestShape> fill_test_shapes();
TestCase make_fill_case(const TestShape& s, DType t, uint64_t seed);

}  // namespace aim::kernels::copy_cpu
