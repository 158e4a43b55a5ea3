#include "models/ssd.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/loss.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "autograd/functions/softmax.h"
#include "kernels/boxes/boxes.h"
#include "kernels/random/random.h"
#include "layers/init.h"
#include "models/detection/ssd_matcher.h"

namespace aim::models {

namespace ag = autograd;

namespace ssd_parts {

std::shared_ptr<layers::Conv2d> conv(int64_t in, int64_t out, int64_t k,
                                     const layers::ConvOptions& o, uint64_t& seed) {
  return std::make_shared<layers::Conv2d>(in, out, k, o, seed++);
}

namespace {
// Re-initialises a conv: weight from `w`, bias 0 when zero_bias.
void init_conv(layers::Conv2d& c, const Tensor& w, bool zero_bias) {
  c.weight.data().copy_(w);
  if (zero_bias && c.bias.defined()) c.bias.data().fill_(0.0);
}
}  // namespace

void kaiming_fan_out(layers::Conv2d& c, kernels::Generator& gen) {
  const Shape s = c.weight.sizes();
  init_conv(c, layers::normal_init(s, 0.0, std::sqrt(2.0 / double(s[0] * s[2] * s[3])), gen), true);
}

void xavier_uniform(layers::Conv2d& c, kernels::Generator& gen, bool zero_bias) {
  const Shape s = c.weight.sizes();
  const double rf = double(s[2] * s[3]);
  const double bound = std::sqrt(6.0 / (double(s[1]) * rf + double(s[0]) * rf));
  init_conv(c, layers::uniform_init(s, -bound, bound, gen), zero_bias);
}

void for_each_conv(layers::Module& m, const std::function<void(layers::Conv2d&)>& f) {
  for (const auto& [n, ch] : m.children()) {
    (void)n;
    if (ch->type_name() == "Conv2d")
      f(static_cast<layers::Conv2d&>(*ch));
    else
      for_each_conv(*ch, f);
  }
}

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

}  // namespace ssd_parts

using ssd_parts::shape_str;

Ssd::Ssd(std::string name, const SsdConfig& c) : c_(c), name_(std::move(name)) {
  AIM_CHECK(c.num_classes >= 2, "[", name_,
            "] num_classes must count background and >= 1 class, got ", c.num_classes);
  AIM_CHECK(c.width_divisor >= 1 && 64 % c.width_divisor == 0, "[", name_,
            "] width_divisor must divide 64 (1, 2, 4, 8, ...), got ", c.width_divisor);
}

void Ssd::set_heads(std::vector<std::shared_ptr<layers::Conv2d>> cls,
                    std::vector<std::shared_ptr<layers::Conv2d>> reg, std::vector<int64_t> per_cell,
                    SsdHeadLayout layout) {
  AIM_CHECK(cls.size() == reg.size() && cls.size() == per_cell.size(), "[", name_,
            "] heads: ", cls.size(), " classification convs, ", reg.size(),
            " regression convs and ", per_cell.size(), " box counts must agree");
  cls_ = std::move(cls), reg_ = std::move(reg), per_cell_ = std::move(per_cell);
  layout_ = layout;
}

void Ssd::set_priors(std::vector<int64_t> map_sizes, const Tensor& anchors_xyxy) {
  AIM_CHECK(map_sizes.size() == per_cell_.size(), "[", name_, "] ", map_sizes.size(),
            " feature map sizes for ", per_cell_.size(), " heads");
  int64_t P = 0;
  for (size_t k = 0; k < map_sizes.size(); ++k) P += map_sizes[k] * map_sizes[k] * per_cell_[k];
  AIM_CHECK(anchors_xyxy.sizes() == Shape({P, 4}), "[", name_, "] the heads predict ", P,
            " boxes, the default boxes are ", shape_str(anchors_xyxy.sizes()));
  map_sizes_ = std::move(map_sizes);
  anchors_ = anchors_xyxy.to(kCPU).to(DType::f32).contiguous();
}

void Ssd::set_normalization(const std::vector<double>& mean, const std::vector<double>& stdv) {
  mean_ = Tensor::from_vector(mean, {1, 3, 1, 1});
  std_ = Tensor::from_vector(stdv, {1, 3, 1, 1});
}

Variable Ssd::normalize(const Variable& images) const {
  const Shape s = images.sizes();
  AIM_CHECK(s.size() == 4 && s[1] == 3 && s[2] == c_.image_size && s[3] == c_.image_size, "[",
            name_, "] images must be [B, 3, ", c_.image_size, ", ", c_.image_size,
            "] (resized, in [0, 1]), got ", shape_str(s));
  const Variable mean(mean_.to(images.dtype()).to(images.device()));
  const Variable stdv(std_.to(images.dtype()).to(images.device()));
  return ag::div(ag::sub(images, mean), stdv);
}

void Ssd::check_maps(const std::vector<Variable>& maps) const {
  AIM_CHECK(maps.size() == map_sizes_.size(), "[", name_, "] ", maps.size(),
            " feature maps, expected ", map_sizes_.size());
  for (size_t k = 0; k < maps.size(); ++k)
    AIM_CHECK(maps[k].size(2) == map_sizes_[k] && maps[k].size(3) == map_sizes_[k], "[", name_,
              "] feature map ", k, " is ", shape_str(maps[k].sizes()), ", expected ", map_sizes_[k],
              " x ", map_sizes_[k]);
}

SsdHeadOutputs Ssd::forward_heads(const Variable& images) {
  const std::vector<Variable> f = features(images);
  check_maps(f);
  auto scoring = [&](const std::vector<std::shared_ptr<layers::Conv2d>>& convs, int64_t K) {
    std::vector<Variable> parts;
    for (size_t k = 0; k < convs.size(); ++k) {
      const Variable y = convs[k]->forward(f[k]);
      const int64_t N = y.size(0), H = y.size(2), W = y.size(3), A = per_cell_[k];
      if (layout_ == SsdHeadLayout::cell_major) {
        const Variable v = ag::reshape(y, {N, A, K, H, W});
        parts.push_back(ag::reshape(ag::contiguous(ag::permute(v, {0, 3, 4, 1, 2})), {N, -1, K}));
      } else {
        // [N, K, A H W] -> [N, A H W, K].
        const Variable v = ag::reshape(y, {N, K, A * H * W});
        parts.push_back(ag::contiguous(ag::permute(v, {0, 2, 1})));
      }
    }
    return ag::concat(parts, 1);
  };
  SsdHeadOutputs o;
  o.bbox_regression = scoring(reg_, 4);
  o.cls_logits = scoring(cls_, c_.num_classes);
  return o;
}

SsdLoss Ssd::compute_loss(const SsdHeadOutputs& out, const SsdTargets& t) const {
  const int64_t P = num_priors(), C = c_.num_classes;
  const Shape ls = out.cls_logits.sizes(), rs = out.bbox_regression.sizes();
  AIM_CHECK(ls.size() == 3 && ls[1] == P && ls[2] == C, "[", name_,
            " loss] cls_logits must be [B, ", P, ", ", C, "], got ", shape_str(ls));
  const int64_t B = ls[0];
  AIM_CHECK(rs == Shape({B, P, 4}), "[", name_, " loss] bbox_regression must be [", B, ", ", P,
            ", 4], got ", shape_str(rs));
  AIM_CHECK(t.boxes.defined() && t.boxes.dim() == 3 && t.boxes.size(0) == B && t.boxes.size(2) == 4,
            "[", name_, " loss] targets.boxes must be [", B, ", G, 4], got ",
            t.boxes.defined() ? shape_str(t.boxes.sizes()) : "undefined");
  const int64_t G = t.boxes.size(1);
  AIM_CHECK(t.labels.defined() && t.labels.sizes() == Shape({B, G}), "[", name_,
            " loss] targets.labels must be [", B, ", ", G, "], got ",
            t.labels.defined() ? shape_str(t.labels.sizes()) : "undefined");
  AIM_CHECK(t.num_boxes.defined() && t.num_boxes.sizes() == Shape({B}), "[", name_,
            " loss] targets.num_boxes must be [", B, "], got ",
            t.num_boxes.defined() ? shape_str(t.num_boxes.sizes()) : "undefined");
  const std::vector<float> boxes = t.boxes.to_vector<float>();
  const std::vector<int64_t> labels = t.labels.to_vector<int64_t>();
  const std::vector<int64_t> counts = t.num_boxes.to_vector<int64_t>();
  const float* anchors = anchors_.data<float>();

  // Per image: SSDMatcher, the class targets, the foreground priors and their encoded boxes.
  std::vector<int64_t> cls_targets(size_t(B * P), 0), fg_rows;
  std::vector<float> matched, fg_anchors;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = counts[size_t(b)];
    AIM_CHECK(n >= 0 && n <= G, "[", name_, " loss] targets.num_boxes[", b, "] = ", n,
              " is outside [0, ", G, "]");
    if (n == 0) continue;  // torchvision: every prior background
    const float* gt = boxes.data() + b * G * 4;
    for (int64_t g = 0; g < n; ++g) {
      const int64_t l = labels[size_t(b * G + g)];
      AIM_CHECK(l >= 1 && l < C, "[", name_, " loss] targets.labels[", b, ", ", g, "] = ", l,
                " is outside [1, ", C - 1, "]");
      AIM_CHECK(gt[g * 4 + 2] > gt[g * 4] && gt[g * 4 + 3] > gt[g * 4 + 1], "[", name_,
                " loss] targets.boxes[", b, ", ", g,
                "] is degenerate: boxes need x2 > x1 and y2 > y1");
    }
    const std::vector<int64_t> m = c_.caffe_matching
                                       ? detection::caffe_match(gt, n, anchors, P, c_.iou_thresh)
                                       : detection::ssd_match(gt, n, anchors, P, c_.iou_thresh);
    for (int64_t p = 0; p < P; ++p) {
      if (m[size_t(p)] < 0) continue;
      cls_targets[size_t(b * P + p)] = labels[size_t(b * G + m[size_t(p)])];
      fg_rows.push_back(b * P + p);
      matched.insert(matched.end(), gt + m[size_t(p)] * 4, gt + m[size_t(p)] * 4 + 4);
      fg_anchors.insert(fg_anchors.end(), anchors + p * 4, anchors + p * 4 + 4);
    }
  }
  const int64_t F = int64_t(fg_rows.size());
  const Device dev = out.cls_logits.device();
  const DType dt = out.cls_logits.dtype();

  SsdLoss r;
  r.num_foreground = F;
  // Per-row weights of both sums: 1 / N with N = max(1, positives of the batch) (torchvision), or
  // 1 / (positives of the row's image * B), 0 for an image without positives (MLPerf).
  std::vector<float> image_w(size_t(B), float(1.0 / double(std::max<int64_t>(1, F))));
  if (c_.loss_per_image) {
    std::vector<int64_t> pos(size_t(B), 0);
    for (int64_t row : fg_rows) ++pos[size_t(row / P)];
    for (int64_t b = 0; b < B; ++b)
      image_w[size_t(b)] = pos[size_t(b)] ? float(1.0 / (double(pos[size_t(b)]) * double(B))) : 0;
  }
  // Box regression: smooth L1 (beta 1) of the positives' outputs against their targets.
  if (F > 0) {
    std::vector<float> enc(static_cast<size_t>(F * 4)), row_w(static_cast<size_t>(F));
    detection::encode_boxes(matched.data(), fg_anchors.data(), F, coder_, enc.data());
    for (int64_t i = 0; i < F; ++i) row_w[size_t(i)] = image_w[size_t(fg_rows[size_t(i)] / P)];
    const Tensor rows = Tensor::from_vector(fg_rows, {F}, dev);
    const Variable sel = ag::index_select(ag::reshape(out.bbox_regression, {B * P, 4}), 0, rows);
    const Variable l1 = ag::smooth_l1_loss(sel, Tensor::from_vector(enc, {F, 4}).to(dt).to(dev),
                                           1.0, kernels::Reduction::none);
    r.bbox_regression =
        ag::sum(ag::mul(l1, Variable(Tensor::from_vector(row_w, {F, 1}).to(dt).to(dev))));
  } else {
    r.bbox_regression = ag::mul(ag::sum(out.bbox_regression), 0.0);  // empty, still on the graph
  }
  // Classification: CE per prior; the positives plus the hard negatives (3:1 per image).
  const Tensor target = Tensor::from_vector(cls_targets, {B * P}, dev);
  const Variable ce =
      ag::cross_entropy(ag::reshape(out.cls_logits, {B * P, C}), target, kernels::Reduction::none);
  kernels::HardNegativesArgs hn;
  hn.loss = ce.data().reshape({B, P}).contiguous();
  hn.labels = target.reshape({B, P});
  hn.negatives = Tensor::empty({B, P}, DType::u8, dev);
  hn.ratio = c_.neg_to_pos_ratio;
  kernels::hard_negatives(hn);
  // Sum of CE over the positives and the chosen negatives as a weighted sum on the device: the
  // negatives' mask is not read back (a GPU step stays free of host synchronisation).
  std::vector<float> fg_w(static_cast<size_t>(B * P), 0.0f), row_w(static_cast<size_t>(B * P));
  for (int64_t row : fg_rows) fg_w[size_t(row)] = 1.0f;
  for (int64_t i = 0; i < B * P; ++i) row_w[size_t(i)] = image_w[size_t(i / P)];
  const Tensor weight = ag::mul(ag::add(Variable(Tensor::from_vector(fg_w, {B * P}).to(dt).to(dev)),
                                        Variable(hn.negatives.reshape({B * P}).to(dt))),
                                Variable(Tensor::from_vector(row_w, {B * P}).to(dt).to(dev)))
                            .data();
  r.classification = ag::sum(ag::mul(ce, Variable(weight)));
  r.total = ag::add(r.bbox_regression, r.classification);
  return r;
}

std::vector<SsdDetections> Ssd::postprocess(const SsdHeadOutputs& out) const {
  const int64_t P = num_priors(), C = c_.num_classes;
  const Shape ls = out.cls_logits.sizes();
  AIM_CHECK(ls.size() == 3 && ls[1] == P && ls[2] == C, "[", name_,
            " postprocess] cls_logits must be [B, ", P, ", ", C, "], got ", shape_str(ls));
  const int64_t B = ls[0];
  AIM_CHECK(out.bbox_regression.sizes() == Shape({B, P, 4}), "[", name_,
            " postprocess] bbox_regression must be [", B, ", ", P, ", 4], got ",
            shape_str(out.bbox_regression.sizes()));
  std::vector<float> scores, codes;
  {
    ag::NoGradGuard ng;
    const Variable logits(out.cls_logits.data().to(kCPU).to(DType::f32));
    scores = ag::softmax(logits, -1).data().to_vector<float>();
    codes = out.bbox_regression.data().to_vector<float>();
  }
  const float size = float(c_.image_size);
  std::vector<SsdDetections> dets;
  std::vector<float> boxes(size_t(P * 4));
  for (int64_t b = 0; b < B; ++b) {
    detection::decode_boxes(codes.data() + b * P * 4, anchors_.data<float>(), P, coder_,
                            boxes.data());
    for (float& v : boxes) v = std::min(std::max(v, 0.0f), size);  // clip_boxes_to_image
    // Per class: score > thresh, the top-k by score (descending; ties by prior index).
    std::vector<float> cand_boxes, cand_scores;
    std::vector<int64_t> cand_labels;
    const float* sc = scores.data() + b * P * C;
    std::vector<int64_t> idx;
    for (int64_t label = 1; label < C; ++label) {
      idx.clear();
      for (int64_t p = 0; p < P; ++p)
        if (sc[p * C + label] > c_.score_thresh) idx.push_back(p);
      const size_t k = size_t(std::min<int64_t>(int64_t(idx.size()), c_.topk_candidates));
      std::stable_sort(idx.begin(), idx.end(),
                       [&](int64_t x, int64_t y) { return sc[x * C + label] > sc[y * C + label]; });
      for (size_t i = 0; i < k; ++i) {
        cand_boxes.insert(cand_boxes.end(), boxes.begin() + idx[i] * 4,
                          boxes.begin() + idx[i] * 4 + 4);
        cand_scores.push_back(sc[idx[i] * C + label]);
        cand_labels.push_back(label);
      }
    }
    const int64_t K = int64_t(cand_scores.size());
    SsdDetections d;
    if (K == 0) {
      d.boxes = Tensor::empty({0, 4});
      d.scores = Tensor::empty({0});
      d.labels = Tensor::empty({0}, DType::i64);
      dets.push_back(d);
      continue;
    }
    kernels::NmsArgs a;
    a.boxes = Tensor::from_vector(cand_boxes, {1, K, 4});
    a.scores = Tensor::from_vector(cand_scores, {1, K});
    a.groups = Tensor::from_vector(cand_labels, {1, K});
    a.keep = Tensor::empty({1, K}, DType::i64);
    a.count = Tensor::empty({1}, DType::i64);
    a.iou_threshold = c_.nms_thresh;
    a.max_out = c_.detections_per_img;
    kernels::nms(a);
    const int64_t n = a.count.data<int64_t>()[0];
    const int64_t* keep = a.keep.data<int64_t>();
    std::vector<float> ob, os;
    std::vector<int64_t> ol;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = keep[i];
      ob.insert(ob.end(), cand_boxes.begin() + j * 4, cand_boxes.begin() + j * 4 + 4);
      os.push_back(cand_scores[size_t(j)]);
      ol.push_back(cand_labels[size_t(j)]);
    }
    d.boxes = Tensor::from_vector(ob, {n, 4});
    d.scores = Tensor::from_vector(os, {n});
    d.labels = Tensor::from_vector(ol, {n});
    dets.push_back(d);
  }
  return dets;
}

TensorMap Ssd::postprocess_outputs(const TensorMap& out) const {
  const std::vector<SsdDetections> d =
      postprocess({Variable(out.at("cls_logits")), Variable(out.at("bbox_regression"))});
  const int64_t B = int64_t(d.size()), D = c_.detections_per_img;
  std::vector<float> boxes(static_cast<size_t>(B * D * 4), 0.0f),
      scores(static_cast<size_t>(B * D), 0.0f);
  std::vector<int64_t> labels(static_cast<size_t>(B * D), 0), count(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = d[size_t(b)].scores.numel();
    count[size_t(b)] = n;
    std::copy_n(d[size_t(b)].boxes.data<float>(), n * 4, boxes.begin() + b * D * 4);
    std::copy_n(d[size_t(b)].scores.data<float>(), n, scores.begin() + b * D);
    std::copy_n(d[size_t(b)].labels.data<int64_t>(), n, labels.begin() + b * D);
  }
  return {{"boxes", Tensor::from_vector(boxes, {B, D, 4})},
          {"scores", Tensor::from_vector(scores, {B, D})},
          {"labels", Tensor::from_vector(labels, {B, D})},
          {"num_detections", Tensor::from_vector(count, {B})}};
}

double Ssd::forward_flops(int64_t B) const {
  const int64_t S = c_.image_size;
  double flops = 2.0 * double(B * 3 * S * S);  // (x - mean) / std
  std::vector<Shape> maps;
  flops += feature_flops(B, maps);
  for (size_t k = 0; k < cls_.size(); ++k) {
    cls_[k]->count_flops(maps[k], flops);
    reg_[k]->count_flops(maps[k], flops);
  }
  return flops;
}

// ---- Model ----------------------------------------------------------------------------------

std::vector<TensorSpec> Ssd::input_specs() const {
  const std::string S = std::to_string(c_.image_size);
  return {{"images", DType::f32, {"B", "3", S, S}, "RGB resized to the input size, in [0, 1]"}};
}

std::vector<TensorSpec> Ssd::label_specs() const {
  return {{"boxes", DType::f32, {"B", "G", "4"}, "objects (x1, y1, x2, y2) in input pixels"},
          {"labels", DType::i64, {"B", "G"}, "classes 1..num_classes-1 (0: padding)"},
          {"num_boxes", DType::i64, {"B"}, "objects per image (the first rows of boxes)"}};
}

std::vector<TensorSpec> Ssd::output_specs() const {
  const std::string P = std::to_string(num_priors()), C = std::to_string(c_.num_classes);
  return {
      {"cls_logits", DType::f32, {"B", P, C}, "class logits per default box"},
      {"bbox_regression", DType::f32, {"B", P, "4"}, "box codes per default box (10, 10, 5, 5)"}};
}

TensorMap Ssd::infer(const TensorMap& batch) {
  const SsdHeadOutputs o = forward_heads(Variable(batch.at("images")));
  return {{"cls_logits", o.cls_logits.data()}, {"bbox_regression", o.bbox_regression.data()}};
}

Variable Ssd::training_loss(const TensorMap& batch) {
  return training_loss(Variable(batch.at("images")),
                       SsdTargets{batch.at("boxes"), batch.at("labels"), batch.at("num_boxes")})
      .total;
}

double Ssd::forward_flops(const TensorMap& batch) const {
  return forward_flops(batch.at("images").size(0));
}

TensorMap Ssd::host_metadata(const TensorMap& host_batch) const {
  TensorMap r;
  for (const char* k : {"boxes", "labels", "num_boxes"})
    if (host_batch.count(k)) r[k] = host_batch.at(k);
  return r;
}

}  // namespace aim::models
