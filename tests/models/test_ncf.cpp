// NCF (models/ncf.h, data/ncf_data.h, the ranking metrics of data/metrics.h): parameter layout
// and initialisation, parity with the PyTorch peer (tests/peers/ncf.py: logits, loss, gradients
// and the weights after one Adam step), HR/NDCG/MRR@k against hand-computed values, the
// synthetic generator, the flat-file reader and its errors, the .npy exporter end to end, and a
// short training run through the registry and the trainer.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "data/metrics.h"
#include "data/ncf_data.h"
#include "models/ncf.h"
#include "models/registry.h"
#include "tensor/check.h"
#include "tensor/safetensors.h"
#include "tests/support/common.h"
#include "train/optim.h"
#include "train/trainer.h"

namespace aim::models {
namespace {

using data::kNcfGroup;

using ::aim::testing::kPython;
using ::aim::testing::make_temp_dir;
using ::aim::testing::run_command;
using ::aim::testing::source_root;
#define REQUIRE_PYTHON_MODULE AIM_REQUIRE_PYTHON_MODULE

using ::aim::testing::error_of;
#define EXPECT_ERROR AIM_EXPECT_ERROR

// ---- the model --------------------------------------------------------------------------------

std::map<std::string, std::vector<int64_t>> shapes(const layers::StateDict& sd) {
  std::map<std::string, std::vector<int64_t>> m;
  for (const auto& [k, t] : sd) m[k] = std::vector<int64_t>(t.sizes().begin(), t.sizes().end());
  return m;
}

TEST(NcfModel, StateDictKeysShapesAndInit) {
  Ncf m(NcfConfig::tiny());
  std::vector<std::string> keys;
  for (const auto& [k, t] : m.state_dict()) keys.push_back(k);
  const std::vector<std::string> want = {
      "user_gmf.weight", "user_gmf.bias", "item_gmf.weight", "item_gmf.bias",
      "user_mlp.weight", "user_mlp.bias", "item_mlp.weight", "item_mlp.bias",
      "mlp.0.weight",    "mlp.0.bias",    "mlp.2.weight",    "mlp.2.bias",
      "mlp.4.weight",    "mlp.4.bias",    "predict.weight",  "predict.bias"};
  EXPECT_EQ(keys, want);
  using V = std::vector<int64_t>;
  auto s = shapes(Ncf(NcfConfig()).state_dict());  // the reference's sizes
  EXPECT_EQ(s["user_gmf.weight"], V({6040, 16}));
  EXPECT_EQ(s["item_gmf.weight"], V({3706, 16}));
  EXPECT_EQ(s["user_mlp.weight"], V({6040, 16}));
  EXPECT_EQ(s["item_mlp.bias"], V({16}));
  EXPECT_EQ(s["mlp.0.weight"], V({32, 32}));
  EXPECT_EQ(s["mlp.2.weight"], V({16, 32}));
  EXPECT_EQ(s["mlp.4.weight"], V({8, 16}));
  EXPECT_EQ(s["predict.weight"], V({1, 24}));
  EXPECT_EQ(s["predict.bias"], V({1}));

  // Glorot-uniform weights U(-r, r), r = sqrt(6 / (fan_in + fan_out)), spread over the range;
  // zero biases; the same seed gives the same weights, another seed others.
  const std::map<std::string, std::pair<int64_t, int64_t>> fans = {
      {"user_gmf.weight", {200, 16}}, {"item_gmf.weight", {300, 16}},
      {"user_mlp.weight", {200, 16}}, {"item_mlp.weight", {300, 16}},
      {"mlp.0.weight", {32, 32}},     {"mlp.2.weight", {32, 16}},
      {"mlp.4.weight", {16, 8}},      {"predict.weight", {24, 1}}};
  NcfConfig c2 = NcfConfig::tiny();
  c2.seed = 5;
  Ncf m2(c2), m3(c2);
  const auto sd2 = m2.state_dict(), sd3 = m3.state_dict();
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::vector<float> v = m.state_dict()[i].second.to_vector<float>();
    if (keys[i].find(".bias") != std::string::npos) {
      for (float x : v) EXPECT_EQ(x, 0.0f) << keys[i];
      continue;
    }
    const auto [fi, fo] = fans.at(keys[i]);
    const double r = std::sqrt(6.0 / double(fi + fo));
    float lo = 1, hi = -1;
    for (float x : v) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    EXPECT_GE(lo, -r) << keys[i];
    EXPECT_LE(hi, r) << keys[i];
    if (v.size() >= 100) {  // the 24 and 8 x 16 kernels are too small for a spread check
      EXPECT_LT(lo, -0.8 * r) << keys[i];
      EXPECT_GT(hi, 0.8 * r) << keys[i];
    }
    EXPECT_EQ(sd2[i].second.to_vector<float>(), sd3[i].second.to_vector<float>()) << keys[i];
    EXPECT_NE(sd2[i].second.to_vector<float>(), v) << keys[i];
  }
}

// Random values for every parameter (biases included, so zero defaults hide nothing; the
// positive mean keeps most ReLUs of the one-hot layers active, some not).
void randomize(Ncf& m, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.1f, 0.5f);
  layers::StateDict sd;
  for (const auto& [n, p] : m.named_parameters()) {
    std::vector<float> v(size_t(p.numel()));
    for (float& x : v) x = nd(rng);
    sd.emplace_back(n, Tensor::from_vector(v, p.sizes()));
  }
  m.load_state_dict(sd);
}

data::NcfRows tiny_rows(int64_t n) {
  data::NcfSynthetic gen(data::NcfSyntheticConfig::tiny());
  return gen.train_rows(0, n);
}

TEST(NcfModel, ForwardBackwardEveryParameterGetsAGradient) {
  Ncf m(NcfConfig::tiny());
  randomize(m, 3);
  const TensorMap b = tiny_rows(60).to_map();
  const Variable logits = m.forward(b.at("user"), b.at("item"));
  ASSERT_EQ(logits.sizes(), (Shape{60}));
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
  // infer(): logits and the sigmoid, and the batch checks of the Model interface.
  const TensorMap out = m.infer(b);
  const auto lg = out.at("logits").to_vector<float>(), p = out.at("output").to_vector<float>();
  for (size_t i = 0; i < lg.size(); ++i) EXPECT_NEAR(p[i], 1 / (1 + std::exp(-lg[i])), 1e-6);
  TensorMap wrong = b;
  wrong["item"] = b.at("item").to(DType::i32);
  EXPECT_ERROR(m.infer(wrong), "ncf inputs: item has dtype i32, expected i64");
  wrong = b;
  wrong.erase("label");
  EXPECT_ERROR(m.training_loss(wrong), "ncf batch: missing tensor 'label'");
  wrong = b;
  wrong["user"] = Tensor::from_vector(std::vector<int64_t>{0, 200}, {2});
  wrong["item"] = Tensor::from_vector(std::vector<int64_t>{0, 1}, {2});
  EXPECT_ERROR(m.infer(wrong), "out of range for V = 200");
}

TEST(NcfModel, AnalyticFlops) {
  // 4 x (bias + ReLU) x 16 + GMF 16 + (2*32*32 + 32) + (2*32*16 + 16) + (2*16*8 + 8) + 2*24.
  EXPECT_DOUBLE_EQ(Ncf::flops_per_sample(NcfConfig()), 128 + 16 + 2080 + 1040 + 264 + 48);
  Ncf m(NcfConfig::tiny());
  EXPECT_DOUBLE_EQ(m.forward_flops(tiny_rows(7).to_map()), 7 * 3576.0);
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

TEST(NcfModel, ParityTorchForwardGradientsAdamStep) {
  REQUIRE_PYTHON_MODULE("torch");
  const std::string dir = make_temp_dir("aim_ncf_test");
  Ncf m(NcfConfig::tiny());
  randomize(m, 11);
  const data::NcfRows rows = tiny_rows(250);
  const TensorMap b = rows.to_map();
  save_safetensors(dir + "/w.safetensors", m.state_dict());
  save_safetensors(dir + "/b.safetensors",
                   {{"user", b.at("user")}, {"item", b.at("item")}, {"label", b.at("label")}});
  const std::string cmd = std::string(kPython) + " " + source_root() +
                          "/tests/peers/ncf.py --weights " + dir + "/w.safetensors --batch " + dir +
                          "/b.safetensors --out " + dir + "/o.safetensors --lr 0.001";
  ASSERT_EQ(run_command(cmd), 0) << cmd;
  const SafetensorsFile o = load_safetensors(dir + "/o.safetensors");

  const Variable logits = m.forward(b.at("user"), b.at("item"));
  const Variable loss = Ncf::loss(logits, b.at("label"));
  const double dl = max_abs_diff(logits.data(), o.at("logits"));
  const double dloss = max_abs_diff(loss.data(), o.at("loss"));
  EXPECT_LT(dl, 1e-4);
  EXPECT_LT(dloss, 1e-5);
  loss.backward();
  double dg = 0, dw = 0;
  std::string worst_g, worst_w;
  for (const auto& [n, p] : m.named_parameters()) {
    ASSERT_TRUE(o.has("grad." + n)) << n;
    const double d = max_abs_diff(p.grad(), o.at("grad." + n));
    if (d >= dg) worst_g = n;
    dg = std::max(dg, d);
  }
  EXPECT_LT(dg, 1e-5) << "worst: " << worst_g;
  train::Adam adam(m.named_parameters(), 1e-3);
  adam.step();
  for (const auto& [n, p] : m.named_parameters()) {
    ASSERT_TRUE(o.has("after." + n)) << n;
    const double d = max_abs_diff(p.data(), o.at("after." + n));
    if (d >= dw) worst_w = n;
    dw = std::max(dw, d);
  }
  // The first Adam step moves every weight with a gradient by ~lr = 1e-3 (m / sqrt(v) = sign of
  // the gradient): agreement to 1e-5 (1% of a step) checks the direction and size of each.
  EXPECT_LT(dw, 1e-5) << "worst: " << worst_w;
  std::printf(
      "[ncf parity] max |dlogits| %.3g, |dloss| %.3g, max |dgrad| %.3g (%s), max |dweight after "
      "Adam| %.3g (%s)\n",
      dl, dloss, dg, worst_g.c_str(), dw, worst_w.c_str());
  std::filesystem::remove_all(dir);
}

// ---- HR / NDCG / MRR @ k ----------------------------------------------------------------------

TEST(NcfMetrics, HandComputedValues) {
  // Three groups of 5, k = 3. Ranks of the positive (0-based, ties against it):
  //   g0: positive 0.9 is the highest                      -> rank 0
  //   g1: positive 0.5 below 0.7 and 0.6, above 0.1, 0.2   -> rank 2
  //   g2: positive 0.4 below 0.8, 0.45, 0.9               -> rank 3 (outside the top 3)
  const std::vector<double> s = {0.9, 0.1,  0.2, 0.3, 0.4,  //
                                 0.7, 0.1,  0.5, 0.6, 0.2,  //
                                 0.8, 0.45, 0.9, 0.1, 0.4};
  const std::vector<int64_t> l = {1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1};
  EXPECT_DOUBLE_EQ(data::hr_at_k(s, l, 5, 3), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(data::ndcg_at_k(s, l, 5, 3), (1.0 + 1.0 / std::log2(4.0)) / 3.0);  // (1 + .5)/3
  EXPECT_DOUBLE_EQ(data::mrr_at_k(s, l, 5, 3), (1.0 + 1.0 / 3.0) / 3.0);
  // k = 4 takes g2's rank 3 in: 1/log2(5) and 1/4.
  EXPECT_DOUBLE_EQ(data::hr_at_k(s, l, 5, 4), 1.0);
  EXPECT_DOUBLE_EQ(data::ndcg_at_k(s, l, 5, 4), (1.0 + 0.5 + 1.0 / std::log2(5.0)) / 3.0);
  EXPECT_DOUBLE_EQ(data::mrr_at_k(s, l, 5, 4), (1.0 + 1.0 / 3.0 + 0.25) / 3.0);
  // k = 1: only g0.
  EXPECT_DOUBLE_EQ(data::hr_at_k(s, l, 5, 1), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(data::ndcg_at_k(s, l, 5, 1), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(data::mrr_at_k(s, l, 5, 1), 1.0 / 3.0);
}

TEST(NcfMetrics, TiesCountAgainstThePositive) {
  // A constant scorer ranks the positive last, wherever it is: HR@k = 0 for k < group.
  const std::vector<double> flat(10, 0.25);
  std::vector<int64_t> l(10, 0);
  l[0] = 1;
  l[7] = 1;
  EXPECT_DOUBLE_EQ(data::hr_at_k(flat, l, 5, 4), 0.0);
  EXPECT_DOUBLE_EQ(data::hr_at_k(flat, l, 5, 5), 1.0);  // rank 4 < 5
  EXPECT_DOUBLE_EQ(data::mrr_at_k(flat, l, 5, 5), 0.2);
  // One tie with a higher negative and one with an equal one: rank 2 (not 1), either order.
  const std::vector<double> s1 = {0.5, 0.9, 0.5, 0.1}, s2 = {0.9, 0.5, 0.1, 0.5};
  EXPECT_DOUBLE_EQ(data::mrr_at_k(s1, {1, 0, 0, 0}, 4, 4), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(data::mrr_at_k(s2, {0, 0, 0, 1}, 4, 4), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(data::ndcg_at_k(s1, {1, 0, 0, 0}, 4, 2), 0.0);
}

TEST(NcfMetrics, Errors) {
  const std::vector<double> s = {0.1, 0.2, 0.3, 0.4};
  EXPECT_ERROR(data::hr_at_k(s, {1, 0, 0}, 2, 1), "hr_at_k: 4 scores but 3 labels");
  EXPECT_ERROR(data::ndcg_at_k(s, {1, 0, 0, 0}, 3, 1),
               "ndcg_at_k: 4 scores is not a positive multiple of the group size 3");
  EXPECT_ERROR(data::mrr_at_k(s, {1, 0, 0, 1}, 2, 0), "k must be >= 1");
  EXPECT_ERROR(data::hr_at_k(s, {1, 0, 0, 0}, 2, 1),
               "hr_at_k: group 1 (rows 2..3) has no positive");
  EXPECT_ERROR(data::hr_at_k(s, {1, 1, 1, 0}, 2, 1),
               "group 0 (rows 0..1) has more than one positive (rows 0 and 1)");
  EXPECT_ERROR(data::hr_at_k(s, {1, 0, 2, 0}, 2, 1), "label 2 at index 2 is not 0/1");
  EXPECT_ERROR(data::hr_at_k({0.1, NAN}, {1, 0}, 2, 1), "score 1 (group 0) is NaN");
  EXPECT_ERROR(data::hr_at_k({}, {}, 2, 1), "0 scores is not a positive multiple");
}

// ---- the synthetic generator ------------------------------------------------------------------

TEST(NcfSynthetic, TrainingGroupsAndDeterminism) {
  const data::NcfSyntheticConfig cfg = data::NcfSyntheticConfig::tiny();
  data::NcfSynthetic gen(cfg);
  const data::NcfRows all = gen.train_rows(0, 5000);
  ASSERT_EQ(all.size(), 5000);
  // Groups of 5: the positive then 4 distinct negatives of the same user, none of them the
  // positive or the user's held-out item.
  for (int64_t g = 0; g < 1000; ++g) {
    const int64_t u = all.user[size_t(5 * g)];
    std::set<int64_t> items;
    for (int64_t s = 0; s < 5; ++s) {
      const size_t i = size_t(5 * g + s);
      ASSERT_EQ(all.user[i], u);
      ASSERT_EQ(all.label[i], s == 0 ? 1 : 0);
      ASSERT_GE(all.item[i], 0);
      ASSERT_LT(all.item[i], cfg.n_items);
      ASSERT_NE(all.item[i], gen.heldout_item(u)) << "group " << g;
      items.insert(all.item[i]);
    }
    ASSERT_EQ(items.size(), 5u) << "group " << g;
  }
  // Any window is the same rows (pure function of the row index).
  const data::NcfRows w = gen.train_rows(1233, 17);
  for (int64_t i = 0; i < 17; ++i) {
    EXPECT_EQ(w.user[size_t(i)], all.user[size_t(1233 + i)]);
    EXPECT_EQ(w.item[size_t(i)], all.item[size_t(1233 + i)]);
    EXPECT_EQ(w.label[size_t(i)], all.label[size_t(1233 + i)]);
  }
  data::NcfSyntheticSource src(cfg);
  src.next(7);
  const TensorMap b = src.next(9);
  EXPECT_EQ(src.position(), 16);
  EXPECT_EQ(b.at("item").to_vector<int64_t>(),
            std::vector<int64_t>(all.item.begin() + 7, all.item.begin() + 16));
  // Another seed, another world.
  data::NcfSynthetic other(data::NcfSyntheticConfig::tiny(2));
  EXPECT_NE(other.train_rows(0, 100).item, gen.train_rows(0, 100).item);
  // The signal: positives have a higher true affinity than the sampled negatives.
  double pos = 0, neg = 0;
  for (int64_t i = 0; i < all.size(); ++i)
    (all.label[size_t(i)] ? pos : neg) += gen.affinity(all.user[size_t(i)], all.item[size_t(i)]);
  EXPECT_GT(pos / 1000 - neg / 4000, 0.8);
}

TEST(NcfSynthetic, EvaluationGroupsAndOracle) {
  const data::NcfSyntheticConfig cfg = data::NcfSyntheticConfig::tiny();
  data::NcfSynthetic gen(cfg);
  ASSERT_EQ(gen.eval_size(), 200 * kNcfGroup);
  const data::NcfRows e = gen.eval_rows(0, gen.eval_size());
  for (int64_t g = 0; g < 200; ++g) {
    std::set<int64_t> items;
    for (int64_t s = 0; s < kNcfGroup; ++s) {
      const size_t i = size_t(g * kNcfGroup + s);
      ASSERT_EQ(e.user[i], g);
      ASSERT_EQ(e.label[i], s == 0 ? 1 : 0);
      items.insert(e.item[i]);
    }
    ASSERT_EQ(items.size(), size_t(kNcfGroup)) << "group " << g;
    ASSERT_EQ(e.item[size_t(g * kNcfGroup)], gen.heldout_item(g));
  }
  const data::NcfRows part = gen.eval_rows(250, 120);
  EXPECT_EQ(part.item, std::vector<int64_t>(e.item.begin() + 250, e.item.begin() + 370));
  EXPECT_ERROR(gen.eval_rows(19990, 11), "outside the evaluation set of 20000 rows");
  // The oracle (documented in docs/ncf-data.md) is far above chance (HR@10 = 0.1).
  const data::NcfRanking o = gen.attainable(200);
  std::printf("[ncf synthetic tiny] oracle HR@10 %.4f NDCG@10 %.4f MRR@10 %.4f\n", o.hr, o.ndcg,
              o.mrr);
  EXPECT_GT(o.hr, 0.55);
  EXPECT_GT(o.ndcg, o.mrr);
  EXPECT_GT(o.hr, o.ndcg);
}

// ---- the flat files ---------------------------------------------------------------------------

void put32(std::string& s, int32_t v) {
  for (int i = 0; i < 4; ++i) s += char((uint32_t(v) >> (8 * i)) & 0xff);
}

// Bytes of an NCF file (docs/ncf-data.md), independent of the reader's code.
std::string ncf_bytes(int32_t split, int32_t users, int32_t items, const std::vector<int32_t>& uil,
                      const char* magic = "AIMNCF01", int32_t rows = -1) {
  std::string s(magic, 8);
  put32(s, split);
  put32(s, users);
  put32(s, items);
  put32(s, rows >= 0 ? rows : int32_t(uil.size() / 3));
  for (int32_t v : uil) put32(s, v);
  return s;
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Two test groups (users 3 and 1), items 0..99 and 100..199 shifted, positives first.
std::vector<int32_t> test_rows() {
  std::vector<int32_t> v;
  for (int32_t g = 0; g < 2; ++g)
    for (int32_t s = 0; s < 100; ++s) {
      v.push_back(g == 0 ? 3 : 1);
      v.push_back((s + 37 * g) % 150);
      v.push_back(s == 0);
    }
  return v;
}

TEST(NcfFiles, ReadValidFilesAndSource) {
  const std::string dir = make_temp_dir("aim_ncf_test");
  const std::vector<int32_t> train = {0, 5, 1, 0, 7, 0, 3, 149, 1, 3, 0, 0, 1, 2, 1, 1, 9, 0};
  write(dir + "/train.bin", ncf_bytes(0, 4, 150, train));
  write(dir + "/test.bin", ncf_bytes(1, 4, 150, test_rows()));
  const data::NcfFile f = data::read_ncf_file(dir + "/train.bin", data::NcfSplit::Train);
  EXPECT_EQ(f.users, 4);
  EXPECT_EQ(f.items, 150);
  ASSERT_EQ(f.rows(), 6);
  EXPECT_EQ(f.item, std::vector<int32_t>({5, 7, 149, 0, 2, 9}));
  EXPECT_EQ(f.label, std::vector<int32_t>({1, 0, 1, 0, 1, 0}));

  data::NcfFileSource src(dir, 1);
  EXPECT_EQ(src.epoch_size(), 6);
  EXPECT_EQ(src.eval_size(), 200);
  const TensorMap e = src.eval_batch(99, 3);
  EXPECT_EQ(e.at("user").to_vector<int64_t>(), std::vector<int64_t>({3, 1, 1}));
  EXPECT_EQ(e.at("item").to_vector<int64_t>(), std::vector<int64_t>({99, 37, 38}));
  EXPECT_EQ(e.at("label").to_vector<int64_t>(), std::vector<int64_t>({0, 1, 0}));
  // An epoch (batches of 3) is a permutation of the training rows; the next epoch another.
  std::multiset<std::vector<int64_t>> seen, want;
  for (size_t r = 0; r < 6; ++r) want.insert({train[3 * r], train[3 * r + 1], train[3 * r + 2]});
  for (int k = 0; k < 2; ++k) {
    const TensorMap b = src.next(3);
    const auto u = b.at("user").to_vector<int64_t>(), i = b.at("item").to_vector<int64_t>(),
               l = b.at("label").to_vector<int64_t>();
    for (size_t r = 0; r < 3; ++r) seen.insert({u[r], i[r], l[r]});
  }
  EXPECT_EQ(seen, want);
  EXPECT_ERROR(src.next(7), "batch size 7 must be in [1, 6]");
  EXPECT_ERROR(src.eval_batch(150, 51), "evaluation rows [150, 201) outside the 200 test rows");
  std::filesystem::remove_all(dir);
}

TEST(NcfFiles, ReaderErrors) {
  const std::string dir = make_temp_dir("aim_ncf_test");
  const std::string p = dir + "/f.bin";
  using data::NcfSplit;
  auto expect = [&](const std::string& bytes, NcfSplit split, const std::string& msg) {
    write(p, bytes);
    const std::string got = error_of([&] { data::read_ncf_file(p, split); });
    EXPECT_EQ(got.rfind(p + ": ", 0), 0u) << "message must start with the path: " << got;
    EXPECT_NE(got.find(msg), std::string::npos)
        << "expected \"" << msg << "\", got \"" << got << "\"";
  };
  const std::vector<int32_t> ok = {0, 1, 1, 1, 2, 0};
  expect("AIMNCF", NcfSplit::Train, "truncated: 6 bytes, shorter than the 24-byte header");
  expect(ncf_bytes(0, 2, 3, ok, "AIMNCF02"), NcfSplit::Train,
         "bad magic 'AIMNCF02' (expected 'AIMNCF01'");
  expect(ncf_bytes(0, 2, 3, ok, "\x93NUMPY\x01\x00"), NcfSplit::Train, "bad magic '\\x93NUMPY");
  expect(ncf_bytes(0, 2, 3, ok), NcfSplit::Test, "header split 0 (train), expected 1 (test)");
  expect(ncf_bytes(7, 2, 3, ok), NcfSplit::Train, "header split 7 (unknown), expected 0 (train)");
  expect(ncf_bytes(0, 0, 3, ok), NcfSplit::Train, "header users 0 and items 3 must both be >= 1");
  expect(ncf_bytes(0, 2, 3, {}), NcfSplit::Train, "header rows 0 must be >= 1");
  const std::string full = ncf_bytes(0, 2, 3, ok);
  expect(full.substr(0, full.size() - 5), NcfSplit::Train,
         "truncated: the header's 2 rows need 48 bytes (24 + 12 per row), the file has 43");
  expect(full + "x", NcfSplit::Train, "trailing data: the header's 2 rows need 48 bytes");
  expect(ncf_bytes(0, 2, 3, {0, 1, 1, 2, 2, 0}), NcfSplit::Train,
         "row 1: user 2 out of range (expected 0 <= user < users = 2)");
  expect(ncf_bytes(0, 2, 3, {0, -1, 1}), NcfSplit::Train,
         "row 0: item -1 out of range (expected 0 <= item < items = 3)");
  expect(ncf_bytes(0, 2, 3, {0, 1, 1, 1, 2, 5}), NcfSplit::Train, "row 1: label 5 is not 0 or 1");
  // Test files: groups of 100, one user each, the positive first and alone.
  std::vector<int32_t> t = test_rows();
  expect(ncf_bytes(1, 4, 150, std::vector<int32_t>(t.begin(), t.end() - 3)), NcfSplit::Test,
         "199 test rows is not a multiple of 100");
  t[3 * 150] = 2;
  expect(ncf_bytes(1, 4, 150, t), NcfSplit::Test,
         "row 150: user 2 in the group of user 1 (rows 100..199 are one user's candidates)");
  t = test_rows();
  t[3 * 100 + 2] = 0;
  expect(ncf_bytes(1, 4, 150, t), NcfSplit::Test,
         "row 100: label 0 on the first row of group 1 (expected 1: the held-out positive comes "
         "first)");
  t = test_rows();
  t[3 * 42 + 2] = 1;
  expect(ncf_bytes(1, 4, 150, t), NcfSplit::Test, "row 42: label 1 inside group 0");
  EXPECT_ERROR(data::read_ncf_file(dir + "/none.bin", NcfSplit::Train),
               dir + "/none.bin: cannot open for reading");
  // A directory whose files disagree on the vocabulary.
  write(dir + "/train.bin", ncf_bytes(0, 4, 151, ok));
  write(dir + "/test.bin", ncf_bytes(1, 4, 150, test_rows()));
  EXPECT_ERROR(data::NcfFileSource(dir, 1),
               "train.bin has 4 users and 151 items, test.bin has 4 and 150 (must be equal)");
  std::filesystem::remove_all(dir);
}

// The exporter on .npy files shaped like the reference's (np.save of a dict of lists; numpy and
// Python integers mixed as pandas/tolist() leave them), read back through the source.
TEST(NcfFiles, NpyExportEndToEnd) {
  REQUIRE_PYTHON_MODULE("numpy");
  const std::string dir = make_temp_dir("aim_ncf_test"), root = source_root();
  const std::string make = dir + "/make.py";
  std::ofstream(make) << R"(import sys
import numpy as np
d = sys.argv[1]
bad = sys.argv[2] if len(sys.argv) > 2 else ""
tu, ti, tl = [], [], []
for u in range(4):
    for p in range(3):
        tu += [np.int32(u)] * 5
        ti += [10 * u + p] + [100 + 10 * u + p + k for k in range(4)]
        tl += [1, 0, 0, 0, 0]
eu, ei, el = [], [], []
for u in range(4):
    items = [u] + [4 + ((u * 7 + k) % 140) for k in range(99)]
    eu += [np.int64(u)] * 100
    ei += items
    el += items  # the reference stores the item id as the test label
if bad == "label":
    el[205] = el[205] + 1
if bad == "range":
    ti[7] = 150
if bad == "dup":
    ei[150] = ei[100]
    el[150] = el[100]
np.save(d + "/train_data.npy", {"user": tu, "item": ti, "label": tl})
np.save(d + "/test_data.npy", {"user": eu, "item": ei, "label": el})
)";
  auto convert = [&](const std::string& bad, const std::string& out) {
    EXPECT_EQ(run_command(str(kPython, " ", make, " ", dir, " ", bad)), 0);
    return run_command(str(kPython, " ", root, "/tools/ncf_npy_export.py --users 4 --items 150 ",
                           dir, "/train_data.npy ", dir, "/test_data.npy ", out, " > ", dir,
                           "/log.txt 2>&1"));
  };
  auto log = [&] {
    std::ifstream in(dir + "/log.txt");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  ASSERT_EQ(convert("", dir + "/out"), 0) << log();
  data::NcfFileSource src(dir + "/out", 1);
  EXPECT_EQ(src.n_users(), 4);
  EXPECT_EQ(src.n_items(), 150);
  EXPECT_EQ(src.epoch_size(), 60);
  ASSERT_EQ(src.eval_size(), 400);
  const TensorMap e = src.eval_batch(0, 400);
  const auto u = e.at("user").to_vector<int64_t>(), it = e.at("item").to_vector<int64_t>(),
             l = e.at("label").to_vector<int64_t>();
  for (int64_t r = 0; r < 400; ++r) {
    EXPECT_EQ(u[size_t(r)], r / 100);
    EXPECT_EQ(l[size_t(r)], r % 100 == 0 ? 1 : 0);
    EXPECT_EQ(it[size_t(r)], r % 100 == 0 ? r / 100 : 4 + ((r / 100) * 7 + r % 100 - 1) % 140);
  }
  const data::NcfFile tr = data::read_ncf_file(dir + "/out/train.bin", data::NcfSplit::Train);
  EXPECT_EQ(tr.item[5], 1);  // file order kept: user 0's second positive
  EXPECT_EQ(tr.label[5], 1);
  EXPECT_EQ(tr.label[6], 0);

  EXPECT_EQ(convert("label", dir + "/bad1"), 1);
  EXPECT_NE(log().find("test_data.npy: row 205: label 23 is not the row's item 22"),
            std::string::npos)
      << log();
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad1/test.bin"));
  EXPECT_EQ(convert("range", dir + "/bad2"), 1);
  EXPECT_NE(log().find("train_data.npy: row 7: item 150 out of range (expected 0 <= item < 150)"),
            std::string::npos)
      << log();
  EXPECT_EQ(convert("dup", dir + "/bad3"), 1);
  EXPECT_NE(log().find("test_data.npy: row 150: item 1 repeats the group's positive (row 100)"),
            std::string::npos)
      << log();
  std::filesystem::remove_all(dir);
}

// ---- training through the registry and the trainer --------------------------------------------

TEST(NcfTrain, TinyRunReachesTheOracleMargin) {
  // 3000 steps of 256 at lr 0.003 (the recipe's 0.001 needs ~6000 steps for the same; measured
  // in docs/ncf-data.md): HR@10 within 0.015-0.035 of the oracle for seeds 1-3.
  const auto t0 = std::chrono::steady_clock::now();
  const ModelEntry& e = find_model("ncf");
  EXPECT_EQ(e.metrics.front(), "hr@10");
  EXPECT_EQ(e.train_defaults, std::vector<std::string>({"--optimizer=adam", "--lr=0.001"}));
  const ModelConfig cfg = e.parse_config({"size=tiny"});
  train::TrainOptions o;
  o.steps = 3000;
  o.batch_size = 256;
  o.optim.name = "adam";
  o.optim.lr = 0.003;
  o.eval_every = 0;
  o.eval_samples = 200 * kNcfGroup;  // every tiny user
  o.seed = 1;
  std::ostringstream log;
  const train::TrainResult r = train::train_model(e, cfg, o, log);
  const data::NcfRanking oracle =
      data::NcfSynthetic(data::NcfSyntheticConfig::tiny(1)).attainable(200);
  const double hr = r.final_metrics.at("hr@10"), ndcg = r.final_metrics.at("ndcg@10");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "[ncf train tiny] HR@10 %.4f NDCG@10 %.4f MRR@10 %.4f (oracle %.4f %.4f %.4f), loss %.4f -> "
      "%.4f, %.1f s\n",
      hr, ndcg, r.final_metrics.at("mrr@10"), oracle.hr, oracle.ndcg, oracle.mrr, r.losses.front(),
      r.losses.back(), secs);
  EXPECT_GT(hr, oracle.hr - 0.08) << log.str();  // chance: 0.10
  EXPECT_GT(ndcg, oracle.ndcg - 0.06) << log.str();
  EXPECT_LT(r.losses.back(), r.losses.front() - 0.2);
  EXPECT_ERROR(e.evaluate(*e.build(cfg, 1), *e.source(cfg, "synthetic", 1), 150, kCPU),
               "ncf evaluation: --eval-samples 150 is not a multiple of 100");
}

}  // namespace
}  // namespace aim::models
