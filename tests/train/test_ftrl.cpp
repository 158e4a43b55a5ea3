// train/optim: Ftrl (tf.compat.v1.train.FtrlOptimizer) over three steps against values computed
// in double by TF's FTRL-Proximal update written out in Python (the formula in train/optim.h,
// with TF's order: accumulate, update linear with the old weight, closed-form weight), the l1
// dead zone, f32 parameters, state_dict round trips; GroupedOptimizer routing by prefix, the
// learning-rate scaling of set_lr, its state_dict union and load errors.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "tensor/check.h"
#include "train/optim.h"

namespace aim::train {
namespace {

using autograd::Variable;
using Rows = std::vector<std::vector<double>>;

const std::vector<double> kP0 = {1.0, -2.0, 3.0};
const Rows kGrads = {{0.5, -1.0, 2.0}, {-0.3, 0.4, 1.0}, {0.1, 0.2, -0.6}};
// Ftrl(lr=0.2, learning_rate_power=-0.5, initial_accumulator_value=0.1, l1=0.05, l2=0.01)
const Rows kFtrl = {{0.2776662138784477, -1.1922032821895245, 2.3244023849607185},
                    {0.36757743220517042, -1.2632198802436065, 2.235997481803091},
                    {0.33793991650461497, -1.2981795543657231, 2.2872649790509127}};

Variable make_param(const std::string& name, DType t = DType::f64) {
  return Variable(Tensor::from_vector<double>(kP0, {3}).to(t), true, name);
}
void set_grad(const Variable& p, const std::vector<double>& g) {
  p.mutable_grad() = Tensor::from_vector<double>(g, {3}).to(p.dtype());
}
void expect_rows(const Variable& p, const std::vector<double>& want, double tol, int step) {
  const std::vector<double> got = p.data().to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol) << "step " << step << " element " << i;
}

TEST(Ftrl, MatchesTfFormulaThreeSteps) {
  for (DType t : {DType::f64, DType::f32}) {
    Variable p = make_param("w", t);
    Ftrl opt({{"w", p}}, 0.2, -0.5, 0.1, 0.05, 0.01);
    for (int s = 0; s < 3; ++s) {
      set_grad(p, kGrads[size_t(s)]);
      opt.step();
      expect_rows(p, kFtrl[size_t(s)], t == DType::f64 ? 1e-12 : 2e-6, s + 1);
    }
    const OptimizerState sd = opt.state_dict();
    ASSERT_EQ(sd.size(), 3u);
    EXPECT_EQ(sd[0].first, "w.accum");
    EXPECT_EQ(sd[1].first, "w.linear");
    EXPECT_EQ(sd[2].first, "w.step");
    // accum = 0.1 + sum of g^2
    EXPECT_NEAR(sd[0].second.to_vector<double>()[0], 0.1 + 0.25 + 0.09 + 0.01, 1e-6);
  }
}

TEST(Ftrl, L1DeadZoneGivesExactZeros) {
  // One step from w = 0 with g = 0.01: z = g = 0.01 <= l1 = 0.05 -> w stays exactly 0; with
  // g = 1: z = 1 > l1, w = (l1 - 1) / (sqrt(1.1) / lr).
  Variable p(Tensor::from_vector<double>({0.0, 0.0}, {2}), true, "w");
  Ftrl opt({{"w", p}}, 0.2, -0.5, 0.1, 0.05, 0.0);
  p.mutable_grad() = Tensor::from_vector<double>({0.01, 1.0}, {2});
  opt.step();
  const std::vector<double> w = p.data().to_vector<double>();
  EXPECT_EQ(w[0], 0.0);
  EXPECT_NEAR(w[1], (0.05 - 1.0) / (std::sqrt(1.1) / 0.2), 1e-12);
}

TEST(Ftrl, StateDictRoundTripContinuesIdentically) {
  Variable a = make_param("w"), b = make_param("w");
  Ftrl oa({{"w", a}}, 0.2, -0.5, 0.1, 0.05, 0.01), ob({{"w", b}}, 0.2, -0.5, 0.1, 0.05, 0.01);
  set_grad(a, kGrads[0]);
  oa.step();
  b.data().copy_(a.data());
  ob.load_state_dict(oa.state_dict());
  for (int s = 1; s < 3; ++s) {
    set_grad(a, kGrads[size_t(s)]);
    set_grad(b, kGrads[size_t(s)]);
    oa.step();
    ob.step();
    expect_rows(b, kFtrl[size_t(s)], 1e-12, s + 1);
  }
}

TEST(Ftrl, RejectsBadHyperParameters) {
  Variable p = make_param("w");
  EXPECT_THROW(Ftrl({{"w", p}}, 0.0), Error);
  EXPECT_THROW(Ftrl({{"w", p}}, 0.1, 0.5), Error);
  EXPECT_THROW(Ftrl({{"w", p}}, 0.1, -0.5, 0.0), Error);
  EXPECT_THROW(Ftrl({{"w", p}}, 0.1, -0.5, 0.1, -1.0), Error);
}

GroupedOptimizer make_grouped(const Variable& wide, const Variable& deep, double lr0 = 0.05) {
  std::vector<GroupedOptimizer::Group> groups;
  groups.push_back({"wide.", [](NamedParameters p) {
                      return std::make_unique<Ftrl>(std::move(p), 0.2, -0.5, 0.1, 0.05, 0.01);
                    }});
  groups.push_back({"", [](NamedParameters p) {
                      return std::make_unique<Adagrad>(std::move(p), 0.05, 0.0, 0.0, 1e-10, 0.1);
                    }});
  return GroupedOptimizer({{"wide.w", wide}, {"deep.w", deep}}, lr0, std::move(groups));
}

TEST(GroupedOptimizer, RoutesByPrefixAndScalesLr) {
  Variable wide = make_param("wide.w"), deep = make_param("deep.w");
  GroupedOptimizer g = make_grouped(wide, deep);
  ASSERT_NE(g.group(0), nullptr);
  ASSERT_NE(g.group(1), nullptr);
  EXPECT_EQ(g.group(0)->parameters().size(), 1u);
  EXPECT_EQ(g.group(0)->parameters()[0].first, "wide.w");
  EXPECT_EQ(g.group(1)->parameters()[0].first, "deep.w");
  g.set_lr(0.05);  // the reference rate: each group keeps its own
  EXPECT_DOUBLE_EQ(g.group(0)->lr(), 0.2);
  EXPECT_DOUBLE_EQ(g.group(1)->lr(), 0.05);
  for (int s = 0; s < 3; ++s) {
    set_grad(wide, kGrads[size_t(s)]);
    set_grad(deep, kGrads[size_t(s)]);
    g.step();
    expect_rows(wide, kFtrl[size_t(s)], 1e-12, s + 1);
  }
  // Adagrad with TF's initial accumulator 0.1: w -= lr * g / (sqrt(0.1 + sum g^2) + eps).
  std::vector<double> w = kP0, acc(3, 0.1);
  for (int s = 0; s < 3; ++s)
    for (size_t i = 0; i < 3; ++i) {
      const double gi = kGrads[size_t(s)][i];
      acc[i] += gi * gi;
      w[i] -= 0.05 * gi / (std::sqrt(acc[i]) + 1e-10);
    }
  expect_rows(deep, w, 1e-12, 3);
  g.set_lr(0.025);  // half the reference: both groups halve
  EXPECT_DOUBLE_EQ(g.group(0)->lr(), 0.1);
  EXPECT_DOUBLE_EQ(g.group(1)->lr(), 0.025);
}

TEST(GroupedOptimizer, StateDictUnionRoundTrip) {
  Variable wa = make_param("wide.w"), da = make_param("deep.w");
  Variable wb = make_param("wide.w"), db = make_param("deep.w");
  GroupedOptimizer a = make_grouped(wa, da), b = make_grouped(wb, db);
  set_grad(wa, kGrads[0]);
  set_grad(da, kGrads[0]);
  a.step();
  const OptimizerState sd = a.state_dict();
  std::vector<std::string> keys;
  for (const auto& kv : sd) keys.push_back(kv.first);
  EXPECT_EQ(keys, (std::vector<std::string>{"wide.w.accum", "wide.w.linear", "wide.w.step",
                                            "deep.w.sum", "deep.w.step"}));
  wb.data().copy_(wa.data());
  db.data().copy_(da.data());
  b.load_state_dict(sd);
  for (int s = 1; s < 3; ++s) {
    for (const Variable* v : {&wa, &da, &wb, &db}) set_grad(*v, kGrads[size_t(s)]);
    a.step();
    b.step();
  }
  expect_rows(wb, wa.data().to_vector<double>(), 0, 3);
  expect_rows(db, da.data().to_vector<double>(), 0, 3);
  // Unknown keys are refused, naming the key.
  try {
    b.load_state_dict({{"other.w.sum", Tensor::zeros({3}, DType::f64)}});
    FAIL() << "unknown key accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("other.w.sum"), std::string::npos) << e.what();
  }
}

TEST(GroupedOptimizer, EveryParameterNeedsAGroup) {
  Variable p = make_param("deep.w");
  std::vector<GroupedOptimizer::Group> groups;
  groups.push_back(
      {"wide.", [](NamedParameters ps) { return std::make_unique<Ftrl>(std::move(ps), 0.2); }});
  try {
    GroupedOptimizer g({{"deep.w", p}}, 0.05, std::move(groups));
    FAIL() << "unmatched parameter accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("deep.w"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace aim::train
