// ICDAR 2015 Challenge 4 (incidental scene text) localisation evaluation, as the Robust Reading
// Competition's script.py computes it (issue 21, docs/seglink.md): quadrilaterals, IoU through
// polygon intersection (data/polygon.h; the script uses Polygon3), one-to-one greedy matching.
//
// Per image, with G ground-truth words (don't-care: transcription "###") and D detections:
//   1. a detection is don't-care when, for the first don't-care word (in file order) it covers,
//      area(det n word) / area(det) > area_precision (0.5) (a detection of no area: never);
//   2. IoU of every (word, detection) pair; for words in file order, for detections in file
//      order, a pair of a not-yet-matched care word and a not-yet-matched care detection with
//      IoU > iou (0.5) is matched (the first such detection, not the best);
//   3. care counts Gc = G - don't-care words, Dc = D - don't-care detections;
//      recall = matched / Gc, precision = matched / Dc (0 when Dc = 0); when Gc = 0: recall 1,
//      precision 1 if Dc = 0 else 0; hmean = 2 p r / (p + r) (0 when p + r = 0).
// Over a set: recall = sum matched / sum Gc, precision = sum matched / sum Dc (0 on a zero
// denominator), hmean of those. The script's files hold integer coordinates; pass the
// coordinates a submission would carry to reproduce its numbers.
#pragma once
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "data/icdar.h"

namespace aim::data {

using IcdarQuad = std::array<double, 8>;  // x1, y1, ..., x4, y4

struct IcdarEvalParams {
  double iou = 0.5;             // IOU_CONSTRAINT
  double area_precision = 0.5;  // AREA_PRECISION_CONSTRAINT
};

struct IcdarImageResult {
  int64_t gt_care = 0, det_care = 0, matched = 0;
  double precision = 0, recall = 0, hmean = 0;
  std::vector<std::pair<int64_t, int64_t>> pairs;  // (word, detection), in matching order
  std::vector<int64_t> dont_care_detections;       // indices of detections not counted
};

struct IcdarEvalResult {
  std::vector<IcdarImageResult> images;
  int64_t gt_care = 0, det_care = 0, matched = 0;
  double precision = 0, recall = 0, hmean = 0;
};

IcdarImageResult icdar_evaluate_image(const std::vector<IcdarWord>& gt,
                                      const std::vector<IcdarQuad>& detections,
                                      const IcdarEvalParams& params = {});

// gt[i] and detections[i] are image i's (an image without detections: an empty list). Errors
// name the two sizes when they differ.
IcdarEvalResult icdar_evaluate(const std::vector<std::vector<IcdarWord>>& gt,
                               const std::vector<std::vector<IcdarQuad>>& detections,
                               const IcdarEvalParams& params = {});

}  // namespace aim::data
