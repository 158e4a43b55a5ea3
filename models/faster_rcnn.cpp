#include "models/faster_rcnn.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/loss.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/roi.h"
#include "autograd/functions/shape.h"
#include "autograd/functions/softmax.h"
#include "kernels/boxes/boxes.h"
#include "kernels/random/random.h"
#include "layers/init.h"
#include "layers/pooling.h"

namespace aim::models {

namespace ag = autograd;
using detection::BoxTransform;

namespace {

constexpr double kStride = 16;
constexpr int64_t kPool = 7;
const char* const kConvNames[13] = {"conv1_1", "conv1_2", "conv2_1", "conv2_2", "conv3_1",
                                    "conv3_2", "conv3_3", "conv4_1", "conv4_2", "conv4_3",
                                    "conv5_1", "conv5_2", "conv5_3"};
const int64_t kConvWidths[13] = {64, 64, 128, 128, 256, 256, 256, 512, 512, 512, 512, 512, 512};
// A 2x2/2 max pool (Caffe's ceil rounding) follows these convs.
bool pool_after(int i) { return i == 1 || i == 3 || i == 6 || i == 9; }

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// Stateless (no parameters, no mode), so one instance serves every model.
layers::MaxPool2d& pool() {
  static layers::MaxPool2d p(2, 2, 0, /*ceil_mode=*/true);
  return p;
}

}  // namespace

FasterRcnn::FasterRcnn(const FasterRcnnConfig& c) : c_(c) {
  AIM_CHECK(c.num_classes >= 2,
            "[faster_rcnn] num_classes must count background and >= 1 class, got ", c.num_classes);
  AIM_CHECK(c.width_divisor >= 1 && 64 % c.width_divisor == 0,
            "[faster_rcnn] width_divisor must divide 64, got ", c.width_divisor);
  AIM_CHECK(c.image_size >= 32, "[faster_rcnn] image_size must be >= 32, got ", c.image_size);
  AIM_CHECK(c.fc_width >= 1, "[faster_rcnn] fc_width must be >= 1, got ", c.fc_width);
  base_anchors_ = detection::generate_anchors(16, {0.5, 1, 2}, c.anchor_scales);
  const int64_t A = num_anchors(), dv = c.width_divisor, C = c.num_classes;
  uint64_t seed = c.seed * 1000;
  int64_t in = 3;
  for (int i = 0; i < 13; ++i) {
    convs_.push_back(child(
        kConvNames[i], std::make_shared<layers::Conv2d>(in, kConvWidths[i] / dv, 3,
                                                        layers::ConvOptions().padding(1), seed++)));
    in = kConvWidths[i] / dv;
  }
  rpn_conv_ = child("rpn_conv/3x3", std::make_shared<layers::Conv2d>(
                                        in, 512 / dv, 3, layers::ConvOptions().padding(1), seed++));
  rpn_cls_ = child("rpn_cls_score", std::make_shared<layers::Conv2d>(
                                        512 / dv, 2 * A, 1, layers::ConvOptions(), seed++));
  rpn_bbox_ = child("rpn_bbox_pred", std::make_shared<layers::Conv2d>(
                                         512 / dv, 4 * A, 1, layers::ConvOptions(), seed++));
  fc6_ = child("fc6", std::make_shared<layers::Linear>(in * kPool * kPool, c.fc_width, seed++));
  drop6_ = child("drop6", std::make_shared<layers::Dropout>(c.dropout, seed++));
  fc7_ = child("fc7", std::make_shared<layers::Linear>(c.fc_width, c.fc_width, seed++));
  drop7_ = child("drop7", std::make_shared<layers::Dropout>(c.dropout, seed++));
  cls_score_ = child("cls_score", std::make_shared<layers::Linear>(c.fc_width, C, seed++));
  bbox_pred_ = child("bbox_pred", std::make_shared<layers::Linear>(c.fc_width, 4 * C, seed++));

  // Init without ImageNet weights: the VGG16 parts as torchvision's vgg16 (convs kaiming normal
  // fan_out, fc normal 0.01), the new layers as the prototxt's fillers (gaussian 0.01; bbox_pred
  // 0.001); biases 0.
  kernels::Generator gen(c.seed);
  auto set = [&](layers::Parameter& w, layers::Parameter& b, double std) {
    w.data().copy_(layers::normal_init(w.sizes(), 0.0, std, gen));
    b.data().fill_(0.0);
  };
  for (auto& cv : convs_) {
    const Shape s = cv->weight.sizes();
    set(cv->weight, cv->bias, std::sqrt(2.0 / double(s[0] * s[2] * s[3])));
  }
  set(rpn_conv_->weight, rpn_conv_->bias, 0.01);
  set(rpn_cls_->weight, rpn_cls_->bias, 0.01);
  set(rpn_bbox_->weight, rpn_bbox_->bias, 0.01);
  set(fc6_->weight, fc6_->bias, 0.01);
  set(fc7_->weight, fc7_->bias, 0.01);
  set(cls_score_->weight, cls_score_->bias, 0.01);
  set(bbox_pred_->weight, bbox_pred_->bias, 0.001);
  if (c.freeze_conv12)
    for (int i = 0; i < 4; ++i) {
      convs_[size_t(i)]->weight.set_requires_grad(false);
      convs_[size_t(i)]->bias.set_requires_grad(false);
    }
  mean_ = Tensor::from_vector(std::vector<float>{102.9801f, 115.9465f, 122.7717f}, {1, 3, 1, 1});
  sample_key_ = data::philox_key(c.seed, 0xFA57E2C0ull);
}

void FasterRcnn::check_images(const Variable& images) const {
  const Shape s = images.sizes();
  AIM_CHECK(s.size() == 4 && s[1] == 3 && s[2] >= 32 && s[3] >= 32,
            "[faster_rcnn] images must be [B, 3, H, W] RGB in [0, 1] with H, W >= 32, got ",
            shape_str(s));
}

Variable FasterRcnn::preprocess(const Variable& images) const {
  check_images(images);
  const Tensor bgr = Tensor::from_vector(std::vector<int64_t>{2, 1, 0}, {3}, images.device());
  const Variable x = ag::mul(ag::index_select(images, 1, bgr), 255.0);
  return ag::sub(x, Variable(mean_.to(images.dtype()).to(images.device())));
}

Variable FasterRcnn::conv5_3(const Variable& images) {
  Variable x = preprocess(images);
  for (int i = 0; i < 13; ++i) {
    x = ag::relu(convs_[size_t(i)]->forward(x));
    if (pool_after(i)) x = pool().forward(x);
  }
  return x;
}

std::pair<Variable, Variable> FasterRcnn::rpn(const Variable& features) {
  const Variable h = ag::relu(rpn_conv_->forward(features));
  return {rpn_cls_->forward(h), rpn_bbox_->forward(h)};
}

std::pair<Variable, Variable> FasterRcnn::head(const Variable& features, const Tensor& rois) {
  const Variable p = ag::roi_pool(features, rois, kPool, kPool, 1.0 / kStride);
  Variable x = ag::reshape(p, {p.size(0), -1});
  x = drop6_->forward(ag::relu(fc6_->forward(x)));
  x = drop7_->forward(ag::relu(fc7_->forward(x)));
  return {cls_score_->forward(x), bbox_pred_->forward(x)};
}

std::vector<double> FasterRcnn::anchors(int64_t H, int64_t W) const {
  return detection::shift_anchors(base_anchors_, H, W, kStride);
}

Tensor FasterRcnn::rpn_readback(const Variable& score, const Variable& deltas) const {
  ag::NoGradGuard ng;
  const int64_t B = score.size(0), A = num_anchors(), H = score.size(2), W = score.size(3);
  // Caffe: reshape [B, 2, A H, W], softmax over the 2; then channel A + a is anchor a's fg.
  const Variable prob = ag::softmax(ag::reshape(Variable(score.data()), {B, 2, A, H, W}), 1);
  const Variable fg =
      ag::reshape(ag::permute(ag::select(prob, 1, 1), {0, 2, 3, 1}), {B, H * W * A});
  const Variable d = ag::reshape(
      ag::permute(ag::reshape(Variable(deltas.data()), {B, A, 4, H, W}), {0, 3, 4, 1, 2}),
      {B, H * W * A * 4});
  return ag::concat({ag::cast(fg, DType::f32), ag::cast(d, DType::f32)}, 1).data().to(kCPU);
}

FasterRcnnStep FasterRcnn::train_step(const Variable& images, const FasterRcnnTargets& t) {
  const Variable f = conv5_3(images);
  FasterRcnnStep s;
  std::tie(s.rpn_cls_score, s.rpn_bbox_pred) = rpn(f);
  const int64_t B = f.size(0), H = f.size(2), W = f.size(3), A = num_anchors(), N = H * W * A;
  const double img_h = double(images.size(2)), img_w = double(images.size(3));
  AIM_CHECK(t.boxes.defined() && t.boxes.dim() == 3 && t.boxes.size(0) == B && t.boxes.size(2) == 4,
            "[faster_rcnn loss] boxes must be [", B, ", G, 4], got ",
            t.boxes.defined() ? shape_str(t.boxes.sizes()) : "undefined");
  const int64_t G = t.boxes.size(1);
  AIM_CHECK(t.labels.defined() && t.labels.sizes() == Shape({B, G}),
            "[faster_rcnn loss] labels must be [", B, ", ", G, "], got ",
            t.labels.defined() ? shape_str(t.labels.sizes()) : "undefined");
  AIM_CHECK(t.num_boxes.defined() && t.num_boxes.sizes() == Shape({B}),
            "[faster_rcnn loss] num_boxes must be [", B, "]");
  const std::vector<float> boxes = t.boxes.to(kCPU).to_vector<float>();
  const std::vector<int64_t> labels = t.labels.to(kCPU).to_vector<int64_t>(),
                             counts = t.num_boxes.to(kCPU).to_vector<int64_t>();
  const std::vector<double> anc = anchors(H, W);
  data::PhiloxDraw draw(sample_key_, step_++ << 20);
  // The one read-back of the step, then the three Python layers per image on the host.
  const Tensor rb = rpn_readback(s.rpn_cls_score, s.rpn_bbox_pred);
  const float* rbp = rb.data<float>();
  std::vector<float> roi_blob;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = counts[size_t(b)];
    AIM_CHECK(n >= 1 && n <= G, "[faster_rcnn loss] num_boxes[", b, "] = ", n,
              ": every training image needs 1 .. ", G, " objects (py-faster-rcnn's roidb)");
    std::vector<double> gt(boxes.begin() + b * G * 4, boxes.begin() + (b * G + n) * 4);
    for (int64_t g = 0; g < n; ++g) {
      const int64_t l = labels[size_t(b * G + g)];
      AIM_CHECK(l >= 1 && l < c_.num_classes, "[faster_rcnn loss] labels[", b, ", ", g, "] = ", l,
                " is outside [1, ", c_.num_classes - 1, "]");
      AIM_CHECK(gt[size_t(4 * g + 2)] >= gt[size_t(4 * g)] &&
                    gt[size_t(4 * g + 3)] >= gt[size_t(4 * g + 1)],
                "[faster_rcnn loss] boxes[", b, ", ", g, "] has x2 < x1 or y2 < y1");
    }
    s.anchor_targets.push_back(
        detection::anchor_targets(anc, gt.data(), n, img_h, img_w, c_.anchor_target, draw));
    const float* sc = rbp + b * N * 5;
    s.proposals.push_back(
        detection::propose(sc, sc + N, anc, img_h, img_w, c_.im_scale, c_.train_proposals));
    s.roi_targets.push_back(detection::proposal_targets(
        s.proposals.back(), gt.data(), labels.data() + b * G, n, c_.proposal_target, draw));
    const detection::RoiTargets& r = s.roi_targets.back();
    for (size_t k = 0; k < r.labels.size(); ++k) {
      roi_blob.push_back(float(b));
      roi_blob.insert(roi_blob.end(), r.rois.begin() + 4 * k, r.rois.begin() + 4 * k + 4);
    }
  }
  const int64_t R = int64_t(roi_blob.size() / 5);
  s.rois = Tensor::from_vector(roi_blob, {R, 5}).to(f.dtype()).to(f.device());
  std::tie(s.cls_score, s.bbox_pred) = head(f, s.rois);
  compute_losses(s);
  return s;
}

void FasterRcnn::compute_losses(FasterRcnnStep& s) const {
  const Variable& score = s.rpn_cls_score;
  const int64_t B = score.size(0), A = num_anchors(), H = score.size(2), W = score.size(3),
                N = H * W * A, C = c_.num_classes;
  const Device dev = score.device();
  const DType dt = score.dtype();
  AIM_CHECK(int64_t(s.anchor_targets.size()) == B && int64_t(s.roi_targets.size()) == B,
            "[faster_rcnn loss] targets for ", s.anchor_targets.size(), " images, batch ", B);
  // RPN classification: Caffe's SoftmaxWithLoss (ignore_label -1, VALID normalisation) over the
  // labelled anchors of the batch; logits in (h, w, a) order.
  std::vector<int64_t> rpn_labels;
  std::vector<int64_t> pos_rows;
  std::vector<float> pos_targets, pos_w;
  int64_t valid = 0;
  for (int64_t b = 0; b < B; ++b) {
    const detection::AnchorTargets& at = s.anchor_targets[size_t(b)];
    AIM_CHECK(int64_t(at.labels.size()) == N, "[faster_rcnn loss] ", at.labels.size(),
              " anchor labels for ", N, " anchors");
    rpn_labels.insert(rpn_labels.end(), at.labels.begin(), at.labels.end());
    const int64_t labelled = at.num_fg + at.num_bg;
    valid += labelled;
    for (int64_t i = 0; i < N; ++i)
      if (at.labels[size_t(i)] == 1) {
        pos_rows.push_back(b * N + i);
        pos_targets.insert(pos_targets.end(), at.targets.begin() + 4 * i,
                           at.targets.begin() + 4 * i + 4);
        // Outside weights 1 / (labelled anchors), SmoothL1Loss's / num (the batch).
        pos_w.push_back(float(1.0 / (double(labelled) * double(B))));
      }
  }
  const Variable logits =
      ag::reshape(ag::permute(ag::reshape(score, {B, 2, A, H, W}), {0, 3, 4, 2, 1}), {B * N, 2});
  const Variable ce = ag::cross_entropy(logits, Tensor::from_vector(rpn_labels, {B * N}, dev),
                                        kernels::Reduction::sum, /*ignore_index=*/-1);
  s.rpn_loss_cls = ag::mul(ce, 1.0 / double(std::max<int64_t>(valid, 1)));
  const Variable deltas = ag::reshape(
      ag::permute(ag::reshape(s.rpn_bbox_pred, {B, A, 4, H, W}), {0, 3, 4, 1, 2}), {B * N, 4});
  const int64_t P = int64_t(pos_rows.size());
  if (P > 0) {
    // Caffe's SmoothL1Loss with sigma 3: beta = 1 / sigma^2.
    const Variable sel = ag::index_select(deltas, 0, Tensor::from_vector(pos_rows, {P}, dev));
    const Variable l =
        ag::smooth_l1_loss(sel, Tensor::from_vector(pos_targets, {P, 4}).to(dt).to(dev), 1.0 / 9.0,
                           kernels::Reduction::none);
    s.rpn_loss_bbox =
        ag::sum(ag::mul(l, Variable(Tensor::from_vector(pos_w, {P, 1}).to(dt).to(dev))));
  } else {
    s.rpn_loss_bbox = ag::mul(ag::sum(deltas), 0.0);
  }
  // Head: SoftmaxWithLoss over the RoIs, SmoothL1Loss (sigma 1) of the foreground RoIs' own
  // class columns, divided by the number of RoIs (Caffe's num).
  std::vector<int64_t> roi_labels, fg_rows;
  std::vector<float> fg_targets;
  for (const detection::RoiTargets& r : s.roi_targets) {
    const int64_t base = int64_t(roi_labels.size());
    for (int64_t k = 0; k < int64_t(r.labels.size()); ++k)
      if (r.labels[size_t(k)] > 0) {
        fg_rows.push_back((base + k) * C + r.labels[size_t(k)]);
        fg_targets.insert(fg_targets.end(), r.targets.begin() + 4 * k,
                          r.targets.begin() + 4 * k + 4);
      }
    roi_labels.insert(roi_labels.end(), r.labels.begin(), r.labels.end());
  }
  const int64_t R = int64_t(roi_labels.size());
  AIM_CHECK(s.cls_score.size(0) == R, "[faster_rcnn loss] ", s.cls_score.size(0),
            " RoI outputs for ", R, " sampled RoIs");
  s.loss_cls = ag::cross_entropy(s.cls_score, Tensor::from_vector(roi_labels, {R}, dev));
  const int64_t F = int64_t(fg_rows.size());
  if (F > 0) {
    const Variable sel = ag::index_select(ag::reshape(s.bbox_pred, {R * C, 4}), 0,
                                          Tensor::from_vector(fg_rows, {F}, dev));
    s.loss_bbox =
        ag::mul(ag::smooth_l1_loss(sel, Tensor::from_vector(fg_targets, {F, 4}).to(dt).to(dev), 1.0,
                                   kernels::Reduction::sum),
                1.0 / double(R));
  } else {
    s.loss_bbox = ag::mul(ag::sum(s.bbox_pred), 0.0);
  }
  s.total = ag::add(ag::add(s.rpn_loss_cls, s.rpn_loss_bbox), ag::add(s.loss_cls, s.loss_bbox));
}

std::vector<FasterRcnnDetections> FasterRcnn::detect(const TensorMap& o) const {
  const Tensor &rois_t = o.at("rois"), &prob_t = o.at("cls_prob"), &pred_t = o.at("bbox_pred"),
               &num_t = o.at("num_rois");
  const int64_t B = rois_t.size(0), P = rois_t.size(1), C = c_.num_classes;
  AIM_CHECK(rois_t.sizes() == Shape({B, P, 4}) && prob_t.sizes() == Shape({B, P, C}) &&
                pred_t.sizes() == Shape({B, P, 4 * C}) && num_t.sizes() == Shape({B}),
            "[faster_rcnn detect] rois [B, P, 4], cls_prob [B, P, ", C, "], bbox_pred [B, P, ",
            4 * C, "], num_rois [B] expected, got ", shape_str(rois_t.sizes()), ", ",
            shape_str(prob_t.sizes()), ", ", shape_str(pred_t.sizes()), ", ",
            shape_str(num_t.sizes()));
  const std::vector<double> rois = rois_t.to(kCPU).to_vector<double>();
  const std::vector<float> prob = prob_t.to(kCPU).to_vector<float>();
  const std::vector<double> pred = pred_t.to(kCPU).to_vector<double>();
  const std::vector<int64_t> num = num_t.to(kCPU).to_vector<int64_t>();
  const double S = double(c_.image_size);
  std::vector<FasterRcnnDetections> out(static_cast<size_t>(B));
  const detection::ProposalTargetConfig& pt = c_.proposal_target;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<float> db, ds;
    std::vector<int64_t> dl;
    for (int64_t j = 1; j < C; ++j) {
      std::vector<float> cand, ext, sc;
      for (int64_t r = b * P; r < b * P + num[size_t(b)]; ++r) {
        if (!(prob[size_t(r * C + j)] > c_.score_thresh)) continue;
        double d[4], box[4];
        for (int k = 0; k < 4; ++k)  // the snapshot's un-normalisation of bbox_pred
          d[k] = pred[size_t(r * 4 * C + 4 * j + k)] * pt.stds[k] + pt.means[k];
        detection::bbox_transform_inv(rois.data() + 4 * r, d, 1, BoxTransform::legacy(), box);
        detection::clip_boxes(box, 1, S, S, 1.0);
        for (int k = 0; k < 4; ++k) cand.push_back(float(box[k]));
        ext.insert(ext.end(),
                   {float(box[0]), float(box[1]), float(box[2]) + 1.0f, float(box[3]) + 1.0f});
        sc.push_back(prob[size_t(r * C + j)]);
      }
      const int64_t K = int64_t(sc.size());
      if (K == 0) continue;
      kernels::NmsArgs a;
      a.boxes = Tensor::from_vector(ext, {1, K, 4});
      a.scores = Tensor::from_vector(sc, {1, K});
      a.keep = Tensor::empty({1, K}, DType::i64);
      a.count = Tensor::empty({1}, DType::i64);
      a.iou_threshold = c_.nms_thresh;
      kernels::nms(a);
      for (int64_t i = 0; i < a.count.data<int64_t>()[0]; ++i) {
        const int64_t k = a.keep.data<int64_t>()[i];
        db.insert(db.end(), cand.begin() + 4 * k, cand.begin() + 4 * k + 4);
        ds.push_back(sc[size_t(k)]);
        dl.push_back(j);
      }
    }
    // max_per_image: keep scores >= the max_per_image-th largest (ties kept, as test_net).
    std::vector<size_t> keep(ds.size());
    std::iota(keep.begin(), keep.end(), size_t(0));
    if (c_.max_per_image > 0 && int64_t(ds.size()) > c_.max_per_image) {
      std::vector<float> sorted = ds;
      std::nth_element(sorted.begin(), sorted.begin() + (c_.max_per_image - 1), sorted.end(),
                       std::greater<float>());
      const float th = sorted[size_t(c_.max_per_image - 1)];
      keep.clear();
      for (size_t i = 0; i < ds.size(); ++i)
        if (ds[i] >= th) keep.push_back(i);
    }
    std::vector<float> kb, ks;
    std::vector<int64_t> kl;
    for (size_t i : keep) {
      kb.insert(kb.end(), db.begin() + 4 * i, db.begin() + 4 * i + 4);
      ks.push_back(ds[i]);
      kl.push_back(dl[i]);
    }
    const int64_t n = int64_t(ks.size());
    out[size_t(b)] = {Tensor::from_vector(kb, {n, 4}), Tensor::from_vector(ks, {n}),
                      Tensor::from_vector(kl, {n})};
  }
  return out;
}

// ---- Model ----------------------------------------------------------------------------------

std::vector<TensorSpec> FasterRcnn::input_specs() const {
  const std::string S = std::to_string(c_.image_size);
  return {{"images", DType::f32, {"B", "3", S, S}, "RGB resized to the input size, in [0, 1]"}};
}

std::vector<TensorSpec> FasterRcnn::label_specs() const {
  return {{"boxes", DType::f32, {"B", "G", "4"}, "objects (x1, y1, x2, y2) in input pixels"},
          {"labels", DType::i64, {"B", "G"}, "classes 1..num_classes-1 (0: padding)"},
          {"num_boxes", DType::i64, {"B"}, "objects per image (>= 1; the first rows of boxes)"}};
}

std::vector<TensorSpec> FasterRcnn::output_specs() const {
  const std::string C = std::to_string(c_.num_classes), C4 = std::to_string(4 * c_.num_classes),
                    P = std::to_string(c_.test_proposals.post_nms_top_n);
  return {{"rois", DType::f32, {"B", P, "4"}, "test proposals (x1, y1, x2, y2), zero-padded"},
          {"num_rois", DType::i64, {"B"}, "proposals per image (the first rows)"},
          {"cls_prob", DType::f32, {"B", P, C}, "class probabilities per RoI"},
          {"bbox_pred", DType::f32, {"B", P, C4}, "normalised class-specific deltas per RoI"}};
}

TensorMap FasterRcnn::infer(const TensorMap& batch) {
  const Variable images(batch.at("images"));
  const Variable f = conv5_3(images);
  const auto [score, deltas] = rpn(f);
  const int64_t B = f.size(0), N = f.size(2) * f.size(3) * num_anchors(), C = c_.num_classes,
                P = c_.test_proposals.post_nms_top_n;
  const std::vector<double> anc = anchors(f.size(2), f.size(3));
  const Tensor rb = rpn_readback(score, deltas);
  // Every image gets P RoI rows (fixed shapes and FLOPs): its proposals, then padding rows (an
  // empty box, outputs zeroed by the mask below).
  std::vector<float> blob(static_cast<size_t>(B * P * 5), 0.0f),
      padded(static_cast<size_t>(B * P * 4), 0.0f), mask(static_cast<size_t>(B * P), 0.0f);
  std::vector<int64_t> num(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const float* sc = rb.data<float>() + b * N * 5;
    const std::vector<float> p =
        detection::propose(sc, sc + N, anc, double(images.size(2)), double(images.size(3)),
                           c_.im_scale, c_.test_proposals);
    num[size_t(b)] = int64_t(p.size() / 4);
    std::copy(p.begin(), p.end(), padded.begin() + b * P * 4);
    for (int64_t k = 0; k < P; ++k) {
      blob[size_t((b * P + k) * 5)] = float(b);
      if (k < num[size_t(b)]) {
        std::copy_n(p.begin() + 4 * k, 4, blob.begin() + (b * P + k) * 5 + 1);
        mask[size_t(b * P + k)] = 1.0f;
      }
    }
  }
  const Device dev = f.device();
  const Tensor rois = Tensor::from_vector(blob, {B * P, 5}).to(f.dtype()).to(dev);
  const auto [cls, pred] = head(f, rois);
  const Variable m(Tensor::from_vector(mask, {B * P, 1}).to(f.dtype()).to(dev));
  return {{"rois", Tensor::from_vector(padded, {B, P, 4}).to(dev)},
          {"num_rois", Tensor::from_vector(num, {B}, dev)},
          {"cls_prob", ag::reshape(ag::mul(ag::softmax(cls, -1), m), {B, P, C}).data()},
          {"bbox_pred", ag::reshape(ag::mul(pred, m), {B, P, 4 * C}).data()}};
}

Variable FasterRcnn::training_loss(const TensorMap& batch) {
  return train_step(Variable(batch.at("images")),
                    {batch.at("boxes"), batch.at("labels"), batch.at("num_boxes")})
      .total;
}

TensorMap FasterRcnn::host_metadata(const TensorMap& host_batch) const {
  TensorMap r;
  for (const char* k : {"boxes", "labels", "num_boxes"})
    if (host_batch.count(k)) r[k] = host_batch.at(k);
  return r;
}

TensorMap FasterRcnn::postprocess_outputs(const TensorMap& out) const {
  const std::vector<FasterRcnnDetections> d = detect(out);
  const int64_t B = int64_t(d.size());
  int64_t D = 1;
  for (const auto& x : d) D = std::max(D, x.scores.numel());
  std::vector<float> boxes(size_t(B * D * 4), 0.0f), scores(size_t(B * D), 0.0f);
  std::vector<int64_t> labels(size_t(B * D), 0), count(static_cast<size_t>(B));
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

double FasterRcnn::forward_flops(int64_t B, int64_t rois_per_image) const {
  const int64_t S = c_.image_size;
  double flops = 3.0 * double(B * 3 * S * S);  // channel flip is a copy; * 255, - mean, per pixel
  Shape s = {B, 3, S, S};
  for (int i = 0; i < 13; ++i) {
    s = convs_[size_t(i)]->count_flops(s, flops);
    flops += double(shape_numel(s));  // ReLU
    if (pool_after(i)) s = pool().count_flops(s, flops);
  }
  Shape r = rpn_conv_->count_flops(s, flops);
  flops += double(shape_numel(r));
  rpn_cls_->count_flops(r, flops);
  rpn_bbox_->count_flops(r, flops);
  const int64_t R = B * rois_per_image;
  Shape h = {R, s[1] * kPool * kPool};
  flops += double(shape_numel(h));  // RoIPool: one comparison per output (kernels/roi's cost)
  h = fc6_->count_flops(h, flops);
  flops += double(shape_numel(h));
  h = fc7_->count_flops(h, flops);
  flops += double(shape_numel(h));
  cls_score_->count_flops(h, flops);
  bbox_pred_->count_flops(h, flops);
  return flops;
}

double FasterRcnn::forward_flops(const TensorMap& batch) const {
  // The test forward at its most proposals (post-NMS top-N per image).
  return forward_flops(batch.at("images").size(0), c_.test_proposals.post_nms_top_n);
}

double FasterRcnn::train_flops(const TensorMap& batch) const {
  return 3 * forward_flops(batch.at("images").size(0), c_.proposal_target.batch_size);
}

}  // namespace aim::models
