// data/keypoint_synthetic.h: deterministic by stream position (next() after seek() repeats it,
// eval samples are their own), the batch layout CPN reads, keypoints inside the image when
// labelled and (0, 0, 0) otherwise, some occluded (v = 1) joints, heatmaps peaking at the
// keypoints' cells, and the area covering the figure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "data/keypoint_synthetic.h"

namespace aim::data {
namespace {

KeypointSyntheticConfig tiny() {
  KeypointSyntheticConfig c;
  c.height = 96, c.width = 72, c.out_h = 24, c.out_w = 18;
  return c;
}

TEST(KeypointSynthetic, DeterministicResumableAndLaidOut) {
  KeypointSyntheticSource a(tiny()), b(tiny());
  const TensorMap x = a.next(6);
  EXPECT_EQ(x.at("images").sizes(), Shape({6, 3, 96, 72}));
  EXPECT_EQ(x.at("keypoints").sizes(), Shape({6, 17, 3}));
  EXPECT_EQ(x.at("valid").sizes(), Shape({6, 17}));
  EXPECT_EQ(x.at("area").sizes(), Shape({6}));
  EXPECT_EQ(x.at("heatmaps").sizes(), Shape({6, 4, 17, 24, 18}));
  b.seek(3);
  const TensorMap y = b.next(3);
  const std::vector<float> xi = x.at("images").to_vector<float>(),
                           yi = y.at("images").to_vector<float>();
  EXPECT_TRUE(std::equal(yi.begin(), yi.end(), xi.begin() + 3 * 3 * 96 * 72));
  EXPECT_EQ(a.position(), 6);
  const TensorMap e = a.eval_batch(0, 2);
  EXPECT_NE(e.at("images").to_vector<float>()[0], xi[0]);
  EXPECT_EQ(a.eval_batch(0, 2).at("keypoints").to_vector<float>(),
            e.at("keypoints").to_vector<float>());
}

TEST(KeypointSynthetic, KeypointsHeatmapsAndVisibility) {
  KeypointSyntheticSource s(tiny());
  const TensorMap x = s.next(64);
  const std::vector<float> kp = x.at("keypoints").to_vector<float>(),
                           heat = x.at("heatmaps").to_vector<float>(),
                           area = x.at("area").to_vector<float>();
  int64_t counts[3] = {0, 0, 0};
  for (int64_t i = 0; i < 64; ++i) {
    EXPECT_GT(area[size_t(i)], 100.0f);
    for (int64_t k = 0; k < 17; ++k) {
      const float px = kp[size_t((i * 17 + k) * 3)], py = kp[size_t((i * 17 + k) * 3 + 1)];
      const int v = int(kp[size_t((i * 17 + k) * 3 + 2)]);
      ASSERT_TRUE(v >= 0 && v <= 2);
      ++counts[v];
      // The finest target (kernel 9, level 3) peaks at 255 on the keypoint's cell, or on the
      // border cell next to it: BORDER_REFLECT_101 counts a one-hot beside the border twice
      // there (as cv2.GaussianBlur in tf-cpn's targets).
      const float* h = heat.data() + ((i * 4 + 3) * 17 + k) * 24 * 18;
      if (v == 0) {
        EXPECT_EQ(px, 0.0f);
        EXPECT_EQ(py, 0.0f);
        EXPECT_EQ(*std::max_element(h, h + 24 * 18), 0.0f);
        continue;
      }
      ASSERT_TRUE(px >= 0 && px < 72 && py >= 0 && py < 96) << px << " " << py;
      const int64_t cy = int64_t(double(py) * 24 / 96), cx = int64_t(double(px) * 18 / 72);
      const int64_t peak = int64_t(std::max_element(h, h + 24 * 18) - h);
      EXPECT_FLOAT_EQ(h[peak], 255.0f);
      const bool on_cell = peak == cy * 18 + cx;
      const bool beside = (cy == 1 && peak == cx) || (cy == 22 && peak == 23 * 18 + cx) ||
                          (cx == 1 && peak == cy * 18) || (cx == 16 && peak == cy * 18 + 17) ||
                          ((cy == 1 || cy == 22) && (cx == 1 || cx == 16));
      EXPECT_TRUE(on_cell || beside)
          << "keypoint cell (" << cy << ", " << cx << "), peak " << peak / 18 << ", " << peak % 18;
      EXPECT_GT(h[cy * 18 + cx], 0.8f * 255);
    }
  }
  EXPECT_GT(counts[2], 64 * 17 / 2);
  EXPECT_GT(counts[1], 20);  // occluded joints
  std::printf("[keypoint synthetic] v=0 %lld, v=1 %lld, v=2 %lld of %d\n",
              static_cast<long long>(counts[0]), static_cast<long long>(counts[1]),
              static_cast<long long>(counts[2]), 64 * 17);
}

}  // namespace
}  // namespace aim::data
