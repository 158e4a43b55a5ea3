// train/optim: each optimizer's first three steps on a 3-element f64 parameter against values
// computed by torch.optim's update formulas (SGD with momentum + Nesterov + weight decay, SGD
// with dampening, Adam, Adam with L2 weight decay, AdamW, Adagrad with lr_decay), state_dict
// round trips that continue identically, f32 parameters, clip_grad_norm, and LR schedules.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "train/optim.h"

namespace aim::train {
namespace {

using autograd::Variable;
using Rows = std::vector<std::vector<double>>;

const std::vector<double> kP0 = {1.0, -2.0, 3.0};
const Rows kGrads = {{0.5, -1.0, 2.0}, {-0.3, 0.4, 1.0}, {0.1, 0.2, -0.6}};

Variable make_param(DType t = DType::f64) {
  return Variable(Tensor::from_vector<double>(kP0, {3}).to(t), true, "w");
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

using Factory = std::function<std::unique_ptr<Optimizer>(NamedParameters)>;

void run_three_steps(const Factory& make, const Rows& want, DType t = DType::f64,
                     double tol = 1e-12) {
  Variable p = make_param(t);
  auto opt = make({{"w", p}});
  for (int s = 0; s < 3; ++s) {
    set_grad(p, kGrads[size_t(s)]);
    opt->step();
    expect_rows(p, want[size_t(s)], tol, s + 1);
  }
}

// torch.optim.SGD(lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True)
const Rows kSgdNesterov = {{0.9031, -1.8062, 2.6143},
                           {0.91707411, -1.79614822, 2.25490283},
                           {0.882721158191, -1.787314516382, 2.133513931623}};
// torch.optim.SGD(lr=0.1, momentum=0.9, dampening=0.1)
const Rows kSgdDampening = {{0.95, -1.9, 2.8}, {0.932, -1.846, 2.53}, {0.9068, -1.8154, 2.341}};
// torch.optim.Adam(lr=0.01)
const Rows kAdam = {{0.9900000002, -1.9900000001, 2.99000000005},
                    {0.98808501989417752, -1.9865439416662627, 2.9806782037208515},
                    {0.98554536806163684, -1.9850847425169962, 2.9753759837555771}};
// torch.optim.Adam(lr=0.01, weight_decay=0.1)
const Rows kAdamL2 = {{0.99000000016666667, -1.9900000000833333, 2.9900000000434783},
                      {0.98601158616227824, -1.9846214736765964, 2.9805055096719486},
                      {0.98115564302433855, -1.9804719426734008, 2.9739399485620153}};
// torch.optim.AdamW(lr=0.01, weight_decay=0.1)
const Rows kAdamW = {{0.9890000002, -1.9880000001, 2.98700000005},
                     {0.98609601989397755, -1.9825559416661627, 2.9746912037208015},
                     {0.9825702720415429, -1.97911418657523, 2.9664142925518062}};
// torch.optim.Adagrad(lr=0.1, lr_decay=0.05, weight_decay=0.01)
const Rows kAdagrad = {{0.90000000001960778, -1.9000000000098038, 2.9000000000049262},
                       {0.94719891633445941, -1.9333252736646798, 2.8569401955322009},
                       {0.93053722316624243, -1.9482060633979152, 2.8790783747982474}};

Factory sgd_nesterov() {
  return [](NamedParameters p) { return std::make_unique<SGD>(p, 0.1, 0.9, 0.0, 0.01, true); };
}
Factory adam() {
  return [](NamedParameters p) { return std::make_unique<Adam>(p, 0.01); };
}
Factory adamw() {
  return [](NamedParameters p) { return std::make_unique<AdamW>(p, 0.01, 0.9, 0.999, 1e-8, 0.1); };
}
Factory adagrad() {
  return [](NamedParameters p) { return std::make_unique<Adagrad>(p, 0.1, 0.05, 0.01); };
}

TEST(OptimSGD, PlainMatchesFormula) {
  run_three_steps([](NamedParameters p) { return std::make_unique<SGD>(p, 0.1); },
                  {{0.95, -1.9, 2.8}, {0.98, -1.94, 2.7}, {0.97, -1.96, 2.76}});
}
TEST(OptimSGD, MomentumNesterovWeightDecay) { run_three_steps(sgd_nesterov(), kSgdNesterov); }
TEST(OptimSGD, MomentumDampening) {
  run_three_steps([](NamedParameters p) { return std::make_unique<SGD>(p, 0.1, 0.9, 0.1); },
                  kSgdDampening);
}
TEST(OptimAdam, MatchesFormula) { run_three_steps(adam(), kAdam); }
TEST(OptimAdam, FirstStepIsLrTimesSign) {
  // Step 1: m_hat = g, v_hat = g^2, so p -= lr * g / (|g| + eps) ~ lr * sign(g).
  EXPECT_NEAR(kAdam[0][0], 1.0 - 0.01, 1e-9);
  EXPECT_NEAR(kAdam[0][1], -2.0 + 0.01, 1e-9);
}
TEST(OptimAdam, L2WeightDecay) {
  run_three_steps(
      [](NamedParameters p) { return std::make_unique<Adam>(p, 0.01, 0.9, 0.999, 1e-8, 0.1); },
      kAdamL2);
}
TEST(OptimAdam, AdamWDecoupled) { run_three_steps(adamw(), kAdamW); }
TEST(OptimAdagrad, MatchesFormula) { run_three_steps(adagrad(), kAdagrad); }

TEST(OptimF32, AdamAndSgdInFloat) {
  run_three_steps(adamw(), kAdamW, DType::f32, 2e-6);
  run_three_steps(sgd_nesterov(), kSgdNesterov, DType::f32, 2e-6);
}

TEST(OptimStep, ParameterWithoutGradIsSkipped) {
  Variable p = make_param(), q = make_param();
  Adam opt({{"p", p}, {"q", q}}, 0.01);
  set_grad(p, kGrads[0]);
  opt.step();
  expect_rows(p, kAdam[0], 1e-12, 1);
  expect_rows(q, kP0, 0, 1);
  const OptimizerState sd = opt.state_dict();
  ASSERT_EQ(sd.size(), 3u);  // p.exp_avg, p.exp_avg_sq, p.step
  EXPECT_EQ(sd[0].first, "p.exp_avg");
  EXPECT_EQ(sd[2].first, "p.step");
  EXPECT_EQ(sd[2].second.item(), 1.0);
}

TEST(OptimStep, ZeroGradZeroes) {
  Variable p = make_param();
  SGD opt({{"w", p}}, 0.1);
  set_grad(p, kGrads[0]);
  opt.zero_grad();
  for (double v : p.grad().to_vector<double>()) EXPECT_EQ(v, 0.0);
}

// One step, save (deep copy), load into a fresh optimizer on a copy of the parameter, and the
// next two steps agree with the uninterrupted run.
void round_trip(const Factory& make, const Rows& want) {
  Variable p = make_param();
  auto opt = make({{"w", p}});
  set_grad(p, kGrads[0]);
  opt->step();
  OptimizerState saved;
  for (const auto& [k, t] : opt->state_dict()) saved.push_back({k, t.clone()});
  ASSERT_FALSE(saved.empty());

  Variable p2(p.data().clone(), true, "w");
  auto opt2 = make({{"w", p2}});
  opt2->load_state_dict(saved);
  for (int s = 1; s < 3; ++s) {
    set_grad(p2, kGrads[size_t(s)]);
    opt2->step();
    expect_rows(p2, want[size_t(s)], 1e-12, s + 1);
  }
  // Without the state the continuation differs (the test is not vacuous).
  Variable p3(p.data().clone(), true, "w");
  auto opt3 = make({{"w", p3}});
  set_grad(p3, kGrads[1]);
  opt3->step();
  EXPECT_GT(std::fabs(p3.data().to_vector<double>()[0] - want[1][0]), 1e-6);
}

// Capturable mode (CUDA graphs): after one eager step, lr and the step count come from the
// optimizer's {lr, step} tensor and the count advances there; the numbers stay torch's (Adam's
// bias corrections and Adagrad's lr_decay need the right step), and state_dict reports it.
void capturable_three_steps(const Factory& make, const Rows& want) {
  Variable p = make_param();
  auto opt = make({{"w", p}});
  set_grad(p, kGrads[0]);
  opt->step();
  expect_rows(p, want[0], 1e-12, 1);
  opt->set_capturable();
  EXPECT_TRUE(opt->capturable());
  for (int s = 1; s < 3; ++s) {
    set_grad(p, kGrads[size_t(s)]);
    opt->step();
    expect_rows(p, want[size_t(s)], 1e-12, s + 1);
  }
  for (const auto& [k, t] : opt->state_dict()) {
    if (k == "w.step") {
      EXPECT_EQ(t.item(), 3.0);
    }
  }
}
TEST(OptimCapturable, SgdAdamAdamWAdagradMatchTorch) {
  capturable_three_steps(sgd_nesterov(), kSgdNesterov);
  capturable_three_steps(adam(), kAdam);
  capturable_three_steps(adamw(), kAdamW);
  capturable_three_steps(adagrad(), kAdagrad);
}
TEST(OptimCapturable, LearningRateChangesReachTheUpdate) {
  Variable a = make_param(), b = make_param();
  Adam eager({{"w", a}}, 0.01), cap({{"w", b}}, 0.01);
  for (int s = 0; s < 3; ++s) {
    if (s == 1) cap.set_capturable();
    for (Optimizer* o : {static_cast<Optimizer*>(&eager), static_cast<Optimizer*>(&cap)})
      o->set_lr(0.01 * (s + 1));
    set_grad(a, kGrads[size_t(s)]);
    set_grad(b, kGrads[size_t(s)]);
    eager.step();
    cap.step();
    expect_rows(b, a.data().to_vector<double>(), 1e-15, s + 1);
  }
}
TEST(OptimCapturable, Errors) {
  Variable p = make_param(), q(Tensor::zeros({2}, DType::f64), true, "q");
  Adam o({{"w", p}, {"q", q}}, 0.01);
  EXPECT_THROW(o.set_capturable(), Error);  // no gradient yet: take an eager step first
  set_grad(p, kGrads[0]);
  o.step();
  o.set_capturable();
  EXPECT_THROW(o.set_capturable(), Error);  // already on
  q.mutable_grad() = Tensor::ones({2}, DType::f64);
  try {
    o.step();
    ADD_FAILURE() << "a parameter with a new gradient was updated by a capturable step";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q got a gradient after capturable mode started"),
              std::string::npos)
        << e.what();
  }
}

TEST(OptimStateDict, RoundTripSgd) { round_trip(sgd_nesterov(), kSgdNesterov); }
TEST(OptimStateDict, RoundTripAdam) { round_trip(adam(), kAdam); }
TEST(OptimStateDict, RoundTripAdamW) { round_trip(adamw(), kAdamW); }
TEST(OptimStateDict, RoundTripAdagrad) { round_trip(adagrad(), kAdagrad); }

TEST(OptimStateDict, NamesAndErrors) {
  Variable p = make_param();
  SGD opt({{"fc.weight", p}}, 0.1, 0.9);
  EXPECT_TRUE(opt.state_dict().empty());  // no buffer before the first step
  set_grad(p, kGrads[0]);
  opt.step();
  const OptimizerState sd = opt.state_dict();
  ASSERT_EQ(sd.size(), 1u);
  EXPECT_EQ(sd[0].first, "fc.weight.momentum_buffer");
  EXPECT_THROW(opt.load_state_dict({{"fc.bias.momentum_buffer", sd[0].second}}), std::exception);
  EXPECT_THROW(opt.load_state_dict({{"fc.weight.momentum_buffer", Tensor::zeros({4})}}),
               std::exception);
}

TEST(OptimClip, ScalesToMaxNorm) {
  Variable a = make_param(), b = Variable(Tensor::zeros({1}, DType::f64), true, "b");
  set_grad(a, {3.0, 4.0, 0.0});
  b.mutable_grad() = Tensor::from_vector<double>({12.0}, {1});
  const double total = clip_grad_norm({{"a", a}, {"b", b}}, 6.5);
  EXPECT_NEAR(total, 13.0, 1e-12);
  const double c = 6.5 / (13.0 + 1e-6);
  const auto ga = a.grad().to_vector<double>();
  EXPECT_NEAR(ga[0], 3.0 * c, 1e-12);
  EXPECT_NEAR(ga[1], 4.0 * c, 1e-12);
  EXPECT_NEAR(b.grad().to_vector<double>()[0], 12.0 * c, 1e-12);
}

TEST(OptimClip, BelowMaxNormUnchanged) {
  Variable a = make_param();
  set_grad(a, {3.0, 4.0, 0.0});
  EXPECT_NEAR(clip_grad_norm({{"a", a}}, 10.0), 5.0, 1e-12);
  EXPECT_EQ(a.grad().to_vector<double>()[1], 4.0);
  Variable none = make_param();  // no gradient: skipped
  EXPECT_EQ(clip_grad_norm({{"n", none}}, 1.0), 0.0);
}

TEST(OptimSchedule, Values) {
  const double pi = 3.14159265358979323846;
  EXPECT_EQ(LRSchedule::constant(0.1).lr(12345), 0.1);
  const LRSchedule st = LRSchedule::step(0.1, 10, 0.5);
  EXPECT_DOUBLE_EQ(st.lr(0), 0.1);
  EXPECT_DOUBLE_EQ(st.lr(9), 0.1);
  EXPECT_DOUBLE_EQ(st.lr(10), 0.05);
  EXPECT_DOUBLE_EQ(st.lr(25), 0.025);
  const LRSchedule po = LRSchedule::poly(1.0, 100, 2.0);
  EXPECT_DOUBLE_EQ(po.lr(0), 1.0);
  EXPECT_DOUBLE_EQ(po.lr(50), 0.25);
  EXPECT_DOUBLE_EQ(po.lr(100), 0.0);
  EXPECT_DOUBLE_EQ(po.lr(150), 0.0);
  const LRSchedule wl = LRSchedule::warmup_linear(1.0, 10, 110);
  EXPECT_DOUBLE_EQ(wl.lr(0), 0.0);
  EXPECT_DOUBLE_EQ(wl.lr(5), 0.5);
  EXPECT_DOUBLE_EQ(wl.lr(10), 1.0);
  EXPECT_DOUBLE_EQ(wl.lr(60), 0.5);
  EXPECT_DOUBLE_EQ(wl.lr(110), 0.0);
  EXPECT_DOUBLE_EQ(wl.lr(200), 0.0);
  const LRSchedule wc = LRSchedule::warmup_cosine(2.0, 4, 104);
  EXPECT_DOUBLE_EQ(wc.lr(1), 0.5);
  EXPECT_DOUBLE_EQ(wc.lr(4), 2.0);
  EXPECT_NEAR(wc.lr(29), 2.0 * 0.5 * (1 + std::cos(pi * 0.25)), 1e-15);
  EXPECT_NEAR(wc.lr(54), 1.0, 1e-15);
  EXPECT_NEAR(wc.lr(104), 0.0, 1e-15);
}

TEST(OptimSchedule, DrivesOptimizer) {
  Variable p = make_param();
  SGD opt({{"w", p}}, 0.0);
  const LRSchedule s = LRSchedule::step(0.1, 1, 0.5);
  for (int64_t t = 0; t < 2; ++t) {
    opt.set_lr(s.lr(t));
    set_grad(p, {1.0, 1.0, 1.0});
    opt.step();
  }
  expect_rows(p, {1.0 - 0.15, -2.0 - 0.15, 3.0 - 0.15}, 1e-12, 2);
}

}  // namespace
}  // namespace aim::train
