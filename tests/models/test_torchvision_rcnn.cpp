// torchvision 0.14's detector parts (models/detection/torchvision_rcnn.h) against torchvision
// itself (tests/peers/mask_rcnn_parts.py): FPN anchors, RPN proposals, anchor and RoI targets,
// the three losses and their gradients (on aim's sampled indices), box post-processing and
// MultiScaleRoIAlign at 7 and 14; plus hand-worked anchors, level mapping, matcher and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "autograd/functions/elementwise.h"
#include "data/coco_mask.h"
#include "models/detection/masks.h"
#include "models/detection/torchvision_rcnn.h"
#include "tensor/safetensors.h"
#include "tests/support/common.h"

namespace aim::models::detection {
namespace {

using autograd::Variable;

// Largest |got - want| / max(1, |want|); fails above tol.
void expect_near(const std::vector<float>& got, const std::vector<float>& want, double tol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d =
        std::fabs(double(got[i]) - double(want[i])) / std::max(1.0, std::fabs(double(want[i])));
    worst = std::max(worst, d);
    if (!(d <= tol) && bad++ < 5)
      ADD_FAILURE() << what << " at " << i << ": " << got[i] << " vs torchvision " << want[i];
  }
  std::printf("[torchvision rcnn] %s: %zu values, max relative difference %.3g\n", what.c_str(),
              got.size(), worst);
}

std::vector<float> vec(const Tensor& t) { return t.to(DType::f32).to_vector<float>(); }
std::vector<int64_t> ivec(const Tensor& t) { return t.to(DType::i64).to_vector<int64_t>(); }

TEST(TorchvisionRcnn, MatchTorchvision) {
  AIM_REQUIRE_PYTHON_MODULE("torchvision");
  // torchvision's test-time pre-NMS 1000 per level: the RPN's NMS takes batched_nms' per-group
  // path (> 4000 coordinates), the post-processing's 300 x 3 candidates the coordinate trick.
  const int64_t B = 2, pad_h = 96, pad_w = 128, C = 4, M = 14, pre = 1000, post = 300;
  const std::vector<std::pair<int64_t, int64_t>> grids = {
      {24, 32}, {12, 16}, {6, 8}, {3, 4}, {2, 2}};
  const std::vector<std::pair<int64_t, int64_t>> sizes = {{90, 120}, {80, 128}};
  std::mt19937_64 rng(22);
  std::normal_distribution<float> Nd(0, 1);
  std::uniform_real_distribution<float> U(0, 1);
  TensorMap in;
  std::vector<int64_t> counts;
  const FpnAnchors gen;
  const std::vector<float> anchors = gen.anchors(grids, pad_h, pad_w, &counts);
  const int64_t N = int64_t(anchors.size() / 4);
  std::vector<float> logits(size_t(B * N)), deltas(size_t(B * N * 4));
  for (float& v : logits) v = 2 * Nd(rng);
  for (float& v : deltas) v = 0.4f * Nd(rng);
  RpnConfig rc;
  rc.pre_nms_top_n = pre, rc.post_nms_top_n = post;
  RoiHeadsConfig hc;
  data::PhiloxDraw draw(data::philox_key(7, 22), 0);
  std::vector<Proposals> props;
  std::vector<RpnTargets> rpn_t;
  std::vector<SampledSets> rpn_s;
  std::vector<RoiSamples> roi_s;
  std::vector<std::vector<float>> gt(B);
  std::vector<std::vector<int64_t>> gtl(B);
  std::vector<Tensor> gtm(B);
  for (int64_t b = 0; b < B; ++b) {
    const auto [h, w] = sizes[size_t(b)];
    const int64_t G = 3 + b;
    std::vector<float> masks;
    for (int64_t g = 0; g < G; ++g) {
      const float x1 = U(rng) * w * 0.6f, y1 = U(rng) * h * 0.6f;
      const float x2 = x1 + 8 + U(rng) * (w - x1 - 8), y2 = y1 + 8 + U(rng) * (h - y1 - 8);
      gt[size_t(b)].insert(gt[size_t(b)].end(), {x1, y1, x2, y2});
      gtl[size_t(b)].push_back(1 + int64_t(rng() % uint64_t(C - 1)));
      const data::CocoRle rle = data::coco_rle_from_polygon(
          {x1, (y1 + y2) / 2, (x1 + x2) / 2, y1, x2, (y1 + y2) / 2, (x1 + x2) / 2, y2}, h, w);
      for (uint8_t v : data::coco_rle_decode(rle)) masks.push_back(float(v));
    }
    gtm[size_t(b)] = Tensor::from_vector(masks, {G, h, w});
    props.push_back(
        rpn_proposals(logits.data() + b * N, deltas.data() + b * N * 4, anchors, counts, h, w, rc));
    rpn_t.push_back(rpn_targets(anchors, gt[size_t(b)].data(), G, rc));
    rpn_s.push_back(
        balanced_sample(rpn_t.back().labels, rc.batch_per_image, rc.positive_fraction, draw));
    roi_s.push_back(roi_training_samples(props.back().boxes, gt[size_t(b)].data(),
                                         gtl[size_t(b)].data(), G, hc, draw));
    const std::string s = std::to_string(b);
    const int64_t P = int64_t(props.back().scores.size());
    in["gt_" + s] = Tensor::from_vector(gt[size_t(b)], {G, 4});
    in["gtl_" + s] = Tensor::from_vector(gtl[size_t(b)], {G});
    in["gtm_" + s] = gtm[size_t(b)];
    in["rpn_pos_" + s] = Tensor::from_vector(rpn_s.back().pos, {int64_t(rpn_s.back().pos.size())});
    in["rpn_neg_" + s] = Tensor::from_vector(rpn_s.back().neg, {int64_t(rpn_s.back().neg.size())});
    in["props_" + s] = Tensor::from_vector(props.back().boxes, {P, 4});
    std::vector<int64_t> rp, rn;
    for (int64_t i : roi_s.back().sampled)
      (roi_s.back().all_labels[size_t(i)] > 0 ? rp : rn).push_back(i);
    in["roi_pos_" + s] = Tensor::from_vector(rp, {int64_t(rp.size())});
    in["roi_neg_" + s] = Tensor::from_vector(rn, {int64_t(rn.size())});
    std::vector<float> cls(size_t(P * C)), reg(size_t(P * C * 4));
    for (float& v : cls) v = 2 * Nd(rng);
    for (float& v : reg) v = 0.5f * Nd(rng);
    in["cls_" + s] = Tensor::from_vector(cls, {P, C});
    in["reg_" + s] = Tensor::from_vector(reg, {P, C * 4});
  }
  std::vector<int64_t> grid_v, size_v;
  for (auto [h, w] : grids) grid_v.insert(grid_v.end(), {h, w});
  for (auto [h, w] : sizes) size_v.insert(size_v.end(), {h, w});
  in["cfg"] = Tensor::from_vector(std::vector<int64_t>{B, pad_h, pad_w, C, M, pre, post, 0}, {8});
  in["grids"] = Tensor::from_vector(grid_v, {5, 2});
  in["sizes"] = Tensor::from_vector(size_v, {B, 2});
  in["logits"] = Tensor::from_vector(logits, {B, N});
  in["deltas"] = Tensor::from_vector(deltas, {B, N, 4});
  // Head outputs on the sampled rows, mask logits on the positives, FPN features.
  std::vector<int64_t> labels, pos_labels;
  std::vector<float> targets;
  std::vector<Tensor> mask_t;
  for (int64_t b = 0; b < B; ++b) {
    const RoiSamples& r = roi_s[size_t(b)];
    labels.insert(labels.end(), r.labels.begin(), r.labels.end());
    targets.insert(targets.end(), r.targets.begin(), r.targets.end());
    std::vector<float> pb;
    std::vector<int64_t> pm;
    for (size_t k = 0; k < r.labels.size(); ++k)
      if (r.labels[k] > 0) {
        pos_labels.push_back(r.labels[k]);
        pb.insert(pb.end(), r.boxes.begin() + 4 * int64_t(k), r.boxes.begin() + 4 * int64_t(k) + 4);
        pm.push_back(r.matched[k]);
      }
    const int64_t G = gtm[size_t(b)].size(0);
    mask_t.push_back(project_masks_on_boxes(gtm[size_t(b)], mask_target_rois(pb, pm, G), M));
  }
  const int64_t S = int64_t(labels.size()), F = int64_t(pos_labels.size());
  ASSERT_GT(F, 4) << "too few positive RoIs for the mask loss";
  auto randn = [&](const Shape& s, float scale) {
    std::vector<float> v(size_t(shape_numel(s)));
    for (float& x : v) x = scale * Nd(rng);
    return Tensor::from_vector(v, s);
  };
  in["tcls"] = randn({S, C}, 2), in["treg"] = randn({S, C * 4}, 0.5);
  in["mlog"] = randn({F, C, M, M}, 2);
  std::vector<Variable> feats;
  for (int64_t l = 0; l < 4; ++l) {
    in["feat_" + std::to_string(l)] =
        randn({B, 3, grids[size_t(l)].first, grids[size_t(l)].second}, 1);
    feats.emplace_back(in["feat_" + std::to_string(l)]);
  }

  const std::string dir = ::aim::testing::make_temp_dir("aim_tv_rcnn");
  save_safetensors(dir + "/in.safetensors",
                   std::vector<std::pair<std::string, Tensor>>(in.begin(), in.end()));
  const std::string cmd = std::string(::aim::testing::kPython) + " " +
                          ::aim::testing::source_root() + "/tests/peers/mask_rcnn_parts.py " + dir +
                          "/in.safetensors " + dir + "/out.safetensors";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const SafetensorsFile o = load_safetensors(dir + "/out.safetensors");

  // Anchors: small integers plus integer shifts, exact.
  expect_near(anchors, vec(o.at("anchors")), 0, "anchors");
  for (int64_t b = 0; b < B; ++b) {
    const std::string s = std::to_string(b);
    SCOPED_TRACE("image " + s);
    // Proposals: the same boxes in the same order (decode's exp may differ by an ulp).
    expect_near(props[size_t(b)].boxes, vec(o.at("boxes_" + s)), 1e-5, "proposals " + s);
    expect_near(props[size_t(b)].scores, vec(o.at("scores_" + s)), 1e-6, "scores " + s);
    EXPECT_GT(props[size_t(b)].scores.size(), size_t(50));
    EXPECT_EQ(rpn_t[size_t(b)].labels, ivec(o.at("rpn_labels_" + s)));
    // Targets of anchors matched to a gt box (the others encode a zero box: -inf logs both).
    const std::vector<float> ref_t = vec(o.at("rpn_targets_" + s));
    std::vector<float> got_f, ref_f;
    for (size_t i = 0; i < ref_t.size(); ++i)
      if (std::isfinite(ref_t[i]))
        got_f.push_back(rpn_t[size_t(b)].targets[i]), ref_f.push_back(ref_t[i]);
    expect_near(got_f, ref_f, 1e-5, "rpn targets " + s);
    const RoiSamples& r = roi_s[size_t(b)];
    EXPECT_EQ(r.all_labels, ivec(o.at("roi_labels_" + s)));
    expect_near(r.boxes, vec(o.at("rois_" + s)), 0, "sampled rois " + s);
    expect_near(r.targets, vec(o.at("roi_targets_" + s)), 1e-5, "roi targets " + s);
    EXPECT_EQ(r.matched, ivec(o.at("roi_matched_" + s)));
    // Post-processing on the same head outputs.
    const Detections d = roi_postprocess(in["cls_" + s].data<float>(), in["reg_" + s].data<float>(),
                                         props[size_t(b)].boxes, C, sizes[size_t(b)].first,
                                         sizes[size_t(b)].second, hc);
    EXPECT_GT(d.scores.size(), size_t(10));
    expect_near(d.boxes, vec(o.at("det_boxes_" + s)), 1e-5, "detections " + s);
    expect_near(d.scores, vec(o.at("det_scores_" + s)), 1e-5, "detection scores " + s);
    EXPECT_EQ(d.labels, ivec(o.at("det_labels_" + s)));
  }
  // RPN loss and gradients.
  const Variable lg(in["logits"], true), dl(in["deltas"], true);
  const RpnLosses rl = rpn_loss(lg, dl, rpn_t, rpn_s);
  autograd::add(rl.objectness, rl.box_reg).backward();
  expect_near(vec(rl.objectness.data()), vec(o.at("rpn_obj")), 1e-5, "rpn objectness loss");
  expect_near(vec(rl.box_reg.data()), vec(o.at("rpn_box")), 1e-5, "rpn box loss");
  expect_near(vec(lg.grad()), vec(o.at("d_logits")), 1e-6, "d rpn logits");
  expect_near(vec(dl.grad()), vec(o.at("d_deltas")), 1e-6, "d rpn deltas");
  // Box head loss and gradients.
  const Variable tc(in["tcls"], true), tr(in["treg"], true);
  const BoxLosses bl = fastrcnn_loss(tc, tr, labels, targets);
  autograd::add(bl.classifier, bl.box_reg).backward();
  expect_near(vec(bl.classifier.data()), vec(o.at("cls_loss")), 1e-5, "classifier loss");
  expect_near(vec(bl.box_reg.data()), vec(o.at("box_loss")), 1e-5, "box loss");
  expect_near(vec(tc.grad()), vec(o.at("d_tcls")), 1e-6, "d class logits");
  expect_near(vec(tr.grad()), vec(o.at("d_treg")), 1e-6, "d box regression");
  // Mask loss and gradient.
  Tensor mt = mask_t[0];
  if (B > 1) {
    std::vector<float> all = mask_t[0].to_vector<float>(), more = mask_t[1].to_vector<float>();
    all.insert(all.end(), more.begin(), more.end());
    mt = Tensor::from_vector(all, {F, M, M});
  }
  const Variable ml(in["mlog"], true);
  const Variable mloss = maskrcnn_loss(ml, pos_labels, mt);
  mloss.backward();
  expect_near(vec(mloss.data()), vec(o.at("mask_loss")), 1e-5, "mask loss");
  expect_near(vec(ml.grad()), vec(o.at("d_mlog")), 1e-6, "d mask logits");
  // MultiScaleRoIAlign of the proposals.
  std::vector<std::vector<float>> boxes;
  for (const Proposals& p : props) boxes.push_back(p.boxes);
  for (int64_t out : {7, 14}) {
    const Variable y = multiscale_roi_align(feats, boxes, 90, out, 2);
    expect_near(vec(y.data()), vec(o.at("pooled" + std::to_string(out))), 1e-5,
                "multiscale roi_align " + std::to_string(out));
  }
  std::system(("rm -rf " + dir).c_str());
}

// The base anchors of maskrcnn_resnet50_fpn's first level: size 32, ratios 0.5, 1, 2 ->
// w = 32 / sqrt(r), h = 32 sqrt(r): (45.25, 22.63), (32, 32), (22.63, 45.25), halves rounded.
TEST(TorchvisionRcnn, CellAnchorsHandWorked) {
  EXPECT_EQ(tv_cell_anchors({32}, {0.5f, 1, 2}),
            (std::vector<float>{-23, -11, 23, 11, -16, -16, 16, 16, -11, -23, 11, 23}));
  const std::vector<float> g = tv_grid_anchors({-16, -16, 16, 16}, 2, 3, 8, 4);
  // (h, w) order: the fifth cell is (y 1, x 1), shifted by (4, 8).
  EXPECT_EQ(std::vector<float>(g.begin() + 16, g.begin() + 20),
            (std::vector<float>{-12, -8, 20, 24}));
}

// LevelMapper: sqrt(area) 224 is level 4 (index 2 of 2..5); 112 level 3; 1000 clamps at 5; 10
// clamps at 2.
TEST(TorchvisionRcnn, LevelMapperHandWorked) {
  EXPECT_EQ(map_roi_levels({0, 0, 224, 224, 0, 0, 112, 112, 0, 0, 1000, 1000, 0, 0, 10, 10}, 2, 5),
            (std::vector<int64_t>{2, 1, 3, 0}));
  EXPECT_EQ(roi_level_scales({200, 100, 50, 25}, 800),
            (std::vector<double>{0.25, 0.125, 0.0625, 0.03125}));
}

// Matcher 0.7 / 0.3 with low-quality matches: a column below 0.3 that holds its row's maximum
// keeps its match.
TEST(TorchvisionRcnn, MatcherHandWorked) {
  // Rows: 2 gt; columns: 4 anchors.
  const std::vector<float> iou = {0.8f, 0.5f, 0.1f,  0.0f,  //
                                  0.1f, 0.2f, 0.25f, 0.05f};
  EXPECT_EQ((Matcher{0.7f, 0.3f, true}.match(iou, 2, 4)), (std::vector<int64_t>{0, -2, 1, -1}));
  EXPECT_EQ((Matcher{0.7f, 0.3f, false}.match(iou, 2, 4)), (std::vector<int64_t>{0, -2, -1, -1}));
}

TEST(TorchvisionRcnn, Errors) {
  const FpnAnchors gen;
  AIM_EXPECT_ERROR(gen.anchors({{4, 4}}, 64, 64), "1 feature maps for 5 anchor sizes");
  AIM_EXPECT_ERROR((Matcher{}.match({0.5f}, 1, 2)), "1 IoUs for 1 x 2");
  AIM_EXPECT_ERROR(
      maskrcnn_loss(Variable(Tensor::zeros({1, 2, 3, 3})), {2}, Tensor::zeros({1, 3, 3})),
      "label 2 of row 0 not in [0, 2)");
}

}  // namespace
}  // namespace aim::models::detection
