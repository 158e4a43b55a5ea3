// GCN (models/gcn.h) and its data (data/graph.h): parity with the PyTorch peer (tests/peers/gcn.py:
// normalised adjacency, logits, loss, gradients, one Adam step), the tiny learning run, the
// analytic FLOPs, the stochastic-block graph, the Planetoid converter (tools/planetoid_convert.py
// on a fabricated pickled set) and reader, and bad inputs.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "data/graph.h"
#include "models/gcn.h"
#include "models/registry.h"
#include "tensor/safetensors.h"
#include "tests/support/common.h"
#include "train/optim.h"

namespace aim::models {
namespace {

using testing::error_of;
using testing::kPython;
using testing::make_temp_dir;
using testing::rel_diff;
using testing::run_command;
using testing::source_root;

GcnConfig tiny_config(double dropout = 0.5) {
  const data::SbmConfig d = data::SbmConfig::tiny();
  GcnConfig c;
  c.features = d.features;
  c.classes = d.classes;
  c.dropout = dropout;
  return c;
}

TensorMap graph_batch(data::GraphSource& src) { return src.next(1); }

// Dense [V, V] of a batch's CSR.
Tensor dense_adj(const TensorMap& b) {
  const auto rp = b.at("adj_row_ptr").to_vector<int32_t>();
  const auto ci = b.at("adj_col_idx").to_vector<int32_t>();
  const auto v = b.at("adj_values").to_vector<float>();
  const int64_t V = int64_t(rp.size()) - 1;
  std::vector<float> d(size_t(V * V), 0.f);
  for (int64_t i = 0; i < V; ++i)
    for (int32_t e = rp[size_t(i)]; e < rp[size_t(i) + 1]; ++e)
      d[size_t(i * V + ci[size_t(e)])] = v[size_t(e)];
  return Tensor::from_vector(d, {V, V});
}

TEST(GcnModel, ParityTorchLogitsGradientsAdamStep) {
  AIM_REQUIRE_PYTHON_MODULE("torch");
  const std::string dir = make_temp_dir("aim_gcn_test");
  data::GraphSource src(data::sbm_graph(data::SbmConfig::tiny(3)), "tiny");
  const TensorMap b = graph_batch(src);
  Gcn m(tiny_config(/*dropout=*/0));  // dropout off: the two frameworks draw different masks
  // Non-zero biases, so their gradients and broadcast are checked too.
  m.gc1->bias.data().copy_(Tensor::from_vector(std::vector<float>(16, 0.05f), {16}));
  save_safetensors(dir + "/w.safetensors", m.state_dict());
  save_safetensors(dir + "/g.safetensors", {{"features", b.at("features")},
                                            {"adj_row_ptr", b.at("adj_row_ptr")},
                                            {"adj_col_idx", b.at("adj_col_idx")},
                                            {"adj_values", b.at("adj_values")},
                                            {"train_idx", b.at("train_idx")},
                                            {"train_labels", b.at("train_labels")}});
  const std::string cmd = std::string(kPython) + " " + source_root() + "/tests/peers/gcn.py" +
                          " --weights " + dir + "/w.safetensors --graph " + dir +
                          "/g.safetensors --out " + dir + "/o.safetensors --lr 0.01 --wd 5e-4";
  ASSERT_EQ(run_command(cmd), 0) << cmd;
  const SafetensorsFile o = load_safetensors(dir + "/o.safetensors");

  const double dadj = rel_diff(dense_adj(b), o.at("adj_hat"));
  EXPECT_LT(dadj, 1e-6);
  const Variable loss = m.training_loss(b);
  const Tensor logits = m.infer(b).at("logits");
  const double dl = rel_diff(logits, o.at("logits"));
  const double dloss = rel_diff(loss.data(), o.at("loss"));
  EXPECT_LT(dl, 1e-5);
  EXPECT_LT(dloss, 1e-6);
  loss.backward();
  double dg = 0, dw = 0;
  for (const auto& [n, p] : m.named_parameters()) {
    ASSERT_TRUE(o.has("grad." + n)) << n;
    const double d = rel_diff(p.grad(), o.at("grad." + n));
    EXPECT_LT(d, 1e-5) << n;
    dg = std::max(dg, d);
  }
  train::Adam adam(m.named_parameters(), 0.01);
  adam.step();
  // The first Adam step moves each weight by lr * g / (|g| + 1e-8): an entry of gc1.weight whose
  // data gradient nearly cancels its weight decay has |g| ~ 1e-8, where the step follows the last
  // bits of g. 2e-4 of the largest weight (~0.3) is < 1% of one step (lr 0.01).
  for (const auto& [n, p] : m.named_parameters()) {
    const double d = rel_diff(p.data(), o.at("after." + n));
    EXPECT_LT(d, 2e-4) << n;
    dw = std::max(dw, d);
  }
  std::printf(
      "[gcn parity] rel diff: adj_hat %.3g, logits %.3g, loss %.3g, grads %.3g, after Adam "
      "%.3g\n",
      dadj, dl, dloss, dg, dw);
  std::filesystem::remove_all(dir);
}

TEST(GcnModel, TinyLearnsSyntheticGraph) {
  const auto t0 = std::chrono::steady_clock::now();
  const ModelEntry& e = find_model("gcn");
  auto m = e.build(e.parse_config({"size=tiny"}), 1);
  auto src = e.source(e.parse_config({"size=tiny"}), "synthetic", 1);
  const double before = e.evaluate(*m, *src, 1, kCPU).at("test_accuracy");
  train::Adam opt(m->named_parameters(), 0.01);
  for (int epoch = 0; epoch < 200; ++epoch) {
    const TensorMap b = src->next(1);
    opt.zero_grad();
    m->training_loss(b).backward();
    opt.step();
  }
  const Metrics after = e.evaluate(*m, *src, 1, kCPU);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[gcn tiny train] test accuracy %.3f -> %.3f (val %.3f, train %.3f), %.2f s\n",
              before, after.at("test_accuracy"), after.at("val_accuracy"),
              after.at("train_accuracy"), secs);
  // 4 balanced classes: chance 0.25. docs/gcn.md: the tiny graph's attainable accuracy.
  EXPECT_GT(after.at("test_accuracy"), 0.80);
  EXPECT_GT(after.at("test_accuracy"), before + 0.3);
}

TEST(GcnModel, AnalyticFlops) {
  Gcn m(tiny_config());
  data::GraphSource src(data::sbm_graph(data::SbmConfig::tiny()), "tiny");
  const TensorMap b = src.next(1);
  const double V = 240, F = 64, H = 16, C = 4, E = double(b.at("adj_col_idx").numel());
  const double fwd = 2 * V * F * H + 2 * E * H + V * H + V * H + 2 * V * H * C + 2 * E * C + V * C;
  m.eval();
  EXPECT_DOUBLE_EQ(m.forward_flops(b), fwd);
  m.train();
  EXPECT_DOUBLE_EQ(m.forward_flops(b), fwd + V * F + V * H);  // + the two dropouts
}

TEST(GcnData, SbmGraphIsDeterministicSymmetricAndNormalised) {
  const data::GraphData g = data::sbm_graph(data::SbmConfig::tiny(5));
  const data::GraphData h = data::sbm_graph(data::SbmConfig::tiny(5));
  EXPECT_EQ(g.adj_col_idx.to_vector<int32_t>(), h.adj_col_idx.to_vector<int32_t>());
  EXPECT_EQ(g.x.to_vector<float>(), h.x.to_vector<float>());
  data::GraphSource src(data::sbm_graph(data::SbmConfig::tiny(5)), "tiny");
  const Tensor d = dense_adj(src.next(1));
  const int64_t V = g.nodes;
  const float* a = d.data<float>();
  double asym = 0;
  for (int64_t i = 0; i < V; ++i)
    for (int64_t j = 0; j < V; ++j)
      asym = std::max(asym, double(std::fabs(a[i * V + j] - a[j * V + i])));
  EXPECT_EQ(asym, 0.0);
  for (int64_t i = 0; i < V; ++i) EXPECT_GT(a[i * V + i], 0.f) << "self-loop of node " << i;
  const std::vector<float> x = g.x.to_vector<float>();
  for (int64_t i = 0; i < V; ++i) {
    double s = 0;
    for (int64_t f = 0; f < g.features; ++f) s += x[size_t(i * g.features + f)];
    EXPECT_NEAR(s, 1.0, 1e-6);
  }
  EXPECT_EQ(g.train_idx.numel(), 20);  // 5 per class
  EXPECT_EQ(g.val_idx.numel(), 40);
  EXPECT_EQ(g.test_idx.numel(), 100);
}

// ---- Planetoid --------------------------------------------------------------------------------

std::string converted_fake(const std::string& dir) {
  const std::string root = source_root();
  const std::string make =
      std::string(kPython) + " " + root + "/tests/data/planetoid/make_fake.py " + dir + "/raw";
  const std::string conv = std::string(kPython) + " " + root + "/tools/planetoid_convert.py " +
                           dir + "/raw fake " + dir + "/out --val 2 >/dev/null";
  EXPECT_EQ(run_command(make), 0) << make;
  EXPECT_EQ(run_command(conv), 0) << conv;
  return dir + "/out";
}

TEST(GcnData, PlanetoidConverterAndReaderReplicateKipf) {
  AIM_REQUIRE_PYTHON_MODULE("numpy");
  const std::string dir = make_temp_dir("aim_planetoid");
  const data::GraphData g = data::read_planetoid(converted_fake(dir));
  EXPECT_EQ(g.name, "fake");
  EXPECT_EQ(g.nodes, 13);
  EXPECT_EQ(g.features, 6);
  EXPECT_EQ(g.classes, 3);
  EXPECT_EQ(g.train_idx.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(g.val_idx.to_vector<int64_t>(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(g.test_idx.to_vector<int64_t>(), (std::vector<int64_t>{8, 10, 11, 12}));
  // test.index lists 10 8 12 11: node order[k] gets tx row k (feature k) and ty row k (class
  // k % 3); node 9, missing from test.index, is Citeseer's isolated case: zero row, no label.
  const std::vector<int64_t> lab = g.labels.to_vector<int64_t>();
  EXPECT_EQ(lab[10], 0);
  EXPECT_EQ(lab[8], 1);
  EXPECT_EQ(lab[12], 2);
  EXPECT_EQ(lab[11], 0);
  EXPECT_EQ(lab[9], -1);
  EXPECT_EQ(lab[4], 1);  // ally row 4: class 4 % 3
  const std::vector<float> x = g.x.to_vector<float>();
  const std::vector<int64_t> order = {10, 8, 12, 11};
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t f = 0; f < 6; ++f)
      EXPECT_EQ(x[size_t(order[size_t(k)] * 6 + f)], f == k ? 1.f : 0.f)
          << "node " << order[size_t(k)];
  for (int64_t f = 0; f < 6; ++f) EXPECT_EQ(x[size_t(9 * 6 + f)], 0.f);
  EXPECT_EQ(x[0], 0.5f);  // allx row 0: features 0 and 1, row-normalised
  // A_hat: node 0 has neighbours 1, 2 (degree 3 with the identity), node 1 degree 2; node 4's
  // self-loop (listed twice: A is 0/1) adds 1 to the identity: A + I row 4 = {4: 2, 7: 1}.
  data::GraphSource src(data::read_planetoid(dir + "/out"), "fake");
  const Tensor d = dense_adj(src.next(1));
  const float* a = d.data<float>();
  EXPECT_NEAR(a[0 * 13 + 1], 1.0 / std::sqrt(6.0), 1e-7);
  EXPECT_NEAR(a[0 * 13 + 0], 1.0 / 3.0, 1e-7);
  EXPECT_NEAR(a[4 * 13 + 4], 2.0 / 3.0, 1e-7);
  EXPECT_NEAR(a[4 * 13 + 7], 1.0 / std::sqrt(6.0), 1e-7);
  EXPECT_NEAR(a[9 * 13 + 9], 1.0, 1e-7);  // isolated: only the identity
  std::filesystem::remove_all(dir);
}

void rewrite(const std::string& path, const std::string& content) {
  std::ofstream f(path);
  f << content;
}

TEST(GcnData, PlanetoidBadFilesNameFileAndLine) {
  AIM_REQUIRE_PYTHON_MODULE("numpy");
  const std::string dir = make_temp_dir("aim_planetoid_bad");
  const std::string out = converted_fake(dir);
  const std::string edges = out + "/edges.txt";
  std::filesystem::copy_file(edges, dir + "/edges.good");
  rewrite(edges, "0 1\n1 0\n2 99\n");
  AIM_EXPECT_ERROR(data::read_planetoid(out), "edges.txt:3: node id 99 is out of range [0, 13)");
  rewrite(edges, "0 1\n1 x\n");
  AIM_EXPECT_ERROR(data::read_planetoid(out), "edges.txt:2: 'x' is not an integer");
  rewrite(edges, "0 1 2\n");
  AIM_EXPECT_ERROR(data::read_planetoid(out), "edges.txt:1: expected 2 fields (u v), got 3");
  std::filesystem::copy_file(dir + "/edges.good", edges,
                             std::filesystem::copy_options::overwrite_existing);
  rewrite(out + "/labels.txt", "0\n1\n");
  AIM_EXPECT_ERROR(data::read_planetoid(out), "labels.txt: 2 labels, meta.txt says 13 nodes");
  rewrite(out + "/labels.txt", "0\n7\n");
  AIM_EXPECT_ERROR(data::read_planetoid(out), "labels.txt:2: label 7 is out of range [-1, 3)");
  rewrite(out + "/features.txt", "0 6 1.0\n");
  AIM_EXPECT_ERROR(data::read_planetoid(out), "features.txt:1: feature 6 is out of range [0, 6)");
  std::filesystem::remove(out + "/meta.txt");
  AIM_EXPECT_ERROR(data::read_planetoid(out), "cannot open " + out + "/meta.txt");
  std::filesystem::remove_all(dir);
}

TEST(GcnData, PlanetoidSplitWithUnlabelledNodeIsRefused) {
  AIM_REQUIRE_PYTHON_MODULE("numpy");
  const std::string dir = make_temp_dir("aim_planetoid_split");
  const std::string out = converted_fake(dir);
  rewrite(out + "/test.txt", "8\n9\n");
  AIM_EXPECT_ERROR(data::read_planetoid(out), "test.txt:2: node 9 has no label");
  std::filesystem::remove_all(dir);
}

TEST(GcnModel, RegistryAndBatchErrors) {
  const ModelEntry& e = find_model("gcn");
  EXPECT_EQ(e.task, "graph");
  const ModelConfig tiny = e.parse_config({"size=tiny"});
  auto src = e.source(tiny, "synthetic", 1);
  AIM_EXPECT_ERROR(src->next(4), "--batch-size must be 1");
  AIM_EXPECT_ERROR(e.source(tiny, "cora", 1), "gcn reads 'synthetic' or 'planetoid:DIR'");
  AIM_EXPECT_ERROR(e.source(tiny, "planetoid:/nonexistent/x", 1), "no such directory");
  AIM_EXPECT_ERROR(e.source(e.parse_config({"size=tiny", "features=10"}), "synthetic", 1),
                   "the graph has 64 features and 4 classes, the model 10 and 4");
  AIM_EXPECT_ERROR(e.build(e.parse_config({"hidden=x"}), 1),
                   "--config hidden='x': expected a positive integer");
  // A batch whose row_ptr does not fit the features.
  auto m = e.build(tiny, 1);
  TensorMap b = src->next(1);
  b["features"] = Tensor::zeros({10, 64});
  AIM_EXPECT_ERROR(m->infer(b), "adj_row_ptr has 241 entries, features has 10 nodes");
}

}  // namespace
}  // namespace aim::models
