// data/detection_augment.h: determinism per (key, block); the geometry (expand, IoU-constrained
// crop, flip, resize) keeps every box on its object: coloured rectangles on black, the colour under
// each output box's centre is its object's; photometric changes keep boxes and the [0, 1] range;
// the resize keeps constants and the identity size.
#include <gtest/gtest.h>

#include <cmath>

#include "data/detection_augment.h"

namespace aim::data {
namespace {

// Three rectangles of distinct pure colours on black.
FloatImage scene(std::vector<AugmentBox>& boxes) {
  FloatImage img;
  img.height = 120, img.width = 160;
  img.chw.assign(size_t(3 * 120 * 160), 0.0f);
  boxes = {{10, 20, 60, 70, 1}, {80, 10, 150, 50, 2}, {70, 70, 110, 115, 3}};
  for (const AugmentBox& b : boxes)
    for (int64_t i = int64_t(b.y1); i < int64_t(b.y2); ++i)
      for (int64_t j = int64_t(b.x1); j < int64_t(b.x2); ++j)
        img.chw[size_t((b.label - 1) * 120 * 160 + i * 160 + j)] = 1.0f;
  return img;
}

TEST(DetectionAugment, DeterministicPerStream) {
  std::vector<AugmentBox> b1, b2, b3;
  FloatImage i1 = scene(b1), i2 = scene(b2), i3 = scene(b3);
  augment_detection(i1, b1, 64, 64, {}, 123, 640);
  augment_detection(i2, b2, 64, 64, {}, 123, 640);
  augment_detection(i3, b3, 64, 64, {}, 123, 704);
  EXPECT_EQ(i1.chw, i2.chw);
  ASSERT_EQ(b1.size(), b2.size());
  for (size_t k = 0; k < b1.size(); ++k) EXPECT_EQ(b1[k].x1, b2[k].x1);
  EXPECT_NE(i1.chw, i3.chw);
}

TEST(DetectionAugment, BoxesStayOnTheirObjects) {
  DetectionAugmentOptions o;
  o.photometric = false;
  o.mean = {0, 0, 0};
  int64_t checked = 0, cropped = 0;
  for (uint64_t s = 0; s < 300; ++s) {
    std::vector<AugmentBox> boxes;
    FloatImage img = scene(boxes);
    augment_detection(img, boxes, 96, 96, o, 7, s * 64);
    ASSERT_EQ(img.height, 96);
    cropped += boxes.size() < 3;
    ASSERT_FALSE(boxes.empty());
    for (const AugmentBox& b : boxes) {
      ASSERT_GE(b.x1, 0.0f);
      ASSERT_GE(b.y1, 0.0f);
      ASSERT_LE(b.x2, 96.0f + 1e-3f);
      ASSERT_LE(b.y2, 96.0f + 1e-3f);
      ASSERT_LT(b.x1, b.x2);
      ASSERT_LT(b.y1, b.y2);
      if (b.x2 - b.x1 < 4 || b.y2 - b.y1 < 4) continue;  // too small for the resize's blur
      const int64_t cy = int64_t(0.5f * (b.y1 + b.y2)), cx = int64_t(0.5f * (b.x1 + b.x2));
      for (int c = 0; c < 3; ++c) {
        const float v = img.chw[size_t(c * 96 * 96 + cy * 96 + cx)];
        if (c == b.label - 1)
          EXPECT_GT(v, 0.9f) << "stream " << s << " label " << b.label;
        else
          EXPECT_LT(v, 0.1f) << "stream " << s << " label " << b.label;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 500);
  EXPECT_GT(cropped, 10);  // the crop does drop objects now and then
}

TEST(DetectionAugment, PhotometricKeepsBoxesAndRange) {
  DetectionAugmentOptions o;
  o.expand = o.crop = o.flip = false;
  int64_t changed = 0;
  for (uint64_t s = 0; s < 50; ++s) {
    std::vector<AugmentBox> boxes, orig;
    FloatImage img = scene(boxes), ref = scene(orig);
    for (size_t i = 0; i < img.chw.size(); ++i) img.chw[i] = ref.chw[i] = 0.2f + 0.6f * img.chw[i];
    augment_detection(img, boxes, 120, 160, o, 9, s * 64);
    for (size_t k = 0; k < boxes.size(); ++k) EXPECT_EQ(boxes[k].x1, orig[k].x1);
    for (float v : img.chw) ASSERT_TRUE(v >= 0.0f && v <= 1.0f);
    changed += img.chw != ref.chw;
  }
  EXPECT_GT(changed, 40);
}

TEST(DetectionAugment, ResizeKeepsConstantsAndIdentity) {
  FloatImage img;
  img.height = 7, img.width = 9;
  img.chw.assign(size_t(3 * 63), 0.25f);
  for (float v : resize_bilinear(img, 20, 3).chw) EXPECT_FLOAT_EQ(v, 0.25f);
  for (size_t i = 0; i < img.chw.size(); ++i) img.chw[i] = float(i % 13) / 13.0f;
  EXPECT_EQ(resize_bilinear(img, 7, 9).chw, img.chw);
}

}  // namespace
}  // namespace aim::data
