// What interpolate_cpu.cpp (the CPU variants and the registration) takes from
// interpolate_cases.cpp (the test cases). Internal to kernels/interpolate.
#pragma once
#include <string>
#include <vector>

#include "kernels/interpolate/interpolate.h"
#include "kernels/registry.h"

namespace aim::kernels::interpolate_cpu {

std::vector<std::string> interpolate_shape_fields();
std::vector<TestShape> interpolate_shapes();
bool interpolate_simt_small(const TestShape& s);
TestCase make_interpolate_fwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_interpolate_bwd_case(const TestShape& s, DType t, uint64_t seed);

}  // namespace aim::kernels::interpolate_cpu
