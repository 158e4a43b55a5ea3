// data/coco_eval.h against pycocotools' COCOeval (tests/data/detection/coco_eval_peer.py) on random
// detections: crowd objects, areas across the small/medium/large ranges (an "area" field unlike the
// box's, as segmentation areas are), an image with more than 100 detections, tied scores,
// categories with gaps and one without objects, images without objects, detections of a category
// outside the set. The Python with pycocotools is $AIM_PYCOCOTOOLS_PYTHON (.ci/run makes a venv)
// or /usr/bin/python3; the test skips, naming both, when neither imports pycocotools.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "data/coco_eval.h"
#include "tests/support/common.h"

namespace aim::data {
namespace {

std::string pycocotools_python() {
  for (const char* p :
       {static_cast<const char*>(std::getenv("AIM_PYCOCOTOOLS_PYTHON")), "/usr/bin/python3"})
    if (p && *p &&
        std::system((std::string(p) + " -c 'import pycocotools' >/dev/null 2>&1").c_str()) == 0)
      return p;
  return "";
}

TEST(CocoEval, MatchesPycocotools) {
  const std::string py = pycocotools_python();
  if (py.empty())
    GTEST_SKIP() << "no Python with pycocotools ($AIM_PYCOCOTOOLS_PYTHON unset or without it, and "
                    "/usr/bin/python3 lacks it; .ci/run installs it in a venv)";
  const std::vector<int64_t> cats = {1, 3, 7, 12};  // 12 has no objects
  std::mt19937_64 rng(7);
  auto uni = [&](double lo, double hi) { return lo + (hi - lo) * double(rng() % 1000000) / 1e6; };
  std::vector<CocoEvalGt> gts;
  std::vector<CocoEvalDet> dets;
  std::vector<int64_t> images;
  int64_t next_id = 1;
  for (int64_t im = 0; im < 30; ++im) {
    const int64_t image_id = 100 + 3 * im;
    images.push_back(image_id);
    const int64_t n = im % 7 == 0 ? 0 : int64_t(rng() % 6);
    for (int64_t k = 0; k < n; ++k) {
      CocoEvalGt g;
      g.id = next_id++;
      g.image_id = image_id;
      g.category_id = cats[rng() % 3];
      const double side = std::exp(uni(std::log(8.0), std::log(250.0)));
      g.x = uni(0, 400), g.y = uni(0, 300), g.w = side * uni(0.6, 1.4), g.h = side * uni(0.6, 1.4);
      g.area = g.w * g.h * uni(0.5, 0.95);
      g.iscrowd = rng() % 10 == 0;
      gts.push_back(g);
      for (int r = 0; r < 1 + int(rng() % 3); ++r) {
        CocoEvalDet d;
        d.image_id = image_id;
        d.category_id = rng() % 6 == 0 ? cats[rng() % 4] : g.category_id;
        d.score = double(rng() % 40) / 40.0;   // ties
        const double j = r == 0 ? 0.15 : 1.0;  // the first copy is tight (high IoU thresholds)
        d.x = g.x + uni(-0.2, 0.2) * j * g.w, d.y = g.y + uni(-0.2, 0.2) * j * g.h;
        d.w = g.w * uni(1 - 0.3 * j, 1 + 0.3 * j), d.h = g.h * uni(1 - 0.3 * j, 1 + 0.3 * j);
        dets.push_back(d);
      }
    }
    const int clutter = im == 5 ? 130 : 4;  // image 5: more than 100 detections
    for (int c = 0; c < clutter; ++c) {
      CocoEvalDet d;
      d.image_id = image_id;
      d.category_id = rng() % 20 == 0 ? 99 : cats[rng() % 4];  // 99: not a category of the set
      d.score = uni(0, 0.7);
      d.x = uni(0, 400), d.y = uni(0, 300), d.w = uni(4, 200), d.h = uni(4, 200);
      dets.push_back(d);
    }
  }
  nlohmann::json gt, dt = nlohmann::json::array();
  gt["images"] = nlohmann::json::array();
  for (int64_t id : images) gt["images"].push_back({{"id", id}, {"width", 640}, {"height", 480}});
  gt["categories"] = nlohmann::json::array();
  for (int64_t c : cats) gt["categories"].push_back({{"id", c}, {"name", "c" + std::to_string(c)}});
  gt["annotations"] = nlohmann::json::array();
  for (const CocoEvalGt& g : gts)
    gt["annotations"].push_back({{"id", g.id},
                                 {"image_id", g.image_id},
                                 {"category_id", g.category_id},
                                 {"bbox", {g.x, g.y, g.w, g.h}},
                                 {"area", g.area},
                                 {"iscrowd", g.iscrowd ? 1 : 0}});
  for (const CocoEvalDet& d : dets)
    dt.push_back({{"image_id", d.image_id},
                  {"category_id", d.category_id},
                  {"bbox", {d.x, d.y, d.w, d.h}},
                  {"score", d.score}});
  const std::string dir = ::aim::testing::make_temp_dir("aim_coco_eval");
  std::ofstream(dir + "/gt.json") << gt.dump();
  std::ofstream(dir + "/dt.json") << dt.dump();
  const std::string cmd = py + " " + ::aim::testing::source_root() +
                          "/tests/data/detection/coco_eval_peer.py " + dir + "/gt.json " + dir +
                          "/dt.json " + dir + "/out.json";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  nlohmann::json out;
  std::ifstream(dir + "/out.json") >> out;
  // The JSON round trip of the boxes: aim evaluates the values pycocotools read.
  for (size_t i = 0; i < gts.size(); ++i) {
    const auto& b = gt["annotations"][i]["bbox"];
    gts[i].x = b[0], gts[i].y = b[1], gts[i].w = b[2], gts[i].h = b[3];
  }
  const CocoStats s = coco_evaluate_bbox(gts, dets, images, cats);
  const char* names[12] = {"AP",  "AP50", "AP75",  "APs", "APm", "APl",
                           "AR1", "AR10", "AR100", "ARs", "ARm", "ARl"};
  for (int i = 0; i < 12; ++i) {
    EXPECT_NEAR(s[size_t(i)], out["stats"][size_t(i)].get<double>(), 1e-12) << names[i];
    std::printf("[coco eval] %-5s aim %.6f pycocotools %.6f\n", names[i], s[size_t(i)],
                out["stats"][size_t(i)].get<double>());
  }
  std::system(("rm -rf " + dir).c_str());
}

TEST(CocoEval, Errors) {
  CocoEvalDet d;
  d.image_id = 5;
  try {
    coco_evaluate_bbox({}, {d}, {1, 2}, {1});
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("detection 0 is on image 5"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace aim::data
