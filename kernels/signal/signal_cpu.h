// What signal_cpu.cpp (the CPU variants and the registration) takes from signal_cases.cpp (the
// test cases). Internal to kernels/signal.
#pragma once
#include <string>
#include <vector>

#include "kernels/registry.h"
#include "kernels/signal/signal.h"

namespace aim::kernels::signal_cpu {

std::vector<std::string> frame_shape_fields();
std::vector<TestShape> frame_shapes();
TestCase make_frame_case(const TestShape& s, DType t, uint64_t seed);

std::vector<std::string> rfft_shape_fields();
std::vector<TestShape> rfft_shapes();
TestCase make_rfft_case(const TestShape& s, DType t, uint64_t seed);
Tolerance rfft_tolerance(DType t, const TestShape& s);

std::vector<std::string> power_shape_fields();
std::vector<TestShape> power_shapes();
TestCase make_power_case(const TestShape& s, DType t, uint64_t seed);

std::vector<std::string> mel_shape_fields();
std::vector<TestShape> mel_shapes();
TestCase make_mel_case(const TestShape& s, DType t, uint64_t seed);

std::vector<std::string> dct_shape_fields();
std::vector<TestShape> dct_shapes();
TestCase make_dct_case(const TestShape& s, DType t, uint64_t seed);

// Shapes the SIMT emulator runs (the others are skipped there).
bool frame_simt_small(const TestShape& s);
bool rfft_simt_small(const TestShape& s);
bool power_simt_small(const TestShape& s);
bool mel_simt_small(const TestShape& s);
bool dct_simt_small(const TestShape& s);

}  // namespace aim::kernels::signal_cpu
