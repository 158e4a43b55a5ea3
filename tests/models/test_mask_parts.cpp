// Mask R-CNN's mask parts (models/detection/masks.h) against torchvision 0.14
// (tests/peers/mask_parts.py): mask targets of proposals around ground-truth polygon masks (some
// reaching outside the image, tiny, fractional), and masks pasted into the image for boxes inside
// it (tiny, thin, at the borders, the whole image), thresholded at 0.5; plus a hand-worked paste
// and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "data/coco_mask.h"
#include "models/detection/masks.h"
#include "tensor/safetensors.h"
#include "tests/support/common.h"

namespace aim::models::detection {
namespace {

struct Case {
  int64_t M, H, W, G, P, N;
};

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double atol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(double(got[i]) - double(want[i]));
    worst = std::max(worst, d);
    if (!(d <= atol) && bad++ < 5)
      ADD_FAILURE() << what << " at " << i << ": " << got[i] << " vs torchvision " << want[i];
  }
  EXPECT_EQ(bad, 0u) << what;
  std::printf("[mask parts] %s: %zu values, max |difference| %.3g\n", what.c_str(), got.size(),
              worst);
}

TEST(MaskParts, MatchTorchvision) {
  AIM_REQUIRE_PYTHON_MODULE("torchvision");
  const std::vector<Case> cases = {{28, 120, 160, 4, 40, 30}, {14, 50, 37, 2, 12, 10}};
  const std::string dir = ::aim::testing::make_temp_dir("aim_mask_parts");
  struct In {
    Tensor gt, rois, masks, boxes;
  };
  std::vector<In> ins;
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    std::mt19937_64 rng(k + 5);
    std::uniform_real_distribution<double> U(0, 1);
    // Ground truth: star polygons rasterised as COCO does.
    std::vector<float> gt;
    std::vector<std::array<double, 4>> gt_boxes;
    for (int64_t g = 0; g < c.G; ++g) {
      const double cx = U(rng) * c.W, cy = U(rng) * c.H, r = 4 + U(rng) * c.H / 3;
      std::vector<double> poly;
      for (int i = 0; i < 7; ++i) {
        const double a = 2 * M_PI * (i + 0.6 * U(rng)) / 7, rr = r * (0.5 + 0.5 * U(rng));
        poly.push_back(cx + rr * std::cos(a)), poly.push_back(cy + rr * std::sin(a));
      }
      const data::CocoRle rle = data::coco_rle_from_polygon(poly, c.H, c.W);
      for (uint8_t v : data::coco_rle_decode(rle)) gt.push_back(float(v));
      gt_boxes.push_back({cx - r, cy - r, cx + r, cy + r});
    }
    // Proposals: jittered around their object's box, some tiny, some past the border.
    std::vector<float> props;
    std::vector<int64_t> matched;
    for (int64_t p = 0; p < c.P; ++p) {
      const int64_t g = int64_t(rng() % uint64_t(c.G));
      const auto& b = gt_boxes[size_t(g)];
      const double s = b[2] - b[0], j = p % 5 == 0 ? 0.6 : 0.15;
      double x1 = b[0] + s * j * (U(rng) - 0.5), y1 = b[1] + s * j * (U(rng) - 0.5);
      double x2 = b[2] + s * j * (U(rng) - 0.5), y2 = b[3] + s * j * (U(rng) - 0.5);
      if (p % 7 == 3) x2 = x1 + 0.4 * U(rng), y2 = y1 + 0.7 * U(rng);  // smaller than a pixel
      props.insert(props.end(),
                   {float(x1), float(y1), float(std::max(x1, x2)), float(std::max(y1, y2))});
      matched.push_back(g);
    }
    // Mask probabilities: smooth blobs (sigmoid of a bump), values across (0, 1).
    std::vector<float> masks;
    for (int64_t n = 0; n < c.N; ++n) {
      const double mx = U(rng) * c.M, my = U(rng) * c.M, sc = 0.3 + U(rng);
      for (int64_t y = 0; y < c.M; ++y)
        for (int64_t x = 0; x < c.M; ++x) {
          const double d2 = ((x - mx) * (x - mx) + (y - my) * (y - my)) / double(c.M * c.M);
          masks.push_back(float(1 / (1 + std::exp(-(4 * sc - 20 * d2 + 0.3 * (U(rng) - 0.5))))));
        }
    }
    std::vector<float> boxes;
    for (int64_t n = 0; n < c.N; ++n) {
      double x1 = U(rng) * (c.W - 1), y1 = U(rng) * (c.H - 1);
      double x2 = x1 + U(rng) * (c.W - x1), y2 = y1 + U(rng) * (c.H - y1);
      if (n == 0) x1 = 0, y1 = 0, x2 = double(c.W), y2 = double(c.H);  // the whole image
      if (n == 1) x2 = x1 + 0.3, y2 = y1 + 0.2;                        // tiny
      if (n == 2) x1 = 0, x2 = 1.5;                                    // thin, at the border
      if (n == 3) x2 = double(c.W), y2 = double(c.H);                  // to the far corner
      boxes.insert(boxes.end(), {float(x1), float(y1), float(x2), float(y2)});
    }
    In in;
    in.gt = Tensor::from_vector(gt, {c.G, c.H, c.W});
    in.rois = mask_target_rois(props, matched, c.G);
    in.masks = Tensor::from_vector(masks, {c.N, c.M, c.M});
    in.boxes = Tensor::from_vector(boxes, {c.N, 4});
    save_safetensors(dir + "/in_" + std::to_string(k) + ".safetensors",
                     {{"cfg", Tensor::from_vector(std::vector<int64_t>{c.M, c.H, c.W}, {3})},
                      {"gt_masks", in.gt},
                      {"proposals", Tensor::from_vector(props, {c.P, 4})},
                      {"matched", Tensor::from_vector(matched, {c.P})},
                      {"masks", in.masks},
                      {"boxes", in.boxes}});
    ins.push_back(in);
  }
  const std::string cmd = std::string(::aim::testing::kPython) + " " +
                          ::aim::testing::source_root() + "/tests/peers/mask_parts.py " + dir +
                          " " + std::to_string(cases.size());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    SCOPED_TRACE("case " + std::to_string(k));
    const SafetensorsFile o = load_safetensors(dir + "/out_" + std::to_string(k) + ".safetensors");
    const Tensor t = project_masks_on_boxes(ins[k].gt, ins[k].rois, c.M);
    EXPECT_EQ(t.sizes(), (Shape{c.P, c.M, c.M}));
    // roi_align's samples and sums in torchvision's f32 order: the same bits.
    expect_close(t.to_vector<float>(), o.at("targets").to_vector<float>(), 0, "targets");
    const Tensor pasted = paste_masks_in_image(ins[k].masks, ins[k].boxes, c.H, c.W);
    const std::vector<float> ref = o.at("pasted").to_vector<float>();
    // torch's bilinear kernel rounds its blends its own way (FMA): within 1e-6.
    expect_close(pasted.to_vector<float>(), ref, 1e-6, "pasted");
    // Thresholded: equal wherever torchvision's value is not within rounding of 0.5.
    const std::vector<std::vector<uint8_t>> bin =
        paste_masks_binary(ins[k].masks, ins[k].boxes, c.H, c.W);
    const std::vector<uint8_t> ref_bin = o.at("binary").to_vector<uint8_t>();
    size_t differ = 0, ones = 0;
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t i = 0; i < c.H * c.W; ++i) {
        const size_t at = size_t(n * c.H * c.W + i);
        ones += ref_bin[at];
        differ += bin[size_t(n)][size_t(i)] != ref_bin[at] && std::fabs(ref[at] - 0.5f) > 1e-6f;
      }
    EXPECT_EQ(differ, 0u);
    EXPECT_GT(ones, size_t(c.N * 10));  // the masks are not empty
  }
  std::system(("rm -rf " + dir).c_str());
}

// A 2x2 mask of ones in the box [2, 3, 5, 6]: padded to 4x4 of scale 2, the box grows to [0.5,
// 1.5, 6.5, 7.5] -> [0, 1, 6, 7], a 7x7 resize of the padded map; the centre of the box is 1.
TEST(MaskParts, PasteHandWorked) {
  const Tensor m = Tensor::ones({1, 2, 2});
  const Tensor b = Tensor::from_vector(std::vector<float>{2, 3, 5, 6}, {1, 4});
  const std::vector<float> p = paste_masks_in_image(m, b, 10, 9).to_vector<float>();
  EXPECT_FLOAT_EQ(p[size_t(4 * 9 + 3)], 1.0f);  // (y 4, x 3): the box's centre
  EXPECT_EQ(p[size_t(0 * 9 + 0)], 0.0f);        // above the expanded box
  EXPECT_EQ(p[size_t(8 * 9 + 3)], 0.0f);        // below it (rows 1..7)
  EXPECT_GT(p[size_t(2 * 9 + 3)], 0.0f);        // the padded border blends in
  EXPECT_LT(p[size_t(2 * 9 + 3)], 0.5f);
  EXPECT_EQ(p[size_t(1 * 9 + 3)], 0.0f);  // row 1 samples the zero border only
  const auto bin = paste_masks_binary(m, b, 10, 9);
  int ones = 0;
  for (uint8_t v : bin[0]) ones += v;
  EXPECT_GT(ones, 4);
}

TEST(MaskParts, Errors) {
  AIM_EXPECT_ERROR(mask_target_rois({0, 0, 1, 1}, {3}, 2),
                   "proposal 0 is matched to object 3, not in [0, 2)");
  AIM_EXPECT_ERROR(project_masks_on_boxes(Tensor::zeros({2, 4}), Tensor::zeros({1, 5}), 7),
                   "gt_masks must be [G, H, W]");
  AIM_EXPECT_ERROR(paste_masks_in_image(Tensor::zeros({2, 3, 3}), Tensor::zeros({1, 4}), 5, 5),
                   "boxes must be [N, 4] with N = 2");
}

}  // namespace
}  // namespace aim::models::detection
