#include "models/detection/ssd_matcher.h"

#include <algorithm>

#include "kernels/boxes/boxes.h"

namespace aim::models::detection {

std::vector<int64_t> ssd_match(const float* gt, int64_t G, const float* priors, int64_t P,
                               float threshold) {
  std::vector<int64_t> match(static_cast<size_t>(P), -1);
  if (G == 0) return match;
  std::vector<float> gt_area(static_cast<size_t>(G)), best_iou(static_cast<size_t>(G), -1.0f);
  std::vector<int64_t> best_prior(static_cast<size_t>(G), 0);
  for (int64_t g = 0; g < G; ++g) gt_area[size_t(g)] = kernels::box_area(gt + 4 * g);
  for (int64_t p = 0; p < P; ++p) {
    const float* q = priors + 4 * p;
    const float area_q = kernels::box_area(q);
    float best = 0;
    int64_t arg = -1;
    for (int64_t g = 0; g < G; ++g) {
      // IoU(object, prior), the (quality matrix [G, P]) order of torchvision's box_iou.
      const float iou = kernels::box_iou_value(gt + 4 * g, gt_area[size_t(g)], q, area_q);
      if (arg < 0 || iou > best) best = iou, arg = g;  // torch's max(dim=0): the first maximum
      if (iou > best_iou[size_t(g)]) best_iou[size_t(g)] = iou, best_prior[size_t(g)] = p;
    }
    match[size_t(p)] = best >= threshold ? arg : -1;
  }
  for (int64_t g = 0; g < G; ++g) match[size_t(best_prior[size_t(g)])] = g;
  return match;
}

std::vector<int64_t> caffe_match(const float* gt, int64_t G, const float* priors, int64_t P,
                                 float threshold) {
  std::vector<int64_t> match(static_cast<size_t>(P), -1);
  if (G == 0) return match;
  // IoU [P, G]; Caffe keeps only overlaps above 1e-6 (the others never match).
  std::vector<float> iou(static_cast<size_t>(P * G));
  std::vector<float> gt_area(static_cast<size_t>(G));
  for (int64_t g = 0; g < G; ++g) gt_area[size_t(g)] = kernels::box_area(gt + 4 * g);
  for (int64_t p = 0; p < P; ++p) {
    const float* q = priors + 4 * p;
    const float area_q = kernels::box_area(q);
    for (int64_t g = 0; g < G; ++g)
      iou[size_t(p * G + g)] = kernels::box_iou_value(q, area_q, gt + 4 * g, gt_area[size_t(g)]);
  }
  // Bipartite: the pool of unmatched objects in index order (Caffe erases matched ones).
  std::vector<int64_t> pool(static_cast<size_t>(G));
  for (int64_t g = 0; g < G; ++g) pool[size_t(g)] = g;
  while (!pool.empty()) {
    int64_t best_p = -1, best_g = -1;
    float best = -1;
    for (int64_t p = 0; p < P; ++p) {
      if (match[size_t(p)] != -1) continue;
      for (int64_t g : pool) {
        const float v = iou[size_t(p * G + g)];
        if (v > 1e-6f && v > best) best = v, best_p = p, best_g = g;
      }
    }
    if (best_p < 0) break;
    match[size_t(best_p)] = best_g;
    pool.erase(std::find(pool.begin(), pool.end(), best_g));
  }
  // Per prediction: the rest take their best object at IoU >= threshold.
  for (int64_t p = 0; p < P; ++p) {
    if (match[size_t(p)] != -1) continue;
    float best = -1;
    for (int64_t g = 0; g < G; ++g) {
      const float v = iou[size_t(p * G + g)];
      if (v > 1e-6f && v >= threshold && v > best) best = v, match[size_t(p)] = g;
    }
  }
  return match;
}

}  // namespace aim::models::detection
