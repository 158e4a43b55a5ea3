// layers/: Module bookkeeping (parameter/buffer/child names and PyTorch key order, train/eval,
// load_state_dict and its errors, to(DType)), and each layer's numbers: Linear = x W^T + b,
// BatchNorm1d train/eval and running stats by PyTorch's formula, Dice gradcheck in training and
// eval by hand, Dropout identity in eval, Embedding padding row, PReLU, MLP keys.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/reduce.h"
#include "autograd/gradcheck.h"
#include "kernels/matmul/matmul.h"
#include "kernels/testing.h"
#include "layers/activation.h"
#include "layers/batchnorm.h"
#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/sequential.h"
#include "tests/support/op_counts.h"

namespace aim::layers {
namespace {

Tensor vec(const std::vector<double>& v, const Shape& s) {
  return Tensor::from_vector<double>(v, s);
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want,
                 double tol = 1e-12) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

// A nested model: own parameter registered after its children, a Sequential inside.
class Net : public Module {
 public:
  explicit Net(uint64_t seed) {
    emb = child("emb", std::make_shared<Embedding>(10, 4, 0, seed));
    mlp = child("mlp", make_mlp({4, 8, 2}, "dice", seed + 1));
    bn = child("bn", std::make_shared<BatchNorm1d>(2));
    scale = param("scale", Tensor::ones({1}));
  }
  std::shared_ptr<Embedding> emb;
  std::shared_ptr<Sequential> mlp;
  std::shared_ptr<BatchNorm1d> bn;
  Parameter scale;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<std::string> keys(const StateDict& sd) {
  std::vector<std::string> k;
  for (const auto& kv : sd) k.push_back(kv.first);
  return k;
}

// ---- Module ----------------------------------------------------------------------------------

TEST(LayersModule, StateDictKeysInPyTorchOrder) {
  Net net(1);
  const std::vector<std::string> want = {"scale",
                                         "emb.weight",
                                         "mlp.0.weight",
                                         "mlp.0.bias",
                                         "mlp.1.alpha",
                                         "mlp.1.running_mean",
                                         "mlp.1.running_var",
                                         "mlp.2.weight",
                                         "mlp.2.bias",
                                         "bn.weight",
                                         "bn.bias",
                                         "bn.running_mean",
                                         "bn.running_var",
                                         "bn.num_batches_tracked"};
  EXPECT_EQ(keys(net.state_dict()), want);
  std::vector<std::string> pnames;
  for (const auto& kv : net.named_parameters()) pnames.push_back(kv.first);
  EXPECT_EQ(pnames, (std::vector<std::string>{"scale", "emb.weight", "mlp.0.weight", "mlp.0.bias",
                                              "mlp.1.alpha", "mlp.2.weight", "mlp.2.bias",
                                              "bn.weight", "bn.bias"}));
  EXPECT_EQ(net.parameters().size(), 9u);
  EXPECT_EQ(net.num_parameters(), 1 + 40 + 32 + 8 + 8 + 16 + 2 + 2 + 2);
  for (const auto& p : net.parameters()) EXPECT_TRUE(p.requires_grad());
  EXPECT_EQ(net.bn->named_buffers().size(), 3u);
  EXPECT_EQ(net.state_dict().back().second.dtype(), DType::i64);
}

Tensor entry(const StateDict& sd, const std::string& key) {
  for (const auto& kv : sd)
    if (kv.first == key) return kv.second;
  ADD_FAILURE() << "no key " << key;
  return Tensor();
}

TEST(LayersModule, LoadStateDictRoundTrip) {
  Net a(1), b(2);
  // state_dict tensors share storage with the module: write a's buffers through them.
  entry(a.state_dict(), "bn.running_mean").fill_(0.5);
  entry(a.state_dict(), "bn.num_batches_tracked").fill_(7);
  EXPECT_NE(entry(a.state_dict(), "mlp.0.weight").to_vector<float>(),
            entry(b.state_dict(), "mlp.0.weight").to_vector<float>());
  b.load_state_dict(a.state_dict());
  const StateDict sa = a.state_dict(), sb = b.state_dict();
  ASSERT_EQ(keys(sa), keys(sb));
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].second.to_vector<double>(), sb[i].second.to_vector<double>()) << sa[i].first;
    EXPECT_NE(sa[i].second.storage(), sb[i].second.storage()) << "copied, not aliased";
  }
  EXPECT_EQ(entry(b.state_dict(), "bn.running_mean").to_vector<float>(),
            (std::vector<float>{0.5f, 0.5f}));
}

TEST(LayersModule, LoadStateDictErrors) {
  Net a(1);
  const StateDict good = a.state_dict();
  std::map<std::string, Tensor> m(good.begin(), good.end());

  auto missing = m;
  missing.erase("mlp.2.bias");
  EXPECT_NE(error_of([&] {
              a.load_state_dict(missing);
            }).find("load_state_dict: missing keys: mlp.2.bias"),
            std::string::npos);

  auto extra = m;
  extra["mlp.3.weight"] = Tensor::zeros({2});
  EXPECT_NE(error_of([&] {
              a.load_state_dict(extra);
            }).find("load_state_dict: unexpected keys: mlp.3.weight"),
            std::string::npos);

  auto both = missing;
  both["zzz"] = Tensor::zeros({1});
  EXPECT_NE(error_of([&] {
              a.load_state_dict(both);
            }).find("load_state_dict: missing keys: mlp.2.bias; unexpected keys: zzz"),
            std::string::npos);
  // Not strict: missing and unexpected keys are allowed.
  EXPECT_EQ(error_of([&] { a.load_state_dict(both, /*strict=*/false); }), "");

  auto shape = m;
  shape["mlp.0.weight"] = Tensor::zeros({4, 8});
  EXPECT_NE(error_of([&] {
              a.load_state_dict(shape);
            }).find("load_state_dict: mlp.0.weight has shape [8, 4], checkpoint has [4, 8]"),
            std::string::npos);
  // Shape mismatches fail even when not strict.
  EXPECT_NE(error_of([&] { a.load_state_dict(shape, false); }).find("has shape"),
            std::string::npos);

  auto dtype = m;
  dtype["bn.weight"] = Tensor::ones({2}, DType::f64);
  EXPECT_NE(error_of([&] {
              a.load_state_dict(dtype);
            }).find("load_state_dict: bn.weight has dtype f32, checkpoint has f64"),
            std::string::npos);

  // Validation happens before any write: a failed load leaves the module unchanged.
  auto partial = m;
  partial["scale"] = Tensor::full({1}, 3.0);
  partial["bn.weight"] = Tensor::zeros({3});
  EXPECT_NE(error_of([&] { a.load_state_dict(partial); }), "");
  EXPECT_EQ(a.scale.data().item(), 1.0);
}

TEST(LayersModule, RegistrationErrors) {
  struct Bad : Module {
    void dup() {
      param("w", Tensor::ones({1}));
      buffer("w", Tensor::ones({1}));
    }
    void dotted() { param("a.b", Tensor::ones({1})); }
  };
  Bad b;
  EXPECT_NE(error_of([&] { b.dup(); }).find("duplicate"), std::string::npos);
  EXPECT_NE(error_of([&] { b.dotted(); }).find("no '.'"), std::string::npos);
  EXPECT_NE(error_of([&] { b.forward(Variable(Tensor::ones({1}))); }).find("no unary forward"),
            std::string::npos);
}

TEST(LayersModule, TrainEvalPropagates) {
  Net net(1);
  EXPECT_TRUE(net.is_training());
  net.eval();
  EXPECT_FALSE(net.is_training());
  EXPECT_FALSE(net.mlp->is_training());
  EXPECT_FALSE((*net.mlp)[1]->is_training());
  EXPECT_FALSE(net.bn->is_training());
  net.train();
  EXPECT_TRUE((*net.mlp)[1]->is_training());
  // A child added to a module in eval takes its mode.
  Sequential s;
  s.eval();
  s.push_back(std::make_shared<Dropout>(0.5));
  EXPECT_FALSE(s[0]->is_training());
}

TEST(LayersModule, ZeroGradAndToDType) {
  Linear l(3, 2, 5);
  Variable x(kernels::random_tensor({4, 3}, DType::f32, 1));
  autograd::sum(l.forward(x)).backward();
  ASSERT_TRUE(l.weight.grad().defined());
  l.zero_grad();
  for (double g : l.weight.grad().to_vector<double>()) EXPECT_EQ(g, 0.0);
  BatchNorm1d bn(3);
  bn.to(DType::f64);
  for (const auto& kv : bn.state_dict())
    EXPECT_EQ(kv.second.dtype(), kv.first == "num_batches_tracked" ? DType::i64 : DType::f64)
        << kv.first;
}

// ---- layers ----------------------------------------------------------------------------------

// After zero_grad() a Linear's weight gradient is written by its GEMM (beta 0) into the stale
// buffer, its bias gradient copied into it: zero_grad and the step run no more fills than a step
// that accumulates, and the gradients equal a fresh layer's exactly.
TEST(LayersLinear, ZeroGradThenBackwardWritesWithoutAFill) {
  Linear l(5, 7, 21), fresh(5, 7, 21);
  const Tensor xt = kernels::random_tensor({4, 5}, DType::f32, 22);
  auto step = [&](Linear& m) { autograd::sum(m.forward(Variable(xt))).backward(); };
  using ::aim::testing::count_ops;
  step(l);
  const std::map<std::string, int> accumulating = count_ops([&] { step(l); });
  std::map<std::string, int> zeroed = count_ops([&] {
    l.zero_grad();
    step(l);
  });
  EXPECT_EQ(zeroed["fill"], accumulating.at("fill"));  // the root's seed only
  EXPECT_EQ(zeroed["matmul"], 2);
  step(fresh);
  EXPECT_EQ(l.weight.grad().to_vector<float>(), fresh.weight.grad().to_vector<float>());
  EXPECT_EQ(l.bias.grad().to_vector<float>(), fresh.bias.grad().to_vector<float>());
}

TEST(LayersLinear, ForwardIsXWtPlusB) {
  Linear l(3, 4, 11);
  const double bound = 1 / std::sqrt(3.0);
  for (float w : l.weight.data().to_vector<float>()) EXPECT_LE(std::abs(w), bound);
  for (float b : l.bias.data().to_vector<float>()) EXPECT_LE(std::abs(b), bound);
  Linear same(3, 4, 11), other(3, 4, 12);
  EXPECT_EQ(l.weight.data().to_vector<float>(), same.weight.data().to_vector<float>());
  EXPECT_NE(l.weight.data().to_vector<float>(), other.weight.data().to_vector<float>());

  const Tensor xt = kernels::random_tensor({2, 3}, DType::f32, 3);
  const auto y = l.forward(Variable(xt)).data().to_vector<double>();
  const auto x = xt.to_vector<double>();
  const auto w = l.weight.data().to_vector<double>();
  const auto b = l.bias.data().to_vector<double>();
  std::vector<double> want(8);
  for (int n = 0; n < 2; ++n)
    for (int o = 0; o < 4; ++o) {
      double acc = b[o];
      for (int i = 0; i < 3; ++i) acc += x[n * 3 + i] * w[o * 3 + i];
      want[n * 4 + o] = acc;
    }
  expect_near(y, want, 1e-5);
  Linear nob(3, 4, 1, /*bias=*/false);
  EXPECT_FALSE(nob.bias.defined());
  EXPECT_EQ(keys(nob.state_dict()), std::vector<std::string>{"weight"});
}

// Linear::allow_prepack: the same bits as without, packed only where the GEMM reads the panels
// (eval mode, no autograd, a small batch) and dropped when the weight may change.
TEST(LayersLinear, PrepackedWeightSameBitsAndDroppedWhenTheWeightMayChange) {
  Linear l(2048, 300, 7);  // 600K floats: the GEMM's few-rows path reads packed panels
  if (!kernels::matmul_reads_packed_b(l.weight.data(), true, 16))
    GTEST_SKIP() << "no packed path on this CPU (AVX-512)";
  const Variable x(kernels::random_tensor({16, 2048}, DType::f32, 5));
  const Variable big(kernels::random_tensor({64, 2048}, DType::f32, 6));
  l.eval();
  auto no_grad = std::make_unique<autograd::NoGradGuard>();
  const auto plain = l.forward(x).data().to_vector<float>();
  const auto plain_big = l.forward(big).data().to_vector<float>();
  EXPECT_TRUE(l.allow_prepack(true));
  EXPECT_EQ(l.prepacked_bytes(), 0);
  EXPECT_EQ(l.forward(big).data().to_vector<float>(), plain_big);  // 64 rows: not read
  EXPECT_EQ(l.prepacked_bytes(), 0);
  EXPECT_EQ(l.forward(x).data().to_vector<float>(), plain);
  EXPECT_EQ(l.prepacked_bytes(), int64_t(sizeof(float)) * 7 * 48 * 2048);  // 300 -> 7 panels
  EXPECT_EQ(l.forward(x).data().to_vector<float>(), plain);                // the kept copy

  // New values written in place: the copy is dropped and the new weight packed.
  Linear other(2048, 300, 8);
  l.load_state_dict(other.state_dict());
  EXPECT_EQ(l.prepacked_bytes(), 0);
  other.eval();
  EXPECT_EQ(l.forward(x).data().to_vector<float>(), other.forward(x).data().to_vector<float>());
  EXPECT_GT(l.prepacked_bytes(), 0);
  // Training mode, or a forward that records a graph, drops it (an optimizer may step next).
  no_grad.reset();
  l.forward(x);
  EXPECT_EQ(l.prepacked_bytes(), 0);
  no_grad = std::make_unique<autograd::NoGradGuard>();
  l.forward(x);
  EXPECT_GT(l.prepacked_bytes(), 0);
  l.train();
  l.forward(x);
  EXPECT_EQ(l.prepacked_bytes(), 0);
}

// PyTorch's BatchNorm1d by hand: batch mean and biased var normalise, the unbiased var updates
// running_var, momentum 0.1.
TEST(LayersBatchNorm, TrainEvalAndRunningStats) {
  BatchNorm1d bn(2);
  bn.to(DType::f64);
  bn.weight.mutable_data().copy_(vec({2.0, 0.5}, {2}));
  bn.bias.mutable_data().copy_(vec({0.1, -1.0}, {2}));
  const std::vector<std::vector<double>> batches = {{1, 2, 3, -4, 5, 6, 7, 0},
                                                    {0.5, 1, -1.5, 2, 2.5, 3, 4.5, -2}};
  std::vector<double> rm = {0, 0}, rv = {1, 1};
  const double eps = 1e-5;
  for (const auto& xs : batches) {
    const auto y = bn.forward(Variable(vec(xs, {4, 2}))).data().to_vector<double>();
    std::vector<double> want(8);
    for (int c = 0; c < 2; ++c) {
      double m = 0, v = 0;
      for (int n = 0; n < 4; ++n) m += xs[n * 2 + c] / 4;
      for (int n = 0; n < 4; ++n) v += (xs[n * 2 + c] - m) * (xs[n * 2 + c] - m) / 4;
      const double g = c == 0 ? 2.0 : 0.5, b = c == 0 ? 0.1 : -1.0;
      for (int n = 0; n < 4; ++n)
        want[n * 2 + c] = (xs[n * 2 + c] - m) / std::sqrt(v + eps) * g + b;
      rm[c] = 0.9 * rm[c] + 0.1 * m;
      rv[c] = 0.9 * rv[c] + 0.1 * v * 4 / 3;
    }
    expect_near(y, want, 1e-10);
  }
  const StateDict sd = bn.state_dict();
  expect_near(entry(sd, "running_mean").to_vector<double>(), rm);
  expect_near(entry(sd, "running_var").to_vector<double>(), rv);
  EXPECT_EQ(entry(sd, "num_batches_tracked").item(), 2.0);

  bn.eval();
  const std::vector<double> xs = {1, -1, 0.5, 3};
  const auto y = bn.forward(Variable(vec(xs, {2, 2}))).data().to_vector<double>();
  std::vector<double> want(4);
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 2; ++c)
      want[n * 2 + c] = (xs[n * 2 + c] - rm[c]) / std::sqrt(rv[c] + eps) * (c == 0 ? 2.0 : 0.5) +
                        (c == 0 ? 0.1 : -1.0);
  expect_near(y, want, 1e-10);
  expect_near(entry(bn.state_dict(), "running_mean").to_vector<double>(), rm);  // eval: no update
  EXPECT_EQ(entry(bn.state_dict(), "num_batches_tracked").item(), 2.0);
}

// forward_relu = relu(forward): at inference through the fused kernel pass, the same bits as
// batch norm then relu (one rounding of the same f32 expression, relu exact); in eval with a
// gradient wanted (frozen BN) and in training, batch norm then relu, the same gradient.
TEST(LayersBatchNorm, ForwardReluEqualsReluOfForward) {
  BatchNorm2d bn(5);
  bn.weight.mutable_data().copy_(kernels::random_tensor({5}, DType::f32, 1, 0.5, 1.5));
  bn.bias.mutable_data().copy_(kernels::random_tensor({5}, DType::f32, 2, -0.5, 0.5));
  const Tensor xt = kernels::random_tensor({3, 5, 6, 7}, DType::f32, 3, -2, 3);
  bn.forward(Variable(xt));  // running statistics away from 0 / 1
  bn.eval();
  {
    autograd::NoGradGuard no_grad;
    const auto fused = bn.forward_relu(Variable(xt)).data().to_vector<float>();
    const auto two = autograd::relu(bn.forward(Variable(xt))).data().to_vector<float>();
    ASSERT_EQ(fused.size(), two.size());
    int zeros = 0;
    for (size_t i = 0; i < fused.size(); ++i) {
      EXPECT_EQ(fused[i], two[i]) << i;
      zeros += fused[i] == 0.0f;
    }
    EXPECT_GT(zeros, int(fused.size()) / 5);  // the relu was exercised
  }
  for (bool train : {false, true}) {
    SCOPED_TRACE(train ? "training" : "eval with gradient");
    if (train) bn.train();
    const Variable x(xt, true, "x");
    Variable y = bn.forward_relu(x);
    autograd::sum(y).backward();
    const auto g1 = x.grad().to_vector<double>();
    const Variable x2(xt, true, "x2");
    autograd::sum(autograd::relu(bn.forward(x2))).backward();
    const auto g2 = x2.grad().to_vector<double>();
    expect_near(g1, g2, 1e-6);
  }
}

// momentum unset: the cumulative average (factor 1 / num_batches_tracked), computed without a
// host read of the count (the blend runs on the count's device). BatchNorm1d and BatchNorm2d;
// the count after a state-dict write is honoured (it is read on the device, not shadowed).
TEST(LayersBatchNorm, CumulativeAverageWithoutMomentum) {
  const std::vector<std::vector<double>> batches = {
      {1, 2, 3, -4, 5, 6, 7, 0}, {0.5, 1, -1.5, 2, 2.5, 3, 4.5, -2}, {3, 1, 4, 1, 5, 9, 2, 6}};
  BatchNorm1d bn1(2, 1e-5, std::nullopt);
  BatchNorm2d bn2(2, 1e-5, std::nullopt);
  bn1.to(DType::f64);
  bn2.to(DType::f64);
  std::vector<double> rm = {0, 0}, rv = {1, 1};
  for (size_t k = 0; k < batches.size(); ++k) {
    const auto& xs = batches[k];
    bn1.forward(Variable(vec(xs, {4, 2})));
    // The same values as [N=4, C=2, 1, 1].
    bn2.forward(Variable(vec(xs, {4, 2, 1, 1})));
    const double f = 1.0 / double(k + 1);
    for (int c = 0; c < 2; ++c) {
      double m = 0, v = 0;
      for (int n = 0; n < 4; ++n) m += xs[size_t(n * 2 + c)] / 4;
      for (int n = 0; n < 4; ++n) v += (xs[size_t(n * 2 + c)] - m) * (xs[size_t(n * 2 + c)] - m);
      rm[size_t(c)] = (1 - f) * rm[size_t(c)] + f * m;
      rv[size_t(c)] = (1 - f) * rv[size_t(c)] + f * v / 3;
    }
  }
  for (Module* bn : std::vector<Module*>{&bn1, &bn2}) {
    const StateDict sd = bn->state_dict();
    expect_near(entry(sd, "running_mean").to_vector<double>(), rm, 1e-12);
    expect_near(entry(sd, "running_var").to_vector<double>(), rv, 1e-12);
    EXPECT_EQ(entry(sd, "num_batches_tracked").dtype(), DType::i64);
    EXPECT_EQ(entry(sd, "num_batches_tracked").item(), 3.0);
  }
  // A count written through the state dict is the one the next step uses: 1 / (9 + 1).
  entry(bn1.state_dict(), "num_batches_tracked").fill_(9);
  const std::vector<double> xs = {1, 1, 3, 5, 1, 1, 3, 5};  // mean 2 and 3, unbiased var 4/3, 16/3
  bn1.forward(Variable(vec(xs, {4, 2})));
  const std::vector<double> want = {0.9 * rm[0] + 0.1 * 2, 0.9 * rm[1] + 0.1 * 3};
  expect_near(entry(bn1.state_dict(), "running_mean").to_vector<double>(), want, 1e-12);
  EXPECT_EQ(entry(bn1.state_dict(), "num_batches_tracked").item(), 10.0);
}

TEST(LayersBatchNorm, GradcheckTrainingThreeD) {
  BatchNorm1d bn(3);
  bn.to(DType::f64);
  bn.weight.mutable_data().copy_(kernels::random_tensor({3}, DType::f64, 4, 0.5, 1.5));
  const Variable x(kernels::random_tensor({2, 3, 4}, DType::f64, 5, -2, 2), true, "x");
  const auto r = autograd::gradcheck(
      [&](const std::vector<Variable>& v) { return bn.forward(v[0]); }, {x, bn.weight, bn.bias});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(LayersDice, GradcheckTraining) {
  Dice d(3);
  d.to(DType::f64);
  d.alpha.mutable_data().copy_(kernels::random_tensor({3}, DType::f64, 2, -1, 1));
  const Variable x(kernels::random_tensor({5, 3}, DType::f64, 1, -2, 2), true, "x");
  const auto r = autograd::gradcheck(
      [&](const std::vector<Variable>& v) { return d.forward(v[0]); }, {x, d.alpha});
  EXPECT_TRUE(r.ok) << r.message;
  // [N, T, C]: statistics over N and T.
  const Variable x3(kernels::random_tensor({2, 3, 3}, DType::f64, 3, -2, 2), true, "x3");
  const auto r3 = autograd::gradcheck(
      [&](const std::vector<Variable>& v) { return d.forward(v[0]); }, {x3, d.alpha});
  EXPECT_TRUE(r3.ok) << r3.message;
}

TEST(LayersDice, TrainAndEvalValues) {
  Dice d(2);
  d.to(DType::f64);
  d.alpha.mutable_data().copy_(vec({0.25, -0.5}, {2}));
  const std::vector<double> xs = {1, 2, 3, -4, -2, 6};
  const auto y = d.forward(Variable(vec(xs, {3, 2}))).data().to_vector<double>();
  const double alpha[2] = {0.25, -0.5}, eps = 1e-8;
  std::vector<double> want(6), rm(2), rv(2);
  for (int c = 0; c < 2; ++c) {
    double m = 0, v = 0;
    for (int n = 0; n < 3; ++n) m += xs[n * 2 + c] / 3;
    for (int n = 0; n < 3; ++n) v += (xs[n * 2 + c] - m) * (xs[n * 2 + c] - m) / 3;
    for (int n = 0; n < 3; ++n) {
      const double x = xs[n * 2 + c], p = 1 / (1 + std::exp(-(x - m) / std::sqrt(v + eps)));
      want[n * 2 + c] = p * x + (1 - p) * alpha[c] * x;
    }
    rm[c] = 0.1 * m;
    rv[c] = 0.9 + 0.1 * v * 3 / 2;
  }
  expect_near(y, want, 1e-12);
  d.eval();
  const auto ye = d.forward(Variable(vec({0.5, -1}, {1, 2}))).data().to_vector<double>();
  for (int c = 0; c < 2; ++c) {
    const double x = c == 0 ? 0.5 : -1,
                 p = 1 / (1 + std::exp(-(x - rm[c]) / std::sqrt(rv[c] + eps)));
    EXPECT_NEAR(ye[c], p * x + (1 - p) * alpha[c] * x, 1e-12);
  }
}

TEST(LayersDropout, EvalIsIdentityTrainDrops) {
  Dropout d(0.5, 3);
  const Tensor xt = kernels::random_tensor({64, 16}, DType::f32, 1, 0.5, 1.5);
  d.eval();
  const Variable x(xt);
  EXPECT_EQ(d.forward(x).data().to_vector<float>(), xt.to_vector<float>());
  d.train();
  const auto y = d.forward(x).data().to_vector<float>();
  const auto xv = xt.to_vector<float>();
  int zeros = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    if (y[i] == 0) {
      ++zeros;
    } else {
      EXPECT_FLOAT_EQ(y[i], 2 * xv[i]);
    }
  }
  EXPECT_GT(zeros, 400);
  EXPECT_LT(zeros, 624);
  // The layer's generator advances: the next mask differs.
  EXPECT_NE(d.forward(x).data().to_vector<float>(), y);
}

TEST(LayersLayerNorm, AffineInitAndValues) {
  LayerNorm ln(4, 1e-12);
  EXPECT_EQ(keys(ln.state_dict()), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(ln.weight.data().to_vector<float>(), (std::vector<float>{1, 1, 1, 1}));
  const auto y = ln.forward(Variable(Tensor::from_vector<float>({1, 2, 3, 4}, {1, 4})))
                     .data()
                     .to_vector<float>();
  const double sd = std::sqrt(1.25);
  for (int c = 0; c < 4; ++c) EXPECT_NEAR(y[size_t(c)], (c + 1 - 2.5) / sd, 1e-6);
  EXPECT_NE(error_of([&] {
              ln.forward(Variable(Tensor::zeros({2, 3})));
            }).find("[..., 4]"),
            std::string::npos);
  LayerNorm plain(3, 1e-5, false);
  EXPECT_TRUE(plain.state_dict().empty());
}

TEST(LayersActivation, GeluExactAndTanh) {
  const Variable x(Tensor::from_vector<double>({-1.5, 0, 0.7}, {3}));
  const auto exact = GELU().forward(x).data().to_vector<double>();
  const auto approx = GELU(true).forward(x).data().to_vector<double>();
  const double xs[] = {-1.5, 0, 0.7};
  for (int i = 0; i < 3; ++i) {
    const double v = xs[i];
    EXPECT_NEAR(exact[size_t(i)], 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))), 1e-12);
    const double t = std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v));
    EXPECT_NEAR(approx[size_t(i)], 0.5 * v * (1 + t), 1e-12);
  }
}

TEST(LayersEmbedding, PaddingRowAndLookup) {
  Embedding e(5, 3, -1, 9);  // padding_idx -1 -> row 4
  EXPECT_EQ(e.padding_idx(), 4);
  const auto w = e.weight.data().to_vector<float>();
  for (int c = 0; c < 3; ++c) EXPECT_EQ(w[4 * 3 + c], 0.0f);
  const Tensor idx = Tensor::from_vector<int64_t>({2, 4}, {2});
  const auto y = e.forward(idx).data().to_vector<float>();
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(y[c], w[2 * 3 + c]);
    EXPECT_EQ(y[3 + c], 0.0f);
  }
}

TEST(LayersActivation, PReLUAndMlpKeys) {
  PReLU p(2);
  const auto y = p.forward(Variable(Tensor::from_vector<float>({-4, 2, 3, -8}, {2, 2})))
                     .data()
                     .to_vector<float>();
  EXPECT_EQ(y, (std::vector<float>{-1, 2, 3, -2}));
  auto mlp = make_mlp({6, 5, 4, 1}, "prelu", 3);
  EXPECT_EQ(keys(mlp->state_dict()),
            (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "2.weight", "2.bias",
                                      "3.weight", "4.weight", "4.bias"}));
  const Variable out = mlp->forward(Variable(kernels::random_tensor({7, 6}, DType::f32, 1)));
  EXPECT_EQ(out.sizes(), (Shape{7, 1}));
  EXPECT_NE(error_of([] {
              make_mlp({2, 2}, "swish");
            }).find("unknown activation"),
            std::string::npos);
}

}  // namespace
}  // namespace aim::layers
