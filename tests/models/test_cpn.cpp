// CPN (models/cpn.h) against tests/peers/cpn.py, tf-cpn's network, losses and mptest.py's flip
// test and decoding written in torch / numpy on aim's weights: a tiny configuration on two
// synthetic figures; the four global outputs and the refine output (training mode), both losses
// with OHKM and the gradient of every parameter against the peer in f64; the flip-averaged eval
// heatmaps and the decoded keypoints. Plus the module tree, FLOPs, the heatmap targets, errors, and
// (training tests) that the tiny model's OKS AP rises on the synthetic figures.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "data/keypoint_heatmap.h"
#include "data/keypoint_synthetic.h"
#include "models/cpn.h"
#include "models/registry.h"
#include "tensor/safetensors.h"
#include "tests/support/common.h"
#include "train/optim.h"

namespace aim::models {
namespace {

using aim::testing::rel_diff;

TensorMap figures(int64_t B, uint64_t seed) {
  data::KeypointSyntheticConfig d;
  const CpnConfig t = CpnConfig::tiny();
  d.height = t.height, d.width = t.width, d.out_h = t.out_h, d.out_w = t.out_w;
  d.seed = seed;
  return data::KeypointSyntheticSource(d).next(B);
}

TEST(CpnModel, ModuleTreeFlopsAndErrors) {
  Cpn m;
  std::map<std::string, Shape> shapes;
  for (const auto& [n, t] : m.state_dict()) shapes[n] = t.sizes();
  EXPECT_EQ(shapes.at("conv1.weight"), Shape({64, 3, 7, 7}));
  EXPECT_EQ(shapes.at("layer3.22.conv3.weight"), Shape({1024, 256, 1, 1}));
  EXPECT_EQ(shapes.at("layer4.0.downsample.0.weight"), Shape({2048, 1024, 1, 1}));
  EXPECT_EQ(shapes.at("global_net.lateral5.conv.weight"), Shape({256, 2048, 1, 1}));
  EXPECT_EQ(shapes.at("global_net.lateral2.bn.weight"), Shape({256}));
  EXPECT_EQ(shapes.at("global_net.merge2.bias"), Shape({256}));
  EXPECT_EQ(shapes.count("global_net.merge5.weight"), 0u);
  EXPECT_EQ(shapes.at("global_net.pyramid3.conv.weight"), Shape({17, 256, 3, 3}));
  EXPECT_EQ(shapes.at("refine_net.res5.2.conv2.weight"), Shape({128, 128, 3, 3}));
  EXPECT_EQ(shapes.count("refine_net.res5.3.conv1.weight"), 0u);
  EXPECT_EQ(shapes.count("refine_net.res3.0.downsample.0.weight"), 0u);
  EXPECT_EQ(shapes.at("refine_net.final_bottleneck.downsample.0.weight"), Shape({256, 1024, 1, 1}));
  EXPECT_EQ(shapes.at("refine_net.refine_out.conv.weight"), Shape({17, 256, 3, 3}));
  m.train();
  const double flops = m.forward_flops(1);
  m.eval();
  const double flip = m.forward_flops(1);
  std::printf("[cpn] parameters %lld, forward FLOPs per 384 x 288 crop %.4g (flip test %.4g)\n",
              static_cast<long long>(m.num_parameters()), flops, flip);
  // ResNet-101's 7.8 G multiply-adds at 224 x 224 scale to 17.2 G at 384 x 288; the heads add
  // about 7.2 G (the final bottleneck on 1024 channels at 96 x 72 alone 4.0 G).
  EXPECT_GT(flops, 2 * 23.5e9);
  EXPECT_LT(flops, 2 * 26e9);
  EXPECT_GT(flip, 1.95 * flops);  // two passes (eval-mode BN counts fewer operations)
  EXPECT_LT(flip, 2.01 * flops);

  Cpn t(CpnConfig::tiny());
  try {
    t.infer({{"images", Tensor::zeros({1, 3, 96, 96})}});
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("images has shape [1, 3, 96, 96]"), std::string::npos)
        << e.what();
  }
}

TEST(CpnModel, HeatmapTargetsAndDecoding) {
  // A keypoint at (37.5, 50.2) of a 96 x 72 crop -> cell (int(50.2 / 4), int(37.5 / 4)) = (12, 9)
  // of the 24 x 18 map, peak 255, symmetric around it.
  std::vector<float> m(24 * 18);
  data::cpn_keypoint_heatmap(37.5, 50.2, 2, 96, 72, 24, 18, 9, m.data());
  EXPECT_FLOAT_EQ(m[12 * 18 + 9], 255.0f);
  EXPECT_EQ(std::max_element(m.begin(), m.end()) - m.begin(), 12 * 18 + 9);
  EXPECT_NEAR(m[12 * 18 + 8], m[12 * 18 + 10], 1e-4);
  EXPECT_NEAR(m[11 * 18 + 9], m[13 * 18 + 9], 1e-4);
  // sigma(9) = 0.3 * (4 - 1) + 0.8 = 1.7: one cell off the peak is exp(-1 / (2 1.7^2)) of it.
  EXPECT_NEAR(m[12 * 18 + 10] / 255.0, std::exp(-1.0 / (2 * 1.7 * 1.7)), 1e-5);
  // Unlabelled: zero.
  data::cpn_keypoint_heatmap(37.5, 50.2, 0, 96, 72, 24, 18, 9, m.data());
  EXPECT_EQ(*std::max_element(m.begin(), m.end()), 0.0f);
  // Decoding the target of a keypoint gives its cell centre (x * 4 + 2) within the quarter step,
  // score 255 / 255 + 0.5.
  data::cpn_keypoint_heatmap(37.5, 50.2, 2, 96, 72, 24, 18, 9, m.data());
  const std::vector<float> k = data::cpn_decode_keypoints(m.data(), 1, 24, 18, 96, 72);
  EXPECT_NEAR(k[0], 9 * 4 + 2, 0.25 * 4 + 1e-5);
  EXPECT_NEAR(k[1], 12 * 4 + 2, 0.25 * 4 + 1e-5);
  EXPECT_FLOAT_EQ(k[2], 1.5f);
}

TEST(CpnModel, ParityTorchPeer) {
  AIM_REQUIRE_PYTHON_MODULE("torch");
  const std::string dir = testing::make_temp_dir("aim_cpn_parity");
  Cpn m(CpnConfig::tiny());
  const TensorMap b = figures(2, 3);
  std::vector<std::pair<std::string, Tensor>> exported;
  for (const auto& [n, p] : m.state_dict()) exported.emplace_back(n, p);
  exported.emplace_back("images", b.at("images"));
  exported.emplace_back("heatmaps", b.at("heatmaps"));
  exported.emplace_back("valid", b.at("valid"));
  save_safetensors(dir + "/in.safetensors", exported);
  const std::string cmd = std::string(testing::kPython) + " " + testing::source_root() +
                          "/tests/peers/cpn.py --in " + dir + "/in.safetensors --out " + dir +
                          "/out.safetensors --blocks 1,1,1,1 --f64";
  ASSERT_EQ(testing::run_command(cmd), 0) << cmd;
  const SafetensorsFile o = load_safetensors(dir + "/out.safetensors");

  // Eval mode first (the running statistics as exported): flip test and decoding.
  TensorMap post;
  {
    autograd::NoGradGuard ng;
    m.eval();
    const TensorMap out = m.infer({{"images", b.at("images")}});
    EXPECT_LT(rel_diff(out.at("heatmaps"), o.at("eval_heatmaps")), 1e-4);
    post = m.postprocess_outputs(out);
    m.train();
  }
  const std::vector<float> kp = post.at("keypoints").to_vector<float>();
  const std::vector<double> pk = o.at("keypoints").to_vector<double>();
  ASSERT_EQ(kp.size(), pk.size());
  int64_t same = 0;
  for (size_t i = 0; i < kp.size(); i += 3)
    same += std::fabs(kp[i] - pk[i]) < 1e-4 && std::fabs(kp[i + 1] - pk[i + 1]) < 1e-4 &&
            std::fabs(kp[i + 2] - pk[i + 2]) < 1e-4;
  EXPECT_EQ(same, int64_t(kp.size() / 3)) << "flip-test keypoints equal to the peer's";

  const CpnOutputs out = m.forward_all(Variable(b.at("images")));
  const CpnLoss l = m.compute_loss(out, b.at("heatmaps"), b.at("valid"));
  l.total.backward();
  double worst_out = 0;
  for (int lv = 0; lv < 4; ++lv)
    worst_out = std::max(worst_out, rel_diff(out.global[size_t(lv)].data(),
                                             o.at("global" + std::to_string(lv + 2))));
  const double d_ref = rel_diff(out.refine.data(), o.at("refine"));
  const double d_g = rel_diff(l.global.data(), o.at("loss_global")),
               d_r = rel_diff(l.refine.data(), o.at("loss_refine"));
  // Relative to each tensor's largest peer gradient, or to the largest of all where a tensor's
  // true gradient is zero (the merge biases: a per-channel shift that only BNs read).
  double scale = 0;
  for (const auto& [n, p] : m.named_parameters())
    for (double v : o.at("grad." + n).to_vector<double>()) scale = std::max(scale, std::fabs(v));
  double worst = 0;
  std::string worst_name;
  int64_t compared = 0;
  for (const auto& [n, p] : m.named_parameters()) {
    ASSERT_TRUE(o.has("grad." + n)) << n;
    ASSERT_TRUE(p.grad().defined()) << n;
    const std::vector<double> a = p.grad().to_vector<double>(),
                              g = o.at("grad." + n).to_vector<double>();
    double diff = 0, mx = 0;
    for (size_t i = 0; i < g.size(); ++i)
      diff = std::max(diff, std::fabs(a[i] - g[i])), mx = std::max(mx, std::fabs(g[i]));
    const double d = diff / std::max(mx, 1e-4 * scale);
    ++compared;
    if (d > worst) worst = d, worst_name = n;
  }
  std::printf(
      "[cpn parity] global outputs %.3g, refine %.3g; loss global %.3g refine (OHKM) %.3g (values "
      "%.6g %.6g); grads of %lld tensors: worst %.3g (%s); %lld / %lld flip-test keypoints equal\n",
      worst_out, d_ref, d_g, d_r, l.global.data().item(), l.refine.data().item(),
      static_cast<long long>(compared), worst, worst_name.c_str(), static_cast<long long>(same),
      static_cast<long long>(kp.size() / 3));
  EXPECT_EQ(compared, int64_t(m.named_parameters().size()));
  EXPECT_LT(worst_out, 1e-4);
  EXPECT_LT(d_ref, 1e-4);
  EXPECT_LT(d_g, 1e-5);
  EXPECT_LT(d_r, 1e-5);
  EXPECT_LT(worst, 1e-3) << worst_name;
}

// The synthetic figures at 96 x 72 (docs/cpn.md): OKS AP from 0 to about 0.3 in 120 Adam steps of
// 16 at lr 2e-3.
TEST(CpnModel, TinyLearnsSyntheticFigures) {
  const auto t0 = std::chrono::steady_clock::now();
  const ModelEntry& e = find_model("cpn");
  const ModelConfig cfg = e.parse_config({"size=tiny"});
  auto m = e.build(cfg, 1);
  auto src = e.source(cfg, "synthetic", 1);
  const Metrics before = e.evaluate(*m, *src, 64, kCPU);
  train::Adam opt(m->named_parameters(), 2e-3);
  for (int step = 0; step < 120; ++step) {
    const TensorMap b = src->next(16);
    opt.zero_grad();
    m->training_loss(batch_to_device(*m, b, kCPU)).backward();
    opt.step();
  }
  const Metrics after = e.evaluate(*m, *src, 64, kCPU);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "[cpn tiny] held-out OKS AP %.4f -> %.4f (AP50 %.4f, AR %.4f) after 120 steps (%.1f s)\n",
      before.at("oks_ap"), after.at("oks_ap"), after.at("oks_ap50"), after.at("oks_ar"), secs);
  EXPECT_GT(after.at("oks_ap"), before.at("oks_ap") + 0.1);
}

}  // namespace
}  // namespace aim::models
