// models/dien: state_dict layout, forward/backward, parity with the PyTorch peer
// (tests/peers/dien.py: logits, CTR and auxiliary loss, gradients, weights after one Adam step),
// input checks and a short training run on the synthetic data (data/dien_synthetic.h).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "data/dien_synthetic.h"
#include "data/metrics.h"
#include "models/dien.h"
#include "models/registry.h"
#include "profiler/profiler.h"
#include "tensor/safetensors.h"
#include "tests/support/common.h"
#include "train/optim.h"

namespace aim::models {
namespace {

using ::aim::testing::source_root;

using V = std::vector<int64_t>;

std::map<std::string, V> shapes(const layers::StateDict& sd) {
  std::map<std::string, V> m;
  for (const auto& [k, t] : sd) m[k] = V(t.sizes().begin(), t.sizes().end());
  return m;
}

TensorMap tiny_batch(int64_t n, int64_t start = 0) {
  data::DienSynthetic gen(data::DienSyntheticConfig::tiny());
  return gen.batch(data::DienSynthetic::Stream::train, start, n);
}

TEST(DienModel, StateDictKeysAndShapes) {
  Dien m(DienConfig::tiny());  // E 4, H 8, att/aux/mlp {16, 8}
  auto s = shapes(m.state_dict());
  EXPECT_EQ(s["uid_emb.weight"], V({200, 4}));
  EXPECT_EQ(s["mid_emb.weight"], V({300, 4}));
  EXPECT_EQ(s["cat_emb.weight"], V({20, 4}));
  EXPECT_EQ(s["gru.weight_ih_l0"], V({24, 8}));
  EXPECT_EQ(s["gru.weight_hh_l0"], V({24, 8}));
  EXPECT_EQ(s["aux_bn.weight"], V({16}));
  EXPECT_EQ(s["aux.0.weight"], V({16, 16}));
  EXPECT_EQ(s["aux.4.weight"], V({2, 8}));
  EXPECT_EQ(s["att_q.weight"], V({8, 8}));
  EXPECT_EQ(s["att_prelu.weight"], V({8}));
  EXPECT_EQ(s["att.0.weight"], V({16, 32}));
  EXPECT_EQ(s["att.4.weight"], V({1, 8}));
  EXPECT_EQ(s["augru.weight_ih_l0"], V({24, 8}));
  EXPECT_EQ(s["bn1.weight"], V({4 + 3 * 8 + 8}));
  EXPECT_EQ(s["f1.weight"], V({16, 36}));
  EXPECT_EQ(s["dice1.alpha"], V({16}));
  EXPECT_EQ(s["f3.weight"], V({2, 8}));
  // TF GRUCell init: gate biases 1, candidate bias 0; PReLU alpha 0.1; Dice alpha 0.
  const auto b = m.gru->bias_ih(0).data().to_vector<float>();
  EXPECT_EQ(b[0], 1.0f);
  EXPECT_EQ(b[15], 1.0f);
  EXPECT_EQ(b[16], 0.0f);
  EXPECT_FLOAT_EQ(m.att_prelu->weight.data().to_vector<float>()[3], 0.1f);

  // The benchmarked sizes: emb 18, hidden 36, head input 162 -> 200 -> 80 -> 2.
  auto f = shapes(Dien(DienConfig()).state_dict());
  EXPECT_EQ(f["uid_emb.weight"], V({543060, 18}));
  EXPECT_EQ(f["mid_emb.weight"], V({367983, 18}));
  EXPECT_EQ(f["cat_emb.weight"], V({1601, 18}));
  EXPECT_EQ(f["gru.weight_ih_l0"], V({108, 36}));
  EXPECT_EQ(f["aux.0.weight"], V({100, 72}));
  EXPECT_EQ(f["att.0.weight"], V({80, 144}));
  EXPECT_EQ(f["bn1.weight"], V({162}));
  EXPECT_EQ(f["f1.weight"], V({200, 162}));
  EXPECT_EQ(f["f2.weight"], V({80, 200}));
  EXPECT_EQ(f["f3.weight"], V({2, 80}));
}

TEST(DienModel, ForwardBackwardEveryParameterGetsAGradient) {
  Dien m(DienConfig::tiny());
  const TensorMap b = tiny_batch(32);
  const TensorMap out = m.infer(b);
  EXPECT_EQ(out.at("logits").sizes(), (Shape{32, 2}));
  EXPECT_EQ(out.at("output").sizes(), (Shape{32}));
  const Variable loss = m.training_loss(b);
  EXPECT_TRUE(std::isfinite(loss.data().to_vector<float>()[0]));
  loss.backward();
  for (const auto& [n, p] : m.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << n << " got no gradient";
    double s = 0;
    for (float g : p.grad().to_vector<float>()) {
      ASSERT_TRUE(std::isfinite(g)) << n;
      s += std::abs(g);
    }
    EXPECT_GT(s, 0.0) << n << " has an all-zero gradient";
  }
}

TEST(DienModel, RejectsBadInputs) {
  Dien m(DienConfig::tiny());
  TensorMap b = tiny_batch(4);
  TensorMap missing = b;
  missing.erase("noclk_item");
  EXPECT_THROW(m.training_loss(missing), Error);
  TensorMap holes = b;
  const int64_t T = b.at("mask").size(1);
  std::vector<float> mk(size_t(4 * T), 0.0f);
  mk[0] = 1.0f;
  mk[size_t(T - 1)] = 1.0f;  // row 0: 1 0 ... 0 1
  for (int64_t r = 1; r < 4; ++r) mk[size_t(r * T)] = 1.0f;
  holes["mask"] = Tensor::from_vector(mk, {4, T});
  if (T > 2) {
    try {
      m.infer(holes);
      ADD_FAILURE() << "a mask with a hole was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("mask row 0"), std::string::npos) << e.what();
    }
  }
}

TEST(DienModel, RegistryEntry) {
  const ModelEntry& e = find_model("dien");
  EXPECT_EQ(e.train_defaults, (std::vector<std::string>{"--optimizer=adam", "--lr=0.001"}));
  EXPECT_EQ(e.metrics, (std::vector<std::string>{"auc", "gauc", "accuracy"}));
  const ModelConfig c = e.parse_config({"size=tiny"});
  auto model = e.build(c, 1);
  auto src = e.source(c, "synthetic", 1);
  const TensorMap b = src->next(16);
  EXPECT_TRUE(b.count("noclk_item") && b.count("noclk_cate"));
  const Metrics r = e.evaluate(*model, *src, 200, kCPU);
  EXPECT_TRUE(r.count("auc") && r.count("accuracy") && r.count("gauc"));
  EXPECT_THROW(e.source(c, "/nonexistent", 1), Error);
}

// Training-mode FLOPs (training_loss: main path + auxiliary net) match the profiler within 1%
// (tests/profiler checks infer() in eval mode for every registered model).
TEST(DienModel, TrainingForwardFlopsMatchProfiler) {
  Dien m(DienConfig::tiny());
  const TensorMap b = tiny_batch(16);
  autograd::NoGradGuard ng;
  profiler::start();
  {
    profiler::Scope phase("fwd", profiler::ScopeKind::Phase);
    m.training_loss(b);
  }
  profiler::stop();
  double flops = 0;
  for (const profiler::Event& ev : profiler::events())
    if (ev.kind == profiler::ScopeKind::Op && !ev.inner) flops += ev.cost.flops;
  const double analytic = m.forward_flops(b);
  std::printf("[dien train fwd] FLOPs: profiler %.6g, analytic %.6g (%+.3f%%)\n", flops, analytic,
              100.0 * (flops - analytic) / analytic);
  EXPECT_NEAR(flops, analytic, 0.01 * analytic);
}

// The sampled non-clicks differ from the clicked item at their position and carry its category.
TEST(DienSynthetic, NoClickHistory) {
  data::DienSynthetic gen(data::DienSyntheticConfig::tiny());
  const auto& cate = gen.base().item_to_cate();
  for (int64_t i = 0; i < 200; ++i) {
    const data::DienExample e = gen.example(data::DienSynthetic::Stream::train, i);
    ASSERT_EQ(e.noclk_item.size(), e.rec.hist_item.size());
    for (size_t t = 0; t < e.noclk_item.size(); ++t) {
      EXPECT_NE(e.noclk_item[t], e.rec.hist_item[t]);
      EXPECT_EQ(e.noclk_cate[t], cate[size_t(e.noclk_item[t])]);
    }
  }
}

void randomize(Dien& m, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.5f);
  layers::StateDict sd;
  for (const auto& [n, p] : m.named_parameters()) {
    std::vector<float> v(size_t(p.numel()));
    for (float& x : v) x = nd(rng);
    if (n == "bn1.weight" || n == "aux_bn.weight")
      for (float& x : v) x += 1.0f;
    sd.emplace_back(n, Tensor::from_vector(v, p.sizes()));
  }
  m.load_state_dict(sd, /*strict=*/false);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to(DType::f32).contiguous().to_vector<float>();
  const auto y = b.to(DType::f32).contiguous().to_vector<float>();
  EXPECT_EQ(x.size(), y.size());
  double d = 0;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i)
    d = std::max(d, double(std::abs(x[i] - y[i])));
  return d;
}

TEST(DienModel, ParityTorch) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    if (std::getenv("CI")) FAIL() << "CI is set but /usr/bin/python3 cannot import torch";
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch: no PyTorch peer to compare with";
  }
  const std::string script = source_root() + "/tests/peers/dien.py";
  const std::string dir = ::aim::testing::make_temp_dir("aim_dien_parity");

  Dien m(DienConfig::tiny());
  randomize(m, 7);
  const TensorMap b = tiny_batch(24, 100);
  save_safetensors(dir + "/w.safetensors", m.state_dict());
  layers::StateDict bs(b.begin(), b.end());
  save_safetensors(dir + "/b.safetensors", bs);
  const double lr = 1e-3;
  const std::string cmd = "/usr/bin/python3 " + script + " --weights " + dir +
                          "/w.safetensors --batch " + dir + "/b.safetensors --out " + dir +
                          "/o.safetensors --lr 0.001";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const SafetensorsFile o = load_safetensors(dir + "/o.safetensors");

  const Dien::Out out = m.forward(b);
  const Variable ctr = Dien::ctr_loss(out.logits, b.at("label"));
  const Variable aux = m.aux_loss(out, b);
  const Variable loss = autograd::add(ctr, aux);
  const double dl = max_abs_diff(out.logits.data(), o.at("logits"));
  EXPECT_LT(dl, 1e-4);
  EXPECT_LT(max_abs_diff(ctr.data(), o.at("ctr")), 1e-5);
  EXPECT_LT(max_abs_diff(aux.data(), o.at("aux")), 1e-5);
  EXPECT_LT(max_abs_diff(loss.data(), o.at("loss")), 1e-5);
  loss.backward();
  double dg = 0;
  std::string worst_g;
  for (const auto& [n, p] : m.named_parameters()) {
    ASSERT_TRUE(o.has("grad." + n)) << n;
    const Tensor g = o.at("grad." + n);
    double scale = 0;
    for (float x : g.to_vector<float>()) scale = std::max(scale, double(std::abs(x)));
    const double d = max_abs_diff(p.grad(), g) / std::max(scale, 1e-3);
    if (d >= dg) worst_g = n;
    dg = std::max(dg, d);
  }
  EXPECT_LT(dg, 1e-3) << "worst: " << worst_g;
  train::Adam opt(m.named_parameters(), lr);
  opt.step();
  // att.4.bias (the attention scores' bias) has a gradient that is 0 up to rounding (softmax is
  // shift-invariant): Adam turns that noise into a step of up to lr in either peer, so it is
  // checked against lr only.
  double dw = 0;
  std::string worst;
  for (const auto& [n, p] : m.named_parameters()) {
    const double d = max_abs_diff(p.data(), o.at("after." + n));
    if (n == "att.4.bias") {
      EXPECT_LE(d, 2 * lr) << n;
      continue;
    }
    if (d >= dw) worst = n;
    dw = std::max(dw, d);
  }
  EXPECT_LT(dw, 1e-5) << "worst: " << worst;
  std::printf(
      "[dien parity] max |dlogits| %.3g, |dloss| %.3g, max rel |dgrad| %.3g (%s), "
      "max |dweight after Adam| %.3g (%s)\n",
      dl, max_abs_diff(loss.data(), o.at("loss")), dg, worst_g.c_str(), dw, worst.c_str());
  std::system(("rm -rf " + dir).c_str());
}

// The tiny model learns the synthetic signal: its held-out AUC comes within a documented margin
// (docs/dien-data.md) of the attainable AUC (the true click probability as the score).
TEST(DienModel, TrainingApproachesAttainableAuc) {
  const auto t0 = std::chrono::steady_clock::now();
  Dien m(DienConfig::tiny());
  data::DienSyntheticSource src(data::DienSyntheticConfig::tiny());
  const TensorMap held = src.eval_batch(0, 1000);
  auto eval_auc = [&] {
    autograd::NoGradGuard ng;
    m.eval();
    const auto lg = m.infer(held).at("logits").to_vector<float>();
    std::vector<double> s(lg.size() / 2);
    for (size_t i = 0; i < s.size(); ++i) s[i] = double(lg[2 * i]) - double(lg[2 * i + 1]);
    m.train();
    return data::auc(s, held.at("label").to_vector<int64_t>());
  };
  const double before = eval_auc();
  train::Adam opt(m.named_parameters(), 1e-2);
  for (int step = 0; step < 300; ++step) {
    const TensorMap b = src.next(64);
    opt.zero_grad();
    m.training_loss(b).backward();
    opt.step();
  }
  const double after = eval_auc();
  const double attainable = src.generator().attainable_auc(1000);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[dien train] held-out AUC %.4f -> %.4f (attainable %.4f), %.1f s\n", before, after,
              attainable, secs);
  EXPECT_GT(after, attainable - 0.06);
  EXPECT_LT(secs, 30.0);
}

}  // namespace
}  // namespace aim::models
