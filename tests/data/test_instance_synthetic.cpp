// data/instance_synthetic.h: the same pixels as DetectionSyntheticSource; each mask is exactly the
// pixels where its object is painted on top (one colour per object without noise, the masks
// disjoint, every non-background pixel owned), boxes the masks' tight extents, the batch layout,
// and the evaluation ground truth scored by the COCO mask evaluation (perfect detections: AP 1;
// shifted ones: less).
#include <gtest/gtest.h>

#include <cmath>

#include "data/coco_eval_segm.h"
#include "data/instance_synthetic.h"

namespace aim::data {
namespace {

DetectionSyntheticConfig small(double noise) {
  DetectionSyntheticConfig c;
  c.classes = 10, c.height = 48, c.width = 64, c.max_objects = 5, c.noise = noise;
  c.min_size = 0.2, c.max_size = 0.7, c.eval_size = 40;
  return c;
}

TEST(InstanceSynthetic, MasksAreTheVisiblePixels) {
  const DetectionSyntheticConfig cfg = small(0.0);
  const InstanceSyntheticSource src(cfg);
  const DetectionSyntheticSource shapes(cfg);
  const int64_t H = cfg.height, W = cfg.width, HW = H * W;
  int64_t objects = 0, occluded = 0;
  for (int64_t s = 0; s < 30; ++s) {
    std::vector<float> img(size_t(3 * HW)), ref(size_t(3 * HW));
    const std::vector<SyntheticInstance> inst = src.sample(s, img.data());
    const std::vector<SyntheticObject> full = shapes.sample(s, ref.data());
    EXPECT_EQ(img, ref) << "sample " << s;  // the same image
    ASSERT_LE(inst.size(), full.size());
    std::vector<int> owners(size_t(HW), 0);
    for (size_t k = 0; k < inst.size(); ++k) {
      const SyntheticObject& o = inst[k].object;
      float x1 = float(W), y1 = float(H), x2 = 0, y2 = 0, colour[3] = {-1, -1, -1};
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < W; ++j) {
          if (!inst[k].mask[size_t(i * W + j)]) continue;
          ++owners[size_t(i * W + j)];
          x1 = std::min(x1, float(j)), y1 = std::min(y1, float(i));
          x2 = std::max(x2, float(j + 1)), y2 = std::max(y2, float(i + 1));
          for (int c = 0; c < 3; ++c) {  // one colour per object (no noise)
            const float v = img[size_t(c * HW + i * W + j)];
            if (colour[c] < 0) colour[c] = v;
            EXPECT_EQ(v, colour[c]) << "sample " << s << " object " << k;
          }
        }
      EXPECT_EQ(std::vector<float>({x1, y1, x2, y2}), std::vector<float>({o.x1, o.y1, o.x2, o.y2}));
      float rgb[3];
      DetectionSyntheticSource::colour(o.label, rgb);
      for (int c = 0; c < 3; ++c)  // painted at 0.8..1 times the label's palette colour
        EXPECT_NEAR(colour[c], colour[0] / rgb[0] * rgb[c], 1e-5) << "sample " << s;
      ++objects;
    }
    // Each object's shape pixels are its mask or covered by a later object: an object whose box
    // shrank is partly occluded.
    for (size_t k = 0; k < inst.size(); ++k) {
      bool same = false;
      for (const SyntheticObject& f : full)
        same = same || (f.x1 == inst[k].object.x1 && f.y1 == inst[k].object.y1 &&
                        f.x2 == inst[k].object.x2 && f.y2 == inst[k].object.y2);
      occluded += !same;
    }
    for (int64_t p = 0; p < HW; ++p) EXPECT_LE(owners[size_t(p)], 1);  // disjoint
  }
  EXPECT_GT(objects, 50);
  EXPECT_GT(occluded, 0);  // the test sees occlusion
}

TEST(InstanceSynthetic, BatchesAndMaskAp) {
  InstanceSyntheticSource src(small(0.05));
  const TensorMap b = src.next(3);
  EXPECT_EQ(b.at("masks").sizes(), (Shape{3, 5, 48, 64}));
  EXPECT_EQ(b.at("masks").dtype(), DType::u8);
  EXPECT_EQ(src.position(), 3);
  const std::vector<int64_t> n = b.at("num_boxes").to_vector<int64_t>();
  const std::vector<uint8_t> m = b.at("masks").to_vector<uint8_t>();
  const std::vector<int64_t> labels = b.at("labels").to_vector<int64_t>();
  for (int64_t s = 0; s < 3; ++s)
    for (int64_t g = 0; g < 5; ++g) {
      int64_t area = 0;
      for (int64_t p = 0; p < 48 * 64; ++p) area += m[size_t((s * 5 + g) * 48 * 64 + p)];
      EXPECT_EQ(area > 0, g < n[size_t(s)]) << s << " " << g;  // padding rows are empty
      EXPECT_EQ(labels[size_t(s * 5 + g)] > 0, g < n[size_t(s)]);
    }
  // Mask AP on the evaluation set: the ground truth itself scores 1; masks shifted by two
  // pixels score less.
  const std::vector<CocoSegmGt> gt = src.eval_ground_truth(0, 20);
  ASSERT_GT(gt.size(), 20u);
  std::vector<CocoSegmDet> perfect, shifted;
  for (const CocoSegmGt& g : gt) {
    perfect.push_back({g.image_id, g.category_id, 0.9, g.mask});
    std::vector<uint8_t> px = coco_rle_decode(g.mask), moved(px.size(), 0);
    for (int64_t i = 0; i < 48; ++i)
      for (int64_t j = 2; j < 64; ++j) moved[size_t(i * 64 + j)] = px[size_t(i * 64 + j - 2)];
    shifted.push_back({g.image_id, g.category_id, 0.9, coco_rle_encode(moved, 48, 64)});
  }
  std::vector<int64_t> images, cats;
  for (int64_t i = 0; i < 20; ++i) images.push_back(i);
  for (int64_t c = 1; c <= 10; ++c) cats.push_back(c);
  EXPECT_DOUBLE_EQ(coco_evaluate_segm(gt, perfect, images, cats)[0], 1.0);
  const double ap = coco_evaluate_segm(gt, shifted, images, cats)[0];
  EXPECT_LT(ap, 0.9);
  EXPECT_GT(ap, 0.05);
  const TensorMap e = src.eval_batch(0, 2);
  EXPECT_EQ(e.at("num_boxes").to_vector<int64_t>()[0],
            int64_t(std::count_if(gt.begin(), gt.end(),
                                  [](const CocoSegmGt& g) { return g.image_id == 0; })));
}

}  // namespace
}  // namespace aim::data
