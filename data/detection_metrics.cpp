#include "data/detection_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "tensor/check.h"

namespace aim::data {
namespace {

double ap_from_curve(const std::vector<double>& rec, const std::vector<double>& prec, bool voc07) {
  if (voc07) {
    double ap = 0;
    for (int k = 0; k <= 10; ++k) {
      const double t = double(k) * 0.1;  // numpy.arange(0, 1.1, 0.1)'s values
      double p = 0;
      for (size_t i = 0; i < rec.size(); ++i)
        if (rec[i] >= t) p = std::max(p, prec[i]);
      ap += p / 11.0;
    }
    return ap;
  }
  std::vector<double> mrec = {0.0}, mpre = {0.0};
  mrec.insert(mrec.end(), rec.begin(), rec.end());
  mpre.insert(mpre.end(), prec.begin(), prec.end());
  mrec.push_back(1.0);
  mpre.push_back(0.0);
  for (size_t i = mpre.size() - 1; i > 0; --i) mpre[i - 1] = std::max(mpre[i - 1], mpre[i]);
  double ap = 0;
  for (size_t i = 0; i + 1 < mrec.size(); ++i)
    if (mrec[i + 1] != mrec[i]) ap += (mrec[i + 1] - mrec[i]) * mpre[i + 1];
  return ap;
}

}  // namespace

VocApResult voc_ap(const std::vector<Detection>& detections,
                   const std::vector<GroundTruth>& ground_truth, int64_t num_classes,
                   const VocApOptions& o) {
  AIM_CHECK(num_classes >= 1, "voc_ap: num_classes must be >= 1, got ", num_classes);
  for (size_t i = 0; i < detections.size(); ++i)
    AIM_CHECK(detections[i].label >= 1 && detections[i].label <= num_classes, "voc_ap: detection ",
              i, " has label ", detections[i].label, " (expected 1..", num_classes, ")");
  for (size_t i = 0; i < ground_truth.size(); ++i)
    AIM_CHECK(ground_truth[i].label >= 1 && ground_truth[i].label <= num_classes,
              "voc_ap: ground truth ", i, " has label ", ground_truth[i].label, " (expected 1..",
              num_classes, ")");
  const double one = o.pixel_inclusive ? 1.0 : 0.0;
  VocApResult r;
  r.ap.assign(size_t(num_classes), std::numeric_limits<double>::quiet_NaN());
  double sum = 0;
  int64_t counted = 0;
  for (int64_t c = 1; c <= num_classes; ++c) {
    // This class's objects per image, in the order given.
    std::map<int64_t, std::vector<size_t>> objects;
    int64_t npos = 0;
    for (size_t i = 0; i < ground_truth.size(); ++i)
      if (ground_truth[i].label == c) {
        objects[ground_truth[i].image].push_back(i);
        npos += !ground_truth[i].difficult;
      }
    std::vector<size_t> order;
    for (size_t i = 0; i < detections.size(); ++i)
      if (detections[i].label == c) order.push_back(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return detections[a].score > detections[b].score; });
    std::vector<char> matched(ground_truth.size(), 0);
    std::vector<double> rec, prec;
    double tp = 0, fp = 0;
    for (size_t d : order) {
      const Detection& bb = detections[d];
      double ovmax = -std::numeric_limits<double>::infinity();
      size_t jmax = 0;
      auto it = objects.find(bb.image);
      if (it != objects.end())
        for (size_t j : it->second) {
          const GroundTruth& g = ground_truth[j];
          const double iw = std::max(
              std::min(double(g.x2), double(bb.x2)) - std::max(double(g.x1), double(bb.x1)) + one,
              0.0);
          const double ih = std::max(
              std::min(double(g.y2), double(bb.y2)) - std::max(double(g.y1), double(bb.y1)) + one,
              0.0);
          const double inter = iw * ih;
          const double uni =
              (double(bb.x2) - double(bb.x1) + one) * (double(bb.y2) - double(bb.y1) + one) +
              (double(g.x2) - double(g.x1) + one) * (double(g.y2) - double(g.y1) + one) - inter;
          const double ov = inter / uni;
          if (ov > ovmax) ovmax = ov, jmax = j;
        }
      if (ovmax > o.iou_threshold) {
        if (ground_truth[jmax].difficult) {
          // Neither true nor false positive: the curve repeats its last point (as voc_eval's
          // cumulative sums do).
        } else if (!matched[jmax]) {
          matched[jmax] = 1;
          tp += 1;
        } else {
          fp += 1;
        }
      } else {
        fp += 1;
      }
      rec.push_back(tp / double(npos));
      prec.push_back(tp / std::max(tp + fp, std::numeric_limits<double>::epsilon()));
    }
    if (npos == 0) continue;  // no ground truth: AP undefined (NaN), not in the mean
    const double ap = ap_from_curve(rec, prec, o.use_07_metric);
    r.ap[size_t(c - 1)] = ap;
    sum += ap;
    ++counted;
  }
  r.map = counted > 0 ? sum / double(counted) : 0.0;
  return r;
}

}  // namespace aim::data
