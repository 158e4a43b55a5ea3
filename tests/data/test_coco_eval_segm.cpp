// data/coco_eval_segm.h against pycocotools' COCOeval(iouType='segm')
// (tests/data/detection/coco_eval_segm_peer.py), the ground truth written as an instances file and
// read back by data/coco.h: images of different sizes, objects as (multi-)polygons and compressed
// RLE, crowds as uncompressed RLE, "area" fields unlike the masks' (as COCO's are), objects across
// the small/medium/large ranges; detections as compressed RLE of jittered polygons (tight and
// loose), clutter, tied scores, an image with more than 100 detections, a category without
// objects and detections of a category outside the set.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "data/coco.h"
#include "data/coco_eval_segm.h"
#include "tests/support/common.h"
#include "tests/support/pycocotools.h"

namespace aim::data {
namespace {

// A star-shaped polygon around (cx, cy) of radius about r, vertices rounded to 0.01 (as COCO's).
std::vector<double> star(std::mt19937_64& rng, double cx, double cy, double r, int n) {
  std::uniform_real_distribution<double> U(0, 1);
  std::vector<double> p;
  for (int i = 0; i < n; ++i) {
    const double a = 2 * M_PI * (i + 0.7 * U(rng)) / n, rr = r * (0.6 + 0.5 * U(rng));
    p.push_back(std::round((cx + rr * std::cos(a)) * 100) / 100);
    p.push_back(std::round((cy + rr * std::sin(a)) * 100) / 100);
  }
  return p;
}

std::vector<double> jitter(std::mt19937_64& rng, std::vector<double> p, double amount) {
  std::uniform_real_distribution<double> U(-1, 1);
  for (double& v : p) v = std::round((v + amount * U(rng)) * 100) / 100;
  return p;
}

std::vector<double> clamp_to(std::vector<double> p, int64_t h, int64_t w) {
  for (size_t i = 0; i < p.size(); ++i)
    p[i] = std::clamp(p[i], 0.0, double(i % 2 == 0 ? w - 1 : h - 1));
  return p;
}

TEST(CocoEvalSegm, MatchesPycocotools) {
  const std::string py = ::aim::testing::pycocotools_python();
  if (py.empty()) GTEST_SKIP() << ::aim::testing::kNoPycocotools;
  std::mt19937_64 rng(23);
  std::uniform_real_distribution<double> U(0, 1);
  const std::vector<int64_t> cats = {2, 5, 11};  // 11 has no objects
  nlohmann::json gt, dt = nlohmann::json::array();
  gt["categories"] = nlohmann::json::array();
  for (int64_t c : cats) gt["categories"].push_back({{"id", c}, {"name", "c" + std::to_string(c)}});
  gt["images"] = nlohmann::json::array();
  gt["annotations"] = nlohmann::json::array();
  std::vector<int64_t> images;
  int64_t next_id = 1;
  auto add_det = [&](int64_t image_id, int64_t cat, const CocoRle& m, double score) {
    dt.push_back({{"image_id", image_id},
                  {"category_id", cat},
                  {"segmentation", {{"size", {m.h, m.w}}, {"counts", coco_rle_to_string(m)}}},
                  {"score", score}});
  };
  for (int im = 0; im < 24; ++im) {
    const int64_t image_id = 10 + 7 * im, h = 90 + int64_t(rng() % 120),
                  w = 100 + int64_t(rng() % 140);
    images.push_back(image_id);
    gt["images"].push_back({{"id", image_id}, {"width", w}, {"height", h}, {"file_name", "x.jpg"}});
    const int n = im % 6 == 0 ? 0 : int(rng() % 5);
    for (int k = 0; k < n; ++k) {
      const int64_t cat = cats[rng() % 2];
      const double r = std::exp(std::log(3.0) + U(rng) * std::log(110.0 / 3.0));
      const double cx = r + U(rng) * std::max(1.0, double(w) - 2 * r);
      const double cy = r + U(rng) * std::max(1.0, double(h) - 2 * r);
      const bool crowd = rng() % 8 == 0, rle = !crowd && rng() % 4 == 0, two = rng() % 5 == 0;
      std::vector<std::vector<double>> polys = {
          clamp_to(star(rng, cx, cy, r, 5 + int(rng() % 6)), h, w)};
      if (two) polys.push_back(clamp_to(star(rng, cx + r, cy, r / 2, 5), h, w));
      std::vector<CocoRle> parts;
      for (const auto& p : polys) parts.push_back(coco_rle_from_polygon(p, h, w));
      const CocoRle mask = coco_rle_merge(parts);
      if (coco_rle_area(mask) == 0) continue;
      const std::array<double, 4> bb = coco_rle_to_bbox(mask);
      nlohmann::json a = {
          {"id", next_id++},
          {"image_id", image_id},
          {"category_id", cat},
          {"bbox", bb},
          {"iscrowd", crowd ? 1 : 0},
          {"area", double(coco_rle_area(mask)) * (rng() % 3 == 0 ? 1.0 : 0.8 + 0.4 * U(rng))}};
      if (crowd)
        a["segmentation"] = {{"counts", mask.counts}, {"size", {h, w}}};
      else if (rle)
        a["segmentation"] = {{"counts", coco_rle_to_string(mask)}, {"size", {h, w}}};
      else
        a["segmentation"] = polys;
      gt["annotations"].push_back(a);
      // Detections: a tight and a loose copy, sometimes of the wrong category.
      for (int c = 0; c < 1 + int(rng() % 3); ++c) {
        std::vector<CocoRle> dp;
        for (const auto& p : polys)
          dp.push_back(coco_rle_from_polygon(jitter(rng, p, c == 0 ? 0.08 * r : 0.4 * r), h, w));
        const int64_t dcat = rng() % 6 == 0 ? cats[rng() % 3] : cat;
        add_det(image_id, dcat, coco_rle_merge(dp), double(rng() % 30) / 30.0);  // ties
      }
    }
    const int clutter = im == 3 ? 120 : 3;  // image 3: more than 100 detections
    for (int c = 0; c < clutter; ++c) {
      const std::array<double, 4> b = {U(rng) * w, U(rng) * h, 2 + U(rng) * 60, 2 + U(rng) * 60};
      const int64_t cat = rng() % 15 == 0 ? 99 : cats[rng() % 3];  // 99: not a category of the set
      add_det(image_id, cat, coco_rle_from_bbox(b, h, w), 0.6 * U(rng));
    }
  }
  const std::string dir = ::aim::testing::make_temp_dir("aim_coco_segm");
  std::ofstream(dir + "/gt.json") << gt.dump();
  std::ofstream(dir + "/dt.json") << dt.dump();
  const std::string cmd = py + " " + ::aim::testing::source_root() +
                          "/tests/data/detection/coco_eval_segm_peer.py " + dir + "/gt.json " +
                          dir + "/dt.json " + dir + "/out.json";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  nlohmann::json out;
  std::ifstream(dir + "/out.json") >> out;

  // The ground truth as the reader reads it, the detections as a results file has them.
  const CocoDataset d = read_coco_instances(dir + "/gt.json");
  ASSERT_EQ(d.annotations.size(), gt["annotations"].size());
  std::vector<CocoSegmDet> dets;
  for (const auto& r : dt) {
    CocoSegmDet x;
    x.image_id = r["image_id"], x.category_id = r["category_id"], x.score = r["score"];
    const auto& s = r["segmentation"];
    x.mask = coco_rle_from_string(s["counts"].get<std::string>(), s["size"][0], s["size"][1]);
    dets.push_back(std::move(x));
  }
  const CocoStats s = coco_evaluate_segm(coco_segm_ground_truth(d), dets, images, cats);
  const char* names[12] = {"AP",  "AP50", "AP75",  "APs", "APm", "APl",
                           "AR1", "AR10", "AR100", "ARs", "ARm", "ARl"};
  for (int i = 0; i < 12; ++i) {
    const double ref = out["stats"][size_t(i)].get<double>();
    EXPECT_NEAR(s[size_t(i)], ref, 1e-12) << names[i];
    EXPECT_GT(ref, 0.0) << names[i] << ": the comparison should not be degenerate";
    std::printf("[coco segm eval] %-5s aim %.6f pycocotools %.6f\n", names[i], s[size_t(i)], ref);
  }
  std::system(("rm -rf " + dir).c_str());
}

TEST(CocoEvalSegm, Errors) {
  CocoSegmGt g;
  g.id = 1, g.image_id = 1, g.category_id = 1;
  g.mask = coco_rle_encode(std::vector<uint8_t>(12, 1), 3, 4);
  CocoSegmDet d;
  d.image_id = 1, d.category_id = 1;
  d.mask = coco_rle_encode(std::vector<uint8_t>(12, 1), 4, 3);
  AIM_EXPECT_ERROR(coco_evaluate_segm({g}, {d}, {1}, {1}),
                   "detection 0's mask is 4x3, another mask of image 1 is 3x4");
  d.mask.h = 3, d.mask.w = 4, d.mask.counts = {0, 11};
  AIM_EXPECT_ERROR(coco_evaluate_segm({g}, {d}, {1}, {1}),
                   "detection 0: the counts sum to 11, not h * w = 3 * 4 = 12");
  d.mask.counts = {0, 12};
  EXPECT_DOUBLE_EQ(coco_evaluate_segm({g}, {d}, {1}, {1})[0], 1.0);  // one perfect detection
}

}  // namespace
}  // namespace aim::data
