// The SSD detectors on ResNet trunks (models/ssd_resnet.h) against their references' PyTorch
// peers (tests/peers/ssd_resnet.py: MLPerf's SSD300-ResNet34 on torchvision's resnet34, and with
// --resnet18 the Caffe SSD ResNet-18 at 321 on torchvision's BasicBlock with dssd.py's Caffe
// matching and loss). The peer
// builds the model with its own random init (a fixed seed), aim loads that state_dict by name; on
// two random 300 x 300 images and their padded ground truth, in f32: the default boxes, the
// eval-mode head outputs, the training-mode loss (the reference's Encoder and Loss), its gradient
// for a few parameters and the BN running statistics after that step.
// Plus the module tree, shapes, FLOPs, errors and learning on the synthetic shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "kernels/math_mode.h"
#include "models/detection/priors.h"
#include "models/registry.h"
#include "models/ssd_resnet.h"
#include "tensor/safetensors.h"
#include "tests/support/common.h"
#include "train/optim.h"

namespace aim::models {
namespace {

bool have_torchvision() {
  if (std::system("/usr/bin/python3 -c 'import torchvision' >/dev/null 2>&1") == 0) return true;
  if (std::getenv("CI"))
    ADD_FAILURE() << "CI is set but /usr/bin/python3 cannot import torchvision";
  return false;
}

using aim::testing::rel_diff;

// The largest distance in units in the last place between two f32 tensors of the same shape.
int64_t max_ulps(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  EXPECT_EQ(x.size(), y.size());
  auto ordered = [](float f) {  // the floats' order as integers (negatives mirrored)
    int32_t i;
    std::memcpy(&i, &f, 4);
    return i < 0 ? int64_t(INT32_MIN) - i : int64_t(i);
  };
  int64_t d = 0;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i)
    d = std::max(d, int64_t(std::llabs(ordered(x[i]) - ordered(y[i]))));
  return d;
}

Tensor random_images(int64_t B, int64_t S, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<float> x(size_t(B * 3 * S * S));
  for (float& v : x) v = u(rng);
  return Tensor::from_vector(x, {B, 3, S, S});
}

template <class F>
void expect_throws_with(F f, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning " << what;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

// [B, K, P] (the reference's view) -> [B, P, K] (aim's canonical head outputs).
Tensor to_canonical(const Tensor& t) { return t.permute({0, 2, 1}).contiguous(); }

TEST(SsdResnetModel, Resnet34ModuleTreeShapesAndErrors) {
  SsdResnet34 m;
  const layers::StateDict sd = m.state_dict();
  std::map<std::string, Shape> shapes;
  for (const auto& [n, t] : sd) shapes[n] = t.sizes();
  // MLPerf's SSD300(21).state_dict(): the trunk's 29 convs and their BNs (5 entries each), the
  // additional blocks' 10 convs and the 12 head convs with biases.
  EXPECT_EQ(sd.size(), 29u + 29 * 5 + 20 + 24);
  EXPECT_EQ(sd.front().first, "model.layer1.0.weight");
  EXPECT_EQ(shapes.at("model.layer1.0.weight"), Shape({64, 3, 7, 7}));
  EXPECT_EQ(shapes.at("model.layer1.1.num_batches_tracked"), Shape({}));
  EXPECT_EQ(shapes.at("model.layer1.4.2.conv2.weight"), Shape({64, 64, 3, 3}));
  EXPECT_EQ(shapes.at("model.layer1.5.0.downsample.0.weight"), Shape({128, 64, 1, 1}));
  EXPECT_EQ(shapes.at("model.layer2.0.0.downsample.0.weight"), Shape({256, 128, 1, 1}));
  EXPECT_EQ(shapes.at("model.layer2.0.5.bn2.running_var"), Shape({256}));
  EXPECT_EQ(shapes.at("additional_blocks.0.0.weight"), Shape({256, 256, 1, 1}));
  EXPECT_EQ(shapes.at("additional_blocks.1.2.weight"), Shape({512, 256, 3, 3}));
  EXPECT_EQ(shapes.at("additional_blocks.4.2.bias"), Shape({256}));
  EXPECT_EQ(shapes.at("loc.1.weight"), Shape({24, 512, 3, 3}));
  EXPECT_EQ(shapes.at("conf.0.weight"), Shape({84, 256, 3, 3}));
  EXPECT_EQ(sd.back().first, "conf.5.bias");
  EXPECT_EQ(shapes.count("model.layer2.0.6.conv1.weight"), 0u);  // layer3 has 6 blocks
  EXPECT_EQ(m.num_parameters(), 14164654);                       // the peer's count for 21 classes
  EXPECT_EQ(m.num_priors(), 8732);
  // The convolutions' multiply-adds alone are 2 x 14.27 G per image (the peer's model, counted
  // with forward hooks; layer3 at 38 x 38 is 69% of it); BNs, ReLUs, adds, the pool and the
  // normalisation add a little.
  const double flops = m.forward_flops(1);
  std::printf("[ssd_resnet34] forward FLOPs per 300 x 300 image: %.4g\n", flops);
  EXPECT_GT(flops, 28.545e9);
  EXPECT_LT(flops, 28.545e9 * 1.02);
  EXPECT_NEAR(SsdResnet34::reference_config().iou_thresh, 0.5f, 1e-7f);
  EXPECT_GT(SsdResnet34::reference_config().iou_thresh, 0.5f);  // IoU > 0.5, strictly

  // The size-major default boxes: per map, per box size every cell.
  const Tensor cxcywh = detection::size_major_default_boxes_cxcywh(
      detection::mlperf_ssd300_default_boxes(), {38, 19, 10, 5, 3, 1}, 300);
  const std::vector<float> d = cxcywh.to_vector<float>();
  ASSERT_EQ(d.size(), 8732u * 4);
  const double s0 = 21.0 / 300, s1 = std::sqrt(21.0 / 300 * 45.0 / 300);
  EXPECT_EQ(d[0], float(0.5 / 37.5));
  EXPECT_EQ(d[2], float(s0));
  EXPECT_EQ(d[4 * 1 + 0], float(1.5 / 37.5));  // box 1: the next cell, the same size
  EXPECT_EQ(d[4 * 1 + 2], float(s0));
  EXPECT_EQ(d[4 * 1444 + 0], float(0.5 / 37.5));  // box 38 x 38: the first cell, the next size
  EXPECT_EQ(d[4 * 1444 + 2], float(s1));
  EXPECT_EQ(d[4 * 8730 + 2], 1.f);  // the last map's 2:1 box, clamped to the image
  EXPECT_EQ(d[4 * 8731 + 3], 1.f);  // and its 1:2 box
  const std::vector<float> a = m.anchors().to_vector<float>();
  EXPECT_EQ(a[0], (float(0.5 / 37.5) - 0.5f * float(s0)) * 300.f);

  std::mt19937 rng(3);
  const Tensor img = random_images(1, 300, rng);
  SsdHeadOutputs o;
  {
    autograd::NoGradGuard ng;
    m.eval();
    o = m.forward_heads(Variable(img));
  }
  EXPECT_EQ(o.cls_logits.sizes(), Shape({1, 8732, 21}));
  EXPECT_EQ(o.bbox_regression.sizes(), Shape({1, 8732, 4}));
  const std::vector<SsdDetections> det = m.postprocess(o);
  ASSERT_EQ(det.size(), 1u);
  EXPECT_LE(det[0].scores.numel(), 200);

  expect_throws_with(
      [&] {
        m.forward_heads(Variable(Tensor::zeros({1, 3, 320, 320})));
      },
      "images must be [B, 3, 300, 300]");
  expect_throws_with(
      [] {
        SsdConfig c = SsdResnet34::reference_config();
        c.image_size = 321;
        SsdResnet34 bad(c);
      },
      "image_size must be 300");
  // A COCO (81-class) checkpoint into the 21-class model: the first conf head names both shapes.
  SsdConfig coco = SsdResnet34::reference_config();
  coco.num_classes = 81;
  coco.width_divisor = 8;
  SsdConfig voc = SsdResnet34::reference_config();
  voc.width_divisor = 8;
  SsdResnet34 small_coco(coco), small_voc(voc);
  expect_throws_with([&] { small_voc.load_state_dict(small_coco.state_dict(), true); },
                     "conf.0.weight has shape [84, 32, 3, 3], checkpoint has [324, 32, 3, 3]");
}

TEST(SsdResnetModel, Resnet34ParityMlperfReference) {
  if (!have_torchvision()) GTEST_SKIP() << "/usr/bin/python3 cannot import torchvision";
  // F(2x2) Winograd at most: the gradient tolerances below hold against PyTorch's direct
  // convolutions at F(2x2)'s rounding; F(4x4)'s, amplified through ~50 batch-statistics batch
  // norms of a batch of 2, moves a few weight gradients by ~1-2% (kernels/math_mode.h).
  const kernels::ScopedWinogradTile f2(2);
  const std::string dir = testing::make_temp_dir("aim_ssd_resnet34_parity");
  const int64_t B = 2, G = 4;
  std::mt19937 rng(11);
  const Tensor images = random_images(B, 300, rng);
  // Objects of every scale, so that every map has positives (and every head a gradient).
  SsdTargets t;
  t.boxes =
      Tensor::from_vector(std::vector<float>{30,  40,  60, 75, 100, 120, 180, 190, 150, 20,  290,
                                             150, 0,   0,  0,  0,   20,  30,  250, 280, 200, 200,
                                             240, 260, 5,  5,  45,  35,  120, 60,  230, 160},
                          {B, G, 4});
  t.labels = Tensor::from_vector(std::vector<int64_t>{3, 17, 9, 0, 1, 20, 5, 12}, {B, G});
  t.num_boxes = Tensor::from_vector(std::vector<int64_t>{3, 4}, {B});
  save_safetensors(
      dir + "/b.safetensors",
      {{"images", images}, {"boxes", t.boxes}, {"labels", t.labels}, {"num_boxes", t.num_boxes}});
  const std::string cmd = std::string(testing::kPython) + " " + testing::source_root() +
                          "/tests/peers/ssd_resnet.py --batch " + dir +
                          "/b.safetensors --weights " + dir + "/w.safetensors --out " + dir +
                          "/o.safetensors --seed 0 --f64";
  ASSERT_EQ(testing::run_command(cmd), 0) << cmd;
  const SafetensorsFile w = load_safetensors(dir + "/w.safetensors");
  const SafetensorsFile o = load_safetensors(dir + "/o.safetensors");

  // Default boxes: (cx, cy, w, h) as the reference's DefaultBoxes, and aim's pixel corners as its
  // ltrb times 300.
  const int64_t box_ulps =
      max_ulps(detection::size_major_default_boxes_cxcywh(detection::mlperf_ssd300_default_boxes(),
                                                          {38, 19, 10, 5, 3, 1}, 300),
               o.at("dboxes"));
  std::vector<float> ltrb_px = o.at("dboxes_ltrb").to_vector<float>();
  for (float& v : ltrb_px) v *= 300.f;
  SsdResnet34 m;
  const int64_t anchor_ulps =
      max_ulps(m.anchors(), Tensor::from_vector(ltrb_px, {int64_t(ltrb_px.size()) / 4, 4}));

  m.load_state_dict(w.tensors, /*strict=*/true);
  m.eval();
  SsdHeadOutputs out;
  {
    autograd::NoGradGuard ng;
    out = m.forward_heads(Variable(images));
  }
  const double d_cls = rel_diff(out.cls_logits.data(), to_canonical(o.at("conf")));
  const double d_reg = rel_diff(out.bbox_regression.data(), to_canonical(o.at("loc")));

  m.train();
  const SsdLoss loss = m.training_loss(Variable(images), t);
  loss.total.backward();
  const double want = o.at("loss").to_vector<double>()[0];
  const double d_loss = std::fabs(loss.total.data().to_vector<double>()[0] - want) / want;
  const std::vector<int64_t> pos = o.at("positives").to_vector<int64_t>();
  // Gradients, against PyTorch's f32 ones and against its f64 model's (the reference both f32
  // gradients approximate). From the heads down to the trunk's last block (layer3's sixth) aim's
  // are within ~1e-4 of both. Further down, the trunk's train-mode BN + ReLU + conv chain
  // amplifies f32 rounding: at layer3's first block and below aim's and PyTorch's f32 gradients
  // are each ~4e-3 .. 2e-2 off the f64 ones (and off each other), so those are checked against
  // f64 at 3e-2.
  double d_grad = 0, d_deep = 0, d_stats = 0;
  std::string worst, worst_deep;
  int n_grads = 0;
  for (const auto& [n, p] : m.named_parameters()) {
    if (!o.has("grad." + n)) continue;
    ++n_grads;
    const Tensor& ref = o.at("grad64." + n);
    EXPECT_GT(rel_diff(Tensor::zeros(ref.sizes()), ref), 0.0) << n << ": no gradient to compare";
    const double d32 = rel_diff(p.grad(), o.at("grad." + n)), d64 = rel_diff(p.grad(), ref),
                 t64 = rel_diff(o.at("grad." + n), ref);
    std::printf(
        "[ssd_resnet34 parity] grad %s: aim vs PyTorch f32 %.3g, vs f64 %.3g (PyTorch f32 vs f64 "
        "%.3g)\n",
        n.c_str(), d32, d64, t64);
    const bool deep = n.rfind("model.", 0) == 0 && n.rfind("model.layer2.0.5.", 0) != 0;
    if (deep) {
      if (d64 >= d_deep) worst_deep = n;
      d_deep = std::max(d_deep, d64);
    } else {
      if (std::max(d32, d64) >= d_grad) worst = n;
      d_grad = std::max({d_grad, d32, d64});
    }
  }
  int n_stats = 0;
  for (const auto& [n, b] : m.state_dict()) {
    const size_t dot = n.rfind('.');
    const std::string key = n.substr(dot + 1) + "." + n.substr(0, dot);
    if (!o.has(key)) continue;
    ++n_stats;
    d_stats = std::max(d_stats, rel_diff(b, o.at(key)));
  }
  std::printf(
      "[ssd_resnet34 parity] default boxes %lld ulp, anchors %lld ulp; conf %.3g, loc %.3g (max "
      "rel); loss %.3g (rel; %lld positives, the reference's %lld + %lld); grads %.3g (%s), "
      "deeper in the trunk %.3g vs f64 (%s); BN running stats %.3g\n",
      (long long)box_ulps, (long long)anchor_ulps, d_cls, d_reg, d_loss,
      (long long)loss.num_foreground, (long long)pos[0], (long long)pos[1], d_grad, worst.c_str(),
      d_deep, worst_deep.c_str(), d_stats);
  EXPECT_LE(box_ulps, 1);
  EXPECT_LE(anchor_ulps, 1);
  EXPECT_EQ(loss.num_foreground, pos[0] + pos[1]);
  EXPECT_GT(pos[0], 0);
  EXPECT_GT(pos[1], 0);
  EXPECT_EQ(n_grads, 13);
  EXPECT_EQ(n_stats, 4);
  EXPECT_LT(d_cls, 1e-4);
  EXPECT_LT(d_reg, 1e-4);
  EXPECT_LT(d_loss, 1e-5);
  EXPECT_LT(d_grad, 1e-3) << worst;
  EXPECT_LT(d_deep, 3e-2) << worst_deep;
  EXPECT_LT(d_stats, 1e-4);
  if (!std::getenv("AIM_SSD_KEEP")) std::filesystem::remove_all(dir);
}

TEST(SsdResnetModel, Resnet18ModuleTreeShapesAndErrors) {
  SsdResnet18 m;
  const layers::StateDict sd = m.state_dict();
  std::map<std::string, Shape> shapes;
  for (const auto& [n, t] : sd) shapes[n] = t.sizes();
  // conv1, 8 blocks x 2 convs and 4 projections (res2a's too), each with a BN (5 entries); the
  // extras' 2 convs and BNs; 8 head convs with biases.
  EXPECT_EQ(sd.size(), 21u + 21 * 5 + 2 + 2 * 5 + 16);
  EXPECT_EQ(sd.front().first, "conv1.weight");
  EXPECT_EQ(shapes.at("conv1.weight"), Shape({64, 3, 7, 7}));
  EXPECT_EQ(shapes.at("bn1.running_var"), Shape({64}));
  EXPECT_EQ(shapes.at("layer1.0.downsample.0.weight"), Shape({64, 64, 1, 1}));
  EXPECT_EQ(shapes.count("layer1.1.downsample.0.weight"), 0u);
  EXPECT_EQ(shapes.at("layer3.0.downsample.0.weight"), Shape({256, 128, 1, 1}));
  EXPECT_EQ(shapes.at("layer4.1.bn2.running_mean"), Shape({512}));
  EXPECT_EQ(shapes.count("layer4.2.conv1.weight"), 0u);  // 2 blocks per stage
  EXPECT_EQ(shapes.at("extras.0.weight"), Shape({256, 512, 1, 1}));
  EXPECT_EQ(shapes.at("extras.1.num_batches_tracked"), Shape({}));
  EXPECT_EQ(shapes.at("extras.3.weight"), Shape({512, 256, 3, 3}));
  EXPECT_EQ(shapes.at("extras.4.running_var"), Shape({512}));
  for (const auto& [n, t] : sd) {  // Caffe's variance blobs start at 0 (see CaffeBatchNorm2d)
    if (n == "bn1.running_var") {
      EXPECT_EQ(t.to_vector<float>(), std::vector<float>(64, 0.f));
    }
  }
  EXPECT_EQ(shapes.at("loc.0.weight"), Shape({32, 128, 3, 3}));
  EXPECT_EQ(shapes.at("conf.3.weight"), Shape({168, 512, 3, 3}));
  EXPECT_EQ(sd.back().first, "conf.3.bias");
  EXPECT_EQ(m.num_parameters(), 15028192);  // the peer's count for 21 classes
  EXPECT_EQ(m.num_priors(), 17000);         // 8 per cell on 40, 20, 10, 5
  const SsdConfig rc = SsdResnet18::reference_config();
  EXPECT_TRUE(rc.caffe_matching);
  EXPECT_FALSE(rc.loss_per_image);
  EXPECT_EQ(rc.image_size, 321);
  // The convolutions' multiply-adds are 2 x 4.441 G per image (the peer's model, counted with
  // forward hooks); BNs, ReLUs, adds, the pool and the normalisation add a little.
  const double flops = m.forward_flops(1);
  std::printf("[ssd_resnet18] forward FLOPs per 321 x 321 image: %.4g\n", flops);
  EXPECT_GT(flops, 2 * 4.441138368e9);
  EXPECT_LT(flops, 2 * 4.441138368e9 * 1.03);

  std::mt19937 rng(3);
  const Tensor img = random_images(1, 321, rng);
  SsdHeadOutputs o;
  std::vector<Variable> maps;
  {
    autograd::NoGradGuard ng;
    m.eval();
    maps = m.features(Variable(img));
    o = m.forward_heads(Variable(img));
  }
  ASSERT_EQ(maps.size(), 4u);
  EXPECT_EQ(maps[0].sizes(), Shape({1, 128, 40, 40}));  // res3b_relu
  EXPECT_EQ(maps[1].sizes(), Shape({1, 256, 20, 20}));  // res4b_relu
  EXPECT_EQ(maps[2].sizes(), Shape({1, 512, 10, 10}));  // res5b_relu
  EXPECT_EQ(maps[3].sizes(), Shape({1, 512, 5, 5}));    // conv7_relu
  EXPECT_EQ(o.cls_logits.sizes(), Shape({1, 17000, 21}));
  EXPECT_EQ(o.bbox_regression.sizes(), Shape({1, 17000, 4}));
  const std::vector<SsdDetections> det = m.postprocess(o);
  ASSERT_EQ(det.size(), 1u);
  EXPECT_LE(det[0].scores.numel(), 200);

  expect_throws_with(
      [&] {
        m.forward_heads(Variable(Tensor::zeros({1, 3, 300, 300})));
      },
      "images must be [B, 3, 321, 321]");
  expect_throws_with(
      [] {
        SsdConfig c = SsdResnet18::reference_config();
        c.image_size = 300;
        SsdResnet18 bad(c);
      },
      "image_size must be 321");
  SsdConfig tiny = SsdResnet18::reference_config();
  tiny.width_divisor = 8;
  SsdResnet18 small(tiny);
  EXPECT_EQ(small.state_dict().size(), sd.size());
  EXPECT_EQ(small.num_priors(), 17000);

  // Evaluation reads the BN buffers (from 0, 0) as Caffe's unbiased averages: after 3 training
  // forwards, the same as buffers holding mean / (1 - l^3), var / (1 - l^3) (l = 0.999), t = 0.
  SsdResnet18 corrected(tiny);
  small.train();
  const Tensor img2 = random_images(2, 321, rng);
  {
    autograd::NoGradGuard ng;
    for (int i = 0; i < 3; ++i) small.forward_heads(Variable(img2));
  }
  layers::StateDict csd = small.state_dict();
  const double start = std::pow(0.999, 3.0);
  int n_bns = 0;
  for (auto& [n, t] : csd) {
    const std::string leaf = n.substr(n.rfind('.') + 1);
    if (leaf == "num_batches_tracked") {
      EXPECT_EQ(t.to_vector<int64_t>()[0], 3) << n;
      t = Tensor::zeros({}, DType::i64);
      ++n_bns;
    } else if (leaf == "running_mean" || leaf == "running_var") {
      std::vector<float> v = t.to_vector<float>();
      for (float& x : v) x = float(double(x) / (1.0 - start));
      t = Tensor::from_vector(v, t.sizes());
    }
  }
  EXPECT_EQ(n_bns, 21 + 2);
  corrected.load_state_dict(csd, /*strict=*/true);
  small.eval();
  corrected.eval();
  {
    autograd::NoGradGuard ng;
    const SsdHeadOutputs a = small.forward_heads(Variable(img2)),
                         b = corrected.forward_heads(Variable(img2));
    const double d = rel_diff(a.cls_logits.data(), b.cls_logits.data());
    std::printf("[ssd_resnet18] Caffe-corrected BN statistics vs corrected buffers: %.3g\n", d);
    EXPECT_LT(d, 1e-5);
  }
}

TEST(SsdResnetModel, Resnet18ParityCaffeReference) {
  if (!have_torchvision()) GTEST_SKIP() << "/usr/bin/python3 cannot import torchvision";
  // F(2x2) Winograd at most: the gradient tolerances below hold against PyTorch's direct
  // convolutions at F(2x2)'s rounding; F(4x4)'s, amplified through ~50 batch-statistics batch
  // norms of a batch of 2, moves a few weight gradients by ~1-2% (kernels/math_mode.h).
  const kernels::ScopedWinogradTile f2(2);
  const std::string dir = testing::make_temp_dir("aim_ssd_resnet18_parity");
  const int64_t B = 2, G = 4;
  std::mt19937 rng(11);
  const Tensor images = random_images(B, 321, rng);
  SsdTargets t;
  t.boxes =
      Tensor::from_vector(std::vector<float>{30,  40,  60, 75, 100, 120, 190, 200, 160, 20,  310,
                                             160, 0,   0,  0,  0,   20,  30,  270, 300, 210, 210,
                                             260, 280, 5,  5,  45,  35,  120, 60,  250, 170},
                          {B, G, 4});
  t.labels = Tensor::from_vector(std::vector<int64_t>{3, 17, 9, 0, 1, 20, 5, 12}, {B, G});
  t.num_boxes = Tensor::from_vector(std::vector<int64_t>{3, 4}, {B});
  SsdResnet18 m;
  // aim's priors go to the peer (test_caffe_priors.cpp checks them against Caffe's PriorBox).
  save_safetensors(dir + "/b.safetensors", {{"images", images},
                                            {"boxes", t.boxes},
                                            {"labels", t.labels},
                                            {"num_boxes", t.num_boxes},
                                            {"priors", m.anchors()}});
  const std::string cmd = std::string(testing::kPython) + " " + testing::source_root() +
                          "/tests/peers/ssd_resnet.py --resnet18 --batch " + dir +
                          "/b.safetensors --weights " + dir + "/w.safetensors --out " + dir +
                          "/o.safetensors --seed 0 --f64";
  ASSERT_EQ(testing::run_command(cmd), 0) << cmd;
  const SafetensorsFile w = load_safetensors(dir + "/w.safetensors");
  const SafetensorsFile o = load_safetensors(dir + "/o.safetensors");

  m.load_state_dict(w.tensors, /*strict=*/true);
  m.eval();
  SsdHeadOutputs out;
  {
    autograd::NoGradGuard ng;
    out = m.forward_heads(Variable(images));
  }
  const double d_cls = rel_diff(out.cls_logits.data(), o.at("cls_logits"));
  const double d_reg = rel_diff(out.bbox_regression.data(), o.at("bbox_regression"));

  m.train();
  const SsdLoss loss = m.training_loss(Variable(images), t);
  loss.total.backward();
  const double want = o.at("loss").to_vector<double>()[0];
  const double d_loss = std::fabs(loss.total.data().to_vector<double>()[0] - want) / want;
  // Gradients against PyTorch's f32 ones and its f64 model's. From the heads down to layer4 aim's
  // are within ~1e-5 of both; in layer3 and below the train-mode BN + ReLU + conv chain amplifies
  // f32 rounding (as in ssd_resnet34): PyTorch's f32 gradients are up to 4e-3 off the f64 ones,
  // aim's up to 1.6e-3 (conv1), so those are checked against f64 at 5e-3.
  double d_grad = 0, d_deep = 0;
  std::string worst, worst_deep;
  int n_grads = 0;
  for (const auto& [n, p] : m.named_parameters()) {
    if (!o.has("grad." + n)) continue;
    ++n_grads;
    const Tensor& ref = o.at("grad64." + n);
    const double d32 = rel_diff(p.grad(), o.at("grad." + n)), d64 = rel_diff(p.grad(), ref),
                 t64 = rel_diff(o.at("grad." + n), ref);
    std::printf(
        "[ssd_resnet18 parity] grad %s: aim vs PyTorch f32 %.3g, vs f64 %.3g (PyTorch f32 vs f64 "
        "%.3g)\n",
        n.c_str(), d32, d64, t64);
    const bool deep = n.rfind("conv1.", 0) == 0 || n.rfind("layer1.", 0) == 0 ||
                      n.rfind("layer2.", 0) == 0 || n.rfind("layer3.", 0) == 0;
    if (deep) {
      if (d64 >= d_deep) worst_deep = n;
      d_deep = std::max(d_deep, d64);
    } else {
      if (std::max(d32, d64) >= d_grad) worst = n;
      d_grad = std::max({d_grad, d32, d64});
    }
  }
  std::printf(
      "[ssd_resnet18 parity] cls %.3g, reg %.3g (max rel); loss %.3g (rel; %lld matches, the "
      "peer's %lld, f64 %lld); grads %.3g (%s), layer3 and below %.3g vs f64 (%s)\n",
      d_cls, d_reg, d_loss, (long long)loss.num_foreground,
      (long long)o.at("num_pos").to_vector<int64_t>()[0],
      (long long)o.at("num_pos64").to_vector<int64_t>()[0], d_grad, worst.c_str(), d_deep,
      worst_deep.c_str());
  EXPECT_EQ(loss.num_foreground, o.at("num_pos").to_vector<int64_t>()[0]);
  EXPECT_EQ(loss.num_foreground, o.at("num_pos64").to_vector<int64_t>()[0]);
  EXPECT_EQ(n_grads, 11);
  EXPECT_LT(d_cls, 1e-4);
  EXPECT_LT(d_reg, 1e-4);
  EXPECT_LT(d_loss, 1e-5);
  EXPECT_LT(d_grad, 1e-3) << worst;
  EXPECT_LT(d_deep, 5e-3) << worst_deep;
  if (!std::getenv("AIM_SSD_KEEP")) std::filesystem::remove_all(dir);
}

// size=tiny on the synthetic shapes (5 classes): Adam (lr 1e-3) for 300 steps of 8 lifts the
// held-out VOC mAP over 64 images from 0.000 to 0.457 (measured, 46 s on the quiet 2-core
// machine; docs/detection.md). Bar: 0.2.
TEST(SsdResnetModel, TinyLearnsSyntheticShapesResnet34) {
  const auto t0 = std::chrono::steady_clock::now();
  const ModelEntry& e = find_model("ssd_resnet34");
  const ModelConfig cfg = e.parse_config({"size=tiny", "num_classes=6"});
  auto m = e.build(cfg, 1);
  auto src = e.source(cfg, "synthetic", 1);
  const Metrics before = e.evaluate(*m, *src, 64, kCPU);
  train::Adam opt(m->named_parameters(), 1e-3);
  for (int step = 0; step < 300; ++step) {
    const TensorMap b = src->next(8);
    opt.zero_grad();
    m->training_loss(batch_to_device(*m, b, kCPU)).backward();
    opt.step();
  }
  const Metrics after = e.evaluate(*m, *src, 64, kCPU);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ssd_resnet34 tiny] held-out VOC mAP %.4f -> %.4f after 300 steps (%.1f s)\n",
              before.at("map"), after.at("map"), secs);
  EXPECT_GT(after.at("map"), 0.2);
}

// size=tiny on the synthetic shapes (5 classes): Adam (lr 1e-3) for 120 steps of 8 lifts the
// held-out VOC mAP over 64 images from 0.000 to 0.182 (measured: 260 s on the 2-core machine at
// load 3.9; the same 120 steps + evaluation took 17 s in aim-train when it was quiet;
// docs/detection.md). Bar: 0.1. Evaluation reads Caffe's unbiased BN averages
// (CaffeBatchNorm2d), which still weigh the first steps' statistics.
TEST(SsdResnetModel, TinyLearnsSyntheticShapesResnet18) {
  const auto t0 = std::chrono::steady_clock::now();
  const ModelEntry& e = find_model("ssd_resnet18");
  const ModelConfig cfg = e.parse_config({"size=tiny", "num_classes=6"});
  auto m = e.build(cfg, 1);
  auto src = e.source(cfg, "synthetic", 1);
  const Metrics before = e.evaluate(*m, *src, 64, kCPU);
  train::Adam opt(m->named_parameters(), 1e-3);
  for (int step = 0; step < 120; ++step) {
    const TensorMap b = src->next(8);
    opt.zero_grad();
    m->training_loss(batch_to_device(*m, b, kCPU)).backward();
    opt.step();
  }
  const Metrics after = e.evaluate(*m, *src, 64, kCPU);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ssd_resnet18 tiny] held-out VOC mAP %.4f -> %.4f after 120 steps (%.1f s)\n",
              before.at("map"), after.at("map"), secs);
  EXPECT_GT(after.at("map"), 0.1);
}

}  // namespace
}  // namespace aim::models
