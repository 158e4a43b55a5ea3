// Caffe SSD's PriorBox (models/detection/caffe_priors.h) on hand-computed boxes: the order of the
// boxes at a cell, the int truncation of the sizes, steps and offsets, clip, flip, the two
// 321 x 321 configurations of ssd_resnet18 and dssd, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "models/detection/caffe_priors.h"

namespace aim::models::detection {
namespace {

// One box (x1, y1, x2, y2) relative to a square image of side S, from centre and size in pixels.
std::vector<double> box(double cx, double cy, double w, double h, double S) {
  return {(cx - w / 2) / S, (cy - h / 2) / S, (cx + w / 2) / S, (cy + h / 2) / S};
}

void expect_box(const Tensor& t, int64_t i, const std::vector<double>& want,
                const std::string& what) {
  const float* p = t.data<float>() + i * 4;
  for (int j = 0; j < 4; ++j)
    EXPECT_NEAR(p[j], want[size_t(j)], 1e-6 * (1 + std::fabs(want[size_t(j)])))
        << what << " box " << i << " coordinate " << j;
}

TEST(CaffePriors, CellOrderSizesAndOffsets) {
  const std::vector<CaffePriorBoxSpec> layers = ssd_resnet18_321_prior_layers();
  ASSERT_EQ(layers.size(), 4u);
  EXPECT_NEAR(layers[2].min_sizes[0], 182.97, 1e-9);
  EXPECT_NEAR(layers[3].max_sizes[0], 420.51, 1e-9);
  for (const auto& l : layers) EXPECT_EQ(caffe_priors_per_cell(l), 8);
  const Tensor p = caffe_prior_boxes(layers, {{40, 40}, {20, 20}, {10, 10}, {5, 5}}, 321, 321);
  ASSERT_EQ(p.sizes(), Shape({(1600 + 400 + 100 + 25) * 8, 4}));
  // Layer 0, cell (0, 0): centre (0 + 2.5 / 8) * 8 = 2.5; min size int(32.1) = 32, max int(64.2)
  // = 64; then ratios 1.6, 1 / 1.6, 2, 1 / 2, 3, 1 / 3.
  const double c = 2.5, m = 32;
  expect_box(p, 0, box(c, c, m, m, 321), "square min");
  expect_box(p, 1, box(c, c, std::sqrt(32.0 * 64), std::sqrt(32.0 * 64), 321), "square max");
  const double ratios[6] = {1.6, 1 / 1.6, 2, 0.5, 3, 1 / 3.0};
  for (int r = 0; r < 6; ++r)
    expect_box(p, 2 + r, box(c, c, m * std::sqrt(ratios[r]), m / std::sqrt(ratios[r]), 321),
               "ratio " + std::to_string(ratios[r]));
  // Layer 0, cell (row 1, column 2): centres move by the step 8 (x first: cells are row-major).
  expect_box(p, (1 * 40 + 2) * 8, box(2.5 + 16, 2.5 + 8, m, m, 321), "cell (1, 2)");
  // Layer 2 (10 x 10, step 32, start 10.5), cell (0, 0): min int(182.97) = 182.
  const int64_t l2 = (1600 + 400) * 8;
  expect_box(p, l2, box(10.5, 10.5, 182, 182, 321), "layer 2 first");
  expect_box(p, l2 + 1, box(10.5, 10.5, std::sqrt(182.0 * 301), std::sqrt(182.0 * 301), 321),
             "layer 2 max");
  // Layer 3 (5 x 5, step 64, start 26.5): its last cell is centred at 26.5 + 4 * 64 = 282.5.
  expect_box(p, p.size(0) - 8, box(282.5, 282.5, 301, 301, 321), "layer 3 last cell");
  // Unclipped: boxes reach outside the image.
  EXPECT_LT(p.data<float>()[0], 0.0f);
}

TEST(CaffePriors, Dssd321) {
  const std::vector<CaffePriorBoxSpec> layers = dssd321_prior_layers();
  ASSERT_EQ(layers.size(), 6u);
  const double mins[6] = {32.1, 64.2, 121.98, 179.76, 237.54, 295.32};
  for (int k = 0; k < 6; ++k) {
    EXPECT_NEAR(layers[size_t(k)].min_sizes[0], mins[k], 1e-9) << k;
    EXPECT_NEAR(layers[size_t(k)].max_sizes[0], k < 5 ? mins[k + 1] : 353.1, 1e-9) << k;
  }
  const Tensor p =
      caffe_prior_boxes(layers, {{40, 40}, {20, 20}, {10, 10}, {5, 5}, {3, 3}, {1, 1}}, 321, 321);
  ASSERT_EQ(p.size(0), (1600 + 400 + 100 + 25 + 9 + 1) * 8);
  // The 3 x 3 map: step 64, start 90.5: centres 90.5, 154.5, 218.5; the 1 x 1: 160.5 (the image
  // centre), square sizes int(295.32) = 295 and sqrt(295 * 353).
  const int64_t l4 = (1600 + 400 + 100 + 25) * 8;
  expect_box(p, l4 + 8 * 4, box(154.5, 154.5, 237, 237, 321), "3x3 centre cell");
  expect_box(p, p.size(0) - 8, box(160.5, 160.5, 295, 295, 321), "1x1 square");
  expect_box(p, p.size(0) - 7,
             box(160.5, 160.5, std::sqrt(295.0 * 353), std::sqrt(295.0 * 353), 321),
             "1x1 max square");
  // In pixels: the same boxes times the image side.
  const Tensor px = caffe_prior_boxes_pixels(
      layers, {{40, 40}, {20, 20}, {10, 10}, {5, 5}, {3, 3}, {1, 1}}, 321, 321);
  EXPECT_NEAR(px.data<float>()[(p.size(0) - 8) * 4], 160.5 - 147.5, 1e-4);
}

TEST(CaffePriors, FlipClipStepRepeatsAndExactSizes) {
  CaffePriorBoxSpec s;
  s.min_sizes = {30.5};
  s.aspect_ratios = {2, 2, 1};  // the repeat and 1 add nothing
  s.flip = false;
  s.clip = true;
  s.int_sizes = false;
  EXPECT_EQ(caffe_priors_per_cell(s), 2);  // the square and ratio 2; no max size
  // step 0: image / map = 100 / 4 = 25 per cell, offset 0.5.
  const Tensor p = caffe_prior_boxes({s}, {{2, 4}}, 50, 100);
  ASSERT_EQ(p.sizes(), Shape({2 * 4 * 2, 4}));
  const float* b = p.data<float>();
  // Cell (0, 0): centre (12.5, 12.5) with steps 25 (x) and 25 (y: 50 / 2); square 30.5 clipped.
  EXPECT_NEAR(b[0], 0.0, 1e-7);
  EXPECT_NEAR(b[2], (12.5 + 15.25) / 100, 1e-6);
  EXPECT_NEAR(b[3], (12.5 + 15.25) / 50, 1e-6);
  // Its ratio-2 box: w = 30.5 sqrt(2), h = 30.5 / sqrt(2).
  EXPECT_NEAR(b[6], (12.5 + 30.5 * std::sqrt(2.0) / 2) / 100, 1e-6);
  for (int64_t i = 0; i < p.numel(); ++i) EXPECT_TRUE(b[i] >= 0 && b[i] <= 1) << i;
  s.flip = true;
  EXPECT_EQ(caffe_priors_per_cell(s), 3);
}

TEST(CaffePriors, Errors) {
  auto expect_error = [](const std::vector<CaffePriorBoxSpec>& l,
                         const std::vector<std::pair<int64_t, int64_t>>& maps,
                         const std::string& what) {
    try {
      caffe_prior_boxes(l, maps, 321, 321);
      ADD_FAILURE() << "no error, expected " << what;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  CaffePriorBoxSpec s;
  s.min_sizes = {32};
  s.max_sizes = {16};
  expect_error({s}, {{10, 10}}, "max_size 16 must exceed min_size 32");
  s.max_sizes = {};
  expect_error({s}, {{10, 10}, {5, 5}}, "1 layers and 2 feature maps");
  expect_error({s}, {{0, 10}}, "map 0x10");
  s.min_sizes = {};
  expect_error({s}, {{10, 10}}, "no min_size");
}

}  // namespace
}  // namespace aim::models::detection
