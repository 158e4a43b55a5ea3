// data/detection_synthetic.h: determinism and resumption, the batch layout (names, shapes,
// padding), boxes inside the image and tight around painted pixels of the right colour, the
// overlap limit, and the configuration errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "data/detection_synthetic.h"

namespace aim::data {
namespace {

DetectionSyntheticConfig small() {
  DetectionSyntheticConfig c;
  c.height = 64, c.width = 80, c.classes = 12, c.max_objects = 4, c.noise = 0.0;
  c.min_size = 0.2, c.max_size = 0.6;
  c.epoch_size = 100, c.eval_size = 10;
  return c;
}

TEST(DetectionSynthetic, BatchLayoutAndDeterminism) {
  DetectionSyntheticSource a(small()), b(small());
  const TensorMap x = a.next(5);
  EXPECT_EQ(x.at("images").sizes(), (std::vector<int64_t>{5, 3, 64, 80}));
  EXPECT_EQ(x.at("boxes").sizes(), (std::vector<int64_t>{5, 4, 4}));
  EXPECT_EQ(x.at("labels").sizes(), (std::vector<int64_t>{5, 4}));
  EXPECT_EQ(x.at("num_boxes").sizes(), (std::vector<int64_t>{5}));
  b.seek(2);
  const TensorMap y = b.next(3);
  EXPECT_EQ(y.at("images").to_vector<float>(),
            x.at("images").narrow(0, 2, 3).contiguous().to_vector<float>());
  EXPECT_EQ(y.at("boxes").to_vector<float>(),
            x.at("boxes").narrow(0, 2, 3).contiguous().to_vector<float>());
  EXPECT_EQ(a.position(), 5);
  // Another seed, other images; the evaluation set is not the training stream.
  DetectionSyntheticConfig c = small();
  c.seed = 2;
  EXPECT_NE(DetectionSyntheticSource(c).next(1).at("images").to_vector<float>(),
            DetectionSyntheticSource(small()).next(1).at("images").to_vector<float>());
  EXPECT_NE(a.eval_batch(0, 1).at("images").to_vector<float>(),
            x.at("images").narrow(0, 0, 1).contiguous().to_vector<float>());
}

TEST(DetectionSynthetic, BoxesAreTightAroundTheirColour) {
  const DetectionSyntheticConfig cfg = small();
  DetectionSyntheticSource s(cfg);
  std::vector<float> img(size_t(3 * cfg.height * cfg.width));
  int64_t objects = 0;
  for (int64_t i = 0; i < 200; ++i) {
    const std::vector<SyntheticObject> objs = s.sample(i, img.data());
    ASSERT_GE(objs.size(), 1u);
    ASSERT_LE(int64_t(objs.size()), cfg.max_objects);
    for (size_t k = 0; k < objs.size(); ++k) {
      const SyntheticObject& o = objs[k];
      ++objects;
      EXPECT_GE(o.label, 1);
      EXPECT_LE(o.label, cfg.classes);
      EXPECT_GE(o.x1, 0.0f);
      EXPECT_GE(o.y1, 0.0f);
      EXPECT_LE(o.x2, float(cfg.width));
      EXPECT_LE(o.y2, float(cfg.height));
      EXPECT_LT(o.x1, o.x2);
      EXPECT_LT(o.y1, o.y2);
      for (size_t m = 0; m < k; ++m) {
        const SyntheticObject& p = objs[m];
        const float w = std::max(0.0f, std::min(o.x2, p.x2) - std::max(o.x1, p.x1));
        const float h = std::max(0.0f, std::min(o.y2, p.y2) - std::max(o.y1, p.y1));
        const float inter = w * h;
        EXPECT_LE(inter / ((o.x2 - o.x1) * (o.y2 - o.y1) + (p.x2 - p.x1) * (p.y2 - p.y1) - inter),
                  0.45f)
            << "sample " << i;
      }
    }
    // The last object is painted over everything: without noise its centre row holds its colour
    // (every shape covers the middle of its box except the ring, shape 4).
    const SyntheticObject& top = objs.back();
    if ((top.label - 1) % DetectionSyntheticSource::kShapes != 4) {
      const int64_t r = int64_t(0.5f * (top.y1 + top.y2)), c = int64_t(0.5f * (top.x1 + top.x2));
      const int64_t HW = cfg.height * cfg.width;
      float rgb[3];
      DetectionSyntheticSource::colour(top.label, rgb);
      const float k = img[size_t(r * cfg.width + c)] / rgb[0];  // the brightness, in [0.8, 1]
      EXPECT_GE(k, 0.8f - 1e-5f) << "sample " << i;
      EXPECT_LE(k, 1.0f + 1e-5f) << "sample " << i;
      for (int ch = 1; ch < 3; ++ch)
        EXPECT_NEAR(img[size_t(ch * HW + r * cfg.width + c)], k * rgb[ch], 1e-5f)
            << "sample " << i << ": the centre of the top object is not its colour";
    }
  }
  EXPECT_GT(objects, 300);
}

TEST(DetectionSynthetic, ConfigurationErrors) {
  DetectionSyntheticConfig c = small();
  c.classes = 41;
  try {
    DetectionSyntheticSource s(c);
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("classes must be in [1, 40]"), std::string::npos)
        << e.what();
  }
  DetectionSyntheticSource s(small());
  try {
    s.eval_batch(8, 5);
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("outside the evaluation set of 10"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace aim::data
