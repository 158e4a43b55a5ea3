// COCO box detection evaluation (issue 21): the twelve numbers of pycocotools' COCOeval
// (iouType 'bbox') summarize(): AP at IoU .50:.05:.95, AP50, AP75, AP small/medium/large, AR at
// 1/10/100 detections, AR small/medium/large. The algorithm of COCOeval.evaluate/accumulate:
// per (image, category) detections by score (stable), at most 100; ground truth with ignored
// (crowd or out of the area range) objects last; greedy matching per IoU threshold preferring
// non-ignored objects, crowd objects matched any number of times by IoU over the detection's area;
// 101-point interpolated precision from the monotone envelope. Checked against pycocotools to
// 1e-12 (tests/data/test_coco_eval.cpp).
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace aim::data {

struct CocoEvalGt {
  int64_t id = 0;  // > 0 (COCO's annotation ids)
  int64_t image_id = 0, category_id = 0;
  double x = 0, y = 0, w = 0, h = 0;  // bbox [x, y, width, height]
  double area = 0;                    // the annotation's "area" field (pycocotools uses it)
  bool iscrowd = false;
};

struct CocoEvalDet {
  int64_t image_id = 0, category_id = 0;
  double x = 0, y = 0, w = 0, h = 0;
  double score = 0;
};

// pycocotools' stats, in its order: AP, AP50, AP75, APs, APm, APl, AR1, AR10, AR100, ARs, ARm,
// ARl; -1 where nothing is defined (as pycocotools).
using CocoStats = std::array<double, 12>;

// image_ids: every image of the ground-truth set (pycocotools' getImgIds(), images without objects
// included); category_ids: every category of the set (getCatIds()). Detections must be on images
// of the set (an error names the first that is not) and of its categories.
CocoStats coco_evaluate_bbox(const std::vector<CocoEvalGt>& ground_truth,
                             const std::vector<CocoEvalDet>& detections,
                             std::vector<int64_t> image_ids, std::vector<int64_t> category_ids);

}  // namespace aim::data
