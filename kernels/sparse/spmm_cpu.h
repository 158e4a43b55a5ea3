// What the CPU sparse files share (spmm_cpu.cpp: cpu.ref, cpu.omp, the checks and the
// registration; spmm_cases.cpp: the test cases). Internal to kernels/sparse.
#pragma once
#include <string>
#include <vector>

#include "kernels/registry.h"
#include "kernels/sparse/spmm.h"
#include "kernels/testing.h"

namespace aim::kernels::spmm_cpu {

// One shape list for spmm and spmm_dvalues.
std::vector<std::string> shape_fields();
std::vector<TestShape> test_shapes();
TestCase make_spmm_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_dvalues_case(const TestShape& s, DType t, uint64_t seed);
Tolerance tolerance(DType t, const TestShape& s);
bool simt_small(const TestShape& s);

}  // namespace aim::kernels::spmm_cpu
