#include "models/ssd.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/l2norm.h"
#include "autograd/functions/loss.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "autograd/functions/softmax.h"
#include "kernels/boxes/boxes.h"
#include "kernels/random/random.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/init.h"
#include "layers/pooling.h"
#include "models/detection/priors.h"
#include "models/detection/ssd_matcher.h"

namespace aim::models {

namespace ag = autograd;
using layers::ConvOptions;
using layers::Sequential;

namespace {

// A named container (torchvision's SSDFeatureExtractorVGG, SSDHead, SSDScoringHead): only holds
// parameters and children under their names; SsdVgg16 runs the computation.
class Container : public layers::Module {
 public:
  explicit Container(std::string type) : type_(std::move(type)) {}
  std::string type_name() const override { return type_; }
  layers::Parameter add_param(const std::string& name, Tensor t) {
    return param(name, std::move(t));
  }
  template <class M>
  std::shared_ptr<M> add(const std::string& name, std::shared_ptr<M> m) {
    return child(name, std::move(m));
  }

 private:
  std::string type_;
};

constexpr int64_t kMaps = 6;
const int64_t kMapChannels[kMaps] = {512, 1024, 512, 256, 256, 256};
const int64_t kMapSizes[kMaps] = {38, 19, 10, 5, 3, 1};

std::shared_ptr<layers::Conv2d> conv(int64_t in, int64_t out, int64_t k, const ConvOptions& o,
                                     uint64_t& seed) {
  return std::make_shared<layers::Conv2d>(in, out, k, o, seed++);
}

// Re-initialises a conv: weight from `w`, bias 0.
void init_conv(layers::Conv2d& c, const Tensor& w) {
  c.weight.data().copy_(w);
  if (c.bias.defined()) c.bias.data().fill_(0.0);
}
void kaiming_fan_out(layers::Conv2d& c, kernels::Generator& gen) {
  const Shape s = c.weight.sizes();
  init_conv(c, layers::normal_init(s, 0.0, std::sqrt(2.0 / double(s[0] * s[2] * s[3])), gen));
}
void xavier_uniform(layers::Conv2d& c, kernels::Generator& gen) {
  const Shape s = c.weight.sizes();
  const double rf = double(s[2] * s[3]);
  const double bound = std::sqrt(6.0 / (double(s[1]) * rf + double(s[0]) * rf));
  init_conv(c, layers::uniform_init(s, -bound, bound, gen));
}
template <class F>
void for_each_conv(layers::Module& m, F f) {
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

}  // namespace

SsdVgg16::SsdVgg16(const SsdConfig& c) : c_(c) {
  AIM_CHECK(c.num_classes >= 2,
            "[ssd_vgg16] num_classes must count background and >= 1 class, got ", c.num_classes);
  AIM_CHECK(c.width_divisor >= 1 && 64 % c.width_divisor == 0,
            "[ssd_vgg16] width_divisor must divide 64 (1, 2, 4, 8, ...), got ", c.width_divisor);
  AIM_CHECK(c.image_size == 300,
            "[ssd_vgg16] image_size must be 300 (the six feature maps 38, 19, ",
            "10, 5, 3, 1 of torchvision's ssd300_vgg16), got ", c.image_size);
  uint64_t seed = c.seed * 1000;
  auto relu = [] { return std::make_shared<layers::ReLU>(); };
  const int64_t dv = c.width_divisor;
  auto backbone = child("backbone", std::make_shared<Container>("SSDFeatureExtractorVGG"));
  scale_weight_ = backbone->add_param("scale_weight", Tensor::full({512 / dv}, 20.0));

  // VGG16 config D up to conv4_3 (features.0 .. 22), pool3 with ceil_mode (75 -> 38).
  features_ = backbone->add("features", std::make_shared<Sequential>());
  const std::vector<int64_t> cfg = {64, 64, 0, 128, 128, 0, 256, 256, 256, -1, 512, 512, 512};
  int64_t in = 3;
  for (int64_t v : cfg) {
    if (v <= 0) {
      features_->push_back(std::make_shared<layers::MaxPool2d>(2, 2, 0, /*ceil_mode=*/v < 0));
      continue;
    }
    features_->push_back(conv(in, v / dv, 3, ConvOptions().padding(1), seed));
    features_->push_back(relu());
    in = v / dv;
  }
  auto extra = backbone->add("extra", std::make_shared<Sequential>());
  // extra.0: pool4, conv5_1 .. conv5_3, then [pool5 3x3/1/1, fc6 atrous, fc7].
  auto e0 = std::make_shared<Sequential>();
  e0->push_back(std::make_shared<layers::MaxPool2d>(2, 2));
  for (int i = 0; i < 3; ++i) {
    e0->push_back(conv(512 / dv, 512 / dv, 3, ConvOptions().padding(1), seed));
    e0->push_back(relu());
  }
  auto fc = std::make_shared<Sequential>(std::vector<std::shared_ptr<layers::Module>>{
      std::make_shared<layers::MaxPool2d>(3, 1, 1),
      conv(512 / dv, 1024 / dv, 3, ConvOptions().padding(6).dilation(6), seed), relu(),
      conv(1024 / dv, 1024 / dv, 1, ConvOptions(), seed), relu()});
  e0->push_back(fc);
  extra->push_back(e0);
  // extra.1 .. 4: conv8_2 .. conv11_2.
  const int64_t ex[4][4] = {// in, mid, out, stride (0: 3x3 unpadded)
                            {1024, 256, 512, 2},
                            {512, 128, 256, 2},
                            {256, 128, 256, 0},
                            {256, 128, 256, 0}};
  std::vector<std::shared_ptr<Sequential>> extra_blocks;
  for (const auto& e : ex) {
    const ConvOptions o3 = e[3] ? ConvOptions().padding(1).stride(e[3]) : ConvOptions();
    auto b = std::make_shared<Sequential>(std::vector<std::shared_ptr<layers::Module>>{
        conv(e[0] / dv, e[1] / dv, 1, ConvOptions(), seed), relu(),
        conv(e[1] / dv, e[2] / dv, 3, o3, seed), relu()});
    extra->push_back(b);
    extra_blocks.push_back(b);
  }
  for (size_t i = 0; i < extra->size(); ++i) extra_.push_back((*extra)[i]);

  // Heads.
  auto head = child("head", std::make_shared<Container>("SSDHead"));
  auto ch = head->add("classification_head", std::make_shared<Container>("SSDClassificationHead"));
  auto rh = head->add("regression_head", std::make_shared<Container>("SSDRegressionHead"));
  auto cls_list = ch->add("module_list", std::make_shared<Sequential>());
  auto reg_list = rh->add("module_list", std::make_shared<Sequential>());
  const detection::DefaultBoxSpec spec = detection::ssd300_default_boxes();
  for (int64_t k = 0; k < kMaps; ++k) {
    const int64_t A = spec.boxes_per_cell(size_t(k));
    anchors_per_cell_.push_back(A);
    cls_list->push_back(
        conv(kMapChannels[k] / dv, c.num_classes * A, 3, ConvOptions().padding(1), seed));
    reg_list->push_back(conv(kMapChannels[k] / dv, 4 * A, 3, ConvOptions().padding(1), seed));
    cls_.push_back((*cls_list)[size_t(k)]);
    reg_.push_back((*reg_list)[size_t(k)]);
  }

  // torchvision's init with weights_backbone=None, in its order: VGG's convs, then (its
  // SSDFeatureExtractorVGG) the extra blocks, fc6/fc7, then the heads.
  kernels::Generator gen(c.seed);
  for_each_conv(*features_, [&](layers::Conv2d& m) { kaiming_fan_out(m, gen); });
  for (size_t i = 0; i + 1 < e0->size(); ++i)
    if ((*e0)[i]->type_name() == "Conv2d")
      kaiming_fan_out(static_cast<layers::Conv2d&>(*(*e0)[i]), gen);
  for (auto& b : extra_blocks)
    for_each_conv(*b, [&](layers::Conv2d& m) { xavier_uniform(m, gen); });
  for_each_conv(*fc, [&](layers::Conv2d& m) { xavier_uniform(m, gen); });
  for_each_conv(*cls_list, [&](layers::Conv2d& m) { xavier_uniform(m, gen); });
  for_each_conv(*reg_list, [&](layers::Conv2d& m) { xavier_uniform(m, gen); });

  std::vector<std::pair<int64_t, int64_t>> maps;
  for (int64_t s : kMapSizes) maps.emplace_back(s, s);
  anchors_ = detection::default_boxes_xyxy(spec, maps, c.image_size, c.image_size);
  mean_ = Tensor::from_vector(std::vector<double>{0.48235, 0.45882, 0.40784}, {1, 3, 1, 1});
  std_ = Tensor::from_vector(std::vector<double>(3, 1.0 / 255.0), {1, 3, 1, 1});
}

Variable SsdVgg16::normalize(const Variable& images) const {
  const Shape s = images.sizes();
  AIM_CHECK(s.size() == 4 && s[1] == 3 && s[2] == c_.image_size && s[3] == c_.image_size,
            "[ssd_vgg16] images must be [B, 3, ", c_.image_size, ", ", c_.image_size,
            "] (resized, in [0, 1]), got ", shape_str(s));
  const Variable mean(mean_.to(images.dtype()).to(images.device()));
  const Variable stdv(std_.to(images.dtype()).to(images.device()));
  return ag::div(ag::sub(images, mean), stdv);
}

std::vector<Variable> SsdVgg16::features(const Variable& images) {
  Variable x = features_->forward(normalize(images));
  std::vector<Variable> out = {ag::l2_normalize(x, scale_weight_)};
  for (auto& block : extra_) {
    x = block->forward(x);
    out.push_back(x);
  }
  for (int64_t k = 0; k < kMaps; ++k)
    AIM_CHECK(out[size_t(k)].size(2) == kMapSizes[k] && out[size_t(k)].size(3) == kMapSizes[k],
              "[ssd_vgg16] feature map ", k, " is ", shape_str(out[size_t(k)].sizes()),
              ", expected ", kMapSizes[k], " x ", kMapSizes[k]);
  return out;
}

SsdHeadOutputs SsdVgg16::forward_heads(const Variable& images) {
  const std::vector<Variable> f = features(images);
  // SSDScoringHead: [N, A K, H, W] -> view(N, A, K, H, W) -> permute(0, 3, 4, 1, 2) ->
  // reshape(N, H W A, K); maps concatenated along the priors.
  auto scoring = [&](const std::vector<std::shared_ptr<layers::Module>>& convs, int64_t K) {
    std::vector<Variable> parts;
    for (int64_t k = 0; k < kMaps; ++k) {
      const Variable y = convs[size_t(k)]->forward(f[size_t(k)]);
      const int64_t N = y.size(0), H = y.size(2), W = y.size(3);
      const Variable v = ag::reshape(y, {N, anchors_per_cell_[size_t(k)], K, H, W});
      parts.push_back(ag::reshape(ag::contiguous(ag::permute(v, {0, 3, 4, 1, 2})), {N, -1, K}));
    }
    return ag::concat(parts, 1);
  };
  SsdHeadOutputs o;
  o.bbox_regression = scoring(reg_, 4);
  o.cls_logits = scoring(cls_, c_.num_classes);
  return o;
}

SsdLoss SsdVgg16::compute_loss(const SsdHeadOutputs& out, const SsdTargets& t) const {
  const int64_t P = num_priors(), C = c_.num_classes;
  const Shape ls = out.cls_logits.sizes(), rs = out.bbox_regression.sizes();
  AIM_CHECK(ls.size() == 3 && ls[1] == P && ls[2] == C, "[ssd_vgg16 loss] cls_logits must be [B, ",
            P, ", ", C, "], got ", shape_str(ls));
  const int64_t B = ls[0];
  AIM_CHECK(rs == Shape({B, P, 4}), "[ssd_vgg16 loss] bbox_regression must be [", B, ", ", P,
            ", 4], got ", shape_str(rs));
  AIM_CHECK(t.boxes.defined() && t.boxes.dim() == 3 && t.boxes.size(0) == B && t.boxes.size(2) == 4,
            "[ssd_vgg16 loss] targets.boxes must be [", B, ", G, 4], got ",
            t.boxes.defined() ? shape_str(t.boxes.sizes()) : "undefined");
  const int64_t G = t.boxes.size(1);
  AIM_CHECK(t.labels.defined() && t.labels.sizes() == Shape({B, G}),
            "[ssd_vgg16 loss] targets.labels must be [", B, ", ", G, "], got ",
            t.labels.defined() ? shape_str(t.labels.sizes()) : "undefined");
  AIM_CHECK(t.num_boxes.defined() && t.num_boxes.sizes() == Shape({B}),
            "[ssd_vgg16 loss] targets.num_boxes must be [", B, "], got ",
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
    AIM_CHECK(n >= 0 && n <= G, "[ssd_vgg16 loss] targets.num_boxes[", b, "] = ", n,
              " is outside [0, ", G, "]");
    if (n == 0) continue;  // torchvision: every prior background
    const float* gt = boxes.data() + b * G * 4;
    for (int64_t g = 0; g < n; ++g) {
      const int64_t l = labels[size_t(b * G + g)];
      AIM_CHECK(l >= 1 && l < C, "[ssd_vgg16 loss] targets.labels[", b, ", ", g, "] = ", l,
                " is outside [1, ", C - 1, "]");
      AIM_CHECK(gt[g * 4 + 2] > gt[g * 4] && gt[g * 4 + 3] > gt[g * 4 + 1],
                "[ssd_vgg16 loss] targets.boxes[", b, ", ", g,
                "] is degenerate: boxes need x2 > x1 and y2 > y1");
    }
    const std::vector<int64_t> m = detection::ssd_match(gt, n, anchors, P, c_.iou_thresh);
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
  const double N = double(std::max<int64_t>(1, F));
  // Box regression: smooth L1 (beta 1, summed) of the positives' outputs against their targets.
  Variable bbox_sum;
  if (F > 0) {
    std::vector<float> enc(size_t(F * 4));
    detection::encode_boxes(matched.data(), fg_anchors.data(), F, coder_, enc.data());
    const Tensor rows = Tensor::from_vector(fg_rows, {F}, dev);
    const Variable sel = ag::index_select(ag::reshape(out.bbox_regression, {B * P, 4}), 0, rows);
    bbox_sum = ag::smooth_l1_loss(sel, Tensor::from_vector(enc, {F, 4}).to(dt).to(dev), 1.0,
                                  kernels::Reduction::sum);
  } else {
    bbox_sum = ag::mul(ag::sum(out.bbox_regression), 0.0);  // an empty sum, still on the graph
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
  std::vector<float> fg_w(static_cast<size_t>(B * P), 0.0f);
  for (int64_t row : fg_rows) fg_w[size_t(row)] = 1.0f;
  const Variable weight(ag::add(Variable(Tensor::from_vector(fg_w, {B * P}).to(dt).to(dev)),
                                Variable(hn.negatives.reshape({B * P}).to(dt)))
                            .data());
  const Variable cls_sum = ag::sum(ag::mul(ce, weight));
  r.bbox_regression = ag::div(bbox_sum, Variable(Tensor::full({}, N, bbox_sum.dtype(), dev)));
  r.classification = ag::div(cls_sum, Variable(Tensor::full({}, N, cls_sum.dtype(), dev)));
  r.total = ag::add(r.bbox_regression, r.classification);
  return r;
}

std::vector<SsdDetections> SsdVgg16::postprocess(const SsdHeadOutputs& out) const {
  const int64_t P = num_priors(), C = c_.num_classes;
  const Shape ls = out.cls_logits.sizes();
  AIM_CHECK(ls.size() == 3 && ls[1] == P && ls[2] == C,
            "[ssd_vgg16 postprocess] cls_logits must be [B, ", P, ", ", C, "], got ",
            shape_str(ls));
  const int64_t B = ls[0];
  AIM_CHECK(out.bbox_regression.sizes() == Shape({B, P, 4}),
            "[ssd_vgg16 postprocess] bbox_regression must be [", B, ", ", P, ", 4], got ",
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

double SsdVgg16::forward_flops(int64_t B) const {
  const int64_t S = c_.image_size;
  double flops = 2.0 * double(B * 3 * S * S);  // (x - mean) / std
  Shape s = features_->count_flops({B, 3, S, S}, flops);
  // L2Norm: per element a square and an add (the norm), a division and the scale product.
  flops += 4.0 * double(shape_numel(s));
  std::vector<Shape> maps = {s};
  for (const auto& block : extra_) {
    s = block->count_flops(s, flops);
    maps.push_back(s);
  }
  for (int64_t k = 0; k < kMaps; ++k) {
    cls_[size_t(k)]->count_flops(maps[size_t(k)], flops);
    reg_[size_t(k)]->count_flops(maps[size_t(k)], flops);
  }
  return flops;
}

// ---- Model ----------------------------------------------------------------------------------

std::vector<TensorSpec> SsdVgg16::input_specs() const {
  const std::string S = std::to_string(c_.image_size);
  return {{"images", DType::f32, {"B", "3", S, S}, "RGB resized to the input size, in [0, 1]"}};
}

std::vector<TensorSpec> SsdVgg16::label_specs() const {
  return {{"boxes", DType::f32, {"B", "G", "4"}, "objects (x1, y1, x2, y2) in input pixels"},
          {"labels", DType::i64, {"B", "G"}, "classes 1..num_classes-1 (0: padding)"},
          {"num_boxes", DType::i64, {"B"}, "objects per image (the first rows of boxes)"}};
}

std::vector<TensorSpec> SsdVgg16::output_specs() const {
  const std::string P = std::to_string(num_priors()), C = std::to_string(c_.num_classes);
  return {
      {"cls_logits", DType::f32, {"B", P, C}, "class logits per default box"},
      {"bbox_regression", DType::f32, {"B", P, "4"}, "box codes per default box (10, 10, 5, 5)"}};
}

TensorMap SsdVgg16::infer(const TensorMap& batch) {
  const SsdHeadOutputs o = forward_heads(Variable(batch.at("images")));
  return {{"cls_logits", o.cls_logits.data()}, {"bbox_regression", o.bbox_regression.data()}};
}

Variable SsdVgg16::training_loss(const TensorMap& batch) {
  return training_loss(Variable(batch.at("images")),
                       SsdTargets{batch.at("boxes"), batch.at("labels"), batch.at("num_boxes")})
      .total;
}

double SsdVgg16::forward_flops(const TensorMap& batch) const {
  return forward_flops(batch.at("images").size(0));
}

TensorMap SsdVgg16::host_metadata(const TensorMap& host_batch) const {
  TensorMap r;
  for (const char* k : {"boxes", "labels", "num_boxes"})
    if (host_batch.count(k)) r[k] = host_batch.at(k);
  return r;
}

std::vector<Model::Fp32Params> SsdVgg16::amp_fp32_params() const {
  return {{"backbone\\.scale_weight", "the L2Norm scale multiplies f32 normalised features"}};
}

}  // namespace aim::models
