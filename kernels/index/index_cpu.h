// What the CPU index files share (index_cpu.cpp: cpu.ref, cpu.omp, the checks and the
// registration; index_cases.cpp: the test cases). Internal to kernels/index.
#pragma once
#include <string>
#include <vector>

#include "kernels/index/index.h"
#include "kernels/registry.h"
#include "kernels/testing.h"

namespace aim::kernels::index_cpu {

// Test cases (index_cases.cpp).
std::vector<std::string> concat_shape_fields();
std::vector<TestShape> concat_test_shapes();
TestCase make_concat_case(const TestShape& s, DType t, uint64_t seed);
bool concat_small_enough_for_simt(const TestShape& s);

std::vector<std::string> index_select_shape_fields();
std::vector<TestShape> index_select_test_shapes();
TestCase make_index_select_case(const TestShape& s, DType t, uint64_t seed);

std::vector<std::string> index_add_shape_fields();
std::vector<TestShape> index_add_test_shapes();
TestCase make_index_add_case(const TestShape& s, DType t, uint64_t seed);

std::vector<std::string> gather_shape_fields();
std::vector<TestShape> gather_test_shapes();
TestCase make_gather_case(const TestShape& s, DType t, uint64_t seed);

std::vector<std::string> scatter_add_shape_fields();
std::vector<TestShape> scatter_add_test_shapes();
TestCase make_scatter_add_case(const TestShape& s, DType t, uint64_t seed);

std::vector<std::string> one_hot_shape_fields();
std::vector<TestShape> one_hot_test_shapes();
TestCase make_one_hot_case(const TestShape& s, DType t, uint64_t seed);

// pad and pad_bwd: one shape list for both.
std::vector<std::string> pad_shape_fields();
std::vector<TestShape> pad_test_shapes();
TestCase make_pad_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_pad_bwd_case(const TestShape& s, DType t, uint64_t seed);

// index_add and scatter_add.
Tolerance accumulate_tolerance(DType t, const TestShape& s);
// Under the emulator: index_select, index_add, gather, scatter_add (sizes a, b, c at s[1..3]);
// one_hot, pad, pad_bwd (sizes at s[0..2]).
bool abc_small_enough_for_simt(const TestShape& s);
bool leading_small_enough_for_simt(const TestShape& s);

}  // namespace aim::kernels::index_cpu
