// What pool2d_cpu.cpp (the CPU variants and the registration) and pool2d_cases.cpp (the test
// cases of the six pooling ops) share. Internal to kernels/pool.
#pragma once
#include <string>
#include <vector>

#include "kernels/pool/pool2d.h"
#include "kernels/registry.h"

namespace aim::kernels::pool2d_cpu {

// cpu.ref's max pooling forward (pool2d_cpu.cpp): maxpool2d_bwd's test cases take their indices
// from it.
void maxpool2d_fwd_cpu_ref(const MaxPool2dFwdArgs& a);

// Test cases (pool2d_cases.cpp). Max and average pooling share the window shapes; `flag` names
// their last field, which each op reads its own way.
std::vector<std::string> pool2d_window_shape_fields(const std::string& flag);
std::vector<TestShape> pool2d_window_test_shapes();
std::vector<TestShape> maxpool2d_fwd_test_shapes();  // the window shapes, one without indices
bool pool2d_window_simt_small(const TestShape& s);
std::vector<std::string> adaptive_avgpool2d_shape_fields();
std::vector<TestShape> adaptive_avgpool2d_test_shapes();
bool adaptive_avgpool2d_simt_small(const TestShape& s);

TestCase make_maxpool2d_fwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_maxpool2d_bwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_avgpool2d_fwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_avgpool2d_bwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_adaptive_avgpool2d_fwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_adaptive_avgpool2d_bwd_case(const TestShape& s, DType t, uint64_t seed);

}  // namespace aim::kernels::pool2d_cpu
