// data/coco_keypoints.h against pycocotools (tests/data/detection/coco_keypoints_peer.py): the
// reader on a person_keypoints file, every OKS of computeOks and the ten keypoint stats on random
// results: crowd objects, objects with num_keypoints 0 (ignored), an object without labelled
// keypoints (OKS against its enlarged box), areas across the medium / large ranges, more than 20
// results on an image, tied scores, images without objects. The Python with pycocotools is
// $AIM_PYCOCOTOOLS_PYTHON or /usr/bin/python3; the test skips, naming both, when neither has it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "data/coco_keypoints.h"
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

TEST(CocoKeypoints, MatchesPycocotools) {
  const std::string py = pycocotools_python();
  if (py.empty())
    GTEST_SKIP() << "no Python with pycocotools ($AIM_PYCOCOTOOLS_PYTHON unset or without it, and "
                    "/usr/bin/python3 lacks it; .ci/run installs it in a venv)";
  std::mt19937_64 rng(11);
  auto uni = [&](double lo, double hi) { return lo + (hi - lo) * double(rng() % 1000000) / 1e6; };
  nlohmann::json gt, dt = nlohmann::json::array();
  gt["images"] = nlohmann::json::array();
  gt["annotations"] = nlohmann::json::array();
  gt["categories"] = {{{"id", 1}, {"name", "person"}}};
  std::vector<int64_t> images;
  int64_t next_id = 1;
  for (int64_t im = 0; im < 25; ++im) {
    const int64_t image_id = 7 + 2 * im;
    images.push_back(image_id);
    gt["images"].push_back({{"id", image_id}, {"width", 640}, {"height", 480}});
    const int64_t n = im % 6 == 0 ? 0 : 1 + int64_t(rng() % 4);
    for (int64_t p = 0; p < n; ++p) {
      const double w = std::exp(uni(std::log(20.0), std::log(300.0))), h = w * uni(1.2, 2.5);
      const double x = uni(0, 300), y = uni(0, 200);
      const int kind = int(rng() % 10);  // 0: crowd, 1: no labelled keypoint, else a person
      std::vector<double> kp(51, 0.0);
      int64_t num = 0;
      for (int k = 0; k < kCocoKeypoints && kind >= 2; ++k) {
        const int v = int(rng() % 5) == 0 ? 0 : 1 + int(rng() % 2);
        if (v == 0) continue;
        kp[size_t(3 * k)] = std::round(x + uni(0, w));
        kp[size_t(3 * k + 1)] = std::round(y + uni(0, h));
        kp[size_t(3 * k + 2)] = v;
        ++num;
      }
      const double area = w * h * uni(0.4, 0.8);
      gt["annotations"].push_back({{"id", next_id++},
                                   {"image_id", image_id},
                                   {"category_id", 1},
                                   {"keypoints", kp},
                                   {"num_keypoints", num},
                                   {"bbox", {x, y, w, h}},
                                   {"area", area},
                                   {"iscrowd", kind == 0 ? 1 : 0}});
      // Results near this person: a tight one and looser ones.
      for (int r = 0; r < 1 + int(rng() % 3); ++r) {
        const double j = r == 0 ? 0.02 : 0.15;
        std::vector<double> dk(51);
        for (int k = 0; k < kCocoKeypoints; ++k) {
          const bool labelled = kp[size_t(3 * k + 2)] > 0;
          dk[size_t(3 * k)] = (labelled ? kp[size_t(3 * k)] : x + uni(0, w)) + uni(-j, j) * w;
          dk[size_t(3 * k + 1)] =
              (labelled ? kp[size_t(3 * k + 1)] : y + uni(0, h)) + uni(-j, j) * h;
          dk[size_t(3 * k + 2)] = 1;
        }
        dt.push_back({{"image_id", image_id},
                      {"category_id", 1},
                      {"keypoints", dk},
                      {"score", double(rng() % 30) / 30.0}});
      }
    }
    const int clutter = im == 3 ? 25 : 2;  // image 3: more than 20 results
    for (int c = 0; c < clutter; ++c) {
      std::vector<double> dk(51);
      const double cx = uni(0, 500), cy = uni(0, 350), s = uni(20, 200);
      for (int k = 0; k < kCocoKeypoints; ++k) {
        dk[size_t(3 * k)] = cx + uni(0, s), dk[size_t(3 * k + 1)] = cy + uni(0, 1.8 * s);
        dk[size_t(3 * k + 2)] = 1;
      }
      dt.push_back(
          {{"image_id", image_id}, {"category_id", 1}, {"keypoints", dk}, {"score", uni(0, 0.6)}});
    }
  }
  const std::string dir = ::aim::testing::make_temp_dir("aim_coco_kp");
  std::ofstream(dir + "/gt.json") << gt.dump();
  std::ofstream(dir + "/dt.json") << dt.dump();
  const std::string cmd = py + " " + ::aim::testing::source_root() +
                          "/tests/data/detection/coco_keypoints_peer.py " + dir + "/gt.json " +
                          dir + "/dt.json " + dir + "/out.json";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  nlohmann::json out;
  std::ifstream(dir + "/out.json") >> out;

  const CocoKeypointDataset ds = read_coco_keypoints(dir + "/gt.json");
  ASSERT_EQ(ds.annotations.size(), gt["annotations"].size());
  ASSERT_EQ(ds.images.size(), images.size());
  std::vector<CocoKeypointDet> dets;
  for (const auto& j : dt) {
    CocoKeypointDet d;
    d.image_id = j["image_id"], d.category_id = j["category_id"], d.score = j["score"];
    for (size_t k = 0; k < d.keypoints.size(); ++k) d.keypoints[k] = j["keypoints"][k];
    dets.push_back(d);
  }
  // Every OKS of computeOks: detections by score (stable), at most 20, against the image's objects
  // in file order.
  int64_t checked = 0;
  for (const auto& [key, rows] : out["ious"].items()) {
    const int64_t img = std::stoll(key.substr(0, key.find(',')));
    std::vector<size_t> d;
    for (size_t i = 0; i < dets.size(); ++i)
      if (dets[i].image_id == img) d.push_back(i);
    std::stable_sort(d.begin(), d.end(),
                     [&](size_t a, size_t b) { return dets[a].score > dets[b].score; });
    const std::vector<size_t>& g = ds.images[ds.image_index.at(img)].annotations;
    ASSERT_EQ(rows.size(), std::min<size_t>(d.size(), 20)) << key;
    for (size_t i = 0; i < rows.size(); ++i)
      for (size_t k = 0; k < g.size(); ++k, ++checked)
        ASSERT_NEAR(coco_oks(dets[d[i]], ds.annotations[g[k]]), rows[i][k].get<double>(), 1e-12)
            << "image " << img << " result " << i << " object " << k;
  }
  EXPECT_GT(checked, 100);
  const std::array<double, 10> s =
      coco_evaluate_keypoints(ds.annotations, dets, images, ds.category_ids);
  const char* names[10] = {"AP", "AP50", "AP75", "APm", "APl", "AR", "AR50", "AR75", "ARm", "ARl"};
  for (int i = 0; i < 10; ++i) {
    EXPECT_NEAR(s[size_t(i)], out["stats"][size_t(i)].get<double>(), 1e-12) << names[i];
    std::printf("[coco keypoints] %-4s aim %.6f pycocotools %.6f\n", names[i], s[size_t(i)],
                out["stats"][size_t(i)].get<double>());
  }
  EXPECT_GT(s[0], 0.1);  // the tight results match: a test of something, not of -1 everywhere
  std::system(("rm -rf " + dir).c_str());
}

TEST(CocoKeypoints, ReaderErrors) {
  auto error_of = [](const std::string& json) {
    try {
      parse_coco_keypoints(json, "kp.json");
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string head =
      R"({"categories":[{"id":1,"name":"person"}],"images":[{"id":3,"width":9,"height":9}],)";
  std::string kp = "[";
  for (int i = 0; i < 51; ++i) kp += (i ? "," : "") + std::string(i == 5 ? "3" : "1");
  kp += "]";
  EXPECT_NE(error_of(head + R"("annotations":[{"id":1,"image_id":3,"category_id":1,)"
                            R"("keypoints":[1,2],"num_keypoints":1,"bbox":[0,0,1,1],"area":1}]})")
                .find("kp.json: annotations[0].keypoints: expected 51 numbers"),
            std::string::npos);
  EXPECT_NE(error_of(head + R"("annotations":[{"id":1,"image_id":3,"category_id":1,"keypoints":)" +
                     kp + R"(,"num_keypoints":1,"bbox":[0,0,1,1],"area":1}]})")
                .find("visibility of keypoint 1 (left_eye) is 3"),
            std::string::npos);
  EXPECT_NE(error_of(head + R"("annotations":[{"id":1,"image_id":4}]})")
                .find("annotations[0]: missing field 'category_id'"),
            std::string::npos);
  EXPECT_NE(error_of("{").find("kp.json: malformed JSON"), std::string::npos);
  // Found by tools/fuzz.sh: a number past double's range is nlohmann's out_of_range, not a
  // parse_error; it was not caught (fuzz/corpus/coco_instances/regression-number-overflow.json).
  EXPECT_NE(
      error_of("{\"images\": [{\"id\": 444444444e44444441}]}").find("kp.json: malformed JSON"),
      std::string::npos);
}

TEST(CocoKeypoints, OksByHand) {
  CocoKeypointAnnotation g;
  g.area = 100;
  g.keypoints[0] = 10, g.keypoints[1] = 20, g.keypoints[2] = 2;  // only the nose labelled
  CocoKeypointDet d;
  d.keypoints[0] = 13, d.keypoints[1] = 24;  // 5 px away
  const double var = (2 * 0.026) * (2 * 0.026);
  EXPECT_NEAR(coco_oks(d, g), std::exp(-25.0 / var / 100.0 / 2.0), 1e-15);
  d.keypoints[0] = 10, d.keypoints[1] = 20;
  EXPECT_DOUBLE_EQ(coco_oks(d, g), 1.0);
}

}  // namespace
}  // namespace aim::data
