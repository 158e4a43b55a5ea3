#include "data/coco_keypoints.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/coco_eval.h"
#include "data/json_fields.h"
#include "tensor/check.h"

namespace aim::data {

const std::array<const char*, kCocoKeypoints> kCocoKeypointNames = {
    "nose",           "left_eye",   "right_eye",   "left_ear",   "right_ear",   "left_shoulder",
    "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip",
    "right_hip",      "left_knee",  "right_knee",  "left_ankle", "right_ankle"};

const std::array<double, kCocoKeypoints> kCocoKeypointSigmas = {
    .26 / 10.0,  .25 / 10.0, .25 / 10.0, .35 / 10.0, .35 / 10.0, .79 / 10.0,
    .79 / 10.0,  .72 / 10.0, .72 / 10.0, .62 / 10.0, .62 / 10.0, 1.07 / 10.0,
    1.07 / 10.0, .87 / 10.0, .87 / 10.0, .89 / 10.0, .89 / 10.0};

const std::array<std::array<int, 2>, 8> kCocoKeypointFlipPairs = {
    {{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}, {11, 12}, {13, 14}, {15, 16}}};

namespace {

using json = nlohmann::json;

using json_fields::field;
using json_fields::int_field;
using json_fields::num_field;

// numpy's pairwise summation for fewer than 128 values (np.sum's order: eight running sums, then
// the tail), so the OKS is bit for bit pycocotools'.
double numpy_sum(const double* a, int n) {
  if (n < 8) {
    double r = 0;
    for (int i = 0; i < n; ++i) r += a[i];
    return r;
  }
  double r[8];
  for (int j = 0; j < 8; ++j) r[j] = a[j];
  int i = 8;
  for (; i < n - n % 8; i += 8)
    for (int j = 0; j < 8; ++j) r[j] += a[i + j];
  double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
  for (; i < n; ++i) res += a[i];
  return res;
}

}  // namespace

CocoKeypointDataset parse_coco_keypoints(const std::string& text, const std::string& name) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number overflow
    AIM_FAIL(name, ": malformed JSON: ", e.what());
  }
  AIM_CHECK(root.is_object(), name, ": the top level must be an object");
  CocoKeypointDataset d;
  const json& cats = field(root, "categories", name);
  AIM_CHECK(cats.is_array(), name, ": categories must be an array");
  for (size_t i = 0; i < cats.size(); ++i) {
    const std::string w = name + ": categories[" + std::to_string(i) + "]";
    const int64_t id = int_field(cats[i], "id", w);
    AIM_CHECK(std::find(d.category_ids.begin(), d.category_ids.end(), id) == d.category_ids.end(),
              w, ": duplicate category id ", id);
    d.category_ids.push_back(id);
  }
  std::sort(d.category_ids.begin(), d.category_ids.end());
  const json& imgs = field(root, "images", name);
  AIM_CHECK(imgs.is_array(), name, ": images must be an array");
  for (size_t i = 0; i < imgs.size(); ++i) {
    const std::string w = name + ": images[" + std::to_string(i) + "]";
    CocoKeypointImage im;
    im.id = int_field(imgs[i], "id", w);
    im.width = int_field(imgs[i], "width", w);
    im.height = int_field(imgs[i], "height", w);
    if (imgs[i].contains("file_name")) {
      const json& f = imgs[i].at("file_name");
      AIM_CHECK(f.is_string(), w, ".file_name: expected a string");
      im.file_name = f.get<std::string>();
    }
    AIM_CHECK(im.width > 0 && im.height > 0, w, ": size ", im.width, "x", im.height,
              " must be positive");
    AIM_CHECK(d.image_index.emplace(im.id, d.images.size()).second, w, ": duplicate image id ",
              im.id);
    d.images.push_back(im);
  }
  const json& anns = field(root, "annotations", name);
  AIM_CHECK(anns.is_array(), name, ": annotations must be an array");
  std::map<int64_t, size_t> ids;
  for (size_t i = 0; i < anns.size(); ++i) {
    const std::string w = name + ": annotations[" + std::to_string(i) + "]";
    CocoKeypointAnnotation a;
    a.id = int_field(anns[i], "id", w);
    AIM_CHECK(ids.emplace(a.id, i).second, w, ": duplicate annotation id ", a.id);
    a.image_id = int_field(anns[i], "image_id", w);
    a.category_id = int_field(anns[i], "category_id", w);
    const auto img = d.image_index.find(a.image_id);
    AIM_CHECK(img != d.image_index.end(), w, ": image_id ", a.image_id, " is not in images");
    AIM_CHECK(std::binary_search(d.category_ids.begin(), d.category_ids.end(), a.category_id), w,
              ": category_id ", a.category_id, " is not in categories");
    const json& kp = field(anns[i], "keypoints", w);
    AIM_CHECK(kp.is_array() && kp.size() == a.keypoints.size() &&
                  std::all_of(kp.begin(), kp.end(), [](const json& v) { return v.is_number(); }),
              w, ".keypoints: expected ", a.keypoints.size(), " numbers (x, y, v of ",
              kCocoKeypoints, " keypoints), got ", kp.dump());
    for (size_t k = 0; k < a.keypoints.size(); ++k) a.keypoints[k] = kp[k].get<double>();
    for (int k = 0; k < kCocoKeypoints; ++k) {
      const double v = a.keypoints[size_t(3 * k + 2)];
      AIM_CHECK(v == 0 || v == 1 || v == 2, w, ".keypoints: visibility of keypoint ", k, " (",
                kCocoKeypointNames[size_t(k)], ") is ", v, ", expected 0, 1 or 2");
    }
    a.num_keypoints = int_field(anns[i], "num_keypoints", w);
    AIM_CHECK(a.num_keypoints >= 0 && a.num_keypoints <= kCocoKeypoints, w,
              ".num_keypoints: ", a.num_keypoints, " outside [0, ", kCocoKeypoints, "]");
    const json& bb = field(anns[i], "bbox", w);
    AIM_CHECK(bb.is_array() && bb.size() == 4 &&
                  std::all_of(bb.begin(), bb.end(), [](const json& v) { return v.is_number(); }),
              w, ".bbox: expected [x, y, width, height] numbers, got ", bb.dump());
    a.x = bb[0].get<double>(), a.y = bb[1].get<double>();
    a.w = bb[2].get<double>(), a.h = bb[3].get<double>();
    a.area = num_field(anns[i], "area", w);
    if (anns[i].contains("iscrowd")) a.iscrowd = int_field(anns[i], "iscrowd", w) != 0;
    d.images[img->second].annotations.push_back(d.annotations.size());
    d.annotations.push_back(a);
  }
  return d;
}

CocoKeypointDataset read_coco_keypoints(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  AIM_CHECK(in, path, ": cannot open the annotation file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_coco_keypoints(ss.str(), path);
}

double coco_oks(const CocoKeypointDet& d, const CocoKeypointAnnotation& g) {
  int visible = 0;
  for (int k = 0; k < kCocoKeypoints; ++k) visible += g.keypoints[size_t(3 * k + 2)] > 0;
  const double x0 = g.x - g.w, x1 = g.x + g.w * 2, y0 = g.y - g.h, y1 = g.y + g.h * 2;
  const double denom = g.area + std::numeric_limits<double>::epsilon();  // np.spacing(1)
  double terms[kCocoKeypoints];
  int n = 0;
  for (int k = 0; k < kCocoKeypoints; ++k) {
    const double xd = d.keypoints[size_t(3 * k)], yd = d.keypoints[size_t(3 * k + 1)];
    double dx, dy;
    if (visible > 0) {
      if (!(g.keypoints[size_t(3 * k + 2)] > 0)) continue;
      dx = xd - g.keypoints[size_t(3 * k)];
      dy = yd - g.keypoints[size_t(3 * k + 1)];
    } else {
      dx = std::max(0.0, x0 - xd) + std::max(0.0, xd - x1);
      dy = std::max(0.0, y0 - yd) + std::max(0.0, yd - y1);
    }
    const double var = (kCocoKeypointSigmas[size_t(k)] * 2) * (kCocoKeypointSigmas[size_t(k)] * 2);
    // numpy's order of operations: (dx**2 + dy**2) / vars / (area + eps) / 2.
    const double e = (dx * dx + dy * dy) / var / denom / 2;
    terms[n++] = std::exp(-e);
  }
  return numpy_sum(terms, n) / double(n);
}

double coco_keypoint_det_area(const CocoKeypointDet& d) {
  double x0 = d.keypoints[0], x1 = x0, y0 = d.keypoints[1], y1 = y0;
  for (int k = 1; k < kCocoKeypoints; ++k) {
    x0 = std::min(x0, d.keypoints[size_t(3 * k)]), x1 = std::max(x1, d.keypoints[size_t(3 * k)]);
    y0 = std::min(y0, d.keypoints[size_t(3 * k + 1)]);
    y1 = std::max(y1, d.keypoints[size_t(3 * k + 1)]);
  }
  return (x1 - x0) * (y1 - y0);
}

std::array<double, 10> coco_evaluate_keypoints(const std::vector<CocoKeypointAnnotation>& gts,
                                               const std::vector<CocoKeypointDet>& dets,
                                               std::vector<int64_t> image_ids,
                                               std::vector<int64_t> category_ids) {
  std::vector<CocoEvalObject> objects(gts.size());
  for (size_t i = 0; i < gts.size(); ++i)
    objects[i] = {gts[i].image_id, gts[i].category_id, gts[i].area, gts[i].iscrowd,
                  gts[i].iscrowd || gts[i].num_keypoints == 0};
  std::vector<CocoEvalScored> scored(dets.size());
  for (size_t i = 0; i < dets.size(); ++i)
    scored[i] = {dets[i].image_id, dets[i].category_id, coco_keypoint_det_area(dets[i]),
                 dets[i].score};
  return coco_summarize_keypoints(coco_evaluate(
      objects, scored, std::move(image_ids), std::move(category_ids), CocoEvalParams::keypoints(),
      [&](size_t d, size_t g) { return coco_oks(dets[d], gts[g]); }));
}

}  // namespace aim::data
