// train/optim Lamb: five steps over several tensors against an independent double-precision
// LAMB written here from the paper's / apex FusedLAMB's formulas (bias-corrected Adam moments,
// decoupled weight decay inside the update, per-tensor trust ratio ||w|| / ||u||), including a
// zero parameter (||w|| = 0: ratio 1) and a parameter whose update is zero (||u|| = 0: ratio 1,
// no NaN); f32 parameters; state_dict round trips that continue bit for bit; capturable mode;
// make_optimizer("lamb") with its default weight decay; bad hyper-parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "tensor/check.h"
#include "train/optim.h"
#include "train/trainer.h"

namespace aim::train {
namespace {

using autograd::Variable;
using Vec = std::vector<double>;

constexpr double kLr = 0.05, kB1 = 0.9, kB2 = 0.999, kEps = 1e-6, kWd = 0.01;
constexpr int kSteps = 5;

// Tensors: "w" a weight, "b" a bias-like one, "zero" starts at 0 (first step: ||w|| = 0),
// "still" is 0 with zero gradients (||u|| = 0 at every step).
const std::vector<std::string> kNames = {"w", "b", "zero", "still"};
Vec initial(size_t k) {
  const size_t n = k == 0 ? 7 : k == 1 ? 3 : 4;
  Vec v(n, 0.0);
  if (k < 2)
    for (size_t i = 0; i < n; ++i) v[i] = std::cos(0.3 + 1.1 * double(i) + 2.0 * double(k));
  return v;
}
Vec gradient(size_t k, int step, size_t n) {
  Vec g(n, 0.0);
  if (k == 3) return g;
  for (size_t i = 0; i < n; ++i)
    g[i] = (k == 2 ? 2.0 : 0.5) * std::sin(1.0 + 0.9 * double(i) + 1.7 * double(k) + 2.3 * step);
  return g;
}

NamedParameters make_params(DType t = DType::f64) {
  NamedParameters r;
  for (size_t k = 0; k < kNames.size(); ++k) {
    const Vec v = initial(k);
    r.push_back({kNames[k], Variable(Tensor::from_vector<double>(v, {int64_t(v.size())}).to(t),
                                     true, kNames[k])});
  }
  return r;
}
void set_grads(const NamedParameters& ps, int step) {
  for (size_t k = 0; k < ps.size(); ++k) {
    const Variable& p = ps[k].second;
    const Vec g = gradient(k, step, size_t(p.numel()));
    p.mutable_grad() = Tensor::from_vector<double>(g, {int64_t(g.size())}).to(p.dtype());
  }
}

// The reference: LAMB in double, straight from the formulas (m_hat, v_hat written out).
struct RefLamb {
  std::vector<Vec> w, m, v;
  std::vector<double> ratios;  // the last step's trust ratio of each tensor
  int t = 0;
  RefLamb() {
    for (size_t k = 0; k < kNames.size(); ++k) {
      w.push_back(initial(k));
      m.push_back(Vec(w.back().size(), 0.0));
      v.push_back(Vec(w.back().size(), 0.0));
    }
    ratios.assign(kNames.size(), 0.0);
  }
  void step() {
    ++t;
    for (size_t k = 0; k < w.size(); ++k) {
      const size_t n = w[k].size();
      const Vec g = gradient(k, t, n);
      Vec u(n);
      double wn = 0, un = 0;
      for (size_t i = 0; i < n; ++i) {
        m[k][i] = kB1 * m[k][i] + (1 - kB1) * g[i];
        v[k][i] = kB2 * v[k][i] + (1 - kB2) * g[i] * g[i];
        const double m_hat = m[k][i] / (1 - std::pow(kB1, t));
        const double v_hat = v[k][i] / (1 - std::pow(kB2, t));
        u[i] = m_hat / (std::sqrt(v_hat) + kEps) + kWd * w[k][i];
        wn += w[k][i] * w[k][i];
        un += u[i] * u[i];
      }
      wn = std::sqrt(wn);
      un = std::sqrt(un);
      const double r = wn > 0 && un > 0 ? wn / un : 1.0;
      ratios[k] = r;
      for (size_t i = 0; i < n; ++i) w[k][i] -= kLr * r * u[i];
    }
  }
};

void expect_near(const NamedParameters& ps, const RefLamb& ref, double tol, int step) {
  for (size_t k = 0; k < ps.size(); ++k) {
    const Vec got = ps[k].second.data().to_vector<double>();
    ASSERT_EQ(got.size(), ref.w[k].size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], ref.w[k][i], tol) << kNames[k] << "[" << i << "] step " << step;
  }
}

std::unique_ptr<Optimizer> make_lamb(const NamedParameters& ps) {
  return std::make_unique<Lamb>(ps, kLr, kB1, kB2, kEps, kWd);
}

TEST(OptimLamb, MatchesDoubleReference) {
  NamedParameters ps = make_params();
  auto opt = make_lamb(ps);
  RefLamb ref;
  for (int s = 1; s <= kSteps; ++s) {
    set_grads(ps, s);
    opt->step();
    ref.step();
    expect_near(ps, ref, 1e-12, s);
    if (s == 1) {
      EXPECT_EQ(ref.ratios[2], 1.0);  // "zero": ||w|| = 0
    }
    EXPECT_EQ(ref.ratios[3], 1.0);  // "still": ||u|| = 0
    EXPECT_GT(std::fabs(ref.ratios[0] - 1.0), 0.1) << "the trust ratio is exercised";
  }
  // "zero" moved off zero after its first (ratio 1) step; "still" never moved, without NaN.
  for (double x : ps[3].second.data().to_vector<double>()) EXPECT_EQ(x, 0.0);
  EXPECT_NE(ps[2].second.data().to_vector<double>()[0], 0.0);
  const OptimizerState sd = opt->state_dict();
  ASSERT_EQ(sd.size(), 3 * kNames.size());
  EXPECT_EQ(sd[0].first, "w.exp_avg");
  EXPECT_EQ(sd[1].first, "w.exp_avg_sq");
  EXPECT_EQ(sd[2].first, "w.step");
  EXPECT_EQ(sd[2].second.item(), double(kSteps));
}

TEST(OptimLamb, FloatParameters) {
  NamedParameters ps = make_params(DType::f32);
  auto opt = make_lamb(ps);
  RefLamb ref;
  for (int s = 1; s <= kSteps; ++s) {
    set_grads(ps, s);
    opt->step();
    ref.step();
    expect_near(ps, ref, 2e-6, s);
  }
}

TEST(OptimLamb, StateDictRoundTripContinuesIdentically) {
  NamedParameters a = make_params();
  auto opt_a = make_lamb(a);
  for (int s = 1; s <= 2; ++s) {
    set_grads(a, s);
    opt_a->step();
  }
  OptimizerState saved;
  for (const auto& [k, t] : opt_a->state_dict()) saved.push_back({k, t.clone()});
  NamedParameters b = make_params();
  for (size_t k = 0; k < b.size(); ++k) b[k].second.data().copy_(a[k].second.data());
  auto opt_b = make_lamb(b);
  opt_b->load_state_dict(saved);
  for (int s = 3; s <= kSteps; ++s) {
    set_grads(a, s);
    set_grads(b, s);
    opt_a->step();
    opt_b->step();
  }
  for (size_t k = 0; k < a.size(); ++k)
    EXPECT_EQ(b[k].second.data().to_vector<double>(), a[k].second.data().to_vector<double>())
        << kNames[k];
}

TEST(OptimLamb, CapturableMatchesEager) {
  NamedParameters eager = make_params(), cap = make_params();
  auto opt_e = make_lamb(eager), opt_c = make_lamb(cap);
  for (int s = 1; s <= kSteps; ++s) {
    if (s == 2) opt_c->set_capturable();  // after one eager step, as aim-train --cuda-graph
    for (Optimizer* o : {opt_e.get(), opt_c.get()}) o->set_lr(kLr * (1.0 + 0.5 * s));
    set_grads(eager, s);
    set_grads(cap, s);
    opt_e->step();
    opt_c->step();
  }
  for (size_t k = 0; k < eager.size(); ++k)
    EXPECT_EQ(cap[k].second.data().to_vector<double>(), eager[k].second.data().to_vector<double>())
        << kNames[k];
  for (const auto& [key, t] : opt_c->state_dict())
    if (key == "w.step") {
      EXPECT_EQ(t.item(), double(kSteps));
    }
}

TEST(OptimLamb, MakeOptimizerDefaultsAndErrors) {
  OptimizerOptions o;
  o.name = "lamb";
  o.lr = kLr;
  NamedParameters a = make_params(), b = make_params();
  auto made = make_optimizer(o, a);
  ASSERT_NE(dynamic_cast<Lamb*>(made.get()), nullptr);
  Lamb direct(b, kLr, 0.9, 0.999, 1e-6, 0.01);  // weight decay 0.01 by default
  for (int s = 1; s <= 2; ++s) {
    set_grads(a, s);
    set_grads(b, s);
    made->step();
    direct.step();
  }
  for (size_t k = 0; k < a.size(); ++k)
    EXPECT_EQ(a[k].second.data().to_vector<double>(), b[k].second.data().to_vector<double>());
  EXPECT_THROW(Lamb(make_params(), -1.0), Error);
  EXPECT_THROW(Lamb(make_params(), 0.1, 1.0), Error);
  EXPECT_THROW(Lamb(make_params(), 0.1, 0.9, 0.999, 1e-6, -0.1), Error);
  o.name = "lambda";
  try {
    make_optimizer(o, make_params());
    FAIL() << "unknown optimizer accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("adagrad, lamb"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace aim::train
