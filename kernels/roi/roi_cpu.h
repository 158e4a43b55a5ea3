// What roi_cpu.cpp (the CPU variants and the registration) and roi_cases.cpp (the test cases of
// the four RoI ops) share; tests/kernels/test_roi.cpp takes the RoI mix. Internal to kernels/roi.
#pragma once
#include <string>
#include <vector>

#include "kernels/registry.h"
#include "kernels/roi/roi.h"

namespace aim::kernels::roi_cpu {

// cpu.ref's roi_pool forward: roi_pool_bwd's test cases take their argmax from it.
void roi_pool_fwd_cpu_ref(const RoiPoolFwdArgs& a);

// RoIs [K, 5] for an N-image batch of H x W feature maps at spatial_scale 1 / scale_inv, in the
// image coordinates the ops take: a mix of RoIs inside the map, partly and entirely outside it,
// empty (zero width or height), inverted (x2 < x1) and smaller than a cell (roi_cases.cpp).
Tensor make_rois(int64_t N, int64_t H, int64_t W, int64_t K, int64_t scale_inv, DType t,
                 uint64_t seed);

std::vector<std::string> roi_align_shape_fields();
std::vector<TestShape> roi_align_shapes();
bool roi_align_simt_small(const TestShape& s);
TestCase make_roi_align_fwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_roi_align_bwd_case(const TestShape& s, DType t, uint64_t seed);

std::vector<std::string> roi_pool_shape_fields();
std::vector<TestShape> roi_pool_shapes();
bool roi_pool_simt_small(const TestShape& s);
TestCase make_roi_pool_fwd_case(const TestShape& s, DType t, uint64_t seed);
TestCase make_roi_pool_bwd_case(const TestShape& s, DType t, uint64_t seed);

}  // namespace aim::kernels::roi_cpu
