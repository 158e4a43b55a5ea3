#include "models/cpn.h"

#include <algorithm>
#include <numeric>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/interpolate.h"
#include "autograd/functions/loss.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "data/keypoint_heatmap.h"
#include "models/image_classifier.h"
#include "models/resnet.h"
#include "profiler/profiler.h"
#include "tensor/check.h"

namespace aim::models {

namespace ag = autograd;
using layers::ConvOptions;

namespace {

// A named group of modules (global_net, refine_net): parameter names only.
class Container : public layers::Module {
 public:
  template <class M>
  std::shared_ptr<M> add(const std::string& name, std::shared_ptr<M> m) {
    return child(name, m);
  }
  std::string type_name() const override { return "Container"; }
};

std::string dims(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

constexpr double kBilinearFlops = 8;  // per output element: four weighted taps

Variable resize(const Variable& x, int64_t h, int64_t w) {
  return ag::interpolate(x, h, w, kernels::InterpMode::bilinear, false);
}

Shape resize_count(const Shape& s, int64_t h, int64_t w, double& flops) {
  const Shape o = {s[0], s[1], h, w};
  flops += kBilinearFlops * double(shape_numel(o));
  return o;
}

}  // namespace

CpnConfig CpnConfig::tiny() {
  CpnConfig c;
  c.height = 96, c.width = 72, c.out_h = 24, c.out_w = 18;
  c.blocks = {1, 1, 1, 1};
  c.base = 8, c.channels = 32, c.refine_mid = 16;
  return c;
}

CpnConvBn::CpnConvBn(int64_t in, int64_t out, int64_t k, uint64_t seed) {
  conv_ = child("conv", std::make_shared<layers::Conv2d>(
                            in, out, k, ConvOptions().padding(k / 2).no_bias(), seed));
  bn_ = child("bn", std::make_shared<layers::BatchNorm2d>(out));
}

Variable CpnConvBn::forward(const Variable& x, bool relu) {
  const Variable y = bn_->forward(conv_->forward(x));
  return relu ? ag::relu(y) : y;
}

Shape CpnConvBn::count(const Shape& in, bool relu, double& flops) const {
  const Shape s = bn_->count_flops(conv_->count_flops(in, flops), flops);
  if (relu) flops += double(shape_numel(s));
  return s;
}

CpnBottleneck::CpnBottleneck(int64_t in, int64_t out, int64_t mid, uint64_t seed) {
  conv1_ =
      child("conv1", std::make_shared<layers::Conv2d>(in, mid, 1, ConvOptions().no_bias(), seed));
  bn1_ = child("bn1", std::make_shared<layers::BatchNorm2d>(mid));
  conv2_ = child("conv2", std::make_shared<layers::Conv2d>(
                              mid, mid, 3, ConvOptions().padding(1).no_bias(), seed + 1));
  bn2_ = child("bn2", std::make_shared<layers::BatchNorm2d>(mid));
  conv3_ = child("conv3",
                 std::make_shared<layers::Conv2d>(mid, out, 1, ConvOptions().no_bias(), seed + 2));
  bn3_ = child("bn3", std::make_shared<layers::BatchNorm2d>(out));
  if (in != out) {
    downsample_ = child("downsample", std::make_shared<layers::Sequential>());
    downsample_->push_back(
        std::make_shared<layers::Conv2d>(in, out, 1, ConvOptions().no_bias(), seed + 3));
    downsample_->push_back(std::make_shared<layers::BatchNorm2d>(out));
  }
}

Variable CpnBottleneck::forward(const Variable& x) {
  Variable y = bn1_->forward_relu(conv1_->forward(x));
  y = bn2_->forward_relu(conv2_->forward(y));
  y = bn3_->forward(conv3_->forward(y));
  return ag::relu(ag::add(y, downsample_ ? downsample_->forward(x) : x));
}

Shape CpnBottleneck::count_flops(const Shape& in, double& flops) const {
  Shape s = bn1_->count_flops(conv1_->count_flops(in, flops), flops);
  flops += double(shape_numel(s));
  s = bn2_->count_flops(conv2_->count_flops(s, flops), flops);
  flops += double(shape_numel(s));
  s = bn3_->count_flops(conv3_->count_flops(s, flops), flops);
  if (downsample_) downsample_->count_flops(in, flops);
  flops += 2 * double(shape_numel(s));  // add, relu
  return s;
}

Cpn::Cpn(const CpnConfig& c) : c_(c) {
  AIM_CHECK(c_.blocks.size() == 4, "cpn: 4 ResNet stages expected, got ", c_.blocks.size());
  AIM_CHECK(c_.keypoints >= 2 && c_.keypoints <= 64, "cpn: keypoints ", c_.keypoints);
  AIM_CHECK(c_.top_k >= 1 && c_.top_k <= c_.keypoints, "cpn: OHKM top_k ", c_.top_k,
            " outside [1, ", c_.keypoints, "]");
  AIM_CHECK(c_.height >= 32 && c_.width >= 32 && c_.out_h >= 1 && c_.out_w >= 1, "cpn: input ",
            c_.height, "x", c_.width, " must be at least 32x32 (C5 is 1/32), heatmaps ", c_.out_h,
            "x", c_.out_w);
  // RGB order: 255 x - mean, then reversed to BGR in forward_all().
  mean_ = Tensor::from_vector(std::vector<float>{122.77f, 115.95f, 102.98f}, {1, 3, 1, 1});
  uint64_t seed = c_.seed * 1000;
  conv1_ = child("conv1", std::make_shared<layers::Conv2d>(
                              3, c_.base, 7, ConvOptions().stride(2).padding(3).no_bias(), seed++));
  bn1_ = child("bn1", std::make_shared<layers::BatchNorm2d>(c_.base));
  maxpool_ = child("maxpool", std::make_shared<layers::MaxPool2d>(3, 2, 1));
  int64_t inplanes = c_.base;
  std::array<int64_t, 4> widths{};
  for (size_t i = 0; i < 4; ++i) {
    const int64_t planes = c_.base << i;
    auto stage = std::make_shared<layers::Sequential>();
    for (int64_t b = 0; b < c_.blocks[i]; ++b) {
      stage->push_back(std::make_shared<Bottleneck>(inplanes, planes, (i > 0 && b == 0) ? 2 : 1,
                                                    /*v1=*/false, seed += 10));
      inplanes = planes * Bottleneck::kExpansion;
    }
    widths[i] = inplanes;
    stages_.push_back(child("layer" + std::to_string(i + 1), stage));
  }
  auto g = std::make_shared<Container>();
  global_net_ = child("global_net", g);
  const int64_t C = c_.channels, K = c_.keypoints;
  for (int l = 3; l >= 0; --l) {  // registration from the top, as tf-cpn builds it
    const std::string L = std::to_string(l + 2);
    lateral_[size_t(l)] =
        g->add("lateral" + L, std::make_shared<CpnConvBn>(widths[size_t(l)], C, 1, seed += 10));
    if (l < 3)
      merge_[size_t(l)] =
          g->add("merge" + L, std::make_shared<layers::Conv2d>(C, C, 1, ConvOptions(), seed += 10));
    tmp_[size_t(l)] = g->add("tmp" + L, std::make_shared<CpnConvBn>(C, C, 1, seed += 10));
    pyramid_[size_t(l)] = g->add("pyramid" + L, std::make_shared<CpnConvBn>(C, K, 3, seed += 10));
  }
  auto r = std::make_shared<Container>();
  refine_net_ = child("refine_net", r);
  for (int l = 0; l < 4; ++l) {
    refine_blocks_[size_t(l)] = std::make_shared<layers::Sequential>();
    for (int j = 0; j < l; ++j)
      refine_blocks_[size_t(l)]->push_back(
          std::make_shared<CpnBottleneck>(C, C, c_.refine_mid, seed += 10));
    if (l > 0) r->add("res" + std::to_string(l + 2), refine_blocks_[size_t(l)]);
  }
  final_ = r->add("final_bottleneck",
                  std::make_shared<CpnBottleneck>(4 * C, C, c_.refine_mid, seed += 10));
  refine_out_ = r->add("refine_out", std::make_shared<CpnConvBn>(C, K, 3, seed += 10));
  init_kaiming_normal_fan_out(*this, c_.seed);
  init_glorot_uniform(*global_net_, c_.seed + 1);
  init_glorot_uniform(*refine_out_, c_.seed + 2);
}

std::vector<TensorSpec> Cpn::input_specs() const {
  return {{"images",
           DType::f32,
           {"B", "3", std::to_string(c_.height), std::to_string(c_.width)},
           "RGB person crop in [0, 1], NCHW"}};
}

std::vector<TensorSpec> Cpn::label_specs() const {
  const std::string K = std::to_string(c_.keypoints);
  return {{"heatmaps",
           DType::f32,
           {"B", "4", K, std::to_string(c_.out_h), std::to_string(c_.out_w)},
           "Gaussian targets (peak 255) for kernels 23, 17, 13, 9"},
          {"valid", DType::f32, {"B", K}, "keypoint visibility 0 / 1 / 2"}};
}

std::vector<TensorSpec> Cpn::output_specs() const {
  return {{"heatmaps",
           DType::f32,
           {"B", std::to_string(c_.keypoints), std::to_string(c_.out_h), std::to_string(c_.out_w)},
           "RefineNet heatmaps (flip-averaged when flip_test)"}};
}

CpnOutputs Cpn::forward_all(const Variable& images) {
  const Shape s = images.sizes();
  AIM_CHECK(s.size() == 4 && s[1] == 3 && s[2] == c_.height && s[3] == c_.width,
            "[cpn] images must be [B, 3, ", c_.height, ", ", c_.width, "] in [0, 1], got ",
            dims(s));
  const Variable mean(mean_.to(images.dtype()).to(images.device()));
  Variable x = ag::sub(ag::mul(images, 255.0), mean);
  x = ag::index_select(x, 1, Tensor::from_vector(std::vector<int64_t>{2, 1, 0}, {3}, x.device()));
  std::array<Variable, 4> c;
  {
    profiler::Scope stem("stem", profiler::ScopeKind::Layer);
    x = maxpool_->forward(bn1_->forward_relu(conv1_->forward(x)));
  }
  for (size_t i = 0; i < 4; ++i)
    x = c[i] = forward_in_layer("layer" + std::to_string(i + 1), *stages_[i], x);
  CpnOutputs out;
  std::array<Variable, 4> fms;
  {
    profiler::Scope scope("global_net", profiler::ScopeKind::Layer);
    Variable last;
    for (int l = 3; l >= 0; --l) {
      const Variable lateral = lateral_[size_t(l)]->forward(c[size_t(l)], true);
      last =
          l == 3
              ? lateral
              : ag::add(merge_[size_t(l)]->forward(resize(last, lateral.size(2), lateral.size(3))),
                        lateral);
      fms[size_t(l)] = last;
      const Variable p = pyramid_[size_t(l)]->forward(tmp_[size_t(l)]->forward(last, true), false);
      out.global[size_t(l)] = resize(p, c_.out_h, c_.out_w);
    }
  }
  profiler::Scope scope("refine_net", profiler::ScopeKind::Layer);
  std::vector<Variable> ups;
  for (size_t l = 0; l < 4; ++l) {
    Variable m = fms[l];
    if (l > 0) m = refine_blocks_[l]->forward(m);
    ups.push_back(resize(m, c_.out_h, c_.out_w));
  }
  out.refine = refine_out_->forward(final_->forward(ag::concat(ups, 1)), false);
  return out;
}

Variable Cpn::heatmaps(const Variable& images) {
  if (!c_.flip_test) return forward_all(images).refine;
  // The image and its mirror in one batch (mptest.py feeds them together).
  const int64_t B = images.size(0), W = c_.width, w = c_.out_w, K = c_.keypoints;
  std::vector<int64_t> rev(static_cast<size_t>(W)), revh(static_cast<size_t>(w)),
      swap(static_cast<size_t>(K));
  std::iota(rev.rbegin(), rev.rend(), int64_t(0));
  std::iota(revh.rbegin(), revh.rend(), int64_t(0));
  std::iota(swap.begin(), swap.end(), int64_t(0));
  if (K == 17)
    for (int64_t k = 1; k < 17; k += 2) std::swap(swap[size_t(k)], swap[size_t(k + 1)]);
  const Device d = images.device();
  const Variable flipped = ag::index_select(images, 3, Tensor::from_vector(rev, {W}, d));
  const Variable h = forward_all(ag::concat({images, flipped}, 0)).refine;
  Variable back = ag::slice(h, 0, B, 2 * B);
  back = ag::index_select(back, 3, Tensor::from_vector(revh, {w}, d));
  back = ag::index_select(back, 1, Tensor::from_vector(swap, {K}, d));
  return ag::mul(ag::add(ag::slice(h, 0, 0, B), back), 0.5);
}

TensorMap Cpn::infer(const TensorMap& batch) {
  check_batch(input_specs(), batch, "cpn inputs");
  return {{"heatmaps", heatmaps(Variable(batch.at("images"))).data()}};
}

CpnLoss Cpn::compute_loss(const CpnOutputs& out, const Tensor& heatmaps,
                          const Tensor& valid) const {
  const int64_t B = heatmaps.size(0), K = c_.keypoints;
  const Variable v(valid);
  const Variable vis = ag::reshape(ag::clamp(ag::add(v, -1.0), 0.0, 1.0), {B, K, 1, 1});
  const Variable labelled = ag::clamp(v, 0.0, 1.0);
  const Variable labels(heatmaps);
  CpnLoss loss;
  for (int64_t l = 0; l < 4; ++l) {
    const Tensor target = ag::mul(ag::select(labels, 1, l), vis).data().contiguous();
    const Variable term = ag::mul(ag::mse_loss(out.global[size_t(l)], target), 0.25);
    loss.global = l == 0 ? term : ag::add(loss.global, term);
  }
  loss.global = ag::mul(loss.global, 0.5);
  const Tensor label7 = ag::select(labels, 1, 3).data().contiguous();
  const Variable per =
      ag::mul(ag::mean(ag::square(ag::sub(out.refine, Variable(label7))), {2, 3}), labelled);
  // OHKM: the top_k keypoints of each image, ties to the lower keypoint (a stable descending
  // sort), chosen on the device (no host read in the training step): keypoint j's rank is the
  // number of keypoints with a larger loss plus those before it with an equal one.
  const Device dev = per.device();
  const Variable p(per.data().to(DType::f32));  // no gradient through the choice
  const Variable pi = ag::reshape(p, {B, K, 1}), pj = ag::reshape(p, {B, 1, K});
  if (!ohkm_before_.defined() || ohkm_before_.device() != dev) {
    std::vector<float> before(size_t(K * K), 0.0f);  // [i][j]: keypoint i comes before j
    for (int64_t i = 0; i < K; ++i)
      for (int64_t j = i + 1; j < K; ++j) before[size_t(i * K + j)] = 1.0f;
    ohkm_before_ = Tensor::from_vector(before, {1, K, K}, dev);
    ohkm_top_k_ = Tensor::full({1}, double(c_.top_k), DType::f32, dev);
  }
  const Variable ahead(ag::gt(pi, pj).to(DType::f32));
  const Variable tied(ag::eq(pi, pj).to(DType::f32));
  const Variable rank = ag::sum(ag::add(ahead, ag::mul(tied, Variable(ohkm_before_))), {1});
  const Variable top_k(ohkm_top_k_);
  const Variable mask(ag::lt(rank, top_k).to(per.dtype()));
  loss.refine = ag::mul(ag::sum(ag::mul(per, mask)), 1.0 / double(c_.top_k * B));
  loss.total = ag::add(loss.global, loss.refine);
  return loss;
}

Variable Cpn::training_loss(const TensorMap& batch) {
  std::vector<TensorSpec> specs = input_specs();
  for (const TensorSpec& s : label_specs()) specs.push_back(s);
  check_batch(specs, batch, "cpn batch");
  return compute_loss(forward_all(Variable(batch.at("images"))), batch.at("heatmaps"),
                      batch.at("valid"))
      .total;
}

TensorMap Cpn::postprocess_outputs(const TensorMap& host_outputs) const {
  const Tensor h = host_outputs.at("heatmaps").to(kCPU).to(DType::f32).contiguous();
  const int64_t B = h.size(0), K = c_.keypoints, hw = c_.out_h * c_.out_w;
  Tensor kps = Tensor::empty({B, K, 3}, DType::f32), scores = Tensor::empty({B}, DType::f32);
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<float> k = data::cpn_decode_keypoints(
        h.data<float>() + b * K * hw, K, c_.out_h, c_.out_w, c_.height, c_.width);
    std::copy(k.begin(), k.end(), kps.data<float>() + b * K * 3);
    double s = 0;
    for (int64_t j = 0; j < K; ++j) s += k[size_t(3 * j + 2)];
    scores.data<float>()[b] = float(s / double(K));
  }
  return {{"keypoints", kps}, {"scores", scores}};
}

double Cpn::forward_flops(int64_t B) const {
  double f = 0;
  Shape s = {B, 3, c_.height, c_.width};
  f += 2 * double(shape_numel(s));  // 255 x - mean
  s = bn1_->count_flops(conv1_->count_flops(s, f), f);
  f += double(shape_numel(s));
  s = maxpool_->count_flops(s, f);
  std::array<Shape, 4> c;
  for (size_t i = 0; i < 4; ++i) s = c[i] = stages_[i]->count_flops(s, f);
  std::array<Shape, 4> fms;
  Shape last;
  for (int l = 3; l >= 0; --l) {
    const Shape lat = lateral_[size_t(l)]->count(c[size_t(l)], true, f);
    if (l < 3) {
      const Shape up = resize_count(last, lat[2], lat[3], f);
      merge_[size_t(l)]->count_flops(up, f);
      f += double(shape_numel(lat));  // add
    }
    last = fms[size_t(l)] = lat;
    const Shape p = pyramid_[size_t(l)]->count(tmp_[size_t(l)]->count(lat, true, f), false, f);
    resize_count(p, c_.out_h, c_.out_w, f);
  }
  Shape cat = {B, 0, c_.out_h, c_.out_w};
  for (size_t l = 0; l < 4; ++l) {
    const Shape m = l > 0 ? refine_blocks_[l]->count_flops(fms[l], f) : fms[l];
    cat[1] += resize_count(m, c_.out_h, c_.out_w, f)[1];
  }
  refine_out_->count(final_->count_flops(cat, f), false, f);
  if (c_.flip_test && !is_training())
    f = 2 * f + 2 * double(B * c_.keypoints * c_.out_h * c_.out_w);
  return f;
}

double Cpn::forward_flops(const TensorMap& batch) const {
  return forward_flops(batch.at("images").size(0));
}

}  // namespace aim::models
