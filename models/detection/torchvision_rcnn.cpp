#include "models/detection/torchvision_rcnn.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/loss.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/roi.h"
#include "autograd/functions/shape.h"
#include "kernels/boxes/boxes.h"
#include "models/detection/box_coder.h"
#include "models/detection/rpn.h"
#include "tensor/check.h"

namespace aim::models::detection {

namespace ag = aim::autograd;
using autograd::Variable;

namespace {

// torchvision.ops.nms on one image's boxes [K * 4], returning the kept indices (decreasing
// score; ties: lower index first).
std::vector<int64_t> nms_indices(const std::vector<float>& boxes, const std::vector<float>& scores,
                                 float iou) {
  const int64_t K = int64_t(scores.size());
  if (K == 0) return {};
  kernels::NmsArgs a;
  a.boxes = Tensor::from_vector(boxes, {1, K, 4});
  a.scores = Tensor::from_vector(scores, {1, K});
  a.keep = Tensor::empty({1, K}, DType::i64);
  a.count = Tensor::empty({1}, DType::i64);
  a.iou_threshold = double(iou);
  kernels::nms(a);
  const int64_t n = a.count.data<int64_t>()[0];
  const int64_t* k = a.keep.data<int64_t>();
  return std::vector<int64_t>(k, k + n);
}

// torchvision.ops.batched_nms as it runs on the CPU: above 4000 coordinates, NMS per group and
// the kept boxes by decreasing score (_batched_nms_vanilla); otherwise every box shifted by
// group (max coordinate + 1) in f32 and one NMS (_batched_nms_coordinate_trick), whose rounding
// of the shifted IoUs this reproduces.
std::vector<int64_t> batched_nms(const std::vector<float>& boxes, const std::vector<float>& scores,
                                 const std::vector<int64_t>& groups, float iou) {
  const int64_t K = int64_t(scores.size());
  if (K == 0) return {};
  if (4 * K > 4000) {
    // One NMS per group (its own kernels::nms call, so the recorded cost is the groups' own
    // pairs), then the kept boxes of all groups by decreasing score, ties lower index first.
    std::vector<int64_t> order(static_cast<size_t>(K));
    std::iota(order.begin(), order.end(), int64_t(0));
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t x, int64_t y) { return groups[size_t(x)] < groups[size_t(y)]; });
    std::vector<int64_t> kept;
    for (size_t i = 0; i < order.size();) {
      size_t j = i;
      std::vector<float> gb, gs;
      while (j < order.size() && groups[size_t(order[j])] == groups[size_t(order[i])]) {
        const int64_t k = order[j++];
        gb.insert(gb.end(), boxes.begin() + 4 * k, boxes.begin() + 4 * k + 4);
        gs.push_back(scores[size_t(k)]);
      }
      for (int64_t k : nms_indices(gb, gs, iou)) kept.push_back(order[i + size_t(k)]);
      i = j;
    }
    std::sort(kept.begin(), kept.end());
    std::stable_sort(kept.begin(), kept.end(),
                     [&](int64_t x, int64_t y) { return scores[size_t(x)] > scores[size_t(y)]; });
    return kept;
  }
  const float top = *std::max_element(boxes.begin(), boxes.end()) + 1.0f;
  std::vector<float> shifted(boxes.size());
  for (int64_t i = 0; i < K; ++i)
    for (int j = 0; j < 4; ++j)
      shifted[size_t(4 * i + j)] = boxes[size_t(4 * i + j)] + float(groups[size_t(i)]) * top;
  return nms_indices(shifted, scores, iou);
}

void clip_to_image(float* b, int64_t n, int64_t h, int64_t w) {
  for (int64_t i = 0; i < n; ++i, b += 4) {
    b[0] = std::min(std::max(b[0], 0.0f), float(w)),
    b[2] = std::min(std::max(b[2], 0.0f), float(w));
    b[1] = std::min(std::max(b[1], 0.0f), float(h)),
    b[3] = std::min(std::max(b[3], 0.0f), float(h));
  }
}

bool large_enough(const float* b, float min_size) {
  return b[2] - b[0] >= min_size && b[3] - b[1] >= min_size;
}

}  // namespace

std::vector<float> tv_cell_anchors(const std::vector<float>& sizes,
                                   const std::vector<float>& ratios) {
  std::vector<float> out;
  for (float r : ratios) {
    const float hr = std::sqrt(r), wr = 1.0f / hr;
    for (float s : sizes) {
      const float ws = wr * s, hs = hr * s;
      for (float v : {-ws, -hs, ws, hs}) out.push_back(std::nearbyint(v / 2.0f));
    }
  }
  return out;
}

std::vector<float> tv_grid_anchors(const std::vector<float>& cell, int64_t H, int64_t W,
                                   int64_t stride_h, int64_t stride_w) {
  const int64_t A = int64_t(cell.size() / 4);
  std::vector<float> out;
  out.reserve(size_t(H * W * A * 4));
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x) {
      const float sx = float(x * stride_w), sy = float(y * stride_h);
      for (int64_t a = 0; a < A; ++a) {
        const float* c = cell.data() + 4 * a;
        out.insert(out.end(), {sx + c[0], sy + c[1], sx + c[2], sy + c[3]});
      }
    }
  return out;
}

std::vector<float> FpnAnchors::anchors(const std::vector<std::pair<int64_t, int64_t>>& grids,
                                       int64_t pad_h, int64_t pad_w,
                                       std::vector<int64_t>* counts) const {
  AIM_CHECK(grids.size() == sizes.size(), "[fpn anchors] ", grids.size(), " feature maps for ",
            sizes.size(), " anchor sizes");
  std::vector<float> out;
  if (counts) counts->clear();
  for (size_t l = 0; l < grids.size(); ++l) {
    const auto [H, W] = grids[l];
    AIM_CHECK(H > 0 && W > 0 && H <= pad_h && W <= pad_w, "[fpn anchors] level ", l, " grid ", H,
              "x", W, " for an image of ", pad_h, "x", pad_w);
    const std::vector<float> g =
        tv_grid_anchors(tv_cell_anchors(sizes[l], ratios), H, W, pad_h / H, pad_w / W);
    out.insert(out.end(), g.begin(), g.end());
    if (counts) counts->push_back(int64_t(g.size() / 4));
  }
  return out;
}

std::vector<float> tv_box_iou(const float* a, int64_t G, const float* b, int64_t N) {
  std::vector<float> out(size_t(G * N)), area_b(static_cast<size_t>(N));
  for (int64_t j = 0; j < N; ++j) area_b[size_t(j)] = kernels::box_area(b + 4 * j);
  for (int64_t g = 0; g < G; ++g) {
    const float area_a = kernels::box_area(a + 4 * g);
    for (int64_t j = 0; j < N; ++j)
      out[size_t(g * N + j)] =
          kernels::box_iou_value(a + 4 * g, area_a, b + 4 * j, area_b[size_t(j)]);
  }
  return out;
}

std::vector<int64_t> Matcher::match(const std::vector<float>& iou, int64_t G, int64_t N) const {
  AIM_CHECK(G >= 1 && int64_t(iou.size()) == G * N, "[matcher] ", iou.size(), " IoUs for ", G,
            " x ", N);
  std::vector<int64_t> best(static_cast<size_t>(N), 0), m(static_cast<size_t>(N));
  std::vector<float> val(static_cast<size_t>(N));
  for (int64_t j = 0; j < N; ++j) {
    float v = iou[size_t(j)];
    for (int64_t g = 1; g < G; ++g)
      if (iou[size_t(g * N + j)] > v) v = iou[size_t(g * N + j)], best[size_t(j)] = g;
    val[size_t(j)] = v;
    m[size_t(j)] = v < low ? kBelow : v < high ? kBetween : best[size_t(j)];
  }
  if (allow_low_quality) {
    for (int64_t g = 0; g < G; ++g) {
      const float* row = iou.data() + g * N;
      const float top = *std::max_element(row, row + N);
      for (int64_t j = 0; j < N; ++j)
        if (row[j] == top) m[size_t(j)] = best[size_t(j)];
    }
  }
  return m;
}

SampledSets balanced_sample(const std::vector<int64_t>& labels, int64_t batch, double fraction,
                            data::PhiloxDraw& d) {
  std::vector<int64_t> pos, neg;
  for (int64_t i = 0; i < int64_t(labels.size()); ++i) {
    if (labels[size_t(i)] >= 1) pos.push_back(i);
    if (labels[size_t(i)] == 0) neg.push_back(i);
  }
  const int64_t num_pos = std::min<int64_t>(int64_t(pos.size()), int64_t(double(batch) * fraction));
  const int64_t num_neg = std::min<int64_t>(int64_t(neg.size()), batch - num_pos);
  SampledSets s;
  s.pos = sample_subset(pos, num_pos, d);
  s.neg = sample_subset(neg, num_neg, d);
  return s;
}

Proposals rpn_proposals(const float* logits, const float* deltas, const std::vector<float>& anchors,
                        const std::vector<int64_t>& counts, int64_t im_h, int64_t im_w,
                        const RpnConfig& c) {
  const int64_t N = int64_t(anchors.size() / 4);
  AIM_CHECK(std::accumulate(counts.begin(), counts.end(), int64_t(0)) == N, "[rpn proposals] ",
            "level counts do not add up to the ", N, " anchors");
  // Per level, the pre_nms_top_n highest logits (torch.topk: descending; ties lower index first).
  std::vector<int64_t> top, level;
  int64_t off = 0;
  for (size_t l = 0; l < counts.size(); ++l) {
    std::vector<int64_t> idx(static_cast<size_t>(counts[l]));
    std::iota(idx.begin(), idx.end(), off);
    const int64_t k = std::min(c.pre_nms_top_n, counts[l]);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t x, int64_t y) {
      return logits[x] > logits[y] || (logits[x] == logits[y] && x < y);
    });
    top.insert(top.end(), idx.begin(), idx.begin() + k);
    level.insert(level.end(), size_t(k), int64_t(l));
    off += counts[l];
  }
  const BoxCoderWeights w{1, 1, 1, 1};
  std::vector<float> boxes, scores;
  std::vector<int64_t> lvl;
  for (size_t i = 0; i < top.size(); ++i) {
    const int64_t a = top[i];
    float b[4];
    decode_boxes(deltas + 4 * a, anchors.data() + 4 * a, 1, w, b);
    clip_to_image(b, 1, im_h, im_w);
    if (!large_enough(b, c.min_size)) continue;
    const float s = 1.0f / (1.0f + std::exp(-logits[a]));
    if (!(s >= c.score_thresh)) continue;
    boxes.insert(boxes.end(), b, b + 4);
    scores.push_back(s);
    lvl.push_back(level[i]);
  }
  std::vector<int64_t> keep = batched_nms(boxes, scores, lvl, c.nms_thresh);
  if (int64_t(keep.size()) > c.post_nms_top_n) keep.resize(size_t(c.post_nms_top_n));
  Proposals p;
  for (int64_t k : keep) {
    p.boxes.insert(p.boxes.end(), boxes.begin() + 4 * k, boxes.begin() + 4 * k + 4);
    p.scores.push_back(scores[size_t(k)]);
  }
  return p;
}

RpnTargets rpn_targets(const std::vector<float>& anchors, const float* gt, int64_t G,
                       const RpnConfig& c) {
  const int64_t N = int64_t(anchors.size() / 4);
  RpnTargets t;
  t.labels.assign(size_t(N), 0);
  t.targets.assign(size_t(N * 4), 0.0f);
  std::vector<float> matched(size_t(N * 4), 0.0f);
  if (G > 0) {
    const std::vector<int64_t> m =
        Matcher{c.fg_iou, c.bg_iou, true}.match(tv_box_iou(gt, G, anchors.data(), N), G, N);
    for (int64_t i = 0; i < N; ++i) {
      const int64_t g = m[size_t(i)];
      t.labels[size_t(i)] = g >= 0 ? 1 : g == Matcher::kBelow ? 0 : -1;
      std::copy_n(gt + 4 * std::max<int64_t>(g, 0), 4, matched.begin() + 4 * i);
    }
  }
  encode_boxes(matched.data(), anchors.data(), N, BoxCoderWeights{1, 1, 1, 1}, t.targets.data());
  return t;
}

RpnLosses rpn_loss(const Variable& objectness, const Variable& deltas,
                   const std::vector<RpnTargets>& targets,
                   const std::vector<SampledSets>& sampled) {
  AIM_CHECK(targets.size() == sampled.size() && !targets.empty(), "[rpn loss] ", targets.size(),
            " targets for ", sampled.size(), " sampled images");
  const int64_t N = int64_t(targets[0].labels.size());
  AIM_CHECK(objectness.numel() == N * int64_t(targets.size()) &&
                deltas.numel() == 4 * N * int64_t(targets.size()),
            "[rpn loss] objectness of ", objectness.numel(), " and deltas of ", deltas.numel(),
            " values for ", targets.size(), " images of ", N, " anchors");
  const Device dev = objectness.device();
  const DType dt = objectness.dtype();
  std::vector<int64_t> pos, neg;
  std::vector<float> pos_t;
  for (size_t b = 0; b < targets.size(); ++b) {
    for (int64_t i : sampled[b].pos) {
      pos.push_back(int64_t(b) * N + i);
      pos_t.insert(pos_t.end(), targets[b].targets.begin() + 4 * i,
                   targets[b].targets.begin() + 4 * i + 4);
    }
    for (int64_t i : sampled[b].neg) neg.push_back(int64_t(b) * N + i);
  }
  std::vector<int64_t> all = pos;
  all.insert(all.end(), neg.begin(), neg.end());
  AIM_CHECK(!all.empty(), "[rpn loss] no sampled anchors");
  const int64_t P = int64_t(pos.size()), S = int64_t(all.size());
  std::vector<float> lab(size_t(S), 0.0f);
  std::fill(lab.begin(), lab.begin() + P, 1.0f);
  RpnLosses r;
  const Variable obj = ag::index_select(ag::reshape(objectness, {N * int64_t(targets.size())}), 0,
                                        Tensor::from_vector(all, {S}, dev));
  r.objectness = ag::bce_with_logits(obj, Tensor::from_vector(lab, {S}).to(dt).to(dev));
  const Variable d4 = ag::reshape(deltas, {N * int64_t(targets.size()), 4});
  if (P > 0) {
    const Variable sel = ag::index_select(d4, 0, Tensor::from_vector(pos, {P}, dev));
    r.box_reg = ag::mul(ag::smooth_l1_loss(sel, Tensor::from_vector(pos_t, {P, 4}).to(dt).to(dev),
                                           1.0 / 9.0, kernels::Reduction::sum),
                        1.0 / double(S));
  } else {
    r.box_reg = ag::mul(ag::sum(d4), 0.0);
  }
  return r;
}

RoiSamples roi_training_samples(const std::vector<float>& proposals, const float* gt,
                                const int64_t* gt_labels, int64_t G, const RoiHeadsConfig& c,
                                data::PhiloxDraw& d) {
  std::vector<float> cand = proposals;
  const float zero_box[4] = {0, 0, 0, 0};
  const int64_t zero_label = 0;
  const bool empty = G == 0;
  if (empty) gt = zero_box, gt_labels = &zero_label;
  // torchvision appends the real gt only (none for an empty image), matching against its zero box.
  if (!empty) cand.insert(cand.end(), gt, gt + 4 * G);
  const int64_t N = int64_t(cand.size() / 4);
  RoiSamples s;
  std::vector<int64_t> m(static_cast<size_t>(N), 0);
  s.all_labels.assign(size_t(N), 0);
  if (!empty) {
    m = Matcher{c.fg_iou, c.bg_iou, false}.match(tv_box_iou(gt, G, cand.data(), N), G, N);
    for (int64_t i = 0; i < N; ++i) {
      const int64_t g = m[size_t(i)];
      s.all_labels[size_t(i)] = g >= 0 ? gt_labels[g] : g == Matcher::kBelow ? 0 : -1;
      m[size_t(i)] = std::max<int64_t>(g, 0);
    }
  }
  const SampledSets ss = balanced_sample(s.all_labels, c.batch_per_image, c.positive_fraction, d);
  s.sampled = ss.pos;
  s.sampled.insert(s.sampled.end(), ss.neg.begin(), ss.neg.end());
  std::sort(s.sampled.begin(), s.sampled.end());  // torch.where(pos | neg)
  const int64_t S = int64_t(s.sampled.size());
  std::vector<float> matched_boxes;
  for (int64_t i : s.sampled) {
    s.boxes.insert(s.boxes.end(), cand.begin() + 4 * i, cand.begin() + 4 * i + 4);
    s.matched.push_back(m[size_t(i)]);
    s.labels.push_back(s.all_labels[size_t(i)]);
    matched_boxes.insert(matched_boxes.end(), gt + 4 * m[size_t(i)], gt + 4 * m[size_t(i)] + 4);
  }
  s.targets.resize(size_t(S * 4));
  encode_boxes(matched_boxes.data(), s.boxes.data(), S, BoxCoderWeights{10, 10, 5, 5},
               s.targets.data());
  return s;
}

Detections roi_postprocess(const float* class_logits, const float* box_regression,
                           const std::vector<float>& proposals, int64_t C, int64_t im_h,
                           int64_t im_w, const RoiHeadsConfig& c) {
  const int64_t R = int64_t(proposals.size() / 4);
  std::vector<float> boxes, scores;
  std::vector<int64_t> labels;
  std::vector<float> prob(static_cast<size_t>(C));
  for (int64_t r = 0; r < R; ++r) {
    const float* z = class_logits + r * C;
    const float mx = *std::max_element(z, z + C);
    float sum = 0;
    for (int64_t k = 0; k < C; ++k) sum += (prob[size_t(k)] = std::exp(z[k] - mx));
    for (int64_t k = 1; k < C; ++k) {
      float b[4];
      decode_boxes(box_regression + (r * C + k) * 4, proposals.data() + 4 * r, 1,
                   BoxCoderWeights{10, 10, 5, 5}, b);
      clip_to_image(b, 1, im_h, im_w);
      const float s = prob[size_t(k)] / sum;
      if (!(s > c.score_thresh) || !large_enough(b, c.min_size)) continue;
      boxes.insert(boxes.end(), b, b + 4);
      scores.push_back(s);
      labels.push_back(k);
    }
  }
  std::vector<int64_t> keep = batched_nms(boxes, scores, labels, c.nms_thresh);
  if (int64_t(keep.size()) > c.detections_per_img) keep.resize(size_t(c.detections_per_img));
  Detections d;
  for (int64_t k : keep) {
    d.boxes.insert(d.boxes.end(), boxes.begin() + 4 * k, boxes.begin() + 4 * k + 4);
    d.scores.push_back(scores[size_t(k)]);
    d.labels.push_back(labels[size_t(k)]);
  }
  return d;
}

BoxLosses fastrcnn_loss(const Variable& class_logits, const Variable& box_regression,
                        const std::vector<int64_t>& labels, const std::vector<float>& targets) {
  const int64_t S = class_logits.size(0), C = class_logits.size(1);
  AIM_CHECK(int64_t(labels.size()) == S && int64_t(targets.size()) == 4 * S &&
                box_regression.numel() == S * C * 4,
            "[fastrcnn loss] ", S, " rows of ", C, " classes with ", labels.size(), " labels, ",
            targets.size() / 4, " targets and box_regression of ", box_regression.numel(),
            " values");
  const Device dev = class_logits.device();
  const DType dt = class_logits.dtype();
  BoxLosses l;
  l.classifier = ag::cross_entropy(class_logits, Tensor::from_vector(labels, {S}, dev));
  std::vector<int64_t> rows;
  std::vector<float> t;
  for (int64_t i = 0; i < S; ++i)
    if (labels[size_t(i)] > 0) {
      rows.push_back(i * C + labels[size_t(i)]);
      t.insert(t.end(), targets.begin() + 4 * i, targets.begin() + 4 * i + 4);
    }
  const Variable reg = ag::reshape(box_regression, {S * C, 4});
  const int64_t P = int64_t(rows.size());
  if (P > 0) {
    const Variable sel = ag::index_select(reg, 0, Tensor::from_vector(rows, {P}, dev));
    l.box_reg = ag::mul(ag::smooth_l1_loss(sel, Tensor::from_vector(t, {P, 4}).to(dt).to(dev),
                                           1.0 / 9.0, kernels::Reduction::sum),
                        1.0 / double(S));
  } else {
    l.box_reg = ag::mul(ag::sum(reg), 0.0);  // smooth_l1 of nothing, summed: 0
  }
  return l;
}

Variable maskrcnn_loss(const Variable& mask_logits, const std::vector<int64_t>& labels,
                       const Tensor& mask_targets) {
  const int64_t P = int64_t(labels.size());
  if (P == 0) return ag::mul(ag::sum(mask_logits), 0.0);
  AIM_CHECK(mask_logits.dim() == 4 && mask_logits.size(0) == P &&
                mask_logits.size(2) == mask_logits.size(3),
            "[maskrcnn loss] mask_logits must be [", P, ", C, M, M], got ",
            to_string(mask_logits.sizes()));
  const int64_t C = mask_logits.size(1), M = mask_logits.size(2);
  AIM_CHECK(mask_targets.sizes() == Shape({P, M, M}), "[maskrcnn loss] mask_targets must be [", P,
            ", ", M, ", ", M, "], got ", to_string(mask_targets.sizes()));
  std::vector<int64_t> rows(static_cast<size_t>(P));
  for (int64_t i = 0; i < P; ++i) {
    AIM_CHECK(labels[size_t(i)] >= 0 && labels[size_t(i)] < C, "[maskrcnn loss] label ",
              labels[size_t(i)], " of row ", i, " not in [0, ", C, ")");
    rows[size_t(i)] = i * C + labels[size_t(i)];
  }
  const Variable sel = ag::index_select(ag::reshape(mask_logits, {P * C, M, M}), 0,
                                        Tensor::from_vector(rows, {P}, mask_logits.device()));
  return ag::bce_with_logits(sel, mask_targets);
}

std::vector<double> roi_level_scales(const std::vector<int64_t>& feature_heights,
                                     int64_t max_image_h) {
  std::vector<double> s;
  for (int64_t h : feature_heights) {
    const float approx = float(double(h) / double(max_image_h));
    s.push_back(std::exp2(double(std::nearbyint(std::log2(approx)))));
  }
  return s;
}

std::vector<int64_t> map_roi_levels(const std::vector<float>& boxes, int64_t k_min, int64_t k_max) {
  const int64_t K = int64_t(boxes.size() / 4);
  std::vector<int64_t> out(static_cast<size_t>(K));
  for (int64_t i = 0; i < K; ++i) {
    const float s = std::sqrt(kernels::box_area(boxes.data() + 4 * i));
    float lvl = std::floor(4.0f + std::log2(s / 224.0f) + 1e-6f);
    lvl = std::min(std::max(lvl, float(k_min)), float(k_max));
    out[size_t(i)] = int64_t(lvl) - k_min;
  }
  return out;
}

Variable multiscale_roi_align(const std::vector<Variable>& features,
                              const std::vector<std::vector<float>>& boxes, int64_t max_image_h,
                              int64_t out, int64_t sampling_ratio) {
  AIM_CHECK(!features.empty(), "[multiscale roi_align] no feature maps");
  std::vector<int64_t> heights;
  for (const Variable& f : features) heights.push_back(f.size(2));
  const std::vector<double> scales = roi_level_scales(heights, max_image_h);
  const int64_t k_min = int64_t(-std::log2(float(scales.front())));
  const int64_t k_max = int64_t(-std::log2(float(scales.back())));
  std::vector<float> all;
  std::vector<float> batch_of;
  for (size_t b = 0; b < boxes.size(); ++b) {
    all.insert(all.end(), boxes[b].begin(), boxes[b].end());
    batch_of.insert(batch_of.end(), boxes[b].size() / 4, float(b));
  }
  const int64_t K = int64_t(batch_of.size());
  const std::vector<int64_t> lv =
      features.size() == 1 ? std::vector<int64_t>(size_t(K), 0) : map_roi_levels(all, k_min, k_max);
  const Device dev = features[0].device();
  const DType dt = features[0].dtype();
  std::vector<Variable> parts;
  std::vector<int64_t> order;  // row of the concatenated parts -> RoI index
  for (size_t l = 0; l < features.size(); ++l) {
    std::vector<float> rois;
    for (int64_t i = 0; i < K; ++i)
      if (lv[size_t(i)] == int64_t(l)) {
        rois.push_back(batch_of[size_t(i)]);
        rois.insert(rois.end(), all.begin() + 4 * i, all.begin() + 4 * i + 4);
        order.push_back(i);
      }
    if (rois.empty()) continue;
    const Tensor r = Tensor::from_vector(rois, {int64_t(rois.size() / 5), 5}).to(dt).to(dev);
    parts.push_back(ag::roi_align(features[l], r, out, out, scales[l], sampling_ratio, false));
  }
  AIM_CHECK(K > 0, "[multiscale roi_align] no boxes");
  const Variable cat = parts.size() == 1 ? parts[0] : ag::concat(parts, 0);
  std::vector<int64_t> inv(static_cast<size_t>(K));
  for (int64_t r = 0; r < K; ++r) inv[size_t(order[size_t(r)])] = r;
  return ag::index_select(cat, 0, Tensor::from_vector(inv, {K}, dev));
}

}  // namespace aim::models::detection
