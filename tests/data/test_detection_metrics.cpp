// data/detection_metrics.h: VOC AP against tests/data/detection/voc_reference.py (py-faster-rcnn's
// voc_eval algorithm in numpy) on random detections with difficult objects, duplicates, a class
// without objects and one with only difficult objects, both AP forms and both pixel conventions;
// plus hand-computed cases and the label errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "data/detection_metrics.h"
#include "tests/support/common.h"

namespace aim::data {
namespace {

TEST(VocAp, MatchesTheReferenceImplementation) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 cannot import numpy";
  std::mt19937_64 rng(42);
  auto uni = [&](double lo, double hi) {
    return float(lo + (hi - lo) * double(rng() % 100000) / 100000.0);
  };
  const int64_t C = 6, images = 40;
  std::vector<GroundTruth> gts;
  std::vector<Detection> dets;
  for (int64_t im = 0; im < images; ++im) {
    const int64_t n = int64_t(rng() % 5);
    for (int64_t k = 0; k < n; ++k) {
      GroundTruth g;
      g.image = im;
      g.label = 1 + int64_t(rng() % 4);  // classes 5 and 6: no objects / only difficult ones
      g.difficult = rng() % 6 == 0;
      g.x1 = uni(0, 300), g.y1 = uni(0, 300);
      g.x2 = g.x1 + uni(10, 150), g.y2 = g.y1 + uni(10, 150);
      gts.push_back(g);
      // Detections near it: a good one, sometimes a duplicate, sometimes a wrong class.
      for (int r = 0; r < 1 + int(rng() % 3); ++r) {
        Detection d;
        d.image = im;
        d.label = rng() % 5 == 0 ? 1 + int64_t(rng() % C) : g.label;
        d.score = uni(0, 1);
        const float j = uni(-20, 20);
        d.x1 = g.x1 + j, d.y1 = g.y1 - j, d.x2 = g.x2 + uni(-15, 15), d.y2 = g.y2 + uni(-15, 15);
        dets.push_back(d);
      }
    }
    GroundTruth hard;
    hard.image = im, hard.label = 6, hard.difficult = true;
    hard.x1 = 10, hard.y1 = 10, hard.x2 = 60, hard.y2 = 70;
    if (im % 3 == 0) gts.push_back(hard);
    for (int k = 0; k < 3; ++k) {  // background clutter
      Detection d;
      d.image = im, d.label = 1 + int64_t(rng() % C), d.score = uni(0, 0.6f);
      d.x1 = uni(0, 300), d.y1 = uni(0, 300), d.x2 = d.x1 + uni(5, 100), d.y2 = d.y1 + uni(5, 100);
      dets.push_back(d);
    }
  }
  const std::string dir = ::aim::testing::make_temp_dir("aim_voc_ap");
  for (bool use07 : {true, false})
    for (bool inclusive : {true, false}) {
      nlohmann::json in;
      in["num_classes"] = C, in["use_07"] = use07, in["inclusive"] = inclusive;
      in["dets"] = nlohmann::json::array();
      in["gts"] = nlohmann::json::array();
      for (const Detection& d : dets)
        in["dets"].push_back({d.image, d.label, d.score, d.x1, d.y1, d.x2, d.y2});
      for (const GroundTruth& g : gts)
        in["gts"].push_back({g.image, g.label, g.difficult ? 1 : 0, g.x1, g.y1, g.x2, g.y2});
      std::ofstream(dir + "/in.json") << in.dump();
      const std::string cmd = "/usr/bin/python3 " + ::aim::testing::source_root() +
                              "/tests/data/detection/voc_reference.py " + dir + "/in.json " + dir +
                              "/out.json";
      ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
      nlohmann::json out;
      std::ifstream(dir + "/out.json") >> out;
      VocApOptions o;
      o.use_07_metric = use07;
      o.pixel_inclusive = inclusive;
      const VocApResult r = voc_ap(dets, gts, C, o);
      SCOPED_TRACE(std::string(use07 ? "VOC07 11-point" : "all-point") +
                   (inclusive ? " +1" : " no +1"));
      for (int64_t c = 0; c < C; ++c) {
        if (out["ap"][size_t(c)].is_null()) {
          EXPECT_TRUE(std::isnan(r.ap[size_t(c)])) << "class " << c + 1;
        } else {
          EXPECT_NEAR(r.ap[size_t(c)], out["ap"][size_t(c)].get<double>(), 1e-12)
              << "class " << c + 1;
        }
      }
      EXPECT_NEAR(r.map, out["map"].get<double>(), 1e-12);
      std::printf("[voc ap] %s%s: mAP %.6f (reference %.6f)\n", use07 ? "07" : "all",
                  inclusive ? " +1" : "", r.map, out["map"].get<double>());
    }
  std::system(("rm -rf " + dir).c_str());
}

// Two objects; detections: a hit (0.9), a duplicate of it (0.8: false positive), a miss (0.7),
// the second object (0.6). Points (recall, precision): (.5, 1), (.5, .5), (.5, 1/3), (1, .5).
TEST(VocAp, HandComputedCurve) {
  std::vector<GroundTruth> g(2);
  g[0].label = g[1].label = 1;
  g[0].x1 = 0, g[0].y1 = 0, g[0].x2 = 10, g[0].y2 = 10;
  g[1].x1 = 50, g[1].y1 = 50, g[1].x2 = 60, g[1].y2 = 60;
  auto det = [](float s, float x) {
    Detection d;
    d.label = 1, d.score = s, d.x1 = x, d.y1 = x, d.x2 = x + 10, d.y2 = x + 10;
    return d;
  };
  const std::vector<Detection> d = {det(0.9f, 0), det(0.8f, 0), det(0.7f, 200), det(0.6f, 50)};
  VocApOptions all;
  all.use_07_metric = false;
  // Envelope: precision 1 up to recall .5, then .5 up to 1: AP = .5 + .25.
  EXPECT_NEAR(voc_ap(d, g, 1, all).map, 0.75, 1e-15);
  // 11-point: t = 0 .. .5 (6 points) at 1, t = .6 .. 1 (5 points) at .5: (6 + 2.5) / 11.
  EXPECT_NEAR(voc_ap(d, g, 1).map, 8.5 / 11, 1e-15);
  try {
    voc_ap({det(0.5f, 0)}, g, 0);
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("num_classes must be >= 1"), std::string::npos);
  }
  Detection bad = det(0.5f, 0);
  bad.label = 3;
  try {
    voc_ap({bad}, g, 2);
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("detection 0 has label 3 (expected 1..2)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace aim::data
