// What the CPU quant files share (quant_cpu.cpp: cpu.ref, cpu.parallel and the checks;
// quant_cpu_vnni.cpp: cpu.vnni; quant_cases.cpp: the test cases). Internal to kernels/quant.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/quant/quant.h"
#include "kernels/registry.h"
#include "kernels/testing.h"

namespace aim::kernels::quant_cpu {

// Sizes of one quantised convolution.
struct QDims {
  int64_t N, C, H, W, K, R, S, P, Q, G, Cg, Kg;
};

// Validates a qconv2d call (throws "[qconv2d] ..."); its sizes.
QDims qconv_dims(const QConv2dArgs& a);

// cpu.vnni (quant_cpu_vnni.cpp): AVX-512 VNNI int8 GEMM for qlinear and qconv2d.
bool cpu_has_vnni();
std::string vnni_supports_cpu();  // "" when this CPU has the instructions
void qlinear_cpu_vnni(const QLinearArgs& a);
void qconv2d_cpu_vnni(const QConv2dArgs& a);

// Test cases (quant_cases.cpp): shapes and their fields, case makers, tolerance, the emulator's
// budget.
std::vector<std::string> quantize_shape_fields();  // quantize, dequantize, quantize_per_channel
std::vector<std::string> qlinear_shape_fields();
std::vector<std::string> qconv2d_shape_fields();
std::vector<TestShape> quantize_shapes();  // quantize and dequantize
std::vector<TestShape> quantize_per_channel_shapes();
std::vector<TestShape> qlinear_shapes();
std::vector<TestShape> qconv2d_shapes();
bool qlinear_simt_small(const TestShape& s);
bool qconv2d_simt_small(const TestShape& s);
TestCase make_quantize_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_dequantize_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_quantize_per_channel_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_qlinear_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_qconv2d_case(const TestShape& s, DType t, uint64_t seed);
Tolerance quant_tolerance(DType t, const TestShape& s);

}  // namespace aim::kernels::quant_cpu
