// data/coco_mask.h: hand-worked cases, the errors, and pycocotools' mask API
// (tests/data/detection/coco_mask_peer.py) bit for bit on random polygons (coordinates on a 0.1
// grid, so that edges pass exactly through pixel centres and the 5x grid's rounding ties are hit;
// repeated vertices; vertices outside the image), multi-polygon objects, boxes, random masks
// (blobs, noise, empty, full), long count lists (multi-character and negative deltas), and the
// IoU of every pair of masks with random crowd flags.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "data/coco_mask.h"
#include "tests/support/common.h"
#include "tests/support/pycocotools.h"

namespace aim::data {
namespace {

TEST(CocoMask, HandWorked) {
  // One column of 7: [0 0 1 1 1 0 1] -> {2, 3, 1, 1}; all ones -> {0, 7}.
  const std::vector<uint8_t> m = {0, 0, 1, 1, 1, 0, 1};
  EXPECT_EQ(coco_rle_encode(m, 7, 1).counts, (std::vector<uint32_t>{2, 3, 1, 1}));
  EXPECT_EQ(coco_rle_encode(std::vector<uint8_t>(7, 1), 7, 1).counts,
            (std::vector<uint32_t>{0, 7}));
  // Row-major in, column-major runs: a 2x3 mask with its middle column set.
  const std::vector<uint8_t> r = {0, 1, 0, 0, 1, 0};
  const CocoRle rle = coco_rle_encode(r, 2, 3);
  EXPECT_EQ(rle.counts, (std::vector<uint32_t>{2, 2, 2}));
  EXPECT_EQ(coco_rle_decode(rle), r);
  EXPECT_EQ(coco_rle_area(rle), 2u);
  EXPECT_EQ(coco_rle_to_bbox(rle), (std::array<double, 4>{1, 0, 1, 2}));
  // Strings: small counts are one character each ('0' + n); from the fourth, deltas.
  CocoRle c;
  c.h = 1, c.w = 100, c.counts = {3, 5, 10, 20, 62};
  const std::string s = coco_rle_to_string(c);
  const CocoRle back = coco_rle_from_string(s, 1, 100);
  EXPECT_EQ(back.counts, c.counts) << s;
  EXPECT_EQ(s.substr(0, 2), "35");
  // The union of two halves is the whole; their intersection is empty.
  const CocoRle a = coco_rle_encode(std::vector<uint8_t>{1, 1, 0, 0}, 1, 4);
  const CocoRle b = coco_rle_encode(std::vector<uint8_t>{0, 0, 1, 1}, 1, 4);
  EXPECT_EQ(coco_rle_merge({a, b}).counts, (std::vector<uint32_t>{0, 4}));
  EXPECT_EQ(coco_rle_area(coco_rle_merge({a, b}, true)), 0u);
  EXPECT_EQ(coco_rle_iou(a, b, false), 0.0);
  const CocoRle ab = coco_rle_merge({a, b});
  EXPECT_DOUBLE_EQ(coco_rle_iou(a, ab, false), 0.5);
  EXPECT_DOUBLE_EQ(coco_rle_iou(a, ab, true), 1.0);  // crowd: over the detection's area
  // A square polygon around pixel centres 1..3 covers exactly those pixels.
  const CocoRle sq = coco_rle_from_polygon({1, 1, 3, 1, 3, 3, 1, 3}, 5, 5);
  EXPECT_EQ(coco_rle_area(sq), 4u);  // maskApi's rule: pixels 1..2 on each axis
  EXPECT_EQ(coco_rle_to_bbox(sq), (std::array<double, 4>{1, 1, 2, 2}));
}

TEST(CocoMask, Errors) {
  AIM_EXPECT_ERROR(coco_rle_from_polygon({1, 2, 3}, 4, 4, "ann[3].segmentation[0]"),
                   "ann[3].segmentation[0]: 3 coordinates");
  AIM_EXPECT_ERROR(coco_rle_from_polygon({}, 4, 4), "0 coordinates");
  AIM_EXPECT_ERROR(coco_rle_from_polygon({1, 2, 3, NAN}, 4, 4), "coordinate 3");
  AIM_EXPECT_ERROR(coco_rle_from_string("3!", 2, 2, "seg"), "seg: counts character 1 ('!')");
  AIM_EXPECT_ERROR(coco_rle_from_string("3P", 2, 2, "seg"), "ends inside count 1");
  AIM_EXPECT_ERROR(coco_rle_from_string("3N", 2, 2, "seg"), "count 1 (from character 1) decodes");
  CocoRle bad;
  bad.h = 2, bad.w = 2, bad.counts = {1, 2};
  AIM_EXPECT_ERROR(coco_rle_decode(bad), "the counts sum to 3, not h * w = 2 * 2 = 4");
  AIM_EXPECT_ERROR(coco_rle_merge({}), "no masks");
  CocoRle other;
  other.h = 1, other.w = 4, other.counts = {4};
  AIM_EXPECT_ERROR(coco_rle_iou(other, coco_rle_encode(std::vector<uint8_t>(4, 0), 2, 2), false),
                   "detection mask 1x4, ground truth 2x2");
}

// A random polygon: a star around a centre (often convex-ish, sometimes self-crossing), vertices
// on a 0.1 grid, now and then repeated, reaching outside the image by a few pixels.
std::vector<double> random_polygon(std::mt19937_64& rng, int h, int w) {
  std::uniform_real_distribution<double> U(0, 1);
  const int n = 3 + int(rng() % 9);
  const double cx = U(rng) * w, cy = U(rng) * h, rad = 1 + U(rng) * 0.5 * std::max(h, w);
  std::vector<double> p;
  for (int i = 0; i < n; ++i) {
    const double a = 2 * M_PI * (i + 0.8 * U(rng)) / n, r = rad * (0.3 + U(rng));
    const double x = std::round((cx + r * std::cos(a)) * 10) / 10;
    const double y = std::round((cy + r * std::sin(a)) * 10) / 10;
    p.push_back(std::clamp(x, -3.0, w + 3.0)), p.push_back(std::clamp(y, -3.0, h + 3.0));
    if (rng() % 8 == 0) p.push_back(p[p.size() - 2]), p.push_back(p[p.size() - 2]);
  }
  if (rng() % 5 == 0)  // axis-parallel edges through pixel centres
    p = {std::floor(cx), std::floor(cy),     std::floor(cx) + 4,
         std::floor(cy), std::floor(cx) + 4, std::floor(cy) + 3.5};
  return p;
}

std::vector<uint8_t> random_mask(std::mt19937_64& rng, int h, int w, int kind) {
  std::vector<uint8_t> m(size_t(h * w), 0);
  if (kind == 0) return m;
  if (kind == 1) return std::vector<uint8_t>(m.size(), 1);
  if (kind == 2) {
    for (auto& v : m) v = rng() % 3 == 0;
    return m;
  }
  for (int b = 0; b < 1 + int(rng() % 3); ++b) {  // blobs: ellipses
    const double cx = double(rng() % unsigned(w)), cy = double(rng() % unsigned(h));
    const double rx = 1 + double(rng() % unsigned(w / 2)), ry = 1 + double(rng() % unsigned(h / 2));
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        if ((x - cx) * (x - cx) / (rx * rx) + (y - cy) * (y - cy) / (ry * ry) <= 1)
          m[size_t(y * w + x)] = 1;
  }
  return m;
}

TEST(CocoMask, MatchesPycocotools) {
  const std::string py = ::aim::testing::pycocotools_python();
  if (py.empty()) GTEST_SKIP() << ::aim::testing::kNoPycocotools;
  const int h = 37, w = 53;
  std::mt19937_64 rng(11);
  nlohmann::json in;
  in["h"] = h, in["w"] = w;
  std::vector<std::vector<double>> polys;
  for (int i = 0; i < 300; ++i) polys.push_back(random_polygon(rng, h, w));
  std::vector<std::vector<std::vector<double>>> objects;
  for (int i = 0; i < 40; ++i) {
    objects.emplace_back();
    for (int k = 0; k < 1 + int(rng() % 4); ++k)
      objects.back().push_back(random_polygon(rng, h, w));
  }
  std::vector<std::array<double, 4>> boxes;
  for (int i = 0; i < 40; ++i)
    boxes.push_back({double(rng() % 600) / 10 - 3, double(rng() % 400) / 10 - 3,
                     double(rng() % 300) / 10, double(rng() % 300) / 10});
  std::vector<std::vector<uint8_t>> masks;
  for (int i = 0; i < 60; ++i) masks.push_back(random_mask(rng, h, w, i < 2 ? i : 2 + int(i > 12)));
  // Long runs: several characters per count, deltas of both signs.
  std::vector<CocoRle> lists;
  for (int i = 0; i < 20; ++i) {
    CocoRle c;
    c.h = 1000, c.w = 1000;
    uint64_t left = 1000000;
    while (left > 0) {
      const uint64_t run = std::min<uint64_t>(left, 1 + rng() % (rng() % 2 ? 40 : 300000));
      c.counts.push_back(uint32_t(run));
      left -= run;
    }
    if (i == 0) c.counts.insert(c.counts.begin(), 0);  // starts with ones
    lists.push_back(c);
  }
  std::vector<int> crowd;
  for (size_t i = 0; i < masks.size(); ++i) crowd.push_back(rng() % 4 == 0);
  in["polygons"] = polys, in["objects"] = objects, in["boxes"] = boxes, in["masks"] = masks;
  in["counts"] = nlohmann::json::array();
  for (const CocoRle& c : lists)
    in["counts"].push_back({{"h", c.h}, {"w", c.w}, {"counts", c.counts}});
  in["iscrowd"] = crowd;
  const std::string dir = ::aim::testing::make_temp_dir("aim_coco_mask");
  std::ofstream(dir + "/in.json") << in.dump();
  const std::string cmd = py + " " + ::aim::testing::source_root() +
                          "/tests/data/detection/coco_mask_peer.py " + dir + "/in.json " + dir +
                          "/out.json";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  nlohmann::json out;
  std::ifstream(dir + "/out.json") >> out;

  // Each result: the string, the decoded mask, area and box, and the string read back.
  auto expect_same = [&](const CocoRle& r, const nlohmann::json& ref, const std::string& what) {
    EXPECT_EQ(coco_rle_to_string(r), ref["counts"].get<std::string>()) << what;
    EXPECT_EQ(coco_rle_area(r), ref["area"].get<uint64_t>()) << what;
    const std::array<double, 4> bb = coco_rle_to_bbox(r);
    EXPECT_EQ(std::vector<double>(bb.begin(), bb.end()), ref["bbox"].get<std::vector<double>>())
        << what;
    EXPECT_EQ(coco_rle_decode(r), ref["mask"].get<std::vector<uint8_t>>()) << what;
    EXPECT_EQ(coco_rle_from_string(ref["counts"].get<std::string>(), h, w).counts, r.counts)
        << what;
  };
  for (size_t i = 0; i < polys.size(); ++i)
    expect_same(coco_rle_from_polygon(polys[i], h, w), out["polygons"][i],
                "polygon " + std::to_string(i) + " " + nlohmann::json(polys[i]).dump());
  for (size_t i = 0; i < objects.size(); ++i) {
    std::vector<CocoRle> parts;
    for (const auto& p : objects[i]) parts.push_back(coco_rle_from_polygon(p, h, w));
    expect_same(coco_rle_merge(parts), out["objects"][i], "object " + std::to_string(i));
  }
  for (size_t i = 0; i < boxes.size(); ++i)
    expect_same(coco_rle_from_bbox(boxes[i], h, w), out["boxes"][i], "box " + std::to_string(i));
  std::vector<CocoRle> rles;
  for (size_t i = 0; i < masks.size(); ++i) {
    rles.push_back(coco_rle_encode(masks[i], h, w));
    expect_same(rles.back(), out["masks"][i], "mask " + std::to_string(i));
  }
  for (size_t i = 0; i < lists.size(); ++i) {
    EXPECT_EQ(coco_rle_to_string(lists[i]), out["counts"][i].get<std::string>()) << "list " << i;
    EXPECT_EQ(coco_rle_from_string(out["counts"][i].get<std::string>(), 1000, 1000).counts,
              lists[i].counts)
        << "list " << i;
  }
  size_t nonzero = 0;
  for (size_t d = 0; d < rles.size(); ++d)
    for (size_t g = 0; g < rles.size(); ++g) {
      // pycocotools' iou(dt, gt) is [dt][gt]; exact: the same integer counts, one division.
      const double ref = out["iou"][d][g].get<double>();
      EXPECT_EQ(coco_rle_iou(rles[d], rles[g], crowd[g] != 0), ref) << d << " " << g;
      nonzero += ref > 0;
    }
  EXPECT_GT(nonzero, rles.size() * 4);  // the comparison is not all zeros
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace aim::data
