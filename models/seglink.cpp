#include "models/seglink.h"

#include <algorithm>
#include <cmath>
#include <string>

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
#include "layers/pooling.h"
#include "models/ssd.h"

namespace aim::models {

namespace ag = autograd;
using layers::ConvOptions;
using layers::Sequential;
using ssd_parts::Container;
using ssd_parts::shape_str;

namespace {

std::shared_ptr<layers::Module> relu() { return std::make_shared<layers::ReLU>(); }

std::shared_ptr<layers::MaxPool2d> pool(int64_t k, int64_t s) {
  layers::PoolOptions o;
  o.kernel = k, o.stride = s, o.tf_same = true;
  return std::make_shared<layers::MaxPool2d>(o);
}

// NCHW head output -> [B, H W n, K]: per cell (row-major) its n outputs of K values, channel
// index j K + k (the reference's NHWC reshape to [-1, K]).
Variable flatten_head(const Variable& y, int64_t K) {
  const int64_t B = y.size(0);
  return ag::reshape(ag::contiguous(ag::permute(y, {0, 2, 3, 1})), {B, -1, K});
}

// Status (1 positive, 0 ignored, -1 negative) -> hard_negatives' labels (> 0 positive, 0
// negative, < 0 ignored) and the CE targets (1 text / linked, 0 otherwise).
void mining_labels(const Tensor& status, std::vector<int64_t>& labels,
                   std::vector<int64_t>& targets, int64_t& positives) {
  const std::vector<int64_t> s = status.to_vector<int64_t>();
  labels.resize(s.size()), targets.resize(s.size());
  positives = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    labels[i] = s[i] > 0 ? 1 : (s[i] < 0 ? 0 : -1);
    targets[i] = s[i] > 0 ? 1 : 0;
    positives += s[i] > 0;
  }
}

// The reference's _cls_mining over the whole batch, / max(1, positives): a weighted CE sum on the
// device (the negatives' mask is not read back).
Variable mined_ce(const Variable& logits, const Tensor& status, double ratio, int64_t& positives) {
  const int64_t N = logits.size(0) * logits.size(1);
  const Device dev = logits.device();
  const DType dt = logits.dtype();
  std::vector<int64_t> labels, targets;
  mining_labels(status, labels, targets, positives);
  const Tensor target = Tensor::from_vector(targets, {N}, dev);
  const Variable ce =
      ag::cross_entropy(ag::reshape(logits, {N, 2}), target, kernels::Reduction::none);
  kernels::HardNegativesArgs hn;
  hn.loss = ce.data().reshape({1, N}).contiguous();
  hn.labels = Tensor::from_vector(labels, {1, N}, dev);
  hn.negatives = Tensor::empty({1, N}, DType::u8, dev);
  hn.ratio = ratio;
  kernels::hard_negatives(hn);
  std::vector<float> pos(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) pos[size_t(i)] = targets[size_t(i)] ? 1.0f : 0.0f;
  const float scale = float(1.0 / double(std::max<int64_t>(1, positives)));
  const Tensor w = ag::mul(ag::add(Variable(Tensor::from_vector(pos, {N}).to(dt).to(dev)),
                                   Variable(hn.negatives.reshape({N}).to(dt))),
                           scale)
                       .data();
  return ag::sum(ag::mul(ce, Variable(w)));
}

}  // namespace

Seglink::Seglink(const SeglinkModelConfig& c)
    : c_(c), geo_(detection::seglink_config(c.image_size, c.image_size)) {
  AIM_CHECK(c.width_divisor >= 1 && 64 % c.width_divisor == 0,
            "[seglink] width_divisor must divide 64 (1, 2, 4, 8, ...), got ", c.width_divisor);
  layout_ = detection::seglink_layout(geo_);
  const int64_t dv = c.width_divisor;
  uint64_t seed = c.seed * 1000;
  auto conv = [&](int64_t in, int64_t out, int64_t k, ConvOptions o) {
    return ssd_parts::conv(in / dv, out / dv, k, o, seed);
  };
  const ConvOptions same = ConvOptions().same();
  auto vgg = child("vgg16", std::make_shared<Container>("SsdVgg16"));
  auto add_conv = [&](Sequential& seq, const std::string& name, int64_t in, int64_t out, int64_t k,
                      ConvOptions o) {
    // The image's 3 channels stay 3 at every width.
    auto m =
        vgg->add(name, in == 3 ? ssd_parts::conv(3, out / dv, k, o, seed) : conv(in, out, k, o));
    seq.push_back(m);
    seq.push_back(relu());
  };
  frozen_ = std::make_shared<Sequential>();
  add_conv(*frozen_, "conv1_1", 3, 64, 3, same);
  add_conv(*frozen_, "conv1_2", 64, 64, 3, same);
  frozen_->push_back(pool(2, 2));
  add_conv(*frozen_, "conv2_1", 64, 128, 3, same);
  add_conv(*frozen_, "conv2_2", 128, 128, 3, same);
  frozen_->push_back(pool(2, 2));
  vgg_rest_ = std::make_shared<Sequential>();
  add_conv(*vgg_rest_, "conv3_1", 128, 256, 3, same);
  add_conv(*vgg_rest_, "conv3_2", 256, 256, 3, same);
  add_conv(*vgg_rest_, "conv3_3", 256, 256, 3, same);
  vgg_rest_->push_back(pool(2, 2));
  add_conv(*vgg_rest_, "conv4_1", 256, 512, 3, same);
  add_conv(*vgg_rest_, "conv4_2", 512, 512, 3, same);
  add_conv(*vgg_rest_, "conv4_3", 512, 512, 3, same);
  pool4_conv5_ = std::make_shared<Sequential>();
  pool4_conv5_->push_back(pool(2, 2));
  add_conv(*pool4_conv5_, "conv5_1", 512, 512, 3, same);
  add_conv(*pool4_conv5_, "conv5_2", 512, 512, 3, same);
  add_conv(*pool4_conv5_, "conv5_3", 512, 512, 3, same);
  pool4_conv5_->push_back(pool(3, 1));
  add_conv(*pool4_conv5_, "fc6", 512, 1024, 3, ConvOptions().same().dilation(6));
  add_conv(*pool4_conv5_, "fc7", 1024, 1024, 1, same);
  scale_ = param("conv4_3_scale", Tensor::full({512 / dv}, 20.0));

  const int64_t ex[3][4] = {{1024, 256, 512, 8}, {512, 128, 256, 9}, {256, 128, 256, 10}};
  for (int i = 0; i < 3; ++i) {
    auto seq = std::make_shared<Sequential>();
    const std::string n = "conv" + std::to_string(ex[i][3]);
    seq->push_back(child(n + "_1", conv(ex[i][0], ex[i][1], 1, same)));
    seq->push_back(relu());
    seq->push_back(child(n + "_2", conv(ex[i][1], ex[i][2], 3, ConvOptions().same().stride(2))));
    seq->push_back(relu());
    extra_.push_back(seq);
  }
  {
    auto seq = std::make_shared<Sequential>();
    seq->push_back(child("conv11", conv(256, 256, 3, ConvOptions().same().stride(2))));
    seq->push_back(relu());
    extra_.push_back(seq);
  }
  const int64_t map_channels[6] = {512, 1024, 512, 256, 256, 256};
  for (int l = 0; l < 6; ++l) {
    auto det = child("det_" + std::to_string(l + 1), std::make_shared<Container>("Detector"));
    const int64_t in = map_channels[l] / dv;
    const int64_t links = layout_.links_per_node[size_t(l)];
    cls_.push_back(det->add("conv_cls", ssd_parts::conv(in, 2, 3, same, seed)));
    lnk_.push_back(det->add("conv_lnk", ssd_parts::conv(in, 2 * links, 3, same, seed)));
    reg_.push_back(det->add("conv_reg", ssd_parts::conv(in, 6, 3, same, seed)));
  }
  // The reference's xavier init (TF's xavier_initializer_conv2d: uniform, fan_in + fan_out over
  // the kernel), biases 0, in registration order.
  kernels::Generator gen(c.seed);
  ssd_parts::for_each_conv(*this, [&](layers::Conv2d& m) { ssd_parts::xavier_uniform(m, gen); });
}

Variable Seglink::normalize(const Variable& images) const {
  const Shape s = images.sizes();
  const int64_t S = c_.image_size;
  AIM_CHECK(s.size() == 4 && s[1] == 3 && s[2] == S && s[3] == S,
            "[seglink] images must be [B, 3, ", S, ", ", S, "] (resized, in [0, 1]), got ",
            shape_str(s));
  const Variable mean(Tensor::from_vector(std::vector<double>{123, 117, 104}, {1, 3, 1, 1})
                          .to(images.dtype())
                          .to(images.device()));
  return ag::sub(ag::mul(images, 255.0), mean);
}

std::vector<Variable> Seglink::features(const Variable& images) {
  // The reference stops the gradient after pool2: conv1_x and conv2_x are not trained.
  Variable x = frozen_->forward(normalize(images)).detach();
  x = vgg_rest_->forward(x);
  std::vector<Variable> out = {ag::l2_normalize(x, scale_)};
  x = pool4_conv5_->forward(x);
  out.push_back(x);
  for (auto& e : extra_) {
    x = e->forward(x);
    out.push_back(x);
  }
  for (size_t l = 0; l < out.size(); ++l) {
    const detection::SeglinkLayer& g = geo_.layers[l];
    AIM_CHECK(out[l].size(2) == g.map_h && out[l].size(3) == g.map_w, "[seglink] feature map ", l,
              " is ", shape_str(out[l].sizes()), ", the targets expect ", g.map_h, " x ", g.map_w);
  }
  return out;
}

SeglinkHeadOutputs Seglink::forward_heads(const Variable& images) {
  const std::vector<Variable> f = features(images);
  std::vector<Variable> seg, lnk, reg;
  for (size_t l = 0; l < f.size(); ++l) {
    seg.push_back(flatten_head(cls_[l]->forward(f[l]), 2));
    lnk.push_back(flatten_head(lnk_[l]->forward(f[l]), 2));
    reg.push_back(flatten_head(reg_[l]->forward(f[l]), 6));
  }
  return {ag::concat(seg, 1), ag::concat(lnk, 1), ag::concat(reg, 1)};
}

SeglinkLoss Seglink::compute_loss(const SeglinkHeadOutputs& out, const Tensor& quads,
                                  const Tensor& num_boxes, const Tensor& dont_care) const {
  const int64_t P = layout_.nodes, L = layout_.links;
  const Shape ss = out.seg_logits.sizes();
  AIM_CHECK(ss.size() == 3 && ss[1] == P && ss[2] == 2, "[seglink loss] seg_logits must be [B, ", P,
            ", 2], got ", shape_str(ss));
  const int64_t B = ss[0];
  AIM_CHECK(out.link_logits.sizes() == Shape({B, L, 2}), "[seglink loss] link_logits must be [", B,
            ", ", L, ", 2], got ", shape_str(out.link_logits.sizes()));
  AIM_CHECK(out.offsets.sizes() == Shape({B, P, 6}), "[seglink loss] offsets must be [", B, ", ", P,
            ", 6], got ", shape_str(out.offsets.sizes()));
  const TensorMap t =
      detection::encode_seglink_batch(geo_, quads.to(kCPU), num_boxes.to(kCPU),
                                      dont_care.defined() ? dont_care.to(kCPU) : dont_care);
  AIM_CHECK(t.at("seg_labels").size(0) == B, "[seglink loss] ", t.at("seg_labels").size(0),
            " images of targets for ", B, " images of outputs");
  SeglinkLoss r;
  r.seg_cls =
      mined_ce(out.seg_logits, t.at("seg_labels"), c_.neg_to_pos_ratio, r.positive_segments);
  r.link_cls =
      mined_ce(out.link_logits, t.at("link_labels"), c_.neg_to_pos_ratio, r.positive_links);
  // Offsets: smooth L1 of the positive segments, / max(1, positive segments).
  const Device dev = out.offsets.device();
  const DType dt = out.offsets.dtype();
  const std::vector<int64_t> labels = t.at("seg_labels").to_vector<int64_t>();
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < B * P; ++i)
    if (labels[size_t(i)] > 0) rows.push_back(i);
  const int64_t F = int64_t(rows.size());
  if (F > 0) {
    const std::vector<float> all = t.at("seg_offsets").to_vector<float>();
    std::vector<float> picked;
    for (int64_t i : rows)
      picked.insert(picked.end(), all.begin() + i * 6, all.begin() + i * 6 + 6);
    const Tensor target = Tensor::from_vector(picked, {F, 6}).to(dt).to(dev);
    const Variable sel = ag::index_select(ag::reshape(out.offsets, {B * P, 6}), 0,
                                          Tensor::from_vector(rows, {F}, dev));
    r.offset =
        ag::mul(ag::smooth_l1_loss(sel, target, 1.0, kernels::Reduction::sum), 1.0 / double(F));
  } else {
    r.offset = ag::mul(ag::sum(out.offsets), 0.0);  // empty, still on the graph
  }
  r.total = ag::add(ag::add(r.seg_cls, r.link_cls), r.offset);
  return r;
}

std::vector<std::vector<detection::SeglinkDetection>> Seglink::detect(
    const SeglinkHeadOutputs& out) const {
  ag::NoGradGuard ng;
  const int64_t P = layout_.nodes, L = layout_.links;
  const int64_t B = out.seg_logits.size(0);
  AIM_CHECK(out.seg_logits.sizes() == Shape({B, P, 2}) &&
                out.link_logits.sizes() == Shape({B, L, 2}) &&
                out.offsets.sizes() == Shape({B, P, 6}),
            "[seglink detect] outputs must be seg_logits [B, ", P, ", 2], link_logits [B, ", L,
            ", 2], offsets [B, ", P, ", 6], got ", shape_str(out.seg_logits.sizes()), ", ",
            shape_str(out.link_logits.sizes()), ", ", shape_str(out.offsets.sizes()));
  auto positive_prob = [](const Variable& logits) {
    const Variable p = ag::softmax(Variable(logits.data().to(kCPU).to(DType::f32)), -1);
    const std::vector<float> v = p.data().to_vector<float>();
    std::vector<float> r(v.size() / 2);
    for (size_t i = 0; i < r.size(); ++i) r[i] = v[2 * i + 1];
    return r;
  };
  const std::vector<float> seg = positive_prob(out.seg_logits),
                           lnk = positive_prob(out.link_logits),
                           off = out.offsets.data().to(kCPU).to(DType::f32).to_vector<float>();
  std::vector<std::vector<detection::SeglinkDetection>> r;
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<detection::SeglinkSegment> s = detection::decode_segments_links(
        geo_, seg.data() + b * P, lnk.data() + b * L, off.data() + b * P * 6, c_.thresholds);
    r.push_back(detection::combine_segments(s));
  }
  return r;
}

TensorMap Seglink::postprocess_outputs(const TensorMap& o) const {
  const auto dets = detect(
      {Variable(o.at("seg_logits")), Variable(o.at("link_logits")), Variable(o.at("offsets"))});
  const int64_t B = int64_t(dets.size());
  int64_t D = 1;
  for (const auto& d : dets) D = std::max<int64_t>(D, int64_t(d.size()));
  std::vector<float> quads(static_cast<size_t>(B * D * 8), 0.0f),
      scores(static_cast<size_t>(B * D), 0.0f);
  std::vector<int64_t> count(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    count[size_t(b)] = int64_t(dets[size_t(b)].size());
    for (size_t i = 0; i < dets[size_t(b)].size(); ++i) {
      const auto& d = dets[size_t(b)][i];
      for (int k = 0; k < 8; ++k)
        quads[size_t((b * D + int64_t(i)) * 8 + k)] = float(d.quad[size_t(k)]);
      scores[size_t(b * D) + i] = float(d.score);
    }
  }
  return {{"quads", Tensor::from_vector(quads, {B, D, 8})},
          {"scores", Tensor::from_vector(scores, {B, D})},
          {"num_detections", Tensor::from_vector(count, {B})}};
}

double Seglink::forward_flops(int64_t B) const {
  const int64_t S = c_.image_size;
  double flops = 2.0 * double(B * 3 * S * S);  // 255 x - mean
  Shape s = frozen_->count_flops({B, 3, S, S}, flops);
  s = vgg_rest_->count_flops(s, flops);
  std::vector<Shape> maps = {s};
  flops += 4.0 * double(shape_numel(s));  // L2 normalisation and scale
  s = pool4_conv5_->count_flops(s, flops);
  maps.push_back(s);
  for (const auto& e : extra_) {
    s = e->count_flops(s, flops);
    maps.push_back(s);
  }
  for (size_t l = 0; l < maps.size(); ++l) {
    cls_[l]->count_flops(maps[l], flops);
    lnk_[l]->count_flops(maps[l], flops);
    reg_[l]->count_flops(maps[l], flops);
  }
  return flops;
}

// ---- Model ----------------------------------------------------------------------------------

std::vector<TensorSpec> Seglink::input_specs() const {
  const std::string S = std::to_string(c_.image_size);
  return {{"images", DType::f32, {"B", "3", S, S}, "RGB resized to the input size, in [0, 1]"}};
}

std::vector<TensorSpec> Seglink::label_specs() const {
  return {{"quads", DType::f32, {"B", "G", "8"}, "words' corners (x1, y1, ..., y4), pixels"},
          {"num_boxes", DType::i64, {"B"}, "words per image (the first rows of quads)"},
          {"dont_care", DType::u8, {"B", "G"}, "1: an illegible word (ICDAR's ###)"}};
}

std::vector<TensorSpec> Seglink::output_specs() const {
  const std::string P = std::to_string(layout_.nodes), L = std::to_string(layout_.links);
  return {{"seg_logits", DType::f32, {"B", P, "2"}, "segment logits (class 1: text) per node"},
          {"link_logits", DType::f32, {"B", L, "2"}, "link logits (class 1: linked)"},
          {"offsets", DType::f32, {"B", P, "6"}, "segment offsets / variances per node"}};
}

TensorMap Seglink::infer(const TensorMap& batch) {
  const SeglinkHeadOutputs o = forward_heads(Variable(batch.at("images")));
  return {{"seg_logits", o.seg_logits.data()},
          {"link_logits", o.link_logits.data()},
          {"offsets", o.offsets.data()}};
}

Variable Seglink::training_loss(const TensorMap& batch) {
  const Tensor dc = batch.count("dont_care") ? batch.at("dont_care") : Tensor();
  return compute_loss(forward_heads(Variable(batch.at("images"))), batch.at("quads"),
                      batch.at("num_boxes"), dc)
      .total;
}

double Seglink::forward_flops(const TensorMap& batch) const {
  return forward_flops(batch.at("images").size(0));
}

TensorMap Seglink::host_metadata(const TensorMap& host_batch) const {
  TensorMap r;
  for (const char* k : {"quads", "num_boxes", "dont_care"})
    if (host_batch.count(k)) r[k] = host_batch.at(k);
  return r;
}

std::vector<Model::Fp32Params> Seglink::amp_fp32_params() const {
  return {{"conv4_3_scale", "the L2 normalisation scale multiplies f32 normalised features"}};
}

}  // namespace aim::models
