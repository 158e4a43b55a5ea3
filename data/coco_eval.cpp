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

constexpr int kT = 10, kR = 101, kA = 4, kM = 3;
constexpr int64_t kMaxDets[kM] = {1, 10, 100};
const double kAreaRng[kA][2] = {
    {0, 1e5 * 1e5}, {0, 32.0 * 32.0}, {32.0 * 32.0, 96.0 * 96.0}, {96.0 * 96.0, 1e5 * 1e5}};

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

// evaluateImg's result for one (image, category, area range), maxDet 100.
struct ImgEval {
  std::vector<double> scores;        // detections by score, at most 100
  std::vector<char> matched[kT];     // per threshold, per detection: matched to an object
  std::vector<char> det_ignore[kT];  // per threshold, per detection
  int64_t gt_not_ignored = 0;
};

}  // namespace

CocoStats coco_evaluate_bbox(const std::vector<CocoEvalGt>& gts,
                             const std::vector<CocoEvalDet>& dets, std::vector<int64_t> image_ids,
                             std::vector<int64_t> category_ids) {
  std::sort(image_ids.begin(), image_ids.end());
  image_ids.erase(std::unique(image_ids.begin(), image_ids.end()), image_ids.end());
  std::sort(category_ids.begin(), category_ids.end());
  category_ids.erase(std::unique(category_ids.begin(), category_ids.end()), category_ids.end());
  const std::set<int64_t> images(image_ids.begin(), image_ids.end()),
      cats(category_ids.begin(), category_ids.end());
  for (size_t i = 0; i < gts.size(); ++i) {
    AIM_CHECK(gts[i].id > 0, "coco eval: ground truth ", i, " has id ", gts[i].id,
              " (COCO ids are > 0)");
    AIM_CHECK(images.count(gts[i].image_id) && cats.count(gts[i].category_id),
              "coco eval: ground truth ", i, " is on image ", gts[i].image_id, " / category ",
              gts[i].category_id, ", not in the image and category lists");
  }
  for (size_t i = 0; i < dets.size(); ++i)
    AIM_CHECK(images.count(dets[i].image_id), "coco eval: detection ", i, " is on image ",
              dets[i].image_id, ", which is not in the ground-truth set");
  // _gts / _dts: per (image, category), in input order.
  std::map<std::pair<int64_t, int64_t>, std::vector<const CocoEvalGt*>> by_gt;
  std::map<std::pair<int64_t, int64_t>, std::vector<const CocoEvalDet*>> by_dt;
  for (const CocoEvalGt& g : gts) by_gt[{g.image_id, g.category_id}].push_back(&g);
  for (const CocoEvalDet& d : dets)
    if (cats.count(d.category_id)) by_dt[{d.image_id, d.category_id}].push_back(&d);
  const std::vector<double> iou_thrs = linspace(0.5, 0.95, kT), rec_thrs = linspace(0.0, 1.0, kR);

  const size_t K = category_ids.size();
  // precision[t][r][k][a][m], recall[t][k][a][m]; -1 where undefined.
  std::vector<double> precision(size_t(kT) * kR * K * kA * kM, -1.0),
      recall(size_t(kT) * K * kA * kM, -1.0);
  auto P = [&](int t, int r, size_t k, int a, int m) -> double& {
    return precision[(((size_t(t) * kR + size_t(r)) * K + k) * kA + size_t(a)) * kM + size_t(m)];
  };
  auto Rc = [&](int t, size_t k, int a, int m) -> double& {
    return recall[((size_t(t) * K + k) * kA + size_t(a)) * kM + size_t(m)];
  };

  for (size_t k = 0; k < K; ++k) {
    const int64_t cat = category_ids[k];
    for (int a = 0; a < kA; ++a) {
      std::vector<ImgEval> evals;  // the non-empty images, in image id order
      for (int64_t img : image_ids) {
        static const std::vector<const CocoEvalGt*> kNoGt;
        static const std::vector<const CocoEvalDet*> kNoDt;
        const auto gi = by_gt.find({img, cat});
        const auto di = by_dt.find({img, cat});
        const auto& g0 = gi == by_gt.end() ? kNoGt : gi->second;
        const auto& d0 = di == by_dt.end() ? kNoDt : di->second;
        if (g0.empty() && d0.empty()) continue;
        // Ground truth: ignored ones (crowd, or area outside the range) last, stable.
        std::vector<const CocoEvalGt*> g(g0);
        auto ignored = [&](const CocoEvalGt* x) {
          return x->iscrowd || x->area < kAreaRng[a][0] || x->area > kAreaRng[a][1];
        };
        std::stable_partition(g.begin(), g.end(), [&](const CocoEvalGt* x) { return !ignored(x); });
        // Detections by score (stable), at most 100.
        std::vector<const CocoEvalDet*> d(d0);
        std::stable_sort(d.begin(), d.end(), [](const CocoEvalDet* x, const CocoEvalDet* y) {
          return x->score > y->score;
        });
        if (d.size() > 100) d.resize(100);
        ImgEval e;
        for (const CocoEvalDet* x : d) e.scores.push_back(x->score);
        std::vector<char> gt_ig(g.size());
        for (size_t j = 0; j < g.size(); ++j) {
          gt_ig[j] = ignored(g[j]);
          e.gt_not_ignored += !gt_ig[j];
        }
        std::vector<double> ious(d.size() * g.size());
        for (size_t i = 0; i < d.size(); ++i)
          for (size_t j = 0; j < g.size(); ++j) ious[i * g.size() + j] = bb_iou(*d[i], *g[j]);
        for (int t = 0; t < kT; ++t) {
          std::vector<char> gtm(g.size(), 0);
          e.matched[t].assign(d.size(), 0);
          e.det_ignore[t].assign(d.size(), 0);
          for (size_t i = 0; i < d.size(); ++i) {
            double iou = std::min(iou_thrs[size_t(t)], 1 - 1e-10);
            int64_t m = -1;
            for (size_t j = 0; j < g.size(); ++j) {
              if (gtm[j] && !g[j]->iscrowd) continue;
              if (m > -1 && !gt_ig[size_t(m)] && gt_ig[j]) break;
              if (ious[i * g.size() + j] < iou) continue;
              iou = ious[i * g.size() + j];
              m = int64_t(j);
            }
            if (m == -1) continue;
            e.det_ignore[t][i] = gt_ig[size_t(m)];
            e.matched[t][i] = 1;
            gtm[size_t(m)] = 1;
          }
          // Unmatched detections outside the area range are ignored.
          for (size_t i = 0; i < d.size(); ++i) {
            const double area = d[i]->w * d[i]->h;
            if (!e.matched[t][i] && (area < kAreaRng[a][0] || area > kAreaRng[a][1]))
              e.det_ignore[t][i] = 1;
          }
        }
        evals.push_back(std::move(e));
      }
      if (evals.empty()) continue;
      for (int m = 0; m < kM; ++m) {
        const size_t maxdet = size_t(kMaxDets[m]);
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
        for (int t = 0; t < kT; ++t) {
          std::vector<double> rc, pr;
          double tp = 0, fp = 0;
          for (const Ref& r : all) {
            const bool ig = evals[r.e].det_ignore[t][r.i], mt = evals[r.e].matched[t][r.i];
            tp += mt && !ig;
            fp += !mt && !ig;
            rc.push_back(tp / double(npig));
            pr.push_back(tp / (fp + tp + std::numeric_limits<double>::epsilon()));
          }
          Rc(t, k, a, m) = rc.empty() ? 0 : rc.back();
          for (size_t i = pr.size(); i-- > 1;)
            if (pr[i] > pr[i - 1]) pr[i - 1] = pr[i];
          for (int r = 0; r < kR; ++r) {
            // numpy.searchsorted(rc, thr, side='left'); past the end: 0 (and the rest too).
            const size_t pi =
                size_t(std::lower_bound(rc.begin(), rc.end(), rec_thrs[size_t(r)]) - rc.begin());
            P(t, r, k, a, m) = pi < pr.size() ? pr[pi] : 0.0;
          }
        }
      }
    }
  }
  // summarize(): the mean over the defined (> -1) entries of a slice, else -1.
  auto mean_of = [&](bool ap, int t_only, int a, int m) {
    double s = 0;
    int64_t n = 0;
    for (int t = 0; t < kT; ++t) {
      if (t_only >= 0 && t != t_only) continue;
      for (size_t k = 0; k < K; ++k) {
        if (ap) {
          for (int r = 0; r < kR; ++r)
            if (P(t, r, k, a, m) > -1) s += P(t, r, k, a, m), ++n;
        } else if (Rc(t, k, a, m) > -1) {
          s += Rc(t, k, a, m), ++n;
        }
      }
    }
    return n == 0 ? -1.0 : s / double(n);
  };
  const int t50 = 0, t75 = 5;  // iouThrs[0] == .5, iouThrs[5] == .75
  return {mean_of(true, -1, 0, 2),  mean_of(true, t50, 0, 2), mean_of(true, t75, 0, 2),
          mean_of(true, -1, 1, 2),  mean_of(true, -1, 2, 2),  mean_of(true, -1, 3, 2),
          mean_of(false, -1, 0, 0), mean_of(false, -1, 0, 1), mean_of(false, -1, 0, 2),
          mean_of(false, -1, 1, 2), mean_of(false, -1, 2, 2), mean_of(false, -1, 3, 2)};
}

}  // namespace aim::data
