// train/optim GroupedOptimizer groups by substrings of the parameter name (Hugging Face's BERT
// recipe: names containing "bias" or "LayerNorm.weight" in an AdamW group without weight decay,
// the rest with weight decay 0.01): the grouped optimizer equals two separate AdamW runs over the
// two sets, bit for bit; a parameter matching no group is an error naming it; a group with both a
// prefix and substrings is refused. The same through make_optimizer's model recipes (group kinds
// adamw and lamb with their settings by name; unknown kinds and settings are errors).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "models/registry.h"
#include "tensor/check.h"
#include "train/optim.h"
#include "train/trainer.h"

namespace aim::train {
namespace {

using autograd::Variable;

// BERT-like names: which ones the no-decay rule takes is the point.
const std::vector<std::string> kNames = {
    "embeddings.word_embeddings.weight",                  // decay
    "embeddings.LayerNorm.weight",                        // no decay
    "embeddings.LayerNorm.bias",                          // no decay
    "encoder.layer.0.attention.self.query.weight",        // decay
    "encoder.layer.0.attention.self.query.bias",          // no decay
    "encoder.layer.0.attention.output.LayerNorm.weight",  // no decay
    "pooler.dense.weight",                                // decay
};
bool no_decay(const std::string& n) {
  return n.find("bias") != std::string::npos || n.find("LayerNorm.weight") != std::string::npos;
}

// Parameter k: 5 + k elements with distinct values; its gradient at step s likewise.
Tensor values(size_t k, int s, double scale) {
  std::vector<double> v(5 + k);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = scale * std::sin(1.0 + 0.7 * double(i) + 1.3 * double(k) + 2.1 * s);
  return Tensor::from_vector<double>(v, {int64_t(v.size())});
}
NamedParameters make_params() {
  NamedParameters r;
  for (size_t k = 0; k < kNames.size(); ++k)
    r.push_back({kNames[k], Variable(values(k, 0, 1.0), true, kNames[k])});
  return r;
}
void set_grads(const NamedParameters& ps, int s) {
  for (size_t k = 0; k < ps.size(); ++k) ps[k].second.mutable_grad() = values(k, s, 0.5);
}

std::vector<GroupedOptimizer::Group> bert_groups(double lr) {
  std::vector<GroupedOptimizer::Group> g;
  g.push_back({"",
               [lr](NamedParameters p) {
                 return std::make_unique<AdamW>(std::move(p), lr, 0.9, 0.999, 1e-8, 0.0);
               },
               {"bias", "LayerNorm.weight"}});
  g.push_back({"", [lr](NamedParameters p) {
                 return std::make_unique<AdamW>(std::move(p), lr, 0.9, 0.999, 1e-8, 0.01);
               }});
  return g;
}

TEST(OptimGroups, NoDecayGroupsEqualTwoSeparateAdamW) {
  const double lr = 0.05;
  NamedParameters grouped = make_params(), reference = make_params();
  GroupedOptimizer g(grouped, lr, bert_groups(lr));
  ASSERT_NE(g.group(0), nullptr);
  ASSERT_NE(g.group(1), nullptr);
  std::vector<std::string> nd, d;
  for (const auto& [n, p] : g.group(0)->parameters()) nd.push_back(n);
  for (const auto& [n, p] : g.group(1)->parameters()) d.push_back(n);
  EXPECT_EQ(nd, (std::vector<std::string>{kNames[1], kNames[2], kNames[4], kNames[5]}));
  EXPECT_EQ(d, (std::vector<std::string>{kNames[0], kNames[3], kNames[6]}));

  // torch: AdamW([{"params": no_decay, "weight_decay": 0}, {"params": rest, "weight_decay":
  // 0.01}]) steps each parameter exactly as an AdamW over its group alone.
  NamedParameters ref_nd, ref_d;
  for (const auto& kv : reference) (no_decay(kv.first) ? ref_nd : ref_d).push_back(kv);
  AdamW a_nd(ref_nd, lr, 0.9, 0.999, 1e-8, 0.0), a_d(ref_d, lr, 0.9, 0.999, 1e-8, 0.01);
  for (int s = 1; s <= 4; ++s) {
    set_grads(grouped, s);
    set_grads(reference, s);
    g.step();
    a_nd.step();
    a_d.step();
  }
  for (size_t k = 0; k < kNames.size(); ++k) {
    const auto got = grouped[k].second.data().to_vector<double>();
    const auto want = reference[k].second.data().to_vector<double>();
    EXPECT_EQ(got, want) << kNames[k];
  }
  // Not vacuous: with decay for every parameter the no-decay ones end elsewhere.
  NamedParameters all = make_params();
  AdamW a_all(all, lr, 0.9, 0.999, 1e-8, 0.01);
  for (int s = 1; s <= 4; ++s) {
    set_grads(all, s);
    a_all.step();
  }
  EXPECT_NE(all[1].second.data().to_vector<double>(), grouped[1].second.data().to_vector<double>());
  EXPECT_EQ(all[0].second.data().to_vector<double>(), grouped[0].second.data().to_vector<double>());
  EXPECT_EQ(g.state_dict().size(), 3 * kNames.size());  // exp_avg, exp_avg_sq, step each
}

TEST(OptimGroups, UnmatchedParameterIsAnErrorNamingIt) {
  NamedParameters ps = make_params();
  std::vector<GroupedOptimizer::Group> groups = bert_groups(0.1);
  groups.pop_back();  // only the no-decay group: the weights match nothing
  try {
    GroupedOptimizer g(ps, 0.1, std::move(groups));
    FAIL() << "a parameter matching no group was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("parameter embeddings.word_embeddings.weight matches no group"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("name contains 'bias' | 'LayerNorm.weight'"), std::string::npos) << m;
  }
  std::vector<GroupedOptimizer::Group> both = bert_groups(0.1);
  both[0].prefix = "encoder.";
  EXPECT_THROW(GroupedOptimizer(make_params(), 0.1, std::move(both)), Error);
}

// A model recipe (models::ModelOptimizer) as BERT's would declare it, built by make_optimizer.
models::ModelOptimizer bert_recipe(const std::string& kind) {
  models::ModelOptimizer m;
  m.name = "bert_" + kind;
  m.ref_lr = 1e-3;
  models::OptimizerGroup nd{"", kind, {{"lr", 1e-3}, {"weight_decay", 0.0}}};
  nd.name_contains = {"bias", "LayerNorm.weight"};
  m.groups = {nd, {"", kind, {{"lr", 1e-3}, {"beta2", 0.98}, {"eps", 1e-6}}}};
  return m;
}

TEST(OptimGroups, RecipeKinds) {
  for (const std::string kind : {"adamw", "lamb"}) {
    SCOPED_TRACE(kind);
    const models::ModelOptimizer m = bert_recipe(kind);
    OptimizerOptions o;
    o.name = m.name;
    o.lr = 2e-3;  // twice the reference: every group's rate doubles
    NamedParameters ps = make_params();
    auto opt = make_optimizer(o, ps, {m});
    auto* g = dynamic_cast<GroupedOptimizer*>(opt.get());
    ASSERT_NE(g, nullptr);
    EXPECT_DOUBLE_EQ(g->group(0)->lr(), 2e-3);
    EXPECT_EQ(g->group(0)->parameters().size(), 4u);
    EXPECT_EQ(g->group(1)->parameters().size(), 3u);
    if (kind == "adamw") {
      EXPECT_NE(dynamic_cast<AdamW*>(g->group(0)), nullptr);
    } else {
      EXPECT_NE(dynamic_cast<Lamb*>(g->group(0)), nullptr);
    }
    set_grads(ps, 1);
    opt->step();
    EXPECT_EQ(opt->state_dict().size(), 3 * kNames.size());
  }
  // Unknown kinds and settings are errors naming the group.
  models::ModelOptimizer bad = bert_recipe("adamw");
  bad.groups[0].settings["momentum"] = 0.9;
  OptimizerOptions o;
  o.name = bad.name;
  try {
    make_optimizer(o, make_params(), {bad});
    FAIL() << "unknown setting accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown setting 'momentum'"), std::string::npos)
        << e.what();
  }
  bad = bert_recipe("adam");
  o.name = bad.name;
  try {
    make_optimizer(o, make_params(), {bad});
    FAIL() << "unknown kind accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(allowed: ftrl, adagrad, adamw, lamb)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace aim::train
