#include "models/detection/rpn.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/boxes/boxes.h"
#include "tensor/check.h"
#include "tensor/tensor.h"

namespace aim::models::detection {

std::vector<int64_t> sample_subset(std::vector<int64_t> values, int64_t k, data::PhiloxDraw& d) {
  const int64_t n = int64_t(values.size());
  if (k >= n) return values;
  k = std::max<int64_t>(k, 0);
  for (int64_t i = 0; i < k; ++i) std::swap(values[size_t(i)], values[size_t(i + d.below(n - i))]);
  values.resize(static_cast<size_t>(k));
  std::sort(values.begin(), values.end());
  return values;
}

AnchorTargets anchor_targets(const std::vector<double>& anchors, const double* gt, int64_t G,
                             double height, double width, const AnchorTargetConfig& c,
                             data::PhiloxDraw& d) {
  const int64_t N = int64_t(anchors.size() / 4);
  AnchorTargets r;
  r.labels.assign(size_t(N), -1);
  r.targets.assign(size_t(N * 4), 0.0f);
  std::vector<int64_t> inside;
  std::vector<double> in_boxes;
  for (int64_t i = 0; i < N; ++i) {
    const double* a = anchors.data() + 4 * i;
    if (a[0] >= -c.allowed_border && a[1] >= -c.allowed_border && a[2] < width + c.allowed_border &&
        a[3] < height + c.allowed_border) {
      inside.push_back(i);
      in_boxes.insert(in_boxes.end(), a, a + 4);
    }
  }
  const int64_t M = int64_t(inside.size());
  std::vector<int64_t> argmax(size_t(M), 0);
  if (G > 0 && M > 0) {
    const std::vector<double> ov = box_overlaps(in_boxes.data(), M, gt, G, 1.0);
    std::vector<double> gt_max(size_t(G), -1.0);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t g = 0; g < G; ++g)
        gt_max[size_t(g)] = std::max(gt_max[size_t(g)], ov[size_t(i * G + g)]);
    for (int64_t i = 0; i < M; ++i) {
      const double* row = ov.data() + i * G;
      const int64_t best = int64_t(std::max_element(row, row + G) - row);  // first maximum
      argmax[size_t(i)] = best;
      int64_t& l = r.labels[size_t(inside[size_t(i)])];
      if (row[best] < c.negative_overlap) l = 0;
      for (int64_t g = 0; g < G; ++g)
        if (row[g] == gt_max[size_t(g)]) l = 1;
      if (row[best] >= c.positive_overlap) l = 1;
    }
  } else {
    for (int64_t i : inside) r.labels[size_t(i)] = 0;
  }
  // Subsampling: positives first, then negatives (the order of anchor_target_layer.py).
  std::vector<int64_t> fg, bg;
  for (int64_t i : inside) {
    if (r.labels[size_t(i)] == 1) fg.push_back(i);
    if (r.labels[size_t(i)] == 0) bg.push_back(i);
  }
  const int64_t max_fg = int64_t(c.fg_fraction * double(c.batch_size));
  const std::vector<int64_t> fg_keep = sample_subset(fg, max_fg, d);
  const std::vector<int64_t> bg_keep = sample_subset(bg, c.batch_size - int64_t(fg_keep.size()), d);
  for (int64_t i : inside) r.labels[size_t(i)] = -1;
  for (int64_t i : fg_keep) r.labels[size_t(i)] = 1;
  for (int64_t i : bg_keep) r.labels[size_t(i)] = 0;
  r.num_fg = int64_t(fg_keep.size()), r.num_bg = int64_t(bg_keep.size());
  for (int64_t k = 0; k < M; ++k) {
    const int64_t i = inside[size_t(k)];
    if (r.labels[size_t(i)] != 1) continue;
    double t[4];
    bbox_transform(anchors.data() + 4 * i, gt + 4 * argmax[size_t(k)], 1, BoxTransform::legacy(),
                   t);
    for (int j = 0; j < 4; ++j) r.targets[size_t(4 * i + j)] = float(t[j]);
  }
  return r;
}

std::vector<float> propose(const float* scores, const float* deltas,
                           const std::vector<double>& anchors, double height, double width,
                           double im_scale, const ProposalConfig& c) {
  const int64_t N = int64_t(anchors.size() / 4);
  std::vector<double> d64(deltas, deltas + N * 4), boxes(size_t(N * 4));
  bbox_transform_inv(anchors.data(), d64.data(), N, BoxTransform::legacy(), boxes.data());
  clip_boxes(boxes.data(), N, height, width, 1.0);
  const double min_size = c.min_size * im_scale;
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < N; ++i) {
    const double* b = boxes.data() + 4 * i;
    if (b[2] - b[0] + 1 >= min_size && b[3] - b[1] + 1 >= min_size) keep.push_back(i);
  }
  std::stable_sort(keep.begin(), keep.end(),
                   [&](int64_t x, int64_t y) { return scores[x] > scores[y]; });
  if (c.pre_nms_top_n > 0 && int64_t(keep.size()) > c.pre_nms_top_n)
    keep.resize(size_t(c.pre_nms_top_n));
  const int64_t K = int64_t(keep.size());
  std::vector<float> cand(size_t(K * 4)), ext(size_t(K * 4)), sc(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) {
    for (int j = 0; j < 4; ++j)
      cand[size_t(4 * k + j)] = float(boxes[size_t(4 * keep[size_t(k)] + j)]);
    ext[size_t(4 * k)] = cand[size_t(4 * k)], ext[size_t(4 * k + 1)] = cand[size_t(4 * k + 1)];
    ext[size_t(4 * k + 2)] = cand[size_t(4 * k + 2)] + 1.0f;
    ext[size_t(4 * k + 3)] = cand[size_t(4 * k + 3)] + 1.0f;
    sc[size_t(k)] = scores[keep[size_t(k)]];
  }
  if (K == 0) return {};
  kernels::NmsArgs a;
  a.boxes = Tensor::from_vector(ext, {1, K, 4});
  a.scores = Tensor::from_vector(sc, {1, K});
  a.keep = Tensor::empty({1, K}, DType::i64);
  a.count = Tensor::empty({1}, DType::i64);
  a.iou_threshold = c.nms_thresh;
  a.max_out = c.post_nms_top_n > 0 ? c.post_nms_top_n : 0;
  kernels::nms(a);
  const int64_t n = a.count.data<int64_t>()[0];
  const int64_t* kept = a.keep.data<int64_t>();
  std::vector<float> out(size_t(n * 4));
  for (int64_t i = 0; i < n; ++i) std::copy_n(cand.begin() + 4 * kept[i], 4, out.begin() + 4 * i);
  return out;
}

RoiTargets proposal_targets(const std::vector<float>& proposals, const double* gt,
                            const int64_t* gt_labels, int64_t G, const ProposalTargetConfig& c,
                            data::PhiloxDraw& d) {
  AIM_CHECK(G >= 1, "proposal_targets: an image needs at least one gt box");
  const int64_t P = int64_t(proposals.size() / 4), N = P + G;
  std::vector<double> all(proposals.begin(), proposals.end());
  all.insert(all.end(), gt, gt + 4 * G);
  const std::vector<double> ov = box_overlaps(all.data(), N, gt, G, 1.0);
  std::vector<int64_t> assign(static_cast<size_t>(N)), fg, bg;
  std::vector<double> best(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) {
    const double* row = ov.data() + i * G;
    assign[size_t(i)] = int64_t(std::max_element(row, row + G) - row);
    best[size_t(i)] = row[assign[size_t(i)]];
    if (best[size_t(i)] >= c.fg_thresh) fg.push_back(i);
    if (best[size_t(i)] < c.bg_thresh_hi && best[size_t(i)] >= c.bg_thresh_lo) bg.push_back(i);
  }
  const int64_t fg_per_image = int64_t(std::nearbyint(c.fg_fraction * double(c.batch_size)));
  const std::vector<int64_t> fg_keep = sample_subset(fg, fg_per_image, d);
  const std::vector<int64_t> bg_keep = sample_subset(bg, c.batch_size - int64_t(fg_keep.size()), d);
  RoiTargets r;
  r.num_fg = int64_t(fg_keep.size());
  r.sampled = fg_keep;
  r.sampled.insert(r.sampled.end(), bg_keep.begin(), bg_keep.end());
  const int64_t R = int64_t(r.sampled.size());
  r.rois.resize(size_t(R * 4));
  r.labels.assign(size_t(R), 0);
  r.targets.assign(size_t(R * 4), 0.0f);
  for (int64_t k = 0; k < R; ++k) {
    const int64_t i = r.sampled[size_t(k)];
    for (int j = 0; j < 4; ++j) r.rois[size_t(4 * k + j)] = float(all[size_t(4 * i + j)]);
    if (k >= r.num_fg) continue;
    r.labels[size_t(k)] = gt_labels[assign[size_t(i)]];
    double t[4];
    bbox_transform(all.data() + 4 * i, gt + 4 * assign[size_t(i)], 1, BoxTransform::legacy(), t);
    for (int j = 0; j < 4; ++j)
      r.targets[size_t(4 * k + j)] = float((t[j] - c.means[j]) / c.stds[j]);
  }
  return r;
}

}  // namespace aim::models::detection
