#include "data/coco_eval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "tensor/check.h"

namespace aim::data {
namespace {

constexpr int kR = 101;  // recall thresholds
constexpr double kAreaMax = 1e5 * 1e5;

// numpy.linspace(start, stop, num)'s values: start + i * ((stop - start) / (num - 1)), the last
// one exactly stop.
std::vector<double> linspace(double start, double stop, int num) {
  std::vector<double> v(static_cast<size_t>(num));
  const double step = (stop - start) / double(num - 1);
  for (int i = 0; i < num; ++i) v[size_t(i)] = double(i) * step + start;
  v[size_t(num - 1)] = stop;
  return v;
}

// maskApi.c's bbIou for one pair (the union is the detection's area for a crowd object).
double bb_iou(const CocoEvalDet& d, const CocoEvalGt& g) {
  const double w = std::min(d.w + d.x, g.w + g.x) - std::max(d.x, g.x);
  if (w <= 0) return 0;
  const double h = std::min(d.h + d.y, g.h + g.y) - std::max(d.y, g.y);
  if (h <= 0) return 0;
  const double i = w * h, da = d.w * d.h, ga = g.w * g.h;
  return i / (g.iscrowd ? da : da + ga - i);
}

// evaluateImg's result for one (image, category, area range), at most maxDets[-1] detections.
struct ImgEval {
  std::vector<double> scores;                 // detections by score
  std::vector<std::vector<char>> matched;     // [threshold][detection]: matched to an object
  std::vector<std::vector<char>> det_ignore;  // [threshold][detection]
  int64_t gt_not_ignored = 0;
};

void sort_unique(std::vector<int64_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace

CocoEvalParams CocoEvalParams::detection() {
  return {linspace(0.5, 0.95, 10),
          {{0, kAreaMax}, {0, 32.0 * 32.0}, {32.0 * 32.0, 96.0 * 96.0}, {96.0 * 96.0, kAreaMax}},
          {1, 10, 100}};
}

CocoEvalParams CocoEvalParams::keypoints() {
  return {linspace(0.5, 0.95, 10),
          {{0, kAreaMax}, {32.0 * 32.0, 96.0 * 96.0}, {96.0 * 96.0, kAreaMax}},
          {20}};
}

double CocoEvalAccumulated::mean(bool ap, int t_only, size_t a, size_t m) const {
  double s = 0;
  int64_t n = 0;
  for (size_t t = 0; t < T; ++t) {
    if (t_only >= 0 && t != size_t(t_only)) continue;
    for (size_t k = 0; k < K; ++k) {
      if (ap) {
        for (size_t r = 0; r < size_t(kR); ++r) {
          const double p = precision[(((t * kR + r) * K + k) * A + a) * M + m];
          if (p > -1) s += p, ++n;
        }
      } else {
        const double rc = recall[((t * K + k) * A + a) * M + m];
        if (rc > -1) s += rc, ++n;
      }
    }
  }
  return n == 0 ? -1.0 : s / double(n);
}

CocoEvalAccumulated coco_evaluate(const std::vector<CocoEvalObject>& gts,
                                  const std::vector<CocoEvalScored>& dets,
                                  std::vector<int64_t> image_ids, std::vector<int64_t> category_ids,
                                  const CocoEvalParams& p,
                                  const std::function<double(size_t d, size_t g)>& iou_of) {
  sort_unique(image_ids);
  sort_unique(category_ids);
  AIM_CHECK(!p.iou_thresholds.empty() && !p.area_ranges.empty() && !p.max_dets.empty(),
            "coco eval: empty parameters");
  const std::set<int64_t> images(image_ids.begin(), image_ids.end()),
      cats(category_ids.begin(), category_ids.end());
  for (size_t i = 0; i < gts.size(); ++i)
    AIM_CHECK(images.count(gts[i].image_id) && cats.count(gts[i].category_id),
              "coco eval: ground truth ", i, " is on image ", gts[i].image_id, " / category ",
              gts[i].category_id, ", not in the image and category lists");
  for (size_t i = 0; i < dets.size(); ++i)
    AIM_CHECK(images.count(dets[i].image_id), "coco eval: detection ", i, " is on image ",
              dets[i].image_id, ", which is not in the ground-truth set");
  // _gts / _dts: per (image, category), indices in input order.
  std::map<std::pair<int64_t, int64_t>, std::vector<size_t>> by_gt, by_dt;
  for (size_t i = 0; i < gts.size(); ++i) by_gt[{gts[i].image_id, gts[i].category_id}].push_back(i);
  for (size_t i = 0; i < dets.size(); ++i)
    if (cats.count(dets[i].category_id))
      by_dt[{dets[i].image_id, dets[i].category_id}].push_back(i);
  const std::vector<double> rec_thrs = linspace(0.0, 1.0, kR);

  CocoEvalAccumulated out;
  const size_t T = p.iou_thresholds.size(), K = category_ids.size(), A = p.area_ranges.size(),
               M = p.max_dets.size();
  out.T = T, out.K = K, out.A = A, out.M = M;
  out.precision.assign(T * kR * K * A * M, -1.0);
  out.recall.assign(T * K * A * M, -1.0);
  const size_t max_det = size_t(p.max_dets.back());
  static const std::vector<size_t> kNone;

  for (size_t k = 0; k < K; ++k) {
    const int64_t cat = category_ids[k];
    // Per image: detections by score (stable), at most maxDets[-1]; their IoUs with every object
    // (computeIoU / computeOks, in the objects' input order).
    struct ImgData {
      std::vector<size_t> d, g;
      std::vector<double> ious;  // [d][g]
    };
    std::vector<ImgData> imgs;
    for (int64_t img : image_ids) {
      const auto gi = by_gt.find({img, cat});
      const auto di = by_dt.find({img, cat});
      ImgData x;
      x.g = gi == by_gt.end() ? kNone : gi->second;
      x.d = di == by_dt.end() ? kNone : di->second;
      if (x.g.empty() && x.d.empty()) continue;
      std::stable_sort(x.d.begin(), x.d.end(),
                       [&](size_t a, size_t b) { return dets[a].score > dets[b].score; });
      if (x.d.size() > max_det) x.d.resize(max_det);
      x.ious.resize(x.d.size() * x.g.size());
      for (size_t i = 0; i < x.d.size(); ++i)
        for (size_t j = 0; j < x.g.size(); ++j) x.ious[i * x.g.size() + j] = iou_of(x.d[i], x.g[j]);
      imgs.push_back(std::move(x));
    }
    for (size_t a = 0; a < A; ++a) {
      const double lo = p.area_ranges[a][0], hi = p.area_ranges[a][1];
      std::vector<ImgEval> evals;  // the non-empty images, in image id order
      for (const ImgData& x : imgs) {
        // Ground truth: ignored ones (flagged, or area outside the range) last, stable.
        auto ignored = [&](size_t j) {
          const CocoEvalObject& o = gts[x.g[j]];
          return o.ignore || o.area < lo || o.area > hi;
        };
        std::vector<size_t> order(x.g.size());
        std::iota(order.begin(), order.end(), size_t(0));
        std::stable_partition(order.begin(), order.end(), [&](size_t j) { return !ignored(j); });
        const size_t G = order.size(), D = x.d.size();
        ImgEval e;
        for (size_t i : x.d) e.scores.push_back(dets[i].score);
        std::vector<char> gt_ig(G), crowd(G);
        for (size_t j = 0; j < G; ++j) {
          gt_ig[j] = ignored(order[j]);
          crowd[j] = gts[x.g[order[j]]].iscrowd;
          e.gt_not_ignored += !gt_ig[j];
        }
        e.matched.assign(T, std::vector<char>(D, 0));
        e.det_ignore.assign(T, std::vector<char>(D, 0));
        for (size_t t = 0; t < T; ++t) {
          std::vector<char> gtm(G, 0);
          for (size_t i = 0; i < D; ++i) {
            double best = std::min(p.iou_thresholds[t], 1 - 1e-10);
            int64_t m = -1;
            for (size_t j = 0; j < G; ++j) {
              if (gtm[j] && !crowd[j]) continue;
              if (m > -1 && !gt_ig[size_t(m)] && gt_ig[j]) break;
              const double v = x.ious[i * x.g.size() + order[j]];
              if (v < best) continue;
              best = v;
              m = int64_t(j);
            }
            if (m == -1) continue;
            e.det_ignore[t][i] = gt_ig[size_t(m)];
            e.matched[t][i] = 1;
            gtm[size_t(m)] = 1;
          }
          // Unmatched detections outside the area range are ignored.
          for (size_t i = 0; i < D; ++i) {
            const double area = dets[x.d[i]].area;
            if (!e.matched[t][i] && (area < lo || area > hi)) e.det_ignore[t][i] = 1;
          }
        }
        evals.push_back(std::move(e));
      }
      if (evals.empty()) continue;
      for (size_t m = 0; m < M; ++m) {
        const size_t maxdet = size_t(p.max_dets[m]);
        // Every image's first maxDet detections, then a stable sort by score.
        struct Ref {
          double score;
          size_t e, i;
        };
        std::vector<Ref> all;
        int64_t npig = 0;
        for (size_t e = 0; e < evals.size(); ++e) {
          for (size_t i = 0; i < std::min(maxdet, evals[e].scores.size()); ++i)
            all.push_back({evals[e].scores[i], e, i});
          npig += evals[e].gt_not_ignored;
        }
        if (npig == 0) continue;
        std::stable_sort(all.begin(), all.end(),
                         [](const Ref& x, const Ref& y) { return x.score > y.score; });
        for (size_t t = 0; t < T; ++t) {
          std::vector<double> rc, pr;
          double tp = 0, fp = 0;
          for (const Ref& r : all) {
            const bool ig = evals[r.e].det_ignore[t][r.i], mt = evals[r.e].matched[t][r.i];
            tp += mt && !ig;
            fp += !mt && !ig;
            rc.push_back(tp / double(npig));
            pr.push_back(tp / (fp + tp + std::numeric_limits<double>::epsilon()));
          }
          out.recall[((t * K + k) * A + a) * M + m] = rc.empty() ? 0 : rc.back();
          for (size_t i = pr.size(); i-- > 1;)
            if (pr[i] > pr[i - 1]) pr[i - 1] = pr[i];
          for (size_t r = 0; r < size_t(kR); ++r) {
            // numpy.searchsorted(rc, thr, side='left'); past the end: 0 (and the rest too).
            const size_t pi =
                size_t(std::lower_bound(rc.begin(), rc.end(), rec_thrs[r]) - rc.begin());
            out.precision[(((t * kR + r) * K + k) * A + a) * M + m] = pi < pr.size() ? pr[pi] : 0.0;
          }
        }
      }
    }
  }
  return out;
}

CocoStats coco_summarize_detection(const CocoEvalAccumulated& e) {
  AIM_CHECK(e.A == 4 && e.M == 3 && e.T == 10,
            "coco eval: detection summary needs 10 thresholds, "
            "4 area ranges and 3 maxDets (got ",
            e.T, ", ", e.A, ", ", e.M, ")");
  const int t50 = 0, t75 = 5;  // iouThrs[0] == .5, iouThrs[5] == .75
  return {e.mean(true, -1, 0, 2),  e.mean(true, t50, 0, 2), e.mean(true, t75, 0, 2),
          e.mean(true, -1, 1, 2),  e.mean(true, -1, 2, 2),  e.mean(true, -1, 3, 2),
          e.mean(false, -1, 0, 0), e.mean(false, -1, 0, 1), e.mean(false, -1, 0, 2),
          e.mean(false, -1, 1, 2), e.mean(false, -1, 2, 2), e.mean(false, -1, 3, 2)};
}

std::array<double, 10> coco_summarize_keypoints(const CocoEvalAccumulated& e) {
  AIM_CHECK(e.A == 3 && e.M == 1 && e.T == 10,
            "coco eval: keypoint summary needs 10 thresholds, "
            "3 area ranges and 1 maxDets (got ",
            e.T, ", ", e.A, ", ", e.M, ")");
  const int t50 = 0, t75 = 5;
  return {e.mean(true, -1, 0, 0),   e.mean(true, t50, 0, 0),  e.mean(true, t75, 0, 0),
          e.mean(true, -1, 1, 0),   e.mean(true, -1, 2, 0),   e.mean(false, -1, 0, 0),
          e.mean(false, t50, 0, 0), e.mean(false, t75, 0, 0), e.mean(false, -1, 1, 0),
          e.mean(false, -1, 2, 0)};
}

CocoStats coco_evaluate_bbox(const std::vector<CocoEvalGt>& gts,
                             const std::vector<CocoEvalDet>& dets, std::vector<int64_t> image_ids,
                             std::vector<int64_t> category_ids) {
  std::vector<CocoEvalObject> objects(gts.size());
  for (size_t i = 0; i < gts.size(); ++i) {
    AIM_CHECK(gts[i].id > 0, "coco eval: ground truth ", i, " has id ", gts[i].id,
              " (COCO ids are > 0)");
    objects[i] = {gts[i].image_id, gts[i].category_id, gts[i].area, gts[i].iscrowd, gts[i].iscrowd};
  }
  std::vector<CocoEvalScored> scored(dets.size());
  for (size_t i = 0; i < dets.size(); ++i)
    scored[i] = {dets[i].image_id, dets[i].category_id, dets[i].w * dets[i].h, dets[i].score};
  return coco_summarize_detection(coco_evaluate(
      objects, scored, std::move(image_ids), std::move(category_ids), CocoEvalParams::detection(),
      [&](size_t d, size_t g) { return bb_iou(dets[d], gts[g]); }));
}

}  // namespace aim::data
