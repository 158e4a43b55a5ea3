#include "models/dssd.h"

#include <cmath>
#include <string>
#include <utility>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "kernels/random/random.h"
#include "layers/init.h"
#include "models/detection/caffe_priors.h"
#include "profiler/profiler.h"

namespace aim::models {

namespace ag = autograd;
using layers::ConvOptions;
using ssd_parts::shape_str;

namespace {

constexpr int64_t kMaps = 6;
const int64_t kMapSizes[kMaps] = {40, 20, 10, 5, 3, 1};
const int64_t kHeadKernel[kMaps] = {5, 5, 3, 3, 3, 3};  // prediction_kernels; pads k / 2
// ImageNet's pixel standard deviation on the 0..255 scale (torchvision's std x 255: 57.4 .. 58.4).
// conv1 sees 0..255 pixels: bn_conv1's frozen variance starts at their variance (a pre-trained
// one is large for the same reason), so that conv1's weights and gradients have the scale of a
// network on standardised inputs (dividing the weights instead leaves the gradients 58 times
// too large for them and the first SGD step diverges).
constexpr double kPixelStd = 58.0;
const char* const kPredNames[kMaps] = {"pred3", "pred5", "pred6", "pred7", "pred8", "pred9"};

// ResNet101Body's block names: res2 and res5 by letter (2a, 2b, 2c), res3 and res4 as a, b1, b2..
std::string block_name(int stage, int64_t b) {
  if (stage == 2 || stage == 5) return std::to_string(stage) + char('a' + b);
  return std::to_string(stage) + (b == 0 ? "a" : "b" + std::to_string(b));
}

// Caffe's XavierFiller (variance_norm FAN_IN): U(+-sqrt(3 / fan_in)) with fan_in = count / shape(0)
// (a deconvolution's weight [in, out, k, k] counts out * k * k); bias 0.
void caffe_xavier(layers::Parameter& w, layers::Parameter& b, kernels::Generator& gen) {
  const Shape s = w.sizes();
  const double bound = std::sqrt(3.0 / double(w.numel() / s[0]));
  w.data().copy_(layers::uniform_init(s, -bound, bound, gen));
  if (b.defined()) b.data().fill_(0.0);
}

}  // namespace

SsdConfig dssd_config() {
  SsdConfig c;
  c.image_size = 321;
  c.caffe_matching = true;
  c.loss_per_image = false;
  return c;
}

Dssd::ConvBn Dssd::conv_bn(const std::string& conv_name, const std::string& bn_name, int64_t in,
                           int64_t out, int64_t k, const ConvOptions& o) {
  ConvBn c;
  c.conv = child(conv_name, std::make_shared<layers::Conv2d>(in, out, k, ConvOptions(o).no_bias()));
  c.bn = child(bn_name, std::make_shared<layers::BatchNorm2d>(out, /*eps=*/1e-3));
  c.bn->set_frozen(true);  // use_global_stats: running statistics in training too
  if (!o_.train_bn_affine) {
    c.bn->weight.set_requires_grad(false);
    c.bn->bias.set_requires_grad(false);
  }
  return c;
}

Dssd::ResBlock Dssd::res_block(const std::string& name, const std::string& conv_prefix,
                               const std::function<std::string(const std::string&)>& bn_name,
                               int64_t in, int64_t mid, int64_t out, int64_t kernel, int64_t stride,
                               int64_t pad, int64_t dilation, bool projection) {
  ResBlock b;
  b.name = name;
  const ConvOptions first = ConvOptions().stride(stride).padding(pad);
  // Caffe's ResBody creates branch1 first (the state dict follows the net's layer order).
  if (projection)
    b.branch1 = conv_bn(conv_prefix + "branch1", bn_name("branch1"), in, out, kernel, first);
  b.branch2a = conv_bn(conv_prefix + "branch2a", bn_name("branch2a"), in, mid, kernel, first);
  b.branch2b = conv_bn(conv_prefix + "branch2b", bn_name("branch2b"), mid, mid, 3,
                       ConvOptions().padding(dilation).dilation(dilation));
  b.branch2c = conv_bn(conv_prefix + "branch2c", bn_name("branch2c"), mid, out, 1, ConvOptions());
  return b;
}

Dssd::Dssd(const SsdConfig& c, const DssdOptions& o) : Ssd("dssd", c), o_(o) {
  AIM_CHECK(c.image_size == 321, "[dssd] image_size must be 321 (the six maps 40, 20, 10, 5, ",
            "3, 1 of DSSD321), got ", c.image_size);
  AIM_CHECK(o.stage_blocks.size() == 4, "[dssd] stage_blocks needs 4 counts (res2 .. res5), got ",
            o.stage_blocks.size());
  for (int64_t n : o.stage_blocks)
    AIM_CHECK(n >= 1 && n <= 26, "[dssd] blocks per stage must be in 1 .. 26, got ", n);
  const int64_t dv = c.width_divisor;
  auto bn_of = [](const std::string& block) {
    return [block](const std::string& branch) { return "bn" + block + "_" + branch; };
  };

  // Trunk: ResNet101Body(use_pool5=False, use_dilation_conv5=True).
  conv1_ = conv_bn("conv1", "bn_conv1", 3, 64 / dv, 7, ConvOptions().stride(2).padding(3));
  pool1_ = std::make_shared<layers::MaxPool2d>(3, 2, 0, /*ceil_mode=*/true);
  int64_t in = 64 / dv;
  for (int stage = 2; stage <= 5; ++stage) {
    const int64_t planes = (int64_t(64) << (stage - 2)) / dv;
    const int64_t n = o.stage_blocks[size_t(stage - 2)];
    for (int64_t b = 0; b < n; ++b) {
      const std::string name = block_name(stage, b);
      // v1: the stride on branch2a's and branch1's 1x1; res5 dilated instead of strided.
      const int64_t stride = (stage == 3 || stage == 4) && b == 0 ? 2 : 1;
      trunk_.push_back(res_block(name, "res" + name + "_", bn_of(name), in, planes, 4 * planes, 1,
                                 stride, 0, stage == 5 ? 2 : 1, b == 0));
      in = 4 * planes;
    }
    if (stage == 3) src3_ = trunk_.size() - 1;
  }
  src5_ = trunk_.size() - 1;

  // AddExtraLayers: res6, res7 (kernel 2 stride 2), res8, res9 (kernel 3, no padding).
  for (int i = 6; i <= 9; ++i) {
    const std::string name = std::to_string(i);
    const bool k2 = i <= 7;
    extra_.push_back(res_block(name, "res" + name + "_", bn_of(name), in, 256 / dv, 1024 / dv,
                               k2 ? 2 : 3, k2 ? 2 : 1, 0, 1, true));
    in = 1024 / dv;
  }

  // AddDeconvLayers: top-down from res9; forward maps res8, res7, res6, res5c, res3b3.
  struct LevelSpec {
    const char* level;
    int64_t kernel, stride, top_channels, fwd_channels;
    std::string fwd;
  };
  const std::vector<LevelSpec> specs = {
      {"8", 3, 1, 1024 / dv, 1024 / dv, "res8"},
      {"7", 3, 1, 512 / dv, 1024 / dv, "res7"},
      {"6", 2, 2, 512 / dv, 1024 / dv, "res6"},
      {"5", 2, 2, 512 / dv, 2048 / dv, "res" + trunk_[src5_].name},
      {"3", 2, 2, 512 / dv, 512 / dv, "res" + trunk_[src3_].name}};
  const int64_t D = 512 / dv;
  const ConvOptions same3 = ConvOptions().padding(1);
  for (const LevelSpec& s : specs) {
    Level l;
    l.name = std::string("deconv_") + s.level;
    l.deconv = child(l.name, std::make_shared<layers::ConvTranspose2d>(
                                 s.top_channels, D, s.kernel, ConvOptions().stride(s.stride)));
    // CombineFeature's order: forward pre1, pre2, then the deconvolution's conv.
    const std::string f = s.fwd + "_relu";
    l.forward_pre1 = conv_bn(f + "_pre1", f + "_pre1_bn", s.fwd_channels, D, 3, same3);
    l.forward_pre2 = conv_bn(f + "_pre2", f + "_pre2_bn", D, D, 3, same3);
    l.deconv_pre = conv_bn(l.name + "_pre", l.name + "_pre_bn", D, D, 3, same3);
    levels_.push_back(std::move(l));
  }

  // CreateMultiBoxHead: a projecting ResBody 256 / 256 / 1024 per map; then the loc / conf convs.
  for (int64_t k = 0; k < kMaps; ++k) {
    const std::string p = kPredNames[k];
    const int64_t ch = k + 1 < kMaps ? D : 1024 / dv;  // combined maps, then res9
    pred_.push_back(res_block(
        p, p + "_", [p](const std::string& br) { return p + "_" + br + "_bn"; }, ch, 256 / dv,
        1024 / dv, 1, 1, 0, 1, true));
  }
  const std::vector<detection::CaffePriorBoxSpec> prior_layers = detection::dssd321_prior_layers();
  std::vector<std::shared_ptr<layers::Conv2d>> cls, reg;
  std::vector<int64_t> per_cell;
  for (int64_t k = 0; k < kMaps; ++k) {
    const int64_t A = detection::caffe_priors_per_cell(prior_layers[size_t(k)]);
    const ConvOptions head = ConvOptions().padding(kHeadKernel[k] / 2);
    const std::string p = kPredNames[k];
    reg.push_back(child(p + "_mbox_loc",
                        std::make_shared<layers::Conv2d>(1024 / dv, 4 * A, kHeadKernel[k], head)));
    cls.push_back(child(p + "_mbox_conf", std::make_shared<layers::Conv2d>(
                                              1024 / dv, c.num_classes * A, kHeadKernel[k], head)));
    per_cell.push_back(A);
  }
  set_heads(cls, reg, per_cell, SsdHeadLayout::cell_major);

  // Initialisation in registration order (the header says why).
  kernels::Generator gen(c.seed);
  for (const auto& [n, m] : children()) {
    if (m->type_name() == "Conv2d") {
      auto& conv = static_cast<layers::Conv2d&>(*m);
      if (conv.bias.defined()) {
        caffe_xavier(conv.weight, conv.bias, gen);  // loc / conf
      } else if (n.size() > 9 && n.compare(n.size() - 9, 9, "_branch2c") == 0) {
        conv.weight.data().fill_(0.0);  // the block starts as its shortcut
      } else {
        const Shape ws = conv.weight.sizes();
        const double std = std::sqrt(2.0 / double(ws[1] * ws[2] * ws[3]));
        conv.weight.data().copy_(layers::normal_init(ws, 0.0, std, gen));
      }
    } else if (m->type_name() == "ConvTranspose2d") {
      auto& d = static_cast<layers::ConvTranspose2d&>(*m);
      caffe_xavier(d.weight, d.bias, gen);
    }
  }

  for (auto& [n, t] : conv1_.bn->named_buffers())
    if (n == "running_var") t.fill_(kPixelStd * kPixelStd);

  std::vector<std::pair<int64_t, int64_t>> maps;
  for (int64_t s : kMapSizes) maps.emplace_back(s, s);
  set_priors({kMapSizes, kMapSizes + kMaps},
             detection::caffe_prior_boxes_pixels(prior_layers, maps, 321, 321));
  // 255 x - mean in RGB order; features() turns it into Caffe's BGR.
  set_normalization({123.0 / 255.0, 117.0 / 255.0, 104.0 / 255.0},
                    std::vector<double>(3, 1.0 / 255.0));
}

Variable Dssd::forward(const ConvBn& c, const Variable& x, bool relu) const {
  const Variable y = c.bn->forward(c.conv->forward(x));
  return relu ? ag::relu(y) : y;
}

Variable Dssd::forward(const ResBlock& b, const Variable& x) const {
  Variable y = forward(b.branch2a, x, true);
  y = forward(b.branch2b, y, true);
  y = forward(b.branch2c, y, false);
  const Variable shortcut = b.branch1.conv ? forward(b.branch1, x, false) : x;
  return ag::relu(ag::add(shortcut, y));
}

Variable Dssd::combine(const Level& l, const Variable& top, const Variable& fwd) const {
  const Variable d = l.deconv->forward(top);
  AIM_CHECK(d.size(2) == fwd.size(2) && d.size(3) == fwd.size(3), "[dssd] ", l.name, " turns ",
            shape_str(top.sizes()), " into ", shape_str(d.sizes()),
            ", which does not match the forward map ", shape_str(fwd.sizes()));
  const Variable f = forward(l.forward_pre2, forward(l.forward_pre1, fwd, true), false);
  return ag::relu(ag::mul(forward(l.deconv_pre, d, false), f));  // EltwisePROD
}

std::vector<Variable> Dssd::features(const Variable& images) {
  Variable x = normalize(images);
  const Tensor bgr = Tensor::from_vector(std::vector<int64_t>{2, 1, 0}, {3}, x.device());
  x = ag::index_select(x, 1, bgr);
  Variable res3, res5;  // res3b3, res5c
  {
    profiler::Scope scope("trunk", profiler::ScopeKind::Layer);
    x = pool1_->forward(forward(conv1_, x, true));
    for (size_t i = 0; i < trunk_.size(); ++i) {
      x = forward(trunk_[i], x);
      if (i == src3_) res3 = x;
    }
    res5 = x;
  }
  std::vector<Variable> extra;  // res6 .. res9
  {
    profiler::Scope scope("extra", profiler::ScopeKind::Layer);
    for (const ResBlock& b : extra_) extra.push_back(x = forward(b, x));
  }
  // Top-down: level k combines the level above with its forward map; maps largest first.
  std::vector<Variable> maps(kMaps);
  maps[kMaps - 1] = extra[3];
  {
    profiler::Scope scope("deconv", profiler::ScopeKind::Layer);
    const Variable forward_maps[5] = {extra[2], extra[1], extra[0], res5, res3};
    Variable top = extra[3];
    for (size_t k = 0; k < levels_.size(); ++k)
      maps[kMaps - 2 - k] = top = combine(levels_[k], top, forward_maps[k]);
  }
  profiler::Scope scope("pred", profiler::ScopeKind::Layer);
  for (int64_t k = 0; k < kMaps; ++k) maps[size_t(k)] = forward(pred_[size_t(k)], maps[size_t(k)]);
  return maps;
}

Shape Dssd::count(const ConvBn& c, const Shape& in, bool relu, double& flops) const {
  const Shape s = c.bn->count_flops(c.conv->count_flops(in, flops), flops);
  if (relu) flops += double(shape_numel(s));
  return s;
}

Shape Dssd::count(const ResBlock& b, const Shape& in, double& flops) const {
  Shape s = count(b.branch2a, in, true, flops);
  s = count(b.branch2b, s, true, flops);
  s = count(b.branch2c, s, false, flops);
  if (b.branch1.conv) count(b.branch1, in, false, flops);
  flops += 2 * double(shape_numel(s));  // add, ReLU
  return s;
}

double Dssd::feature_flops(int64_t B, std::vector<Shape>& maps) const {
  const int64_t S = c_.image_size;
  double flops = 0;  // the BGR reorder is a copy
  Shape s = pool1_->count_flops(count(conv1_, {B, 3, S, S}, true, flops), flops);
  Shape res3, res5;
  for (size_t i = 0; i < trunk_.size(); ++i) {
    s = count(trunk_[i], s, flops);
    if (i == src3_) res3 = s;
  }
  res5 = s;
  std::vector<Shape> extra;
  for (const ResBlock& b : extra_) extra.push_back(s = count(b, s, flops));
  maps.assign(kMaps, Shape());
  maps[kMaps - 1] = extra[3];
  const Shape forward_maps[5] = {extra[2], extra[1], extra[0], res5, res3};
  for (size_t k = 0; k < levels_.size(); ++k) {
    const Level& l = levels_[k];
    const Shape d = count(l.deconv_pre, l.deconv->count_flops(s, flops), false, flops);
    count(l.forward_pre2, count(l.forward_pre1, forward_maps[k], true, flops), false, flops);
    flops += 2 * double(shape_numel(d));  // product, ReLU
    maps[kMaps - 2 - k] = s = d;
  }
  for (int64_t k = 0; k < kMaps; ++k)
    maps[size_t(k)] = count(pred_[size_t(k)], maps[size_t(k)], flops);
  return flops;
}

}  // namespace aim::models
