// COCO person keypoints (issue 22, MODELS.md §5.3): person_keypoints_*.json as
// pycocotools.coco.COCO loads it, and the keypoint evaluation of pycocotools'
// COCOeval(iouType='keypoints') on the shared core (data/coco_eval.h):
//   OKS (computeOks): per keypoint e = (dx^2 + dy^2) / (2 sigma)^2 / (area + eps) / 2 with the 17
//     COCO sigmas and the object's "area" field (eps = numpy's spacing(1)); OKS = mean of exp(-e)
//     over the object's keypoints with visibility > 0, or, when it has none, over all 17 with the
//     distance measured to the object's box enlarged to [x - w, x + 2w] x [y - h, y + 2h];
//   objects ignored when iscrowd or num_keypoints == 0 (_prepare); a detection's area is its
//     keypoints' box (loadRes); area ranges all / medium / large, maxDets 20 (Params).
// Checked against pycocotools to 1e-12 (tests/data/test_coco_keypoints.cpp).
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace aim::data {

constexpr int kCocoKeypoints = 17;
// COCO's keypoint order: nose, left/right eye, ear, shoulder, elbow, wrist, hip, knee, ankle.
extern const std::array<const char*, kCocoKeypoints> kCocoKeypointNames;
// pycocotools' kpt_oks_sigmas.
extern const std::array<double, kCocoKeypoints> kCocoKeypointSigmas;
// Left/right pairs (1, 2), (3, 4), ..., (15, 16): swapped by a horizontal flip.
extern const std::array<std::array<int, 2>, 8> kCocoKeypointFlipPairs;

using CocoKeypoints = std::array<double, 3 * kCocoKeypoints>;  // x, y, v per keypoint

struct CocoKeypointAnnotation {
  int64_t id = 0, image_id = 0, category_id = 0;
  CocoKeypoints keypoints{};  // v: 0 not labelled, 1 labelled but hidden, 2 visible
  int64_t num_keypoints = 0;
  double x = 0, y = 0, w = 0, h = 0;  // bbox
  double area = 0;
  bool iscrowd = false;
};

struct CocoKeypointImage {
  int64_t id = 0, width = 0, height = 0;
  std::string file_name;
  std::vector<size_t> annotations;  // indices into CocoKeypointDataset::annotations
};

struct CocoKeypointDataset {
  std::vector<CocoKeypointImage> images;            // in file order
  std::map<int64_t, size_t> image_index;            // image id -> index into images
  std::vector<int64_t> category_ids;                // increasing (COCO: {1}, person)
  std::vector<CocoKeypointAnnotation> annotations;  // in file order
};

// Reads a person_keypoints JSON file. Errors name the file and the element
// ("annotations[3].keypoints: expected 51 numbers"): malformed JSON, a missing or mistyped field,
// duplicate ids, an annotation of an unknown image or category, a visibility outside {0, 1, 2}.
CocoKeypointDataset read_coco_keypoints(const std::string& path);
CocoKeypointDataset parse_coco_keypoints(const std::string& json, const std::string& name);

// One keypoint result as loadRes takes it ({image_id, category_id, keypoints, score}).
struct CocoKeypointDet {
  int64_t image_id = 0, category_id = 1;
  CocoKeypoints keypoints{};  // the v entries are not read
  double score = 0;
};

// computeOks for one (detection, object) pair.
double coco_oks(const CocoKeypointDet& d, const CocoKeypointAnnotation& g);
// loadRes's area of a keypoint result: the box of all 17 keypoints, (x1 - x0) * (y1 - y0).
double coco_keypoint_det_area(const CocoKeypointDet& d);

// COCOeval(iouType='keypoints') evaluate + accumulate + summarize: AP, AP50, AP75, APm, APl, AR,
// AR50, AR75, ARm, ARl. image_ids / category_ids as coco_evaluate_bbox's (every image and
// category of the ground-truth set).
std::array<double, 10> coco_evaluate_keypoints(const std::vector<CocoKeypointAnnotation>& gts,
                                               const std::vector<CocoKeypointDet>& dets,
                                               std::vector<int64_t> image_ids,
                                               std::vector<int64_t> category_ids);

}  // namespace aim::data
