#include "models/detection/ssd_matcher.h"

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

}  // namespace aim::models::detection
