#include "models/googlenet.h"

#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/shape.h"
#include "profiler/profiler.h"

namespace aim::models {

namespace ag = autograd;
using layers::ConvOptions;

namespace {

std::shared_ptr<layers::Conv2d> same_conv(int64_t in, int64_t out, int64_t k, int64_t stride,
                                          uint64_t seed) {
  return std::make_shared<layers::Conv2d>(in, out, k, ConvOptions().stride(stride).same(), seed);
}

std::shared_ptr<layers::MaxPool2d> same_max_pool(int64_t stride) {
  layers::PoolOptions o;
  o.kernel = 3;
  o.stride = stride;
  o.tf_same = true;
  return std::make_shared<layers::MaxPool2d>(o);
}

// conv -> ReLU, the only kind of layer in this network (one kernel at inference).
Variable conv_relu(layers::Module& conv, const Variable& x) {
  if (auto* c = dynamic_cast<layers::Conv2d*>(&conv)) return c->forward_relu(x);
  return ag::relu(conv.forward(x));
}

Shape conv_relu_flops(const layers::Module& conv, const Shape& in, double& flops) {
  const Shape s = conv.count_flops(in, flops);
  flops += double(shape_numel(s));  // relu
  return s;
}

}  // namespace

InceptionV1::InceptionV1(int64_t in_channels, const InceptionV1Widths& w, uint64_t seed) {
  branch1_ = child("branch1", same_conv(in_channels, w.k, 1, 1, seed));
  branch2_ = child("branch2", std::make_shared<layers::Sequential>());
  branch2_->push_back(same_conv(in_channels, w.l, 1, 1, seed + 1));
  branch2_->push_back(same_conv(w.l, w.m, 3, 1, seed + 2));
  branch3_ = child("branch3", std::make_shared<layers::Sequential>());
  branch3_->push_back(same_conv(in_channels, w.n, 1, 1, seed + 3));
  branch3_->push_back(same_conv(w.n, w.p, 5, 1, seed + 4));
  branch4_ = child("branch4", std::make_shared<layers::Sequential>());
  branch4_->push_back(same_max_pool(1));
  branch4_->push_back(same_conv(in_channels, w.q, 1, 1, seed + 5));
}

Variable InceptionV1::forward(const Variable& x) {
  const Variable b1 = conv_relu(*branch1_, x);
  const Variable b2 = conv_relu(*(*branch2_)[1], conv_relu(*(*branch2_)[0], x));
  const Variable b3 = conv_relu(*(*branch3_)[1], conv_relu(*(*branch3_)[0], x));
  const Variable b4 = conv_relu(*(*branch4_)[1], (*branch4_)[0]->forward(x));
  return ag::concat({b1, b2, b3, b4}, 1);
}

Shape InceptionV1::count_flops(const Shape& in, double& flops) const {
  const Shape b1 = conv_relu_flops(*branch1_, in, flops);
  const Shape b2 =
      conv_relu_flops(*(*branch2_)[1], conv_relu_flops(*(*branch2_)[0], in, flops), flops);
  const Shape b3 =
      conv_relu_flops(*(*branch3_)[1], conv_relu_flops(*(*branch3_)[0], in, flops), flops);
  const Shape b4 = conv_relu_flops(*(*branch4_)[1], (*branch4_)[0]->count_flops(in, flops), flops);
  return {b1[0], b1[1] + b2[1] + b3[1] + b4[1], b1[2], b1[3]};  // concat: no FLOPs
}

GoogLeNet::GoogLeNet(const ImageModelConfig& c) : ImageClassifier(c) {
  AIM_CHECK(c.variant.empty(), "googlenet: has no variants, got variant '", c.variant, "'");
  AIM_CHECK(c.classes > 0 && c.height > 0 && c.width > 0,
            "googlenet: classes, height and width must be positive, got classes=", c.classes,
            " image ", c.height, "x", c.width);
  const int64_t div = c.tiny ? 8 : 1;
  auto ch = [div](int64_t n) { return (n + div - 1) / div; };
  uint64_t seed = c.seed * 1000;
  conv1_ = child("conv1", same_conv(3, ch(64), 7, 2, seed++));
  maxpool1_ = child("maxpool1", same_max_pool(2));
  conv2_ = child("conv2", same_conv(ch(64), ch(64), 1, 1, seed++));
  conv3_ = child("conv3", same_conv(ch(64), ch(192), 3, 1, seed++));
  maxpool2_ = child("maxpool2", same_max_pool(2));
  int64_t in = ch(192);
  auto inception = [&](const char* name, InceptionV1Widths w) {
    w = {ch(w.k), ch(w.l), ch(w.m), ch(w.n), ch(w.p), ch(w.q)};
    auto m = child(name, std::make_shared<InceptionV1>(in, w, seed += 10));
    in = w.out();
    return m;
  };
  inception3a_ = inception("inception3a", {64, 96, 128, 16, 32, 32});
  inception3b_ = inception("inception3b", {128, 128, 192, 32, 96, 64});
  maxpool3_ = child("maxpool3", same_max_pool(2));
  inception4a_ = inception("inception4a", {192, 96, 208, 16, 48, 64});
  inception4b_ = inception("inception4b", {160, 112, 224, 24, 64, 64});
  inception4c_ = inception("inception4c", {128, 128, 256, 24, 64, 64});
  inception4d_ = inception("inception4d", {112, 144, 288, 32, 64, 64});
  inception4e_ = inception("inception4e", {256, 160, 320, 32, 128, 128});
  maxpool4_ = child("maxpool4", same_max_pool(2));
  inception5a_ = inception("inception5a", {256, 160, 320, 32, 128, 128});
  inception5b_ = inception("inception5b", {384, 192, 384, 48, 128, 128});
  avgpool_ = child("avgpool", std::make_shared<layers::AdaptiveAvgPool2d>(1, 1));
  fc_ = child("fc", std::make_shared<layers::Linear>(in, c.classes, seed + 1));
  init_glorot_uniform(*this, c.seed);
}

Variable GoogLeNet::forward(const Variable& x) {
  Variable y;
  {
    profiler::Scope stem("stem", profiler::ScopeKind::Layer);
    y = maxpool1_->forward(conv_relu(*conv1_, x));
    y = maxpool2_->forward(conv_relu(*conv3_, conv_relu(*conv2_, y)));
  }
  y = forward_in_layer("inception3a", *inception3a_, y);
  y = forward_in_layer("inception3b", *inception3b_, y);
  y = forward_in_layer("maxpool3", *maxpool3_, y);
  const char* names4[] = {"inception4a", "inception4b", "inception4c", "inception4d",
                          "inception4e"};
  const std::shared_ptr<InceptionV1> stage4[] = {inception4a_, inception4b_, inception4c_,
                                                 inception4d_, inception4e_};
  for (int i = 0; i < 5; ++i) y = forward_in_layer(names4[i], *stage4[i], y);
  y = forward_in_layer("maxpool4", *maxpool4_, y);
  y = forward_in_layer("inception5a", *inception5a_, y);
  y = forward_in_layer("inception5b", *inception5b_, y);
  profiler::Scope head("head", profiler::ScopeKind::Layer);
  y = avgpool_->forward(y);
  return fc_->forward(ag::reshape(y, {y.size(0), y.size(1)}));
}

Shape GoogLeNet::count_flops(const Shape& in, double& flops) const {
  Shape s = maxpool1_->count_flops(conv_relu_flops(*conv1_, in, flops), flops);
  s = conv_relu_flops(*conv3_, conv_relu_flops(*conv2_, s, flops), flops);
  s = maxpool2_->count_flops(s, flops);
  s = inception3b_->count_flops(inception3a_->count_flops(s, flops), flops);
  s = maxpool3_->count_flops(s, flops);
  for (const auto& m : {inception4a_, inception4b_, inception4c_, inception4d_, inception4e_})
    s = m->count_flops(s, flops);
  s = maxpool4_->count_flops(s, flops);
  s = inception5b_->count_flops(inception5a_->count_flops(s, flops), flops);
  s = avgpool_->count_flops(s, flops);
  return fc_->count_flops({s[0], s[1]}, flops);
}

}  // namespace aim::models
