// COCO box detection evaluation (issue 21): the twelve numbers of pycocotools' COCOeval
// (iouType 'bbox') summarize(): AP at IoU .50:.05:.95, AP50, AP75, AP small/medium/large, AR at
// 1/10/100 detections, AR small/medium/large. The algorithm of COCOeval.evaluate/accumulate:
// per (image, category) detections by score (stable), at most 100; ground truth with ignored
// (crowd or out of the area range) objects last; greedy matching per IoU threshold preferring
// non-ignored objects, crowd objects matched any number of times by IoU over the detection's area;
// 101-point interpolated precision from the monotone envelope. Checked against pycocotools to
// 1e-12 (tests/data/test_coco_eval.cpp).
//
// The algorithm is one for every iouType (`coco_evaluate`): the caller gives each ground-truth
// object's image, category, area, crowd and ignore flags, each detection's image, category, area
// and score, and the IoU (or OKS) of a detection with an object; the box, mask (data/coco_mask.h)
// and keypoint (OKS) evaluations are thin callers of it.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
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

// COCOeval's Params for one iouType: IoU thresholds (.50:.05:.95), the area ranges (the first
// one "all") and the maxDets list (evaluateImg keeps the last one's count of detections).
struct CocoEvalParams {
  std::vector<double> iou_thresholds;
  std::vector<std::array<double, 2>> area_ranges;
  std::vector<int64_t> max_dets;
  static CocoEvalParams detection();  // bbox and segm: all/small/medium/large, {1, 10, 100}
  static CocoEvalParams keypoints();  // all/medium/large, {20}
};

// One ground-truth object as COCOeval._prepare leaves it: `ignore` is iscrowd for bbox and segm,
// iscrowd or num_keypoints == 0 for keypoints; `area` is the annotation's "area" field.
struct CocoEvalObject {
  int64_t image_id = 0, category_id = 0;
  double area = 0;
  bool iscrowd = false, ignore = false;
};

// One detection: `area` as loadRes computes it (box w * h, mask pixel count, keypoints' box).
struct CocoEvalScored {
  int64_t image_id = 0, category_id = 0;
  double area = 0, score = 0;
};

// accumulate()'s precision [T][R=101][K][A][M] and recall [T][K][A][M], -1 where undefined.
struct CocoEvalAccumulated {
  size_t T = 0, K = 0, A = 0, M = 0;
  std::vector<double> precision, recall;
  // summarize()'s _summarize: the mean over the defined entries of the slice at area range a and
  // maxDets index m, all thresholds or only threshold t (>= 0); -1 when none is defined.
  double mean(bool ap, int t, size_t a, size_t m) const;
};

// evaluate() + accumulate(). iou(d, g): the IoU (OKS) of detections[d] with ground_truth[g]
// (crowd objects: the intersection over the detection's area, as maskApi's iou with iscrowd).
// image_ids / category_ids as coco_evaluate_bbox's. Errors name the first detection or object
// that is not on an image (category) of the lists.
CocoEvalAccumulated coco_evaluate(const std::vector<CocoEvalObject>& ground_truth,
                                  const std::vector<CocoEvalScored>& detections,
                                  std::vector<int64_t> image_ids, std::vector<int64_t> category_ids,
                                  const CocoEvalParams& params,
                                  const std::function<double(size_t d, size_t g)>& iou);

// pycocotools' stats, in its order: AP, AP50, AP75, APs, APm, APl, AR1, AR10, AR100, ARs, ARm,
// ARl; -1 where nothing is defined (as pycocotools).
using CocoStats = std::array<double, 12>;

// image_ids: every image of the ground-truth set (pycocotools' getImgIds(), images without objects
// included); category_ids: every category of the set (getCatIds()). Detections must be on images
// of the set (an error names the first that is not) and of its categories.
CocoStats coco_evaluate_bbox(const std::vector<CocoEvalGt>& ground_truth,
                             const std::vector<CocoEvalDet>& detections,
                             std::vector<int64_t> image_ids, std::vector<int64_t> category_ids);

// summarize() for bbox and segm (twelve numbers, above) and for keypoints (ten: AP, AP50, AP75,
// APm, APl, AR, AR50, AR75, ARm, ARl at maxDets 20).
CocoStats coco_summarize_detection(const CocoEvalAccumulated& e);
std::array<double, 10> coco_summarize_keypoints(const CocoEvalAccumulated& e);

}  // namespace aim::data
