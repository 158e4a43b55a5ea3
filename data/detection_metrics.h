// Detection metrics (issue 21): Pascal VOC's average precision per class and its mean, as the
// VOC development kit and py-faster-rcnn's voc_eval compute it.
#pragma once
#include <cstdint>
#include <vector>

namespace aim::data {

struct Detection {
  int64_t image = 0, label = 0;  // label: the class (1..C; 0 is background and not scored)
  float score = 0;
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
};

struct GroundTruth {
  int64_t image = 0, label = 0;
  bool difficult = false;
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
};

struct VocApOptions {
  double iou_threshold = 0.5;
  bool use_07_metric = true;    // true: VOC2007's 11-point AP; false: VOC2010+'s all-point AP
  bool pixel_inclusive = true;  // VOC's +1 on widths and heights (1-based inclusive pixels)
};

struct VocApResult {
  std::vector<double> ap;  // per class 1..C (ap[c - 1]); NaN for a class without ground truth
  double map = 0;          // mean over the classes that have ground truth
};

// Per class c in 1..num_classes, as voc_eval: detections of c in decreasing score (ties: the order
// given), each compared with every object of its image and class (difficult and already-matched
// ones too), in double; with the largest IoU (the first object on ties): ignored when that object
// is difficult, a true positive when IoU > iou_threshold and the object is not matched yet (it
// becomes matched), else a false positive. Recall over the non-difficult objects; AP from the
// precision/recall curve: 11-point (thresholds k * 0.1 as numpy's arange makes them) or the area
// under the monotone envelope. Errors name the detection or ground truth with a bad label.
VocApResult voc_ap(const std::vector<Detection>& detections,
                   const std::vector<GroundTruth>& ground_truth, int64_t num_classes,
                   const VocApOptions& options = {});

}  // namespace aim::data
