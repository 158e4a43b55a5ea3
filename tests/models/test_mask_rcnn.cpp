// mask_rcnn (models/mask_rcnn.h): torchvision 0.14's module tree, names and parameter counts;
// the registry entry through infer and post-processing; parity with tests/peers/mask_rcnn.py
// (torchvision's MaskRCNN from its own classes at tiny widths) in eval mode on weights exported
// from torchvision (proposals, box-head and mask-head outputs, final detections and pasted masks)
// and in training on aim's weights and sampling (the five losses and every gradient); and the
// tiny model learning the synthetic instances.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "kernels/math_mode.h"
#include "models/detection/masks.h"
#include "models/mask_rcnn.h"
#include "models/registry.h"
#include "tensor/safetensors.h"
#include "tests/support/common.h"
#include "train/optim.h"

namespace aim::models {
namespace {

using aim::testing::rel_diff;

TEST(MaskRcnnModel, ModuleTreeNamesAndCounts) {
  MaskRcnn m;  // maskrcnn_resnet50_fpn(num_classes=91) with FrozenBatchNorm2d
  const layers::StateDict sd = m.state_dict();
  // torchvision 0.14 (printed by the peer's build): 307 entries, 44401393 parameters of which
  // 44178993 train with trainable_backbone_layers=3.
  EXPECT_EQ(sd.size(), 307u);
  EXPECT_EQ(sd.front().first, "backbone.body.conv1.weight");
  EXPECT_EQ(sd.back().first, "roi_heads.mask_predictor.mask_fcn_logits.bias");
  std::map<std::string, Shape> shapes;
  for (const auto& [n, t] : sd) shapes[n] = t.sizes();
  EXPECT_EQ(shapes.at("backbone.body.bn1.running_var"), Shape({64}));
  EXPECT_EQ(shapes.count("backbone.body.bn1.num_batches_tracked"), 0u);
  EXPECT_EQ(shapes.at("backbone.body.layer1.0.downsample.1.weight"), Shape({256}));
  EXPECT_EQ(shapes.at("backbone.body.layer4.2.conv3.weight"), Shape({2048, 512, 1, 1}));
  EXPECT_EQ(shapes.at("backbone.fpn.inner_blocks.3.0.weight"), Shape({256, 2048, 1, 1}));
  EXPECT_EQ(shapes.at("backbone.fpn.layer_blocks.0.0.weight"), Shape({256, 256, 3, 3}));
  EXPECT_EQ(shapes.at("rpn.head.conv.0.0.weight"), Shape({256, 256, 3, 3}));
  EXPECT_EQ(shapes.at("rpn.head.cls_logits.weight"), Shape({3, 256, 1, 1}));
  EXPECT_EQ(shapes.at("rpn.head.bbox_pred.bias"), Shape({12}));
  EXPECT_EQ(shapes.at("roi_heads.box_head.fc6.weight"), Shape({1024, 12544}));
  EXPECT_EQ(shapes.at("roi_heads.box_predictor.bbox_pred.weight"), Shape({364, 1024}));
  EXPECT_EQ(shapes.at("roi_heads.mask_head.3.0.weight"), Shape({256, 256, 3, 3}));
  EXPECT_EQ(shapes.at("roi_heads.mask_predictor.conv5_mask.weight"), Shape({256, 256, 2, 2}));
  EXPECT_EQ(shapes.at("roi_heads.mask_predictor.mask_fcn_logits.weight"), Shape({91, 256, 1, 1}));
  EXPECT_EQ(m.num_parameters(), 44401393);
  int64_t trained = 0;
  for (const auto& [n, p] : m.named_parameters()) {
    const bool frozen =
        n.rfind("backbone.body.conv1", 0) == 0 || n.rfind("backbone.body.layer1", 0) == 0;
    EXPECT_EQ(p.requires_grad(), !frozen) << n;
    if (p.requires_grad()) trained += p.numel();
  }
  EXPECT_EQ(trained, 44178993);
  // Forward FLOPs of an 800 x 800 image (no resize, no padding), 2 x MACs: ResNet-50's trunk
  // ~105 G (8.2 G at 224 x 224), FPN ~72 G, RPN conv ~62 G, box head on 1000 RoIs ~28 G, mask
  // head on 100 detections ~103 G: ~370 G.
  const double fl = m.forward_flops(1, 800, 800);
  std::printf("[mask_rcnn] forward FLOPs at 800 x 800: %.4g\n", fl);
  EXPECT_GT(fl, 3.5e11);
  EXPECT_LT(fl, 3.9e11);

  MaskRcnnConfig c101;
  c101.blocks = {3, 4, 23, 3};
  c101.num_classes = 91;
  MaskRcnn r101(c101);
  EXPECT_EQ(r101.state_dict().size(), 562u);
  EXPECT_EQ(r101.num_parameters(), 63341297);
}

TEST(MaskRcnnModel, RegistryInferPostprocessAndErrors) {
  const ModelEntry& e = find_model("mask_rcnn");
  const ModelConfig cfg = e.parse_config({"size=tiny"});
  auto m = e.build(cfg, 1);
  auto& mr = dynamic_cast<MaskRcnn&>(*m);
  EXPECT_EQ(mr.config().num_classes, 6);
  auto src = e.source(cfg, "synthetic", 1);
  const TensorMap b = src->next(2);
  EXPECT_EQ(b.at("images").sizes(), Shape({2, 3, 128, 128}));
  m->eval();
  TensorMap out;
  {
    autograd::NoGradGuard ng;
    out = m->infer(b);
  }
  EXPECT_EQ(out.at("boxes").sizes(), Shape({2, 100, 4}));
  EXPECT_EQ(out.at("mask_probs").sizes(), Shape({2, 100, 28, 28}));
  const std::vector<int64_t> n = out.at("num_detections").to_vector<int64_t>();
  EXPECT_GT(n[0], 0);
  const TensorMap pp = m->postprocess_outputs(out);
  EXPECT_EQ(pp.at("masks").size(0), 2);
  EXPECT_EQ(pp.at("masks").size(1), std::max<int64_t>({n[0], n[1], 1}));
  EXPECT_EQ(pp.at("masks").size(2), 128);
  m->train();
  const Variable loss = m->training_loss(b);
  EXPECT_TRUE(std::isfinite(loss.data().to_vector<double>()[0]));
  loss.backward();
  AIM_EXPECT_ERROR(m->infer({{"images", Tensor::zeros({1, 1, 128, 128})}}),
                   "images must be [B, 3, H, W]");
  TensorMap bad = b;
  bad["labels"] = Tensor::full({2, b.at("labels").size(1)}, 6.0).to(DType::i64);
  AIM_EXPECT_ERROR(m->training_loss(bad), "is outside [1, 5]");
  bad = b;
  bad["masks"] = Tensor::zeros({2, b.at("labels").size(1), 64, 64}, DType::u8);
  AIM_EXPECT_ERROR(m->training_loss(bad), "masks must be [2, ");
  AIM_EXPECT_ERROR(e.source(cfg, "coco:/x", 1), "expected synthetic");
  const ModelConfig cfg101 = e.parse_config({"size=tiny", "backbone=resnet101"});
  EXPECT_EQ(dynamic_cast<MaskRcnn&>(*e.build(cfg101, 1)).config().blocks[2], 2);
  EXPECT_GT(m->forward_flops(b), 0.0);
}

// The parity configuration: tiny widths, 5 classes, images 96 x 120 resized to 128 x 160
// (min_size 128, max_size 200: scale 4 / 3), padded to 128 x 160.
MaskRcnnConfig parity_config() {
  MaskRcnnConfig c = MaskRcnnConfig::tiny(5);
  c.max_size = 200;
  // torchvision's RPN and RoI-head settings (tiny trims them; the peer keeps the defaults).
  c.rpn_train = detection::RpnConfig::training();
  c.rpn_test = {};
  c.roi = {};
  c.seed = 3;
  return c;
}

// Spread-out RPN and classifier outputs (a trained model's), so that no two candidates are near a
// tie in top-k, NMS or the score threshold.
void sharpen(MaskRcnn& m) {
  for (auto& [n, p] : m.named_parameters()) {
    double f = 1;
    if (n == "rpn.head.cls_logits.weight") f = 40;
    if (n == "rpn.head.bbox_pred.weight") f = 5;
    if (n == "roi_heads.box_predictor.cls_score.weight") f = 20;
    if (f == 1) continue;
    std::vector<float> w = p.data().to_vector<float>();
    for (float& v : w) v *= float(f);
    p.data().copy_(Tensor::from_vector(w, p.sizes()));
  }
}

Tensor parity_cfg(const MaskRcnnConfig& c) {
  return Tensor::from_vector(
      std::vector<int64_t>{c.num_classes, c.base, c.blocks[0], c.blocks[1], c.blocks[2],
                           c.blocks[3], c.fpn_channels, c.representation, c.mask_channels,
                           c.min_size, c.max_size, c.trainable_layers},
      {12});
}

Tensor random_images(int64_t B, int64_t H, int64_t W, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<float> img(size_t(B * 3 * H * W));
  for (float& v : img) v = u(rng);
  return Tensor::from_vector(img, {B, 3, H, W});
}

SafetensorsFile run_peer(const std::string& dir, bool read_out = true) {
  const std::string cmd = std::string(testing::kPython) + " " + testing::source_root() +
                          "/tests/peers/mask_rcnn.py " + dir + "/in.safetensors " + dir +
                          "/w.safetensors " + dir + "/out.safetensors";
  EXPECT_EQ(testing::run_command(cmd), 0) << cmd;
  return read_out ? load_safetensors(dir + "/out.safetensors") : SafetensorsFile{};
}

double max_abs(const std::vector<float>& a, const Tensor& b) {
  const std::vector<float> y = b.to_vector<float>();
  EXPECT_EQ(a.size(), y.size());
  double d = 0;
  for (size_t i = 0; i < std::min(a.size(), y.size()); ++i)
    d = std::max(d, double(std::fabs(a[i] - y[i])));
  return d;
}

TEST(MaskRcnnModel, ParityEvalTorchvision) {
  AIM_REQUIRE_PYTHON_MODULE("torchvision");
  // F(2x2) Winograd at most: with F(4x4)'s rounding two of the 200 detections with near-equal
  // scores trade places, so the box and mask comparisons in rank order fail (kernels/math_mode.h).
  const kernels::ScopedWinogradTile f2(2);
  const std::string dir = testing::make_temp_dir("aim_maskrcnn_parity");
  const MaskRcnnConfig c = parity_config();
  MaskRcnn m(c);
  // Weights exported from torchvision: its own initialisation of the same tree, loaded strictly
  // (every key, shape and buffer of torchvision's state dict, nothing more).
  save_safetensors(dir + "/in.safetensors",
                   {{"cfg", parity_cfg(c)}, {"export", Tensor::ones({1}, DType::i64)}});
  run_peer(dir, false);
  {
    const SafetensorsFile tv = load_safetensors(dir + "/w.safetensors");
    EXPECT_EQ(tv.tensors.size(), m.state_dict().size());
    m.load_state_dict(tv.tensors, /*strict=*/true);
  }
  sharpen(m);
  m.eval();
  const int64_t B = 2, H = 96, W = 120;
  const Tensor images = random_images(B, H, W, 11);
  MaskRcnnEval e;
  {
    autograd::NoGradGuard ng;
    e = m.evaluate(Variable(images));
  }
  EXPECT_EQ(e.input.height, 128);
  EXPECT_EQ(e.input.width, 160);
  save_safetensors(dir + "/w.safetensors", m.state_dict());
  save_safetensors(dir + "/in.safetensors", {{"cfg", parity_cfg(c)}, {"images", images}});
  const SafetensorsFile o = run_peer(dir);

  double d_prop = 0, d_box = 0, d_score = 0, d_mask = 0;
  int64_t n_props = 0, n_dets = 0, mask_px_diff = 0, mask_px = 0;
  for (int64_t b = 0; b < B; ++b) {
    const std::string s = std::to_string(b);
    const detection::Proposals& p = e.proposals[size_t(b)];
    ASSERT_EQ(int64_t(p.boxes.size()), o.at("props_" + s).numel()) << "image " << b;
    d_prop = std::max(d_prop, max_abs(p.boxes, o.at("props_" + s)));
    n_props += int64_t(p.scores.size());
    const detection::Detections& d = e.final[size_t(b)];
    ASSERT_EQ(int64_t(d.scores.size()), o.at("scores_" + s).numel()) << "image " << b;
    EXPECT_EQ(d.labels, o.at("labels_" + s).to_vector<int64_t>());
    const std::vector<float> tb = o.at("boxes_" + s).to_vector<float>();
    for (size_t i = 0; i < tb.size(); ++i)
      d_box = std::max(
          d_box, std::fabs(double(d.boxes[i]) - tb[i]) / std::max(1.0, double(std::fabs(tb[i]))));
    d_score = std::max(d_score, max_abs(d.scores, o.at("scores_" + s)));
    n_dets += int64_t(d.scores.size());
    // Masks pasted into the 96 x 120 image: probabilities, and the > 0.5 pixels.
    const int64_t D = int64_t(d.scores.size());
    if (D == 0) continue;
    const Tensor pasted = detection::paste_masks_in_image(
        e.mask_probs[size_t(b)], Tensor::from_vector(d.boxes, {D, 4}), H, W);
    const std::vector<float> mine = pasted.to_vector<float>(),
                             theirs = o.at("masks_" + s).to_vector<float>();
    ASSERT_EQ(mine.size(), theirs.size());
    for (size_t i = 0; i < mine.size(); ++i) {
      d_mask = std::max(d_mask, double(std::fabs(mine[i] - theirs[i])));
      mask_px += theirs[i] > 0.5f;
      mask_px_diff += (mine[i] > 0.5f) != (theirs[i] > 0.5f);
    }
  }
  const double d_cls = rel_diff(e.class_logits, o.at("class_logits"));
  const double d_reg = rel_diff(e.box_regression, o.at("box_regression"));
  const double d_mlog = rel_diff(e.mask_logits, o.at("mask_logits"));
  std::printf(
      "[mask_rcnn parity eval] %lld proposals (max diff %.3g px); class_logits %.3g "
      "box_regression %.3g; %lld detections: boxes %.3g rel, scores %.3g; mask_logits %.3g; "
      "pasted masks max diff %.3g, %lld of %lld pixels > 0.5 differ\n",
      (long long)n_props, d_prop, d_cls, d_reg, (long long)n_dets, d_box, d_score, d_mlog, d_mask,
      (long long)mask_px_diff, (long long)mask_px);
  EXPECT_GT(n_props, 200);
  EXPECT_GT(n_dets, 10);
  EXPECT_LT(d_prop, 1e-3);
  EXPECT_LT(d_cls, 1e-5);
  EXPECT_LT(d_reg, 1e-5);
  EXPECT_LT(d_box, 1e-3);
  EXPECT_LT(d_score, 1e-5);
  EXPECT_LT(d_mlog, 1e-5);
  EXPECT_LT(d_mask, 1e-4);
  EXPECT_EQ(mask_px_diff, 0);
  std::filesystem::remove_all(dir);
}

// Two objects per image: a rectangle and an ellipse (their masks), in 96 x 120 pixels.
void draw_objects(int64_t b, std::vector<float>& boxes, std::vector<int64_t>& labels,
                  std::vector<uint8_t>& masks, int64_t H, int64_t W) {
  const float r[4] = {float(8 + 10 * b), 10, float(50 + 10 * b), 60};  // rectangle
  const float el[4] = {60, float(30 + 8 * b), 110, 86};                // ellipse's box
  boxes.insert(boxes.end(), r, r + 4);
  boxes.insert(boxes.end(), el, el + 4);
  labels.insert(labels.end(), {1 + b, 3});
  std::vector<uint8_t> m(size_t(2 * H * W), 0);
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x) {
      m[size_t(y * W + x)] = x >= r[0] && x < r[2] && y >= r[1] && y < r[3];
      const double cx = (el[0] + el[2]) / 2, cy = (el[1] + el[3]) / 2, ax = (el[2] - el[0]) / 2,
                   ay = (el[3] - el[1]) / 2;
      const double q = std::pow((x + 0.5 - cx) / ax, 2) + std::pow((y + 0.5 - cy) / ay, 2);
      m[size_t(H * W + y * W + x)] = q <= 1.0;
    }
  masks.insert(masks.end(), m.begin(), m.end());
}

TEST(MaskRcnnModel, ParityTrainTorchvision) {
  AIM_REQUIRE_PYTHON_MODULE("torchvision");
  const std::string dir = testing::make_temp_dir("aim_maskrcnn_train_parity");
  const MaskRcnnConfig c = parity_config();
  MaskRcnn m(c);
  sharpen(m);
  m.train();
  const int64_t B = 2, H = 96, W = 120, G = 2;
  const Tensor images = random_images(B, H, W, 17);
  std::vector<float> boxes;
  std::vector<int64_t> labels;
  std::vector<uint8_t> masks;
  for (int64_t b = 0; b < B; ++b) draw_objects(b, boxes, labels, masks, H, W);
  MaskRcnnTargets t{Tensor::from_vector(boxes, {B, G, 4}), Tensor::from_vector(labels, {B, G}),
                    Tensor::from_vector(std::vector<int64_t>{G, G}, {B}),
                    Tensor::from_vector(masks, {B, G, H, W})};
  const MaskRcnnLosses l = m.losses(Variable(images), t);
  l.total.backward();
  save_safetensors(dir + "/w.safetensors", m.state_dict());
  std::vector<std::pair<std::string, Tensor>> in = {
      {"cfg", parity_cfg(c)}, {"images", images}, {"train", Tensor::ones({1}, DType::i64)}};
  auto idx = [](const std::vector<int64_t>& v) {
    return Tensor::from_vector(v, {int64_t(v.size())});
  };
  for (int64_t b = 0; b < B; ++b) {
    const std::string s = std::to_string(b);
    in.push_back(
        {"gt_" + s, Tensor::from_vector(std::vector<float>(boxes.begin() + b * G * 4,
                                                           boxes.begin() + (b + 1) * G * 4),
                                        {G, 4})});
    in.push_back(
        {"gtl_" + s,
         Tensor::from_vector(
             std::vector<int64_t>(labels.begin() + b * G, labels.begin() + (b + 1) * G), {G})});
    in.push_back(
        {"gtm_" + s, Tensor::from_vector(std::vector<uint8_t>(masks.begin() + b * G * H * W,
                                                              masks.begin() + (b + 1) * G * H * W),
                                         {G, H, W})});
    in.push_back({"rpn_pos_" + s, idx(l.rpn_sampled[size_t(b)].pos)});
    in.push_back({"rpn_neg_" + s, idx(l.rpn_sampled[size_t(b)].neg)});
    in.push_back({"roi_pos_" + s, idx(l.roi_sampled[size_t(b)].pos)});
    in.push_back({"roi_neg_" + s, idx(l.roi_sampled[size_t(b)].neg)});
    EXPECT_GT(l.roi_sampled[size_t(b)].pos.size(), 0u);
  }
  save_safetensors(dir + "/in.safetensors", in);
  const SafetensorsFile o = run_peer(dir);
  auto rel = [&](const Variable& v, const char* k) {
    const double a = v.data().to_vector<double>()[0], b = o.at(k).to_vector<double>()[0];
    return std::fabs(a - b) / std::max(std::fabs(b), 1e-12);
  };
  const double l_cls = rel(l.classifier, "loss_classifier"), l_box = rel(l.box_reg, "loss_box_reg"),
               l_mask = rel(l.mask, "loss_mask"), l_obj = rel(l.objectness, "loss_objectness"),
               l_rpn = rel(l.rpn_box_reg, "loss_rpn_box_reg");
  double d_grad = 0;
  std::string worst;
  int n_grads = 0;
  for (const auto& [n, p] : m.named_parameters()) {
    if (!p.requires_grad()) {
      EXPECT_FALSE(o.has("grad." + n)) << n;
      continue;
    }
    ASSERT_TRUE(o.has("grad." + n)) << n;
    ++n_grads;
    const double d = rel_diff(p.grad(), o.at("grad." + n));
    if (std::getenv("AIM_VERBOSE"))
      std::printf("[mask_rcnn parity train] grad %s %.3g\n", n.c_str(), d);
    if (d >= d_grad) d_grad = d, worst = n;
  }
  std::printf(
      "[mask_rcnn parity train] losses rel: classifier %.3g box_reg %.3g mask %.3g objectness "
      "%.3g rpn_box_reg %.3g; %d gradients, max rel %.3g (%s)\n",
      l_cls, l_box, l_mask, l_obj, l_rpn, n_grads, d_grad, worst.c_str());
  EXPECT_LT(l_cls, 1e-5);
  EXPECT_LT(l_box, 1e-5);
  EXPECT_LT(l_mask, 1e-5);
  EXPECT_LT(l_obj, 1e-5);
  EXPECT_LT(l_rpn, 1e-5);
  // 1e-3, not the 1e-4 of the other models: the mask head's weight gradients are sums with heavy
  // cancellation; torchvision's own f32 gradients differ from its f64 ones by 2e-4 on
  // mask_head.1 (measured on this case), as aim's do from its f32 ones (2.7e-4).
  EXPECT_LT(d_grad, 1e-3) << worst;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace aim::models

namespace aim::models {
namespace {

// aim-train mask_rcnn --config size=tiny (5 classes, 128 x 128 synthetic instances, up to 3
// objects of 0.2 .. 0.6 of the side): Adam 1e-3 for 150 steps of 2 images lifts the held-out mask
// AP (32 images) from 0.000 to 0.103 and the box AP from 0.000 to 0.122 (measured). Bar: +0.05.
// AIM_MR_STEPS / _BATCH / _LR / _BAR override the settings for longer runs (docs/detection.md).
int env_int(const char* k, int d) { return std::getenv(k) ? std::atoi(std::getenv(k)) : d; }
double env_double(const char* k, double d) {
  return std::getenv(k) ? std::atof(std::getenv(k)) : d;
}

TEST(MaskRcnnModel, TinyLearnsSyntheticInstances) {
  const int steps = env_int("AIM_MR_STEPS", 150), batch = env_int("AIM_MR_BATCH", 2);
  const double lr = env_double("AIM_MR_LR", 1e-3), bar = env_double("AIM_MR_BAR", 0.05);
  const auto t0 = std::chrono::steady_clock::now();
  const ModelEntry& e = find_model("mask_rcnn");
  const ModelConfig cfg = e.parse_config({"size=tiny"});
  auto m = e.build(cfg, 1);
  auto src = e.source(cfg, "synthetic", 1);
  const Metrics before = e.evaluate(*m, *src, 32, kCPU);
  const auto t1 = std::chrono::steady_clock::now();
  train::Adam opt(m->named_parameters(), lr);
  for (int step = 0; step < steps; ++step) {
    const TensorMap b = src->next(batch);
    opt.zero_grad();
    const Variable loss = m->training_loss(batch_to_device(*m, b, kCPU));
    loss.backward();
    opt.step();
    if (std::getenv("AIM_VERBOSE") && step % 50 == 0)
      std::printf("step %d loss %.4f\n", step, loss.data().to_vector<double>()[0]);
  }
  const auto t2 = std::chrono::steady_clock::now();
  const Metrics after = e.evaluate(*m, *src, 32, kCPU);
  const auto t3 = std::chrono::steady_clock::now();
  auto s = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  std::printf(
      "[mask_rcnn tiny] held-out mask AP %.4f -> %.4f, box AP %.4f -> %.4f after %d steps of %d "
      "(eval %.1f s, train %.1f s, eval %.1f s)\n",
      before.at("mask_ap"), after.at("mask_ap"), before.at("bbox_ap"), after.at("bbox_ap"), steps,
      batch, s(t0, t1), s(t1, t2), s(t2, t3));
  EXPECT_GT(after.at("mask_ap"), before.at("mask_ap") + bar);
}

}  // namespace
}  // namespace aim::models
