#include "models/ssd_vgg16.h"

#include <cmath>
#include <string>
#include <utility>

#include "autograd/functions/l2norm.h"
#include "kernels/random/random.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/pooling.h"
#include "models/detection/priors.h"

namespace aim::models {

using layers::ConvOptions;
using layers::Sequential;
using ssd_parts::Container;
using ssd_parts::conv;
using ssd_parts::for_each_conv;
using ssd_parts::kaiming_fan_out;
using ssd_parts::xavier_uniform;

namespace {

constexpr int64_t kMaps = 6;
const int64_t kMapChannels[kMaps] = {512, 1024, 512, 256, 256, 256};
const int64_t kMapSizes[kMaps] = {38, 19, 10, 5, 3, 1};

}  // namespace

SsdVgg16::SsdVgg16(const SsdConfig& c) : Ssd("ssd_vgg16", c) {
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
  std::vector<std::shared_ptr<layers::Conv2d>> cls, reg;
  std::vector<int64_t> per_cell;
  for (int64_t k = 0; k < kMaps; ++k) {
    const int64_t A = spec.boxes_per_cell(size_t(k));
    per_cell.push_back(A);
    cls.push_back(conv(kMapChannels[k] / dv, c.num_classes * A, 3, ConvOptions().padding(1), seed));
    reg.push_back(conv(kMapChannels[k] / dv, 4 * A, 3, ConvOptions().padding(1), seed));
    cls_list->push_back(cls.back());
    reg_list->push_back(reg.back());
  }
  set_heads(cls, reg, per_cell, SsdHeadLayout::cell_major);

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
  set_priors({kMapSizes, kMapSizes + kMaps},
             detection::default_boxes_xyxy(spec, maps, c.image_size, c.image_size));
  set_normalization({0.48235, 0.45882, 0.40784}, std::vector<double>(3, 1.0 / 255.0));
}

std::vector<Variable> SsdVgg16::features(const Variable& images) {
  Variable x = features_->forward(normalize(images));
  std::vector<Variable> out = {autograd::l2_normalize(x, scale_weight_)};
  for (auto& block : extra_) {
    x = block->forward(x);
    out.push_back(x);
  }
  return out;
}

double SsdVgg16::feature_flops(int64_t B, std::vector<Shape>& maps) const {
  const int64_t S = c_.image_size;
  double flops = 0;
  Shape s = features_->count_flops({B, 3, S, S}, flops);
  // L2Norm: per element a square and an add (the norm), a division and the scale product.
  flops += 4.0 * double(shape_numel(s));
  maps = {s};
  for (const auto& block : extra_) {
    s = block->count_flops(s, flops);
    maps.push_back(s);
  }
  return flops;
}

std::vector<Model::Fp32Params> SsdVgg16::amp_fp32_params() const {
  return {{"backbone\\.scale_weight", "the L2Norm scale multiplies f32 normalised features"}};
}

}  // namespace aim::models
