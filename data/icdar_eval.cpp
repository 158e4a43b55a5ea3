#include "data/icdar_eval.h"

#include "data/polygon.h"
#include "tensor/check.h"

namespace aim::data {
namespace {

double hmean_of(double p, double r) { return p + r == 0 ? 0.0 : 2 * p * r / (p + r); }

}  // namespace

IcdarImageResult icdar_evaluate_image(const std::vector<IcdarWord>& gt,
                                      const std::vector<IcdarQuad>& detections,
                                      const IcdarEvalParams& params) {
  const size_t G = gt.size(), D = detections.size();
  std::vector<Polygon> gp(G), dp(D);
  for (size_t g = 0; g < G; ++g) gp[g] = quad_polygon(gt[g].quad.data());
  for (size_t d = 0; d < D; ++d) dp[d] = quad_polygon(detections[d].data());
  IcdarImageResult r;
  std::vector<char> det_dont_care(D, 0);
  for (size_t d = 0; d < D; ++d) {
    const double area = polygon_area(dp[d]);
    for (size_t g = 0; g < G && area > 0; ++g)
      if (gt[g].dont_care && intersection_area(gp[g], dp[d]) / area > params.area_precision) {
        det_dont_care[d] = 1;
        r.dont_care_detections.push_back(int64_t(d));
        break;
      }
  }
  // Greedy in file order: words outside, detections inside; the first pair over the threshold.
  std::vector<char> gt_taken(G, 0), det_taken(D, 0);
  for (size_t g = 0; g < G; ++g) {
    if (gt[g].dont_care) continue;
    for (size_t d = 0; d < D && !gt_taken[g]; ++d) {
      if (det_taken[d] || det_dont_care[d]) continue;
      if (polygon_iou(dp[d], gp[g]) > params.iou) {
        gt_taken[g] = det_taken[d] = 1;
        r.pairs.push_back({int64_t(g), int64_t(d)});
      }
    }
  }
  for (const IcdarWord& w : gt) r.gt_care += w.dont_care ? 0 : 1;
  r.det_care = int64_t(D) - int64_t(r.dont_care_detections.size());
  r.matched = int64_t(r.pairs.size());
  if (r.gt_care == 0) {
    r.recall = 1;
    r.precision = r.det_care > 0 ? 0 : 1;
  } else {
    r.recall = double(r.matched) / double(r.gt_care);
    r.precision = r.det_care == 0 ? 0 : double(r.matched) / double(r.det_care);
  }
  r.hmean = hmean_of(r.precision, r.recall);
  return r;
}

IcdarEvalResult icdar_evaluate(const std::vector<std::vector<IcdarWord>>& gt,
                               const std::vector<std::vector<IcdarQuad>>& detections,
                               const IcdarEvalParams& params) {
  AIM_CHECK(gt.size() == detections.size(), "[icdar_evaluate] ground truth for ", gt.size(),
            " images but detections for ", detections.size());
  IcdarEvalResult out;
  for (size_t i = 0; i < gt.size(); ++i) {
    out.images.push_back(icdar_evaluate_image(gt[i], detections[i], params));
    const IcdarImageResult& r = out.images.back();
    out.gt_care += r.gt_care, out.det_care += r.det_care, out.matched += r.matched;
  }
  out.recall = out.gt_care == 0 ? 0 : double(out.matched) / double(out.gt_care);
  out.precision = out.det_care == 0 ? 0 : double(out.matched) / double(out.det_care);
  out.hmean = hmean_of(out.precision, out.recall);
  return out;
}

}  // namespace aim::data
