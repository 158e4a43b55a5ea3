// What boxes_cpu.cpp (the CPU variants and the registration) takes from boxes_cases.cpp (the test
// cases of box_iou and nms). Internal to kernels/boxes.
#pragma once
#include <string>
#include <vector>

#include "kernels/boxes/boxes.h"
#include "kernels/registry.h"

namespace aim::kernels::boxes_cpu {

std::vector<std::string> box_iou_shape_fields();
std::vector<TestShape> box_iou_shapes();
TestCase make_box_iou_case(const TestShape& s, DType t, uint64_t seed);
bool box_iou_simt_small(const TestShape& s);

std::vector<std::string> nms_shape_fields();
std::vector<TestShape> nms_shapes();
TestCase make_nms_case(const TestShape& s, DType t, uint64_t seed);
bool nms_simt_small(const TestShape& s);

std::vector<std::string> hard_negatives_shape_fields();
std::vector<TestShape> hard_negatives_shapes();
TestCase make_hard_negatives_case(const TestShape& s, DType t, uint64_t seed);
bool hard_negatives_simt_small(const TestShape& s);

// Every variant evaluates the same expressions in the boxes' dtype: results compare exactly.
Tolerance exact(DType t, const TestShape& s);

}  // namespace aim::kernels::boxes_cpu
