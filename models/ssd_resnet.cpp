#include "models/ssd_resnet.h"

#include <cmath>
#include <string>
#include <utility>

#include "autograd/functions/batch_norm.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "kernels/random/random.h"
#include "layers/activation.h"
#include "layers/batchnorm.h"
#include "layers/conv.h"
#include "layers/init.h"
#include "layers/pooling.h"
#include "models/detection/caffe_priors.h"
#include "models/detection/priors.h"
#include "models/resnet_basic.h"

namespace aim::models {

using layers::ConvOptions;
using layers::Sequential;
using ssd_parts::Container;
using ssd_parts::conv;
using ssd_parts::for_each_conv;
using ssd_parts::kaiming_fan_out;
using ssd_parts::xavier_uniform;

namespace {

std::shared_ptr<layers::ReLU> relu() { return std::make_shared<layers::ReLU>(); }

}  // namespace

// ---- ssd_resnet34 ---------------------------------------------------------------------------

namespace {

constexpr int64_t kR34Maps = 6;
const int64_t kR34Channels[kR34Maps] = {256, 512, 512, 256, 256, 256};
const int64_t kR34Sizes[kR34Maps] = {38, 19, 10, 5, 3, 1};

}  // namespace

SsdConfig SsdResnet34::reference_config() {
  SsdConfig c;
  c.loss_per_image = true;
  c.iou_thresh = std::nextafter(0.5f, 1.0f);
  c.score_thresh = 0.05f;
  c.nms_thresh = std::nextafter(0.5f, 0.0f);
  c.topk_candidates = 200;
  c.detections_per_img = 200;
  return c;
}

SsdResnet34::SsdResnet34(const SsdConfig& c) : Ssd("ssd_resnet34", c) {
  AIM_CHECK(c.image_size == 300,
            "[ssd_resnet34] image_size must be 300 (the six feature maps 38, 19, 10, 5, 3, 1 of "
            "MLPerf's SSD300), got ",
            c.image_size);
  uint64_t seed = c.seed * 1000;
  const int64_t dv = c.width_divisor;
  auto model = child("model", std::make_shared<Container>("ResNet34"));
  // model.layer1 = torchvision resnet34's children [:6]; model.layer2 = [layer3] (stride 1).
  layer1_ = model->add("layer1", std::make_shared<Sequential>());
  layer1_->push_back(conv(3, 64 / dv, 7, ConvOptions().stride(2).padding(3).no_bias(), seed));
  layer1_->push_back(std::make_shared<layers::BatchNorm2d>(64 / dv));
  layer1_->push_back(relu());
  layer1_->push_back(std::make_shared<layers::MaxPool2d>(3, 2, 1));
  layer1_->push_back(make_basic_layer(64 / dv, 64 / dv, 3, 1, seed));
  layer1_->push_back(make_basic_layer(64 / dv, 128 / dv, 4, 2, seed));
  layer2_ = model->add("layer2", std::make_shared<Sequential>());
  layer2_->push_back(make_basic_layer(128 / dv, 256 / dv, 6, /*stride=*/1, seed));

  auto extra = child("additional_blocks", std::make_shared<Sequential>());
  const int64_t mid[kR34Maps - 1] = {256, 256, 128, 128, 128};
  for (int64_t k = 0; k + 1 < kR34Maps; ++k) {
    // 38 -> 19 -> 10 -> 5 with stride 2 (pad 1), then 5 -> 3 -> 1 unpadded.
    const ConvOptions o3 = k < 3 ? ConvOptions().padding(1).stride(2) : ConvOptions();
    auto b = std::make_shared<Sequential>(std::vector<std::shared_ptr<layers::Module>>{
        conv(kR34Channels[k] / dv, mid[k] / dv, 1, ConvOptions(), seed), relu(),
        conv(mid[k] / dv, kR34Channels[k + 1] / dv, 3, o3, seed), relu()});
    extra->push_back(b);
    extra_.push_back(b);
  }

  auto loc = child("loc", std::make_shared<Sequential>());
  auto conf = child("conf", std::make_shared<Sequential>());
  const detection::DefaultBoxSpec spec = detection::mlperf_ssd300_default_boxes();
  std::vector<std::shared_ptr<layers::Conv2d>> cls, reg;
  std::vector<int64_t> per_cell;
  for (int64_t k = 0; k < kR34Maps; ++k) {
    const int64_t A = spec.boxes_per_cell(size_t(k));
    per_cell.push_back(A);
    reg.push_back(conv(kR34Channels[k] / dv, 4 * A, 3, ConvOptions().padding(1), seed));
    cls.push_back(conv(kR34Channels[k] / dv, c.num_classes * A, 3, ConvOptions().padding(1), seed));
  }
  for (auto& r : reg) loc->push_back(r);
  for (auto& l : cls) conf->push_back(l);
  set_heads(cls, reg, per_cell, SsdHeadLayout::size_major);

  // torchvision's resnet34 init for the trunk, then SSD300._init_weights: xavier_uniform on the
  // weights of the additional blocks, loc and conf (in that order); their biases keep the
  // default init.
  kernels::Generator gen(c.seed);
  for_each_conv(*model, [&](layers::Conv2d& m) { kaiming_fan_out(m, gen); });
  for (auto* m : {extra.get(), loc.get(), conf.get()})
    for_each_conv(*m, [&](layers::Conv2d& cv) { xavier_uniform(cv, gen, /*zero_bias=*/false); });

  set_priors({kR34Sizes, kR34Sizes + kR34Maps},
             detection::size_major_default_boxes_xyxy(spec, {kR34Sizes, kR34Sizes + kR34Maps},
                                                      c.image_size));
  set_normalization({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225});
}

std::vector<Variable> SsdResnet34::features(const Variable& images) {
  Variable x = layer2_->forward(layer1_->forward(normalize(images)));
  std::vector<Variable> out = {x};
  for (auto& block : extra_) {
    x = block->forward(x);
    out.push_back(x);
  }
  return out;
}

double SsdResnet34::feature_flops(int64_t B, std::vector<Shape>& maps) const {
  const int64_t S = c_.image_size;
  double flops = 0;
  Shape s = layer2_->count_flops(layer1_->count_flops({B, 3, S, S}, flops), flops);
  maps = {s};
  for (const auto& block : extra_) {
    s = block->count_flops(s, flops);
    maps.push_back(s);
  }
  return flops;
}

std::vector<Model::Fp32Params> SsdResnet34::amp_fp32_params() const {
  // Convs in 16 bits; BN statistics and affine parameters, softmax and the loss are f32 by the op
  // policy. No parameter of its own needs declaring (no L2Norm scale, unlike ssd_vgg16).
  return {};
}

// ---- ssd_resnet18 ---------------------------------------------------------------------------

namespace {

constexpr int64_t kR18Maps = 4;
const int64_t kR18Channels[kR18Maps] = {128, 256, 512, 512};
const int64_t kR18Sizes[kR18Maps] = {40, 20, 10, 5};

// Caffe's BatchNorm averages the batch statistics as sum_i l^(t-i) s_i / sum_i l^(t-i) (its blobs
// start at 0 and its scale factor divides: unbiased from the first step; l =
// moving_average_fraction 0.999). The buffers follow torchvision's rule with momentum 1 - l but
// start at (0, 0) as Caffe's, so after t steps they hold (1 - l^t) times that average, and
// evaluation divides it out: Caffe's estimate (without it, 1000s of steps pass before the buffers
// mean anything; from a variance of 1 the division would cancel catastrophically in f32). t is
// num_batches_tracked; 0 (an untrained net, or converted Caffe statistics) uses the buffers as
// they are.
class CaffeBatchNorm2d : public layers::BatchNorm2d {
 public:
  CaffeBatchNorm2d(int64_t channels, double eps, double momentum)
      : BatchNorm2d(channels, eps, momentum), eps_(eps), fraction_(1.0 - momentum) {
    buffer_named("running_var").fill_(0.0);
  }

  Variable forward(const Variable& x) override {
    if (is_training() && uses_batch_statistics()) return BatchNorm2d::forward(x);
    // scale = 1 / (1 - fraction^t), t = num_batches_tracked, computed in f64 on the buffers'
    // device (no read-back: an eval forward stays free of host synchronisation and can be
    // captured in a CUDA graph); t = 0 (statistics loaded as they are): scale 1.
    Tensor m, v;
    {
      autograd::NoGradGuard ng;
      const Tensor mean = buffer_named("running_mean"), var = buffer_named("running_var");
      const Variable t(buffer_named("num_batches_tracked").to(DType::f64));
      const Variable one(Tensor::full({}, 1.0, DType::f64, t.device()));
      const Variable denom =
          autograd::sub(one, autograd::exp(autograd::mul(t, std::log(fraction_))));
      const Tensor fresh = autograd::eq(t, Variable(Tensor::zeros({}, DType::f64, t.device())));
      const Variable scale = autograd::where(fresh, one, autograd::div(one, denom));
      const Variable s(scale.data().to(mean.dtype()));
      m = autograd::mul(Variable(mean), s).data();
      v = autograd::mul(Variable(var), s).data();
    }
    return autograd::batch_norm(x, weight, bias, m, v, /*training=*/false, 0.0, eps_);
  }

 private:
  Tensor buffer_named(const std::string& name) const {
    for (const auto& [n, t] : named_buffers())
      if (n == name) return t;
    AIM_CHECK(false, "[ssd_resnet18] BatchNorm2d has no buffer ", name);
    return Tensor();
  }
  double eps_, fraction_;
};

// Caffe's gaussian (std 0.01) and xavier (uniform +-sqrt(3 / fan_in)) fillers; biases 0.
void caffe_gaussian(layers::Conv2d& c, kernels::Generator& gen) {
  c.weight.data().copy_(layers::normal_init(c.weight.sizes(), 0.0, 0.01, gen));
  if (c.bias.defined()) c.bias.data().fill_(0.0);
}
void caffe_xavier(layers::Conv2d& c, kernels::Generator& gen) {
  const Shape s = c.weight.sizes();
  const double bound = std::sqrt(3.0 / double(s[1] * s[2] * s[3]));
  c.weight.data().copy_(layers::uniform_init(s, -bound, bound, gen));
  if (c.bias.defined()) c.bias.data().fill_(0.0);
}

}  // namespace

SsdConfig SsdResnet18::reference_config() {
  SsdConfig c;
  c.image_size = 321;
  c.caffe_matching = true;
  return c;
}

SsdResnet18::SsdResnet18(const SsdConfig& c) : Ssd("ssd_resnet18", c) {
  AIM_CHECK(c.image_size == 321,
            "[ssd_resnet18] image_size must be 321 (the maps 40, 20, 10, 5 of the Caffe "
            "reference), got ",
            c.image_size);
  uint64_t seed = c.seed * 1000;
  const int64_t dv = c.width_divisor;
  BasicBlockOptions bo;
  bo.bn_eps = 1e-3, bo.bn_momentum = 1e-3, bo.always_project = true;
  auto bn = [eps = bo.bn_eps,
             momentum = bo.bn_momentum](int64_t ch) -> std::shared_ptr<layers::BatchNorm2d> {
    return std::make_shared<CaffeBatchNorm2d>(ch, eps, momentum);
  };
  bo.make_bn = bn;
  conv1_ = child("conv1", conv(3, 64 / dv, 7, ConvOptions().stride(2).padding(3).no_bias(), seed));
  bn1_ = child("bn1", bn(64 / dv));
  maxpool_ = child("maxpool", std::make_shared<layers::MaxPool2d>(3, 2, 0, /*ceil_mode=*/true));
  int64_t in = 64 / dv;
  for (int64_t i = 0; i < 4; ++i) {
    const int64_t planes = (64 << i) / dv;
    layers_.push_back(child("layer" + std::to_string(i + 1),
                            make_basic_layer(in, planes, 2, i ? 2 : 1, seed, bo)));
    in = planes;
  }
  extras_ =
      child("extras",
            std::make_shared<Sequential>(std::vector<std::shared_ptr<layers::Module>>{
                conv(512 / dv, 256 / dv, 1, ConvOptions().no_bias(), seed), bn(256 / dv), relu(),
                conv(256 / dv, 512 / dv, 3, ConvOptions().stride(2).padding(1).no_bias(), seed),
                bn(512 / dv), relu()}));

  auto loc = child("loc", std::make_shared<Sequential>());
  auto conf = child("conf", std::make_shared<Sequential>());
  const std::vector<detection::CaffePriorBoxSpec> priors =
      detection::ssd_resnet18_321_prior_layers();
  std::vector<std::shared_ptr<layers::Conv2d>> cls, reg;
  std::vector<int64_t> per_cell;
  for (int64_t k = 0; k < kR18Maps; ++k) {
    const int64_t A = detection::caffe_priors_per_cell(priors[size_t(k)]);
    per_cell.push_back(A);
    reg.push_back(conv(kR18Channels[k] / dv, 4 * A, 3, ConvOptions().padding(1), seed));
    cls.push_back(conv(kR18Channels[k] / dv, c.num_classes * A, 3, ConvOptions().padding(1), seed));
    loc->push_back(reg.back());
    conf->push_back(cls.back());
  }
  set_heads(cls, reg, per_cell, SsdHeadLayout::cell_major);

  kernels::Generator gen(c.seed);
  conv1_->weight.data().copy_(layers::normal_init(conv1_->weight.sizes(), 0.0, 0.01, gen));
  for (auto& l : layers_) for_each_conv(*l, [&](layers::Conv2d& m) { caffe_gaussian(m, gen); });
  for_each_conv(*extras_, [&](layers::Conv2d& m) { caffe_gaussian(m, gen); });
  for (auto* m : {loc.get(), conf.get()})
    for_each_conv(*m, [&](layers::Conv2d& cv) { caffe_xavier(cv, gen); });

  std::vector<std::pair<int64_t, int64_t>> maps;
  for (int64_t s : kR18Sizes) maps.emplace_back(s, s);
  set_priors({kR18Sizes, kR18Sizes + kR18Maps},
             detection::caffe_prior_boxes_pixels(priors, maps, c.image_size, c.image_size));
  // 255 x - mean in RGB order; features() turns it into Caffe's BGR.
  set_normalization({123 / 255.0, 117 / 255.0, 104 / 255.0}, std::vector<double>(3, 1 / 255.0));
}

std::vector<Variable> SsdResnet18::features(const Variable& images) {
  Variable x = normalize(images);
  x = autograd::index_select(x, 1,
                             Tensor::from_vector(std::vector<int64_t>{2, 1, 0}, {3}, x.device()));
  x = maxpool_->forward(bn1_->forward_relu(conv1_->forward(x)));
  std::vector<Variable> out;
  for (size_t i = 0; i < layers_.size(); ++i) {
    x = layers_[i]->forward(x);
    if (i) out.push_back(x);  // res3b_relu, res4b_relu, res5b_relu
  }
  out.push_back(extras_->forward(x));  // conv7_relu
  return out;
}

double SsdResnet18::feature_flops(int64_t B, std::vector<Shape>& maps) const {
  const int64_t S = c_.image_size;
  double flops = 0;
  Shape s = bn1_->count_flops(conv1_->count_flops({B, 3, S, S}, flops), flops);
  flops += double(shape_numel(s));  // relu
  s = maxpool_->count_flops(s, flops);
  maps.clear();
  for (size_t i = 0; i < layers_.size(); ++i) {
    s = layers_[i]->count_flops(s, flops);
    if (i) maps.push_back(s);
  }
  maps.push_back(extras_->count_flops(s, flops));
  return flops;
}

std::vector<Model::Fp32Params> SsdResnet18::amp_fp32_params() const {
  return {};  // as ssd_resnet34: BN and the loss are f32 by the op policy
}

}  // namespace aim::models
