#include "models/mask_rcnn.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/interpolate.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "kernels/boxes/boxes.h"
#include "kernels/random/random.h"
#include "layers/init.h"
#include "models/detection/masks.h"
#include "models/ssd.h"
#include "tensor/check.h"

namespace aim::models {

namespace ag = autograd;
using layers::ConvOptions;
using ssd_parts::Container;

namespace {

constexpr int64_t kBoxPool = 7, kMaskPool = 14, kSampling = 2, kSizeDivisible = 32;

std::string dims(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

void fill_normal(layers::Parameter& w, double std, kernels::Generator& gen) {
  w.data().copy_(layers::normal_init(w.sizes(), 0.0, std, gen));
}

// nn.init.kaiming_normal_(mode="fan_out", nonlinearity="relu"): torch's fan_out is size(0) times
// the receptive field (for a ConvTranspose2d weight [in, out, k, k] that is in k k).
void kaiming_fan_out(layers::Parameter& w, kernels::Generator& gen) {
  const Shape s = w.sizes();
  const double fan_out = double(s[0] * s[2] * s[3]);
  fill_normal(w, std::sqrt(2.0 / fan_out), gen);
}

// A Sequential holding one module at "0" (torchvision 0.14's Conv2dNormActivation without norm:
// the conv is its child "0").
std::shared_ptr<layers::Sequential> wrap(std::shared_ptr<layers::Module> m) {
  auto s = std::make_shared<layers::Sequential>();
  s->push_back(std::move(m));
  return s;
}

std::vector<std::vector<float>> boxes_of(const std::vector<detection::Detections>& d) {
  std::vector<std::vector<float>> r;
  for (const auto& x : d) r.push_back(x.boxes);
  return r;
}

}  // namespace

MaskRcnnConfig MaskRcnnConfig::tiny(int64_t num_classes) {
  MaskRcnnConfig c;
  c.num_classes = num_classes;
  c.blocks = {1, 1, 1, 1};
  c.base = 8;
  c.fpn_channels = 32;
  c.representation = 64;
  c.mask_channels = 32;
  c.min_size = c.max_size = 128;
  // Fewer RoIs than torchvision's 512 per image and fewer proposals: on 128 x 128 images with at
  // most 3 objects they are plenty, and they keep a CPU training step to ~0.1 s (CI).
  c.roi.batch_per_image = 128;
  c.rpn_train.pre_nms_top_n = 1000, c.rpn_train.post_nms_top_n = 500;
  c.rpn_test.pre_nms_top_n = 500, c.rpn_test.post_nms_top_n = 300;
  return c;
}

// ---- FrozenBatchNorm2d, Bottleneck ----------------------------------------------------------

FrozenBatchNorm2d::FrozenBatchNorm2d(int64_t channels, double eps)
    : channels_(channels), eps_(eps) {
  weight_ = &buffer("weight", Tensor::ones({channels}));
  bias_ = &buffer("bias", Tensor::zeros({channels}));
  running_mean_ = &buffer("running_mean", Tensor::zeros({channels}));
  running_var_ = &buffer("running_var", Tensor::ones({channels}));
}

Variable FrozenBatchNorm2d::forward(const Variable& x) {
  AIM_CHECK(x.dim() == 4 && x.size(1) == channels_, "[FrozenBatchNorm2d] expected x [N, ",
            channels_, ", H, W], got ", dims(x.sizes()));
  // torchvision's order: scale = w * (rv + eps).rsqrt(); shift = b - rm * scale.
  const Shape s = {1, channels_, 1, 1};
  Tensor sc, sh;
  {
    ag::NoGradGuard ng;  // constants: no graph for the buffers
    const Variable scale =
        ag::mul(Variable(*weight_), ag::rsqrt(ag::add(Variable(*running_var_), eps_)));
    const Variable shift = ag::sub(Variable(*bias_), ag::mul(Variable(*running_mean_), scale));
    sc = ag::reshape(scale, s).data().to(x.dtype());
    sh = ag::reshape(shift, s).data().to(x.dtype());
  }
  return ag::add(ag::mul(x, Variable(sc)), Variable(sh));
}

Shape FrozenBatchNorm2d::count_flops(const Shape& in, double& flops) const {
  flops += 2 * double(shape_numel(in));
  return in;
}

FrozenBottleneck::FrozenBottleneck(int64_t inplanes, int64_t planes, int64_t stride,
                                   uint64_t seed) {
  const int64_t out = planes * kExpansion;
  conv1_ = child("conv1", std::make_shared<layers::Conv2d>(inplanes, planes, 1,
                                                           ConvOptions().no_bias(), seed));
  bn1_ = child("bn1", std::make_shared<FrozenBatchNorm2d>(planes));
  conv2_ = child(
      "conv2", std::make_shared<layers::Conv2d>(
                   planes, planes, 3, ConvOptions().stride(stride).padding(1).no_bias(), seed + 1));
  bn2_ = child("bn2", std::make_shared<FrozenBatchNorm2d>(planes));
  conv3_ = child(
      "conv3", std::make_shared<layers::Conv2d>(planes, out, 1, ConvOptions().no_bias(), seed + 2));
  bn3_ = child("bn3", std::make_shared<FrozenBatchNorm2d>(out));
  if (stride != 1 || inplanes != out) {
    downsample_ = child("downsample", std::make_shared<layers::Sequential>());
    downsample_->push_back(std::make_shared<layers::Conv2d>(
        inplanes, out, 1, ConvOptions().stride(stride).no_bias(), seed + 3));
    downsample_->push_back(std::make_shared<FrozenBatchNorm2d>(out));
  }
}

Variable FrozenBottleneck::forward(const Variable& x) {
  Variable y = ag::relu(bn1_->forward(conv1_->forward(x)));
  y = ag::relu(bn2_->forward(conv2_->forward(y)));
  y = bn3_->forward(conv3_->forward(y));
  return ag::relu(ag::add(y, downsample_ ? downsample_->forward(x) : x));
}

Shape FrozenBottleneck::count_flops(const Shape& in, double& flops) const {
  Shape s = bn1_->count_flops(conv1_->count_flops(in, flops), flops);
  flops += double(shape_numel(s));
  s = bn2_->count_flops(conv2_->count_flops(s, flops), flops);
  flops += double(shape_numel(s));
  s = bn3_->count_flops(conv3_->count_flops(s, flops), flops);
  if (downsample_) downsample_->count_flops(in, flops);
  flops += 2 * double(shape_numel(s));
  return s;
}

// ---- the module tree ------------------------------------------------------------------------

MaskRcnn::MaskRcnn(const MaskRcnnConfig& c) : c_(c) {
  AIM_CHECK(c.num_classes >= 2,
            "[mask_rcnn] num_classes must count background and >= 1 class, got ", c.num_classes);
  AIM_CHECK(c.blocks.size() == 4, "[mask_rcnn] blocks must give 4 stages, got ", c.blocks.size());
  AIM_CHECK(c.base >= 1 && c.fpn_channels >= 1 && c.representation >= 1 && c.mask_channels >= 1,
            "[mask_rcnn] widths must be >= 1");
  AIM_CHECK(c.trainable_layers >= 0 && c.trainable_layers <= 5,
            "[mask_rcnn] trainable_layers must be in [0, 5], got ", c.trainable_layers);
  AIM_CHECK(c.min_size >= 32 && c.max_size >= c.min_size, "[mask_rcnn] min_size ", c.min_size,
            " / max_size ", c.max_size, ": need 32 <= min_size <= max_size");
  AIM_CHECK(c.anchors.sizes.size() == 5, "[mask_rcnn] anchors: 5 levels (P2..P6) expected, got ",
            c.anchors.sizes.size());
  const int64_t A = c.anchors.per_cell(0), F = c.fpn_channels, C = c.num_classes;
  for (size_t l = 1; l < 5; ++l)
    AIM_CHECK(c.anchors.per_cell(l) == A, "[mask_rcnn] every level needs ", A,
              " anchors per cell (one RPN head)");
  uint64_t seed = c.seed * 1000;
  auto backbone = child("backbone", std::make_shared<Container>("BackboneWithFPN"));
  auto body = backbone->add("body", std::make_shared<Container>("IntermediateLayerGetter"));
  conv1_ =
      body->add("conv1", std::make_shared<layers::Conv2d>(
                             3, c.base, 7, ConvOptions().stride(2).padding(3).no_bias(), seed++));
  bn1_ = body->add("bn1", std::make_shared<FrozenBatchNorm2d>(c.base));
  maxpool_ = std::make_shared<layers::MaxPool2d>(3, 2, 1);
  int64_t inplanes = c.base;
  std::vector<int64_t> stage_out;
  for (size_t i = 0; i < 4; ++i) {
    const int64_t planes = c.base << i;
    auto stage = std::make_shared<layers::Sequential>();
    for (int64_t b = 0; b < c.blocks[i]; ++b) {
      stage->push_back(std::make_shared<FrozenBottleneck>(inplanes, planes,
                                                          (i > 0 && b == 0) ? 2 : 1, seed += 10));
      inplanes = planes * FrozenBottleneck::kExpansion;
    }
    stages_.push_back(body->add("layer" + std::to_string(i + 1), stage));
    stage_out.push_back(inplanes);
  }
  auto fpn = backbone->add("fpn", std::make_shared<Container>("FeaturePyramidNetwork"));
  auto inner = fpn->add("inner_blocks", std::make_shared<layers::Sequential>());
  auto layer = fpn->add("layer_blocks", std::make_shared<layers::Sequential>());
  for (size_t i = 0; i < 4; ++i) {
    inner_.push_back(std::make_shared<layers::Conv2d>(stage_out[i], F, 1, ConvOptions(), seed++));
    inner->push_back(wrap(inner_.back()));
    layer_.push_back(std::make_shared<layers::Conv2d>(F, F, 3, ConvOptions().padding(1), seed++));
    layer->push_back(wrap(layer_.back()));
  }
  auto rpn = child("rpn", std::make_shared<Container>("RegionProposalNetwork"));
  auto head = rpn->add("head", std::make_shared<Container>("RPNHead"));
  rpn_conv_ = std::make_shared<layers::Conv2d>(F, F, 3, ConvOptions().padding(1), seed++);
  head->add("conv", wrap(wrap(rpn_conv_)));
  rpn_cls_ =
      head->add("cls_logits", std::make_shared<layers::Conv2d>(F, A, 1, ConvOptions(), seed++));
  rpn_bbox_ =
      head->add("bbox_pred", std::make_shared<layers::Conv2d>(F, 4 * A, 1, ConvOptions(), seed++));
  auto roi = child("roi_heads", std::make_shared<Container>("RoIHeads"));
  auto box_head = roi->add("box_head", std::make_shared<Container>("TwoMLPHead"));
  fc6_ = box_head->add(
      "fc6", std::make_shared<layers::Linear>(F * kBoxPool * kBoxPool, c.representation, seed++));
  fc7_ = box_head->add(
      "fc7", std::make_shared<layers::Linear>(c.representation, c.representation, seed++));
  auto box_pred = roi->add("box_predictor", std::make_shared<Container>("FastRCNNPredictor"));
  cls_score_ =
      box_pred->add("cls_score", std::make_shared<layers::Linear>(c.representation, C, seed++));
  bbox_pred_ =
      box_pred->add("bbox_pred", std::make_shared<layers::Linear>(c.representation, 4 * C, seed++));
  auto mask_head = roi->add("mask_head", std::make_shared<layers::Sequential>());
  int64_t in = F;
  for (int i = 0; i < 4; ++i) {
    mask_convs_.push_back(
        std::make_shared<layers::Conv2d>(in, c.mask_channels, 3, ConvOptions().padding(1), seed++));
    mask_head->push_back(wrap(mask_convs_.back()));
    in = c.mask_channels;
  }
  auto mask_pred = roi->add("mask_predictor", std::make_shared<Container>("MaskRCNNPredictor"));
  conv5_mask_ =
      mask_pred->add("conv5_mask", std::make_shared<layers::ConvTranspose2d>(
                                       in, c.mask_channels, 2, ConvOptions().stride(2), seed++));
  mask_logits_ = mask_pred->add(
      "mask_fcn_logits",
      std::make_shared<layers::Conv2d>(c.mask_channels, C, 1, ConvOptions(), seed++));

  // torchvision's inits: ResNet convs kaiming normal (fan_out); FPN kaiming_uniform(a=1), bias 0;
  // RPN head normal 0.01, bias 0; mask head and predictor kaiming normal (fan_out), bias 0;
  // the Linear layers keep PyTorch's default.
  kernels::Generator gen(c.seed);
  kaiming_fan_out(conv1_->weight, gen);
  for (auto& st : stages_)
    for (const auto& [n, p] : st->named_parameters()) {
      layers::Parameter w = p;
      kaiming_fan_out(w, gen);
    }
  for (auto* v : {&inner_, &layer_})
    for (auto& cv : *v) {
      const Shape s = cv->weight.sizes();
      const double bound = std::sqrt(3.0 / double(s[1] * s[2] * s[3]));
      cv->weight.data().copy_(layers::uniform_init(s, -bound, bound, gen));
      cv->bias.data().fill_(0.0);
    }
  for (auto* cv : {rpn_conv_.get(), rpn_cls_.get(), rpn_bbox_.get()}) {
    fill_normal(cv->weight, 0.01, gen);
    cv->bias.data().fill_(0.0);
  }
  for (auto& cv : mask_convs_) {
    kaiming_fan_out(cv->weight, gen);
    cv->bias.data().fill_(0.0);
  }
  kaiming_fan_out(conv5_mask_->weight, gen);
  conv5_mask_->bias.data().fill_(0.0);
  kaiming_fan_out(mask_logits_->weight, gen);
  mask_logits_->bias.data().fill_(0.0);
  // trainable_layers: layer4, layer3, layer2, layer1, conv1 (bn1 is frozen anyway) from the top.
  const char* order[5] = {"layer4", "layer3", "layer2", "layer1", "conv1"};
  std::vector<std::string> trainable(order, order + c.trainable_layers);
  for (const auto& [n, p] : body->named_parameters()) {
    bool on = false;
    for (const std::string& t : trainable) on = on || n.rfind(t, 0) == 0;
    layers::Parameter q = p;
    q.set_requires_grad(on);
  }
  mean_ = Tensor::from_vector(c.image_mean, {1, 3, 1, 1});
  std_ = Tensor::from_vector(c.image_std, {1, 3, 1, 1});
  sample_key_ = data::philox_key(c.seed, 0x3A5CC0ull);
}

// ---- forward pieces -------------------------------------------------------------------------

std::pair<int64_t, int64_t> MaskRcnn::resized_size(int64_t H, int64_t W) const {
  // torchvision: python floats (double), then math.floor(size * scale).
  const double scale = std::min(double(c_.min_size) / double(std::min(H, W)),
                                double(c_.max_size) / double(std::max(H, W)));
  return {int64_t(std::floor(double(H) * scale)), int64_t(std::floor(double(W) * scale))};
}

RcnnImages MaskRcnn::transform(const Variable& images) const {
  const Shape s = images.sizes();
  AIM_CHECK(s.size() == 4 && s[1] == 3 && s[2] >= 1 && s[3] >= 1,
            "[mask_rcnn] images must be [B, 3, H, W] RGB in [0, 1], got ", dims(s));
  RcnnImages r;
  r.orig_height = s[2], r.orig_width = s[3];
  const Device dev = images.device();
  Variable x = ag::div(ag::sub(images, Variable(mean_.to(images.dtype()).to(dev))),
                       Variable(std_.to(images.dtype()).to(dev)));
  std::tie(r.height, r.width) = resized_size(s[2], s[3]);
  // Bilinear at the same size is the identity (half-pixel centres land on the pixels).
  if (r.height != s[2] || r.width != s[3])
    x = ag::interpolate(x, r.height, r.width, kernels::InterpMode::bilinear, false);
  const int64_t ph = (r.height + kSizeDivisible - 1) / kSizeDivisible * kSizeDivisible,
                pw = (r.width + kSizeDivisible - 1) / kSizeDivisible * kSizeDivisible;
  if (ph != r.height || pw != r.width) x = ag::pad(x, {0, pw - r.width, 0, ph - r.height}, 0.0);
  r.images = x;
  return r;
}

std::vector<Variable> MaskRcnn::features(const Variable& images) {
  Variable x = ag::relu(bn1_->forward(conv1_->forward(images)));
  x = maxpool_->forward(x);
  std::vector<Variable> c;
  for (auto& st : stages_) c.push_back(x = st->forward(x));
  // FPN top-down: last_inner = inner[3](C5); each lower level adds its lateral to the nearest
  // upsampling of the level above.
  std::vector<Variable> out(4);
  Variable last = inner_[3]->forward(c[3]);
  out[3] = layer_[3]->forward(last);
  for (int i = 2; i >= 0; --i) {
    const Variable lateral = inner_[size_t(i)]->forward(c[size_t(i)]);
    const Variable top = ag::interpolate(last, lateral.size(2), lateral.size(3),
                                         kernels::InterpMode::nearest, false);
    last = ag::add(lateral, top);
    out[size_t(i)] = layer_[size_t(i)]->forward(last);
  }
  static layers::MaxPool2d pool(1, 2, 0);  // LastLevelMaxPool; stateless
  out.push_back(pool.forward(out[3]));
  return out;
}

void MaskRcnn::rpn_head(const std::vector<Variable>& feats, std::vector<Variable>& objectness,
                        std::vector<Variable>& deltas) {
  objectness.clear(), deltas.clear();
  for (const Variable& f : feats) {
    const Variable h = ag::relu(rpn_conv_->forward(f));
    objectness.push_back(rpn_cls_->forward(h));
    deltas.push_back(rpn_bbox_->forward(h));
  }
}

std::pair<Variable, Variable> MaskRcnn::box_branch(const std::vector<Variable>& feats,
                                                   const std::vector<std::vector<float>>& boxes,
                                                   int64_t image_h) {
  const std::vector<Variable> maps(feats.begin(), feats.begin() + 4);  // "0".."3"
  const Variable p = detection::multiscale_roi_align(maps, boxes, image_h, kBoxPool, kSampling);
  Variable x = ag::reshape(p, {p.size(0), -1});
  x = ag::relu(fc7_->forward(ag::relu(fc6_->forward(x))));
  return {cls_score_->forward(x), bbox_pred_->forward(x)};
}

Variable MaskRcnn::mask_branch(const std::vector<Variable>& feats,
                               const std::vector<std::vector<float>>& boxes, int64_t image_h) {
  const std::vector<Variable> maps(feats.begin(), feats.begin() + 4);
  Variable x = detection::multiscale_roi_align(maps, boxes, image_h, kMaskPool, kSampling);
  for (auto& cv : mask_convs_) x = ag::relu(cv->forward(x));
  return mask_logits_->forward(ag::relu(conv5_mask_->forward(x)));
}

namespace {

// The RPN outputs in anchor order (levels concatenated, (h, w, a) within a level), image-major:
// objectness [B, N] and deltas [B, N * 4].
std::pair<Variable, Variable> flatten_rpn(const std::vector<Variable>& obj,
                                          const std::vector<Variable>& del) {
  std::vector<Variable> o, d;
  for (size_t l = 0; l < obj.size(); ++l) {
    const int64_t B = obj[l].size(0), A = obj[l].size(1), H = obj[l].size(2), W = obj[l].size(3);
    o.push_back(ag::reshape(ag::permute(obj[l], {0, 2, 3, 1}), {B, H * W * A}));
    d.push_back(ag::reshape(ag::permute(ag::reshape(del[l], {B, A, 4, H, W}), {0, 3, 4, 1, 2}),
                            {B, H * W * A * 4}));
  }
  return {ag::concat(o, 1), ag::concat(d, 1)};
}

std::vector<std::pair<int64_t, int64_t>> grids_of(const std::vector<Variable>& feats) {
  std::vector<std::pair<int64_t, int64_t>> g;
  for (const Variable& f : feats) g.emplace_back(f.size(2), f.size(3));
  return g;
}

}  // namespace

MaskRcnnEval MaskRcnn::evaluate(const Variable& images) {
  MaskRcnnEval e;
  e.input = transform(images);
  const Variable& x = e.input.images;
  const int64_t B = x.size(0), C = c_.num_classes, M = c_.mask_size;
  const std::vector<Variable> feats = features(x);
  std::vector<Variable> obj, del;
  rpn_head(feats, obj, del);
  std::vector<int64_t> counts;
  const std::vector<float> anchors =
      c_.anchors.anchors(grids_of(feats), x.size(2), x.size(3), &counts);
  const int64_t N = int64_t(anchors.size() / 4);
  // Read-back 1: the RPN outputs.
  Tensor rb;
  {
    ag::NoGradGuard ng;
    auto [o, d] = flatten_rpn(obj, del);
    rb = ag::concat({ag::cast(o, DType::f32), ag::cast(d, DType::f32)}, 1).data().to(kCPU);
  }
  std::vector<std::vector<float>> props;
  for (int64_t b = 0; b < B; ++b) {
    const float* p = rb.data<float>() + b * N * 5;
    e.proposals.push_back(detection::rpn_proposals(p, p + N, anchors, counts, e.input.height,
                                                   e.input.width, c_.rpn_test));
    props.push_back(e.proposals.back().boxes);
  }
  int64_t R = 0;
  for (const auto& p : props) R += int64_t(p.size() / 4);
  e.detections.assign(size_t(B), {});
  if (R > 0) {
    auto [cls, reg] = box_branch(feats, props, e.input.height);
    // Read-back 2: the box head.
    e.class_logits = ag::cast(cls, DType::f32).data().to(kCPU);
    e.box_regression = ag::cast(reg, DType::f32).data().to(kCPU);
    int64_t off = 0;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t n = int64_t(props[size_t(b)].size() / 4);
      e.detections[size_t(b)] = detection::roi_postprocess(
          e.class_logits.data<float>() + off * C, e.box_regression.data<float>() + off * 4 * C,
          props[size_t(b)], C, e.input.height, e.input.width, c_.roi);
      off += n;
    }
  }
  int64_t D = 0;
  for (const auto& d : e.detections) D += int64_t(d.scores.size());
  std::vector<float> probs;
  if (D > 0) {
    // Read-back 3: the mask logits of the detections; each keeps its label's map, sigmoid.
    e.mask_logits = ag::cast(mask_branch(feats, boxes_of(e.detections), e.input.height), DType::f32)
                        .data()
                        .to(kCPU);
    const float* ml = e.mask_logits.data<float>();
    int64_t k = 0;
    for (const auto& d : e.detections)
      for (int64_t lab : d.labels) {
        const float* m = ml + (k++ * C + lab) * M * M;
        for (int64_t i = 0; i < M * M; ++i) probs.push_back(1.0f / (1.0f + std::exp(-m[i])));
      }
  }
  // transform.postprocess: boxes times original / resized (f32 ratios), per axis.
  const float rh = float(e.input.orig_height) / float(e.input.height),
              rw = float(e.input.orig_width) / float(e.input.width);
  int64_t k = 0;
  for (const auto& d : e.detections) {
    detection::Detections f = d;
    for (size_t i = 0; i < f.boxes.size(); i += 4) {
      f.boxes[i] *= rw, f.boxes[i + 2] *= rw;
      f.boxes[i + 1] *= rh, f.boxes[i + 3] *= rh;
    }
    const int64_t n = int64_t(d.scores.size());
    e.mask_probs.push_back(Tensor::from_vector(
        std::vector<float>(probs.begin() + k * M * M, probs.begin() + (k + n) * M * M), {n, M, M}));
    k += n;
    e.final.push_back(std::move(f));
  }
  return e;
}

MaskRcnnLosses MaskRcnn::losses(const Variable& images, const MaskRcnnTargets& t) {
  const RcnnImages in = transform(images);
  const Variable& x = in.images;
  const int64_t B = x.size(0), H = images.size(2), W = images.size(3);
  AIM_CHECK(t.boxes.defined() && t.boxes.dim() == 3 && t.boxes.size(0) == B && t.boxes.size(2) == 4,
            "[mask_rcnn loss] boxes must be [", B, ", G, 4], got ",
            t.boxes.defined() ? dims(t.boxes.sizes()) : "undefined");
  const int64_t G = t.boxes.size(1);
  AIM_CHECK(t.labels.defined() && t.labels.sizes() == Shape({B, G}),
            "[mask_rcnn loss] labels must be [", B, ", ", G, "], got ",
            t.labels.defined() ? dims(t.labels.sizes()) : "undefined");
  AIM_CHECK(t.num_boxes.defined() && t.num_boxes.sizes() == Shape({B}),
            "[mask_rcnn loss] num_boxes must be [", B, "]");
  AIM_CHECK(t.masks.defined() && t.masks.sizes() == Shape({B, G, H, W}),
            "[mask_rcnn loss] masks must be [", B, ", ", G, ", ", H, ", ", W,
            "] (the images' size), got ", t.masks.defined() ? dims(t.masks.sizes()) : "undefined");
  const std::vector<float> boxes = t.boxes.to(kCPU).to_vector<float>();
  const std::vector<int64_t> labels = t.labels.to(kCPU).to_vector<int64_t>(),
                             counts = t.num_boxes.to(kCPU).to_vector<int64_t>();
  // Targets resized as the images: boxes times (new / old) (f32 ratios), masks nearest.
  const float rh = float(in.height) / float(H), rw = float(in.width) / float(W);
  const Device dev = x.device();
  Tensor masks = t.masks.to(dev).to(x.dtype());
  if (in.height != H || in.width != W)
    masks =
        ag::interpolate(Variable(masks), in.height, in.width, kernels::InterpMode::nearest).data();
  std::vector<std::vector<float>> gt(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = counts[size_t(b)];
    AIM_CHECK(n >= 0 && n <= G, "[mask_rcnn loss] num_boxes[", b, "] = ", n, " is outside [0, ", G,
              "]");
    for (int64_t g = 0; g < n; ++g) {
      const int64_t l = labels[size_t(b * G + g)];
      AIM_CHECK(l >= 1 && l < c_.num_classes, "[mask_rcnn loss] labels[", b, ", ", g, "] = ", l,
                " is outside [1, ", c_.num_classes - 1, "]");
      const float* q = boxes.data() + (b * G + g) * 4;
      AIM_CHECK(q[2] > q[0] && q[3] > q[1], "[mask_rcnn loss] boxes[", b, ", ", g,
                "] has x2 <= x1 or y2 <= y1 (torchvision refuses degenerate boxes)");
      gt[size_t(b)].insert(gt[size_t(b)].end(), {q[0] * rw, q[1] * rh, q[2] * rw, q[3] * rh});
    }
  }

  const std::vector<Variable> feats = features(x);
  std::vector<Variable> obj, del;
  rpn_head(feats, obj, del);
  std::vector<int64_t> lc;
  const std::vector<float> anchors = c_.anchors.anchors(grids_of(feats), x.size(2), x.size(3), &lc);
  const int64_t N = int64_t(anchors.size() / 4);
  auto [objectness, deltas] = flatten_rpn(obj, del);
  Tensor rb;
  {
    ag::NoGradGuard ng;
    rb = ag::concat({ag::cast(Variable(objectness.data()), DType::f32),
                     ag::cast(Variable(deltas.data()), DType::f32)},
                    1)
             .data()
             .to(kCPU);
  }
  data::PhiloxDraw draw(sample_key_, step_++ << 20);
  MaskRcnnLosses l;
  std::vector<detection::RpnTargets> rpn_t;
  std::vector<detection::SampledSets>& rpn_s = l.rpn_sampled;
  std::vector<std::vector<float>> sampled_boxes, pos_boxes;
  std::vector<int64_t> roi_labels, pos_labels;
  std::vector<float> roi_targets;
  std::vector<Tensor> mask_targets;
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<float>& g = gt[size_t(b)];
    const int64_t n = int64_t(g.size() / 4);
    const float* p = rb.data<float>() + b * N * 5;
    const detection::Proposals pr =
        detection::rpn_proposals(p, p + N, anchors, lc, in.height, in.width, c_.rpn_train);
    rpn_t.push_back(detection::rpn_targets(anchors, g.data(), n, c_.rpn_train));
    rpn_s.push_back(detection::balanced_sample(rpn_t.back().labels, c_.rpn_train.batch_per_image,
                                               c_.rpn_train.positive_fraction, draw));
    const detection::RoiSamples s =
        detection::roi_training_samples(pr.boxes, g.data(), labels.data() + b * G, n, c_.roi, draw);
    sampled_boxes.push_back(s.boxes);
    detection::SampledSets ss;
    for (size_t i = 0; i < s.labels.size(); ++i)
      (s.labels[i] > 0 ? ss.pos : ss.neg).push_back(s.sampled[i]);
    l.roi_sampled.push_back(std::move(ss));
    roi_labels.insert(roi_labels.end(), s.labels.begin(), s.labels.end());
    roi_targets.insert(roi_targets.end(), s.targets.begin(), s.targets.end());
    std::vector<float> pb;
    std::vector<int64_t> pm;
    for (size_t i = 0; i < s.labels.size(); ++i)
      if (s.labels[i] > 0) {
        pb.insert(pb.end(), s.boxes.begin() + 4 * i, s.boxes.begin() + 4 * i + 4);
        pm.push_back(s.matched[i]);
        pos_labels.push_back(s.labels[i]);
      }
    if (!pm.empty()) {
      const Tensor gm = ag::slice(ag::select(Variable(masks), 0, b), 0, 0, n).data().contiguous();
      mask_targets.push_back(detection::project_masks_on_boxes(
          gm, detection::mask_target_rois(pb, pm, n), c_.mask_size));
    }
    pos_boxes.push_back(std::move(pb));
  }
  const detection::RpnLosses rl = detection::rpn_loss(objectness, deltas, rpn_t, rpn_s);
  l.objectness = rl.objectness, l.rpn_box_reg = rl.box_reg;
  auto [cls, reg] = box_branch(feats, sampled_boxes, in.height);
  const detection::BoxLosses bl = detection::fastrcnn_loss(cls, reg, roi_labels, roi_targets);
  l.classifier = bl.classifier, l.box_reg = bl.box_reg;
  if (!pos_labels.empty()) {
    const Variable ml = mask_branch(feats, pos_boxes, in.height);
    const Tensor mt =
        mask_targets.size() == 1
            ? mask_targets[0]
            : ag::concat(std::vector<Variable>(mask_targets.begin(), mask_targets.end()), 0).data();
    l.mask = detection::maskrcnn_loss(ml, pos_labels, mt.to(ml.dtype()));
  } else {
    l.mask = ag::mul(ag::sum(cls), 0.0);  // no positives (images without objects)
  }
  // torchvision's loss dict summed: classifier, box_reg, mask, objectness, rpn_box_reg.
  l.total = ag::add(ag::add(ag::add(l.classifier, l.box_reg), ag::add(l.mask, l.objectness)),
                    l.rpn_box_reg);
  return l;
}

// ---- Model ----------------------------------------------------------------------------------

std::vector<TensorSpec> MaskRcnn::input_specs() const {
  return {{"images", DType::f32, {"B", "3", "H", "W"}, "RGB in [0, 1] (resized by the model)"}};
}

std::vector<TensorSpec> MaskRcnn::label_specs() const {
  return {{"boxes", DType::f32, {"B", "G", "4"}, "objects (x1, y1, x2, y2) in input pixels"},
          {"labels", DType::i64, {"B", "G"}, "classes 1..num_classes-1 (0: padding)"},
          {"num_boxes", DType::i64, {"B"}, "objects per image (the first rows of boxes)"},
          {"masks", DType::u8, {"B", "G", "H", "W"}, "each object's pixels (0 / 1)"}};
}

std::vector<TensorSpec> MaskRcnn::output_specs() const {
  const std::string D = std::to_string(c_.roi.detections_per_img), M = std::to_string(c_.mask_size);
  return {{"boxes", DType::f32, {"B", D, "4"}, "detections (x1, y1, x2, y2) in input pixels"},
          {"scores", DType::f32, {"B", D}, "detection scores, best first (0: padding)"},
          {"labels", DType::i64, {"B", D}, "detection classes (0: padding)"},
          {"num_detections", DType::i64, {"B"}, "detections per image (the first rows)"},
          {"mask_probs", DType::f32, {"B", D, M, M}, "each detection's mask probabilities"},
          {"image_size", DType::i64, {"2"}, "the input images' H, W (for pasting the masks)"}};
}

TensorMap MaskRcnn::infer(const TensorMap& batch) {
  const Variable images(batch.at("images"));
  const MaskRcnnEval e = evaluate(images);
  const int64_t B = images.size(0), D = c_.roi.detections_per_img, M = c_.mask_size;
  std::vector<float> boxes(size_t(B * D * 4), 0.0f), scores(size_t(B * D), 0.0f),
      probs(size_t(B * D * M * M), 0.0f);
  std::vector<int64_t> labels(size_t(B * D), 0), num(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const detection::Detections& d = e.final[size_t(b)];
    const int64_t n = std::min<int64_t>(D, int64_t(d.scores.size()));
    num[size_t(b)] = n;
    std::copy_n(d.boxes.begin(), 4 * n, boxes.begin() + b * D * 4);
    std::copy_n(d.scores.begin(), n, scores.begin() + b * D);
    std::copy_n(d.labels.begin(), n, labels.begin() + b * D);
    std::copy_n(e.mask_probs[size_t(b)].data<float>(), n * M * M, probs.begin() + b * D * M * M);
  }
  const Device dev = images.device();
  return {{"boxes", Tensor::from_vector(boxes, {B, D, 4}, dev)},
          {"scores", Tensor::from_vector(scores, {B, D}, dev)},
          {"labels", Tensor::from_vector(labels, {B, D}, dev)},
          {"num_detections", Tensor::from_vector(num, {B}, dev)},
          {"mask_probs", Tensor::from_vector(probs, {B, D, M, M}, dev)},
          {"image_size",
           Tensor::from_vector(std::vector<int64_t>{images.size(2), images.size(3)}, {2}, dev)}};
}

Variable MaskRcnn::training_loss(const TensorMap& batch) {
  return losses(Variable(batch.at("images")),
                {batch.at("boxes"), batch.at("labels"), batch.at("num_boxes"), batch.at("masks")})
      .total;
}

TensorMap MaskRcnn::host_metadata(const TensorMap& host_batch) const {
  TensorMap r;
  for (const char* k : {"boxes", "labels", "num_boxes"})
    if (host_batch.count(k)) r[k] = host_batch.at(k);
  return r;
}

TensorMap MaskRcnn::postprocess_outputs(const TensorMap& out) const {
  const Tensor boxes = out.at("boxes").to(kCPU), num = out.at("num_detections").to(kCPU),
               probs = out.at("mask_probs").to(kCPU), size = out.at("image_size").to(kCPU);
  const int64_t B = boxes.size(0), D = boxes.size(1), M = probs.size(2);
  AIM_CHECK(probs.sizes() == Shape({B, D, M, M}) && num.sizes() == Shape({B}) && size.numel() == 2,
            "[mask_rcnn postprocess] boxes [B, D, 4], mask_probs [B, D, M, M], num_detections [B], "
            "image_size [2] expected");
  const int64_t H = size.data<int64_t>()[0], W = size.data<int64_t>()[1];
  int64_t most = 1;
  for (int64_t b = 0; b < B; ++b) most = std::max(most, num.data<int64_t>()[b]);
  Tensor masks = Tensor::zeros({B, most, H, W}, DType::u8);
  uint8_t* mp = masks.data<uint8_t>();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = num.data<int64_t>()[b];
    if (n == 0) continue;
    const Tensor m =
        Tensor::from_vector(std::vector<float>(probs.data<float>() + b * D * M * M,
                                               probs.data<float>() + (b * D + n) * M * M),
                            {n, M, M});
    const Tensor bx = Tensor::from_vector(
        std::vector<float>(boxes.data<float>() + b * D * 4, boxes.data<float>() + (b * D + n) * 4),
        {n, 4});
    const auto bin = detection::paste_masks_binary(m, bx, H, W);
    for (int64_t k = 0; k < n; ++k)
      std::copy(bin[size_t(k)].begin(), bin[size_t(k)].end(), mp + (b * most + k) * H * W);
  }
  TensorMap r = out;
  for (auto& [k, v] : r) v = v.to(kCPU);
  r["masks"] = masks;
  return r;
}

double MaskRcnn::forward_flops(int64_t B, int64_t H, int64_t W) const {
  double flops = 2.0 * double(B * 3 * H * W);  // normalise
  const auto [h, w] = resized_size(H, W);
  if (h != H || w != W) flops += 7.0 * double(B * 3 * h * w);  // bilinear (kernels/interpolate)
  const int64_t ph = (h + kSizeDivisible - 1) / kSizeDivisible * kSizeDivisible,
                pw = (w + kSizeDivisible - 1) / kSizeDivisible * kSizeDivisible;
  Shape s = conv1_->count_flops({B, 3, ph, pw}, flops);
  s = bn1_->count_flops(s, flops);
  flops += double(shape_numel(s));
  s = maxpool_->count_flops(s, flops);
  std::vector<Shape> c;
  for (const auto& st : stages_) c.push_back(s = st->count_flops(s, flops));
  std::vector<Shape> p(4);
  for (int i = 3; i >= 0; --i) {
    const Shape lat = inner_[size_t(i)]->count_flops(c[size_t(i)], flops);
    if (i < 3) flops += double(shape_numel(lat));  // top-down add (nearest upsampling: copies)
    p[size_t(i)] = layer_[size_t(i)]->count_flops(lat, flops);
  }
  p.push_back({p[3][0], p[3][1], (p[3][2] - 1) / 2 + 1, (p[3][3] - 1) / 2 + 1});
  flops += double(shape_numel(p[4]));  // 1x1 max pool
  // The host NMS runs through kernels/boxes (its cost model is recorded) as torchvision's
  // batched_nms: above 1000 boxes one NMS per group, else one NMS over all. The RPN's groups are
  // the levels' top-n boxes (none removed as small: score_thresh 0); the box stage's are the
  // classes, counted at their most, every proposal above the score threshold in every class (as
  // a random model's probabilities are at tiny; a trained model's are far fewer).
  auto batched_nms_flops = [](const std::vector<int64_t>& groups) {
    int64_t K = 0;
    double per_group = 0;
    for (int64_t g : groups) K += g, per_group += kernels::nms_flops(double(g));
    return K > 1000 ? per_group : kernels::nms_flops(double(K));
  };
  std::vector<int64_t> rpn_groups;
  for (const Shape& f : p) {
    const Shape r = rpn_conv_->count_flops(f, flops);
    flops += double(shape_numel(r));
    rpn_cls_->count_flops(r, flops);
    rpn_bbox_->count_flops(r, flops);
    rpn_groups.push_back(std::min(c_.rpn_test.pre_nms_top_n, f[2] * f[3] * c_.anchors.per_cell(0)));
  }
  int64_t rpn_candidates = 0;
  for (int64_t g : rpn_groups) rpn_candidates += g;
  const int64_t props = std::min(c_.rpn_test.post_nms_top_n, rpn_candidates);
  flops += double(B) * (batched_nms_flops(rpn_groups) +
                        batched_nms_flops(std::vector<int64_t>(size_t(c_.num_classes - 1), props)));
  // The box head at the most proposals, the mask head at the most detections; roi_align as
  // kernels/roi counts it (8 per sample + 1, sampling 2 x 2).
  const int64_t F = c_.fpn_channels, R = B * props, Dn = B * c_.roi.detections_per_img;
  flops += double(R * F * kBoxPool * kBoxPool) * (8 * kSampling * kSampling + 1);
  Shape x = fc6_->count_flops({R, F * kBoxPool * kBoxPool}, flops);
  flops += double(shape_numel(x));
  x = fc7_->count_flops(x, flops);
  flops += double(shape_numel(x));
  cls_score_->count_flops(x, flops);
  bbox_pred_->count_flops(x, flops);
  flops += double(Dn * F * kMaskPool * kMaskPool) * (8 * kSampling * kSampling + 1);
  Shape m = {Dn, F, kMaskPool, kMaskPool};
  for (const auto& cv : mask_convs_) {
    m = cv->count_flops(m, flops);
    flops += double(shape_numel(m));
  }
  m = conv5_mask_->count_flops(m, flops);
  flops += double(shape_numel(m));
  mask_logits_->count_flops(m, flops);
  return flops;
}

double MaskRcnn::forward_flops(const TensorMap& batch) const {
  const Shape s = batch.at("images").sizes();
  return forward_flops(s[0], s[2], s[3]);
}

double MaskRcnn::train_flops(const TensorMap& batch) const {
  // The heads see batch_per_image sampled RoIs in training, not the test proposals; the backbone
  // dominates at full size, so 3x the test forward is a close upper bound.
  return 3 * forward_flops(batch);
}

}  // namespace aim::models
