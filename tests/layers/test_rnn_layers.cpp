// Recurrent layers and EmbeddingBag (layers/rnn.h, layers/embedding_bag.h, autograd/functions/
// rnn.h, embedding_bag.h):
//   * gradcheck in f64 (cpu.ref) of autograd::rnn for every cell, both directions, with lengths
//     (a zero length included), initial states, with and without biases; of embedding_bag;
//   * parity with PyTorch (tests/peers/rnn_layers.py, weights and inputs through safetensors):
//     torch.nn.LSTM and torch.nn.GRU (2 layers, bidirectional, lengths through
//     pack_padded_sequence, batch_first both ways), TensorFlow's GRU and DIEN's AUGRU written by
//     hand, torch.nn.EmbeddingBag (sum, mean, per_sample_weights, padding_idx, offsets): forward
//     outputs and every gradient;
//   * parameter names, shapes and init; AUGRU with att = 0 is the TF-style GRU; dropout between
//     layers; count_flops against the profiler; bad input errors.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/embedding_bag.h"
#include "autograd/functions/index.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/rnn.h"
#include "autograd/functions/shape.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "kernels/testing.h"
#include "layers/embedding_bag.h"
#include "layers/rnn.h"
#include "profiler/profiler.h"
#include "tensor/safetensors.h"
#include "tests/support/common.h"

namespace aim::layers {
namespace {

using autograd::Variable;
using kernels::RnnCell;

using ::aim::testing::source_root;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

Variable rand_var(const Shape& s, uint64_t seed, DType t = DType::f32, double lo = -1,
                  double hi = 1) {
  return Variable(kernels::random_tensor(s, t, seed, lo, hi), true);
}

Tensor lengths_of(const std::vector<int32_t>& v) {
  return Tensor::from_vector(v, {int64_t(v.size())});
}

// sum(a * r) over all elements.
Variable dot(const Variable& a, const Tensor& r) {
  return autograd::sum(autograd::mul(a, Variable(r)));
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to(DType::f64).contiguous().to_vector<double>()) m = std::max(m, std::abs(v));
  return m;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  const auto x = a.to(DType::f64).contiguous().to_vector<double>();
  const auto y = b.to(DType::f64).contiguous().to_vector<double>();
  double d = 0;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) d = std::max(d, std::abs(x[i] - y[i]));
  return d;
}

// ---- gradcheck of autograd::rnn ----------------------------------------------------------------

struct GradCase {
  const char* what;
  RnnCell cell;
  bool reverse, lbr, bias, h0, lengths;
};

TEST(RnnAutograd, GradcheckEveryCell) {
  const int64_t T = 4, B = 3, I = 3, H = 2;
  const GradCase cases[] = {
      {"LSTM", RnnCell::LSTM, false, true, true, true, true},
      {"LSTM reverse", RnnCell::LSTM, true, true, true, true, true},
      {"LSTM no bias, zero state, full length", RnnCell::LSTM, false, true, false, false, false},
      {"GRU", RnnCell::GRU, false, true, true, true, true},
      {"GRU reverse", RnnCell::GRU, true, true, true, true, true},
      {"GRU TF-style", RnnCell::GRU, false, false, true, true, true},
      {"GRU TF-style reverse, no bias", RnnCell::GRU, true, false, false, true, true},
      {"AUGRU TF-style", RnnCell::AUGRU, false, false, true, true, true},
      {"AUGRU PyTorch-style reverse", RnnCell::AUGRU, true, true, true, true, false},
  };
  uint64_t seed = 100;
  for (const GradCase& c : cases) {
    SCOPED_TRACE(c.what);
    const int64_t G = kernels::rnn_gates(c.cell);
    const bool lstm = c.cell == RnnCell::LSTM, augru = c.cell == RnnCell::AUGRU;
    // Slots: x, h0, c0, w_ih, w_hh, b_ih, b_hh, att (undefined where the case has none).
    std::vector<Variable> in(8);
    in[0] = rand_var({T, B, I}, seed++, DType::f64);
    if (c.h0) in[1] = rand_var({B, H}, seed++, DType::f64);
    if (c.h0 && lstm) in[2] = rand_var({B, H}, seed++, DType::f64);
    in[3] = rand_var({G * H, I}, seed++, DType::f64);
    in[4] = rand_var({G * H, H}, seed++, DType::f64);
    if (c.bias) {
      in[5] = rand_var({G * H}, seed++, DType::f64);
      in[6] = rand_var({G * H}, seed++, DType::f64);
    }
    if (augru) in[7] = rand_var({T, B}, seed++, DType::f64, 0.05, 0.95);
    std::vector<Variable> leaves;
    std::vector<int> slot;
    for (int j = 0; j < 8; ++j)
      if (in[size_t(j)].defined()) {
        leaves.push_back(in[size_t(j)]);
        slot.push_back(j);
      }
    // A zero length: y is zero there and hn = h0 (its gradient passes straight through).
    const Tensor lengths = c.lengths ? lengths_of({4, 0, 2}) : Tensor();
    auto f = [&](const std::vector<Variable>& v) {
      std::vector<Variable> s(8);
      for (size_t k = 0; k < v.size(); ++k) s[size_t(slot[k])] = v[k];
      autograd::RnnArgs a;
      a.cell = c.cell;
      a.reverse = c.reverse;
      a.linear_before_reset = c.lbr;
      a.x = s[0];
      a.lengths = lengths;
      a.h0 = s[1];
      a.c0 = s[2];
      a.w_ih = s[3];
      a.w_hh = s[4];
      a.b_ih = s[5];
      a.b_hh = s[6];
      a.att = s[7];
      const autograd::RnnResult r = autograd::rnn(a);
      std::vector<Variable> parts = {autograd::reshape(r.y, {-1}), autograd::reshape(r.hn, {-1})};
      if (r.cn.defined()) parts.push_back(autograd::reshape(r.cn, {-1}));
      return autograd::concat(parts, 0);
    };
    const autograd::GradcheckResult r = autograd::gradcheck(f, leaves);
    EXPECT_TRUE(r.ok) << r.message;
  }
}

// Only hn is used: y's gradient is zero, every gradient still flows through the recurrence.
TEST(RnnAutograd, GradcheckFinalStateOnly) {
  const int64_t T = 3, B = 2, I = 2, H = 3;
  std::vector<Variable> in = {rand_var({T, B, I}, 1, DType::f64),
                              rand_var({4 * H, I}, 2, DType::f64),
                              rand_var({4 * H, H}, 3, DType::f64)};
  auto f = [&](const std::vector<Variable>& v) {
    autograd::RnnArgs a;
    a.cell = RnnCell::LSTM;
    a.x = v[0];
    a.w_ih = v[1];
    a.w_hh = v[2];
    a.lengths = lengths_of({3, 1});
    return autograd::rnn(a).cn;
  };
  const autograd::GradcheckResult r = autograd::gradcheck(f, in);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(RnnAutograd, NoGraphWithoutGrad) {
  const int64_t T = 3, B = 2, I = 2, H = 3;
  autograd::RnnArgs a;
  a.cell = RnnCell::GRU;
  a.x = rand_var({T, B, I}, 1);
  a.w_ih = rand_var({3 * H, I}, 2);
  a.w_hh = rand_var({3 * H, H}, 3);
  {
    autograd::NoGradGuard ng;
    const autograd::RnnResult r = autograd::rnn(a);
    EXPECT_FALSE(r.y.grad_fn());
    EXPECT_FALSE(r.hn.requires_grad());
    EXPECT_FALSE(r.cn.defined());
  }
  const autograd::RnnResult r = autograd::rnn(a);
  ASSERT_TRUE(r.y.grad_fn());
  EXPECT_STREQ(r.y.grad_fn()->name(), "GRU");
  EXPECT_EQ(r.y.grad_fn(), r.hn.grad_fn());
}

TEST(RnnAutograd, BadArguments) {
  autograd::RnnArgs a;
  a.cell = RnnCell::GRU;
  a.x = rand_var({3, 2, 2}, 1);
  a.w_ih = rand_var({6, 2}, 2);
  a.w_hh = rand_var({6, 2}, 3);
  a.att = rand_var({3, 2}, 4);
  EXPECT_NE(error_of([&] { autograd::rnn(a); }).find("is for the AUGRU only"), std::string::npos);
  a.att = Variable();
  a.c0 = rand_var({2, 2}, 5);
  EXPECT_NE(error_of([&] { autograd::rnn(a); }).find("c0 is for the LSTM only"), std::string::npos);
  a.c0 = Variable();
  a.b_ih = rand_var({6}, 6);
  EXPECT_NE(error_of([&] { autograd::rnn(a); }).find("both b_ih and b_hh"), std::string::npos);
  a.b_ih = Variable();
  a.x = rand_var({3, 2}, 7);
  EXPECT_NE(error_of([&] { autograd::rnn(a); }).find("x must be [T, B, I]"), std::string::npos);
}

// ---- layers: names, shapes, init
// -----------------------------------------------------------------

std::vector<std::string> keys(const Module& m) {
  std::vector<std::string> k;
  for (const auto& [n, t] : m.state_dict()) k.push_back(n);
  return k;
}

TEST(RnnLayers, ParameterNamesShapesAndInit) {
  RnnOptions o;
  o.num_layers = 2;
  o.bidirectional = true;
  LSTM lstm(5, 4, o, 3);
  const std::vector<std::string> want = {
      "weight_ih_l0",         "weight_hh_l0",         "bias_ih_l0",         "bias_hh_l0",
      "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse",
      "weight_ih_l1",         "weight_hh_l1",         "bias_ih_l1",         "bias_hh_l1",
      "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse"};
  EXPECT_EQ(keys(lstm), want);
  EXPECT_EQ(lstm.weight_ih(0).sizes(), (Shape{16, 5}));
  EXPECT_EQ(lstm.weight_ih(1, true).sizes(), (Shape{16, 8}));
  EXPECT_EQ(lstm.weight_hh(1).sizes(), (Shape{16, 4}));
  EXPECT_EQ(lstm.bias_hh(1, true).sizes(), (Shape{16}));
  EXPECT_EQ(lstm.type_name(), "LSTM");
  for (const auto& [n, p] : lstm.named_parameters()) {
    EXPECT_LE(max_abs(p.data()), 0.5) << n;  // U(-1/sqrt(4), 1/sqrt(4))
    EXPECT_GT(max_abs(p.data()), 0.3) << n;
  }
  // Same seed, same weights; another seed, other weights.
  LSTM same(5, 4, o, 3), other(5, 4, o, 4);
  EXPECT_EQ(max_abs_diff(same.weight_hh(1).data(), lstm.weight_hh(1).data()), 0.0);
  EXPECT_GT(max_abs_diff(other.weight_hh(1).data(), lstm.weight_hh(1).data()), 0.0);

  RnnOptions g;
  g.bias = false;
  GRU gru(3, 6, g);
  EXPECT_EQ(keys(gru), (std::vector<std::string>{"weight_ih_l0", "weight_hh_l0"}));
  EXPECT_EQ(gru.weight_ih(0).sizes(), (Shape{18, 3}));
  EXPECT_FALSE(gru.bias_ih(0).defined());
  EXPECT_NE(error_of([&] { gru.weight_ih(0, true); }).find("no layer 0 (reverse)"),
            std::string::npos);

  AUGRU au(3, 4);
  EXPECT_EQ(keys(au),
            (std::vector<std::string>{"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"}));
  const auto b = au.bias_ih_l0.data().to_vector<float>();
  for (int i = 0; i < 12; ++i) EXPECT_EQ(b[size_t(i)], i < 8 ? 1.0f : 0.0f) << i;
  EXPECT_EQ(max_abs(au.bias_hh_l0.data()), 0.0);
  EXPECT_FALSE(au.options().linear_before_reset);
}

TEST(RnnLayers, BadInputErrors) {
  LSTM lstm(3, 4);
  const Variable x = rand_var({5, 2, 3}, 1);
  EXPECT_NE(error_of([&] {
              lstm.forward(rand_var({5, 2, 4}, 1), Tensor());
            }).find("LSTM: expected x [T, B, 3], got [5, 2, 4]"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              lstm.forward(x, Tensor(), rand_var({2, 2, 4}, 2));
            }).find("h0 must be [1, 2, 4], got [2, 2, 4]"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              lstm.forward(x, Tensor::from_vector<float>({5, 5}, {2}));
            }).find("lengths must be a [2] i32 or i64 tensor on the CPU"),
            std::string::npos);
  // A length beyond T is the kernels' check, naming the entry.
  EXPECT_NE(error_of([&] {
              lstm.forward(x, lengths_of({5, 6}));
            }).find("lengths[1] = 6"),
            std::string::npos);
  GRU gru(3, 4);
  EXPECT_NE(error_of([&] {
              gru.forward(x, Tensor(), Variable(), rand_var({1, 2, 4}, 3));
            }).find("c0 is for the LSTM only"),
            std::string::npos);
  RnnOptions o;
  o.linear_before_reset = false;
  EXPECT_NE(error_of([&] { LSTM bad(3, 4, o); }).find("linear_before_reset = false is a GRU"),
            std::string::npos);
  o = RnnOptions();
  o.num_layers = 0;
  EXPECT_NE(error_of([&] { GRU bad(3, 4, o); }).find("num_layers must be >= 1"), std::string::npos);
  AUGRU au(3, 4);
  EXPECT_NE(error_of([&] {
              au.forward(x, rand_var({2, 5}, 4));
            }).find("att must be [5, 2] ([T, B])"),
            std::string::npos);
}

// With att = 0 the AUGRU is the TF-style GRU: the same weights give the same outputs.
TEST(RnnLayers, AugruWithZeroAttentionIsTfGru) {
  AUGRU au(3, 5, AugruOptions(), 9);
  RnnOptions o;
  o.linear_before_reset = false;
  GRU gru(3, 5, o);
  gru.load_state_dict(au.state_dict());
  const Variable x = rand_var({6, 4, 3}, 2);
  const Tensor len = lengths_of({6, 3, 1, 5});
  const RnnOutput a = au.forward(x, Variable(Tensor::zeros({6, 4})), len);
  const RnnOutput g = gru.forward(x, len);
  EXPECT_LT(max_abs_diff(a.output.data(), g.output.data()), 1e-6);
  EXPECT_LT(max_abs_diff(a.h_n.data(), g.h_n.data().view({4, 5})), 1e-6);
  // Nonzero attention changes the update.
  const RnnOutput b = au.forward(x, Variable(Tensor::full({6, 4}, 0.5)), len);
  EXPECT_GT(max_abs_diff(a.output.data(), b.output.data()), 1e-3);
}

// Lengths: outputs past each length are 0; a zero length leaves h0; with all lengths T the
// result equals no lengths.
TEST(RnnLayers, LengthsSemantics) {
  RnnOptions o;
  o.bidirectional = true;
  LSTM m(2, 3, o, 5);
  const Variable x = rand_var({4, 3, 2}, 7);
  const Variable h0 = rand_var({2, 3, 3}, 8), c0 = rand_var({2, 3, 3}, 9);
  const RnnOutput full = m.forward(x, Tensor(), h0, c0);
  const RnnOutput same = m.forward(x, lengths_of({4, 4, 4}), h0, c0);
  EXPECT_EQ(max_abs_diff(full.output.data(), same.output.data()), 0.0);
  EXPECT_EQ(max_abs_diff(full.h_n.data(), same.h_n.data()), 0.0);
  const RnnOutput r = m.forward(x, lengths_of({4, 0, 2}), h0, c0);
  const Tensor y = r.output.data();
  for (int64_t t = 0; t < 4; ++t) EXPECT_EQ(max_abs(y.select(0, t).select(0, 1)), 0.0) << t;
  for (int64_t t = 2; t < 4; ++t) EXPECT_EQ(max_abs(y.select(0, t).select(0, 2)), 0.0) << t;
  EXPECT_EQ(max_abs_diff(r.h_n.data().select(1, 1), h0.data().select(1, 1)), 0.0);
  EXPECT_EQ(max_abs_diff(r.c_n.data().select(1, 1), c0.data().select(1, 1)), 0.0);
  EXPECT_GT(max_abs(y.select(0, 1).select(0, 2)), 0.0);
}

// Dropout acts between layers in training only, from the layer's own Philox stream.
TEST(RnnLayers, DropoutBetweenLayers) {
  RnnOptions o;
  o.num_layers = 2;
  GRU plain(3, 4, o, 1);
  o.dropout = 0.5;
  GRU drop(3, 4, o, 1);
  const Variable x = rand_var({5, 2, 3}, 3);
  const Tensor a = plain.forward(x, Tensor()).output.data();
  drop.eval();
  EXPECT_EQ(max_abs_diff(drop.forward(x, Tensor()).output.data(), a), 0.0);
  drop.train();
  const Tensor d1 = drop.forward(x, Tensor()).output.data();
  const Tensor d2 = drop.forward(x, Tensor()).output.data();
  EXPECT_GT(max_abs_diff(d1, a), 1e-3);
  EXPECT_GT(max_abs_diff(d1, d2), 1e-3);  // the stream advances
  GRU again(3, 4, o, 1);
  EXPECT_EQ(max_abs_diff(again.forward(x, Tensor()).output.data(), d1), 0.0);
}

// ---- count_flops against the profiler ----------------------------------------------------------

double profiled_flops(const std::function<void()>& f) {
  profiler::start();
  {
    profiler::Scope phase("fwd", profiler::ScopeKind::Phase);
    f();
  }
  profiler::stop();
  // Top-level ops only: rnn's cpu.fast runs its GEMMs through the matmul op, whose records nest
  // inside the rnn record and are part of its cost.
  std::set<int64_t> ops;
  for (const profiler::Event& ev : profiler::events())
    if (ev.kind == profiler::ScopeKind::Op) ops.insert(ev.id);
  double flops = 0;
  for (const profiler::Event& ev : profiler::events())
    if (ev.kind == profiler::ScopeKind::Op && !ops.count(ev.parent)) flops += ev.cost.flops;
  return flops;
}

TEST(RnnLayers, CountFlopsMatchesProfiler) {
  RnnOptions o;
  o.num_layers = 2;
  o.bidirectional = true;
  o.batch_first = true;
  o.dropout = 0.25;
  LSTM lstm(6, 5, o);
  GRU gru(6, 5, o);
  AUGRU au(6, 5);
  const Variable xb = rand_var({3, 7, 6}, 1), xt = rand_var({7, 3, 6}, 2);
  const Variable att = Variable(kernels::random_tensor({7, 3}, DType::f32, 3, 0, 1));
  autograd::NoGradGuard ng;
  for (bool training : {false, true}) {
    for (RnnStack* m : {static_cast<RnnStack*>(&lstm), static_cast<RnnStack*>(&gru)}) {
      m->train(training);
      double analytic = 0;
      EXPECT_EQ(m->count_flops(xb.sizes(), analytic), (Shape{3, 7, 10}));
      const double measured = profiled_flops([&] { m->forward(xb, Tensor()); });
      EXPECT_GT(analytic, 0);
      EXPECT_NEAR(measured, analytic, 1e-9 * analytic) << m->type_name() << " train " << training;
    }
  }
  double analytic = 0;
  EXPECT_EQ(au.count_flops(xt.sizes(), analytic), (Shape{7, 3, 5}));
  EXPECT_NEAR(profiled_flops([&] { au.forward(xt, att); }), analytic, 1e-9 * analytic);

  for (BagMode mode : {BagMode::sum, BagMode::mean})
    for (bool pad : {false, true}) {
      EmbeddingBag bag(20, 8, mode, pad ? std::optional<int64_t>(0) : std::nullopt);
      const Tensor idx = kernels::random_indices({4, 5}, 20, DType::i64, 4);
      double f = 0;
      EXPECT_EQ(bag.count_flops(idx.sizes(), f), (Shape{4, 8}));
      EXPECT_NEAR(profiled_flops([&] { bag.forward(idx); }), f, 1e-9 * f)
          << autograd::bag_mode_name(mode) << " pad " << pad;
      const Tensor flat = kernels::random_indices({9}, 20, DType::i64, 5);
      const Tensor off = Tensor::from_vector<int64_t>({0, 2, 2, 7}, {4});
      EXPECT_NEAR(profiled_flops([&] { bag.forward(flat, off); }), bag.flops(9, 4, false, false),
                  1e-9 * f);
      if (mode == BagMode::sum) {
        const Variable psw = rand_var({9}, 6);
        EXPECT_NEAR(profiled_flops([&] { bag.forward(flat, off, psw); }),
                    bag.flops(9, 4, false, true), 1e-9 * f);
      }
    }
}

// ---- the GPU against the CPU -------------------------------------------------------------------

// Outputs of one forward and the leaves whose gradients to compare (the module's parameters are
// compared too).
using Forward = std::function<std::pair<std::vector<Variable>, std::vector<Variable>>(Device)>;

// Runs `f` with `cpu` and with `gpu` (the same module type and weights, moved to the GPU), takes
// loss = sum_i <output_i, r_i> with the same r_i on both, and compares outputs and gradients.
void expect_cuda_matches_cpu(const std::string& what, Module& cpu, Module& gpu, const Forward& f) {
  SCOPED_TRACE(what);
  gpu.load_state_dict(cpu.state_dict());
  gpu.to(cuda_device(0));
  std::vector<std::pair<std::string, Tensor>> got[2];
  for (int k = 0; k < 2; ++k) {
    const Device d = k ? cuda_device(0) : kCPU;
    Module& m = k ? gpu : cpu;
    const auto [outs, leaves] = f(d);
    Variable loss;
    for (size_t i = 0; i < outs.size(); ++i) {
      const Tensor r = kernels::random_tensor(outs[i].sizes(), DType::f32, 50 + i).to(d);
      const Variable l = dot(outs[i], r);
      loss = loss.defined() ? autograd::add(loss, l) : l;
      got[k].emplace_back("output " + std::to_string(i), outs[i].data().to(kCPU));
    }
    loss.backward();
    for (const auto& [n, p] : m.named_parameters())
      got[k].emplace_back("grad " + n, p.grad().to(kCPU));
    for (size_t i = 0; i < leaves.size(); ++i)
      got[k].emplace_back("grad input " + std::to_string(i), leaves[i].grad().to(kCPU));
  }
  ASSERT_EQ(got[0].size(), got[1].size());
  for (size_t i = 0; i < got[0].size(); ++i) {
    const double d =
        max_abs_diff(got[1][i].second, got[0][i].second) / std::max(1.0, max_abs(got[0][i].second));
    EXPECT_LE(d, 1e-4) << got[0][i].first;
  }
}

Variable leaf_on(const Tensor& t, Device d) { return Variable(t.to(d), true); }

TEST(RnnLayers, CudaMatchesCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  const Tensor x = kernels::random_tensor({4, 6, 5}, DType::f32, 1);  // [B, T, I]
  const Tensor len = lengths_of({6, 2, 0, 5});
  RnnOptions o;
  o.num_layers = 2;
  o.bidirectional = true;
  o.batch_first = true;
  {
    const Tensor h0 = kernels::random_tensor({4, 4, 3}, DType::f32, 2);
    const Tensor c0 = kernels::random_tensor({4, 4, 3}, DType::f32, 3);
    LSTM cpu(5, 3, o, 4), gpu(5, 3, o, 5);
    expect_cuda_matches_cpu("LSTM", cpu, gpu, [&](Device d) {
      const Variable xv = leaf_on(x, d), hv = leaf_on(h0, d), cv = leaf_on(c0, d);
      const RnnOutput r = (d.is_cuda() ? gpu : cpu).forward(xv, len, hv, cv);
      return std::make_pair(std::vector<Variable>{r.output, r.h_n, r.c_n},
                            std::vector<Variable>{xv, hv, cv});
    });
  }
  for (bool lbr : {true, false}) {
    o.linear_before_reset = lbr;
    GRU cpu(5, 3, o, 6), gpu(5, 3, o, 7);
    expect_cuda_matches_cpu(lbr ? "GRU" : "GRU TF-style", cpu, gpu, [&](Device d) {
      const Variable xv = leaf_on(x, d);
      const RnnOutput r = (d.is_cuda() ? gpu : cpu).forward(xv, len);
      return std::make_pair(std::vector<Variable>{r.output, r.h_n}, std::vector<Variable>{xv});
    });
  }
  {
    AugruOptions ao;
    ao.batch_first = true;
    AUGRU cpu(5, 3, ao, 8), gpu(5, 3, ao, 9);
    const Tensor att = kernels::random_tensor({4, 6}, DType::f32, 10, 0, 1);
    expect_cuda_matches_cpu("AUGRU", cpu, gpu, [&](Device d) {
      const Variable xv = leaf_on(x, d), av = leaf_on(att, d);
      const RnnOutput r = (d.is_cuda() ? gpu : cpu).forward(xv, av, len);
      return std::make_pair(std::vector<Variable>{r.output, r.h_n}, std::vector<Variable>{xv, av});
    });
  }
  {
    EmbeddingBag cpu(10, 4, BagMode::sum, 2, false, 11), gpu(10, 4, BagMode::sum, 2, false, 12);
    const Tensor idx = Tensor::from_vector<int64_t>({1, 2, 7, 3, 3, 9, 0, 2, 5, 8}, {10});
    const Tensor off = Tensor::from_vector<int64_t>({0, 3, 3, 7, 8}, {5});
    const Tensor psw = kernels::random_tensor({10}, DType::f32, 13);
    expect_cuda_matches_cpu("EmbeddingBag sum, offsets, padding, weights", cpu, gpu, [&](Device d) {
      const Variable wv = leaf_on(psw, d);
      // Indices on the CPU: embedding_bag moves them to the table's device.
      const Variable y = (d.is_cuda() ? gpu : cpu).forward(idx, off, wv);
      return std::make_pair(std::vector<Variable>{y}, std::vector<Variable>{wv});
    });
  }
  {
    EmbeddingBag cpu(10, 4, BagMode::mean, 2, false, 14), gpu(10, 4, BagMode::mean, 2, false, 15);
    const Tensor idx = Tensor::from_vector<int64_t>({1, 2, 7, 2, 2, 2, 0, 9, 9}, {3, 3});
    expect_cuda_matches_cpu("EmbeddingBag mean, fixed bags, padding", cpu, gpu, [&](Device d) {
      const Variable y = (d.is_cuda() ? gpu : cpu).forward(idx.to(d));
      return std::make_pair(std::vector<Variable>{y}, std::vector<Variable>{});
    });
  }
}

// ---- EmbeddingBag without a peer ---------------------------------------------------------------

TEST(EmbeddingBagLayer, FixedBagsEqualOffsetsAndByHand) {
  EmbeddingBag bag(6, 3, BagMode::mean, std::nullopt, false, 2);
  const Tensor idx = Tensor::from_vector<int64_t>({1, 4, 4, 0, 5, 2}, {2, 3});
  const Tensor fixed = bag.forward(idx).data();
  const Tensor off = bag.forward(idx.view({6}), Tensor::from_vector<int64_t>({0, 3}, {2})).data();
  EXPECT_LT(max_abs_diff(fixed, off), 1e-6);
  const auto w = bag.weight.data().to_vector<float>();
  const auto y = fixed.to_vector<float>();
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(y[size_t(c)], (w[size_t(3 + c)] + 2 * w[size_t(12 + c)]) / 3, 1e-6);
    EXPECT_NEAR(y[size_t(3 + c)], (w[size_t(c)] + w[size_t(15 + c)] + w[size_t(6 + c)]) / 3, 1e-6);
  }
}

TEST(EmbeddingBagLayer, PaddingEmptyBagsAndErrors) {
  // padding_idx -1 counts from the end (5); its row starts at zero.
  EmbeddingBag bag(6, 2, BagMode::mean, -1);
  EXPECT_EQ(bag.padding_idx(), 5);
  EXPECT_EQ(max_abs(bag.weight.data().select(0, 5)), 0.0);
  bag.weight.mutable_data().select(0, 5).fill_(100.0);  // must not leak into any bag
  const Tensor idx = Tensor::from_vector<int64_t>({5, 1, 5, 5, 2}, {5});
  const Tensor off = Tensor::from_vector<int64_t>({0, 2, 2, 4}, {4});
  const Variable y = bag.forward(idx, off);  // bags {5,1}, {}, {5,5}, {2}
  const auto w = bag.weight.data().to_vector<float>();
  const auto v = y.data().to_vector<float>();
  for (int c = 0; c < 2; ++c) {
    EXPECT_NEAR(v[size_t(c)], w[size_t(2 + c)], 1e-6);  // mean over the one non-padding entry
    EXPECT_EQ(v[size_t(2 + c)], 0.0f);                  // empty bag
    EXPECT_EQ(v[size_t(4 + c)], 0.0f);                  // padding only
    EXPECT_NEAR(v[size_t(6 + c)], w[size_t(4 + c)], 1e-6);
  }
  autograd::sum(y).backward();
  EXPECT_EQ(max_abs(bag.weight.grad().select(0, 5)), 0.0);  // the padding row gets no gradient
  EXPECT_NEAR(bag.weight.grad().select(0, 1).to_vector<float>()[0], 1.0f, 1e-6);

  EXPECT_NE(error_of([&] {
              bag.forward(idx, off, rand_var({5}, 1));
            }).find("per_sample_weights need mode sum"),
            std::string::npos);
  EmbeddingBag sum_bag(6, 2, BagMode::sum);
  EXPECT_NE(error_of([&] {
              sum_bag.forward(idx, Tensor::from_vector<int64_t>({1, 2}, {2}));
            }).find("offsets[0] must be 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              sum_bag.forward(idx, Tensor::from_vector<int64_t>({0, 3, 2}, {3}));
            }).find("non-decreasing"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              sum_bag.forward(idx, off, rand_var({4}, 2));
            }).find("per_sample_weights must be [5]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { sum_bag.forward(idx); }).find("indices must be [B, L] without offsets"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              sum_bag.forward(Tensor::from_vector<int64_t>({0, 9}, {1, 2}));
            }).find("out of range"),
            std::string::npos);
  EmbeddingBag last(6, 2, BagMode::sum, std::nullopt, /*include_last_offset=*/true);
  EXPECT_NE(error_of([&] {
              last.forward(idx, Tensor::from_vector<int64_t>({0, 2, 4}, {3}));
            }).find("last offset must equal the number of indices 5"),
            std::string::npos);
  EXPECT_EQ(last.forward(idx, Tensor::from_vector<int64_t>({0, 2, 5}, {3})).sizes(), (Shape{2, 2}));
}

TEST(EmbeddingBagGrad, Gradcheck) {
  const Tensor flat = Tensor::from_vector<int64_t>({3, 0, 3, 1, 2, 0, 3}, {7});
  const Tensor off = Tensor::from_vector<int64_t>({0, 3, 3, 5}, {4});
  const Tensor fixed = Tensor::from_vector<int64_t>({3, 0, 3, 1, 2, 0}, {2, 3});
  for (int64_t pad : {-1, 0}) {
    for (BagMode mode : {BagMode::sum, BagMode::mean}) {
      SCOPED_TRACE(std::string(autograd::bag_mode_name(mode)) + " padding " + std::to_string(pad));
      const Variable w = rand_var({4, 3}, 11, DType::f64);
      auto f_off = [&](const std::vector<Variable>& v) {
        return autograd::embedding_bag(v[0], flat, off, mode, v.size() > 1 ? v[1] : Variable(),
                                       pad);
      };
      auto f_fix = [&](const std::vector<Variable>& v) {
        return autograd::embedding_bag(v[0], fixed, Tensor(), mode,
                                       v.size() > 1 ? v[1] : Variable(), pad);
      };
      std::vector<Variable> in_off = {w}, in_fix = {w};
      if (mode == BagMode::sum) {
        in_off.push_back(rand_var({7}, 12, DType::f64));
        in_fix.push_back(rand_var({2, 3}, 13, DType::f64));
      }
      autograd::GradcheckResult r = autograd::gradcheck(f_off, in_off);
      EXPECT_TRUE(r.ok) << "offsets: " << r.message;
      r = autograd::gradcheck(f_fix, in_fix);
      EXPECT_TRUE(r.ok) << "fixed: " << r.message;
    }
  }
}

// ---- parity with PyTorch -----------------------------------------------------------------------

bool have_torch() {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0) return true;
  // CI installs python3-torch (tools/deps.sh): there the parity check must run, not skip.
  if (std::getenv("CI")) ADD_FAILURE() << "CI is set but /usr/bin/python3 cannot import torch";
  return false;
}

// One case of the peer: its JSON description, its input tensors, and after the run, what to
// compare (name -> our tensor).
struct PeerCase {
  std::string name, json;
  std::vector<std::pair<std::string, Tensor>> inputs;
  std::vector<std::pair<std::string, Tensor>> ours;
};

// Runs tests/peers/rnn_layers.py on the cases and compares every result: max |ours - torch| <=
// tol * max(1, max |torch|).
void run_peer_and_compare(const std::vector<PeerCase>& cases, double tol) {
  const std::string dir = ::aim::testing::make_temp_dir("aim_rnn_parity");
  std::string json = "[";
  std::vector<std::pair<std::string, Tensor>> inputs;
  for (size_t i = 0; i < cases.size(); ++i) {
    json += (i ? ",\n" : "") + cases[i].json;
    for (const auto& [k, t] : cases[i].inputs) inputs.emplace_back(cases[i].name + "." + k, t);
  }
  json += "]\n";
  FILE* f = std::fopen((dir + "/cases.json").c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(json.c_str(), f);
  std::fclose(f);
  save_safetensors(dir + "/in.safetensors", inputs);
  const std::string cmd = "/usr/bin/python3 " + source_root() + "/tests/peers/rnn_layers.py" +
                          " --cases " + dir + "/cases.json --in " + dir + "/in.safetensors" +
                          " --out " + dir + "/out.safetensors";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const SafetensorsFile o = load_safetensors(dir + "/out.safetensors");
  for (const PeerCase& c : cases) {
    double worst = 0;
    std::string worst_key;
    for (const auto& [k, ours] : c.ours) {
      const std::string key = c.name + "." + k;
      ASSERT_TRUE(o.has(key)) << key << " missing from the peer's output";
      ASSERT_TRUE(ours.defined()) << key << ": aim produced nothing";
      const Tensor& theirs = o.at(key);
      ASSERT_EQ(ours.sizes(), theirs.sizes()) << key;
      const double d = max_abs_diff(ours, theirs) / std::max(1.0, max_abs(theirs));
      EXPECT_LE(d, tol) << key;
      if (d >= worst) worst = d, worst_key = k;
    }
    std::printf("[rnn parity %s] %zu tensors, worst relative difference %.3g (%s)\n",
                c.name.c_str(), c.ours.size(), worst, worst_key.c_str());
  }
  std::system(("rm -rf " + dir).c_str());
}

struct RnnSpec {
  std::string name, kind;  // lstm, gru, gru_tf, augru
  int64_t I, H, L;
  bool bidirectional, batch_first, bias, lengths, state;
};

PeerCase rnn_case(const RnnSpec& s, uint64_t seed) {
  const int64_t T = 5, B = 4, D = s.bidirectional ? 2 : 1;
  PeerCase c;
  c.name = s.name;
  std::ostringstream js;
  js << "{\"name\": \"" << s.name << "\", \"kind\": \"" << s.kind << "\", \"hidden_size\": " << s.H
     << ", \"num_layers\": " << s.L
     << ", \"bidirectional\": " << (s.bidirectional ? "true" : "false")
     << ", \"batch_first\": " << (s.batch_first ? "true" : "false")
     << ", \"bias\": " << (s.bias ? "true" : "false") << ", \"linear_before_reset\": "
     << (s.kind == "augru" || s.kind == "gru_tf" ? "false" : "true") << "}";
  c.json = js.str();

  std::unique_ptr<RnnStack> stack;
  std::unique_ptr<AUGRU> augru;
  Module* m = nullptr;
  RnnOptions o;
  o.num_layers = s.L;
  o.bidirectional = s.bidirectional;
  o.batch_first = s.batch_first;
  o.bias = s.bias;
  if (s.kind == "lstm") {
    stack = std::make_unique<LSTM>(s.I, s.H, o, seed);
  } else if (s.kind == "gru" || s.kind == "gru_tf") {
    o.linear_before_reset = s.kind == "gru";
    stack = std::make_unique<GRU>(s.I, s.H, o, seed);
  } else {
    AugruOptions ao;
    ao.batch_first = s.batch_first;
    ao.bias = s.bias;
    augru = std::make_unique<AUGRU>(s.I, s.H, ao, seed);
  }
  m = stack ? static_cast<Module*>(stack.get()) : augru.get();
  // Random biases too (AUGRU's init is 1/0, which would hide a swapped gate).
  StateDict sd;
  for (const auto& [n, p] : m->named_parameters())
    sd.emplace_back(n, kernels::random_tensor(p.sizes(), DType::f32, seed++, -0.6, 0.6));
  m->load_state_dict(sd);
  for (const auto& [n, t] : m->state_dict()) c.inputs.emplace_back("p." + n, t);

  const Shape xs = s.batch_first ? Shape{B, T, s.I} : Shape{T, B, s.I};
  const Variable x = rand_var(xs, seed++);
  c.inputs.emplace_back("x", x.data());
  Tensor lengths;
  if (s.lengths) {
    lengths = Tensor::from_vector<int64_t>({3, 5, 1, 4}, {B});  // unsorted, max = T
    c.inputs.emplace_back("lengths", lengths);
  }
  const bool lstm = s.kind == "lstm", au = s.kind == "augru";
  const Shape state = au ? Shape{B, s.H} : Shape{s.L * D, B, s.H};
  Variable h0, c0, att;
  if (s.state) {
    h0 = rand_var(state, seed++);
    c.inputs.emplace_back("h0", h0.data());
    if (lstm) {
      c0 = rand_var(state, seed++);
      c.inputs.emplace_back("c0", c0.data());
    }
  }
  RnnOutput r;
  if (au) {
    att = rand_var(s.batch_first ? Shape{B, T} : Shape{T, B}, seed++, DType::f32, 0, 1);
    c.inputs.emplace_back("att", att.data());
    r = augru->forward(x, att, lengths, h0);
  } else {
    r = stack->forward(x, lengths, h0, c0);
  }
  const Tensor r_out = kernels::random_tensor(r.output.sizes(), DType::f32, seed++);
  const Tensor r_h = kernels::random_tensor(r.h_n.sizes(), DType::f32, seed++);
  c.inputs.emplace_back("r_out", r_out);
  c.inputs.emplace_back("r_h", r_h);
  Variable loss = autograd::add(dot(r.output, r_out), dot(r.h_n, r_h));
  if (lstm) {
    const Tensor r_c = kernels::random_tensor(r.c_n.sizes(), DType::f32, seed++);
    c.inputs.emplace_back("r_c", r_c);
    loss = autograd::add(loss, dot(r.c_n, r_c));
  }
  loss.backward();
  c.ours = {{"output", r.output.data()}, {"h_n", r.h_n.data()}, {"grad.x", x.grad()}};
  if (lstm) c.ours.emplace_back("c_n", r.c_n.data());
  if (h0.defined()) c.ours.emplace_back("grad.h0", h0.grad());
  if (c0.defined()) c.ours.emplace_back("grad.c0", c0.grad());
  if (att.defined()) c.ours.emplace_back("grad.att", att.grad());
  for (const auto& [n, p] : m->named_parameters()) c.ours.emplace_back("grad." + n, p.grad());
  return c;
}

TEST(RnnLayersParity, LstmAndGruAgainstTorch) {
  if (!have_torch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch";
  std::vector<PeerCase> cases;
  uint64_t seed = 1000;
  for (const char* kind : {"lstm", "gru", "gru_tf"}) {
    const std::string k = kind;
    // 2 layers, bidirectional, lengths, initial states, time-major and batch-first.
    cases.push_back(rnn_case({k + "_l2_bi_len", k, 3, 4, 2, true, false, true, true, true}, seed));
    cases.push_back(
        rnn_case({k + "_l2_bi_len_bf", k, 3, 4, 2, true, true, true, true, true}, seed));
    // No lengths, zero initial state, no bias, unidirectional.
    cases.push_back(
        rnn_case({k + "_l2_plain", k, 5, 3, 2, false, true, false, false, false}, seed));
    seed += 100;
  }
  run_peer_and_compare(cases, 2e-5);
}

TEST(RnnLayersParity, AugruAgainstHandWrittenTorch) {
  if (!have_torch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch";
  std::vector<PeerCase> cases;
  cases.push_back(rnn_case({"augru_len_bf", "augru", 3, 4, 1, false, true, true, true, true}, 7));
  cases.push_back(rnn_case({"augru_tm", "augru", 4, 3, 1, false, false, true, false, false}, 8));
  cases.push_back(rnn_case({"augru_nobias", "augru", 2, 5, 1, false, false, false, true, true}, 9));
  run_peer_and_compare(cases, 2e-5);
}

PeerCase bag_case(const std::string& name, BagMode mode, std::optional<int64_t> pad, bool offsets,
                  bool psw, bool include_last, uint64_t seed) {
  const int64_t V = 10, C = 4;
  EmbeddingBag bag(V, C, mode, pad, include_last, seed);
  // Random weights with a nonzero padding row: padding entries must be skipped, not just zero.
  bag.load_state_dict(StateDict{{"weight", kernels::random_tensor({V, C}, DType::f32, seed + 1)}});
  PeerCase c;
  c.name = name;
  std::ostringstream js;
  js << "{\"name\": \"" << name << "\", \"kind\": \"embedding_bag\", \"mode\": \""
     << autograd::bag_mode_name(mode)
     << "\", \"include_last_offset\": " << (include_last ? "true" : "false");
  if (pad) js << ", \"padding_idx\": " << *pad;
  js << "}";
  c.json = js.str();
  c.inputs.emplace_back("weight", bag.weight.data());
  Tensor idx, off;
  if (offsets) {
    // Bags of 3, 0, 4, 1, 2 entries; the padding index (2) appears, once as a whole bag.
    idx = Tensor::from_vector<int64_t>({1, 2, 7, 3, 3, 9, 0, 2, 5, 8}, {10});
    off = include_last ? Tensor::from_vector<int64_t>({0, 3, 3, 7, 8, 10}, {6})
                       : Tensor::from_vector<int64_t>({0, 3, 3, 7, 8}, {5});
    c.inputs.emplace_back("offsets", off);
  } else {
    idx = Tensor::from_vector<int64_t>({1, 2, 7, 2, 2, 2, 0, 9, 9}, {3, 3});
  }
  c.inputs.emplace_back("input", idx);
  Variable w;
  if (psw) {
    w = rand_var(idx.sizes(), seed + 2);
    c.inputs.emplace_back("per_sample_weights", w.data());
  }
  const Variable y = bag.forward(idx, off, w);
  const Tensor r = kernels::random_tensor(y.sizes(), DType::f32, seed + 3);
  c.inputs.emplace_back("r_out", r);
  dot(y, r).backward();
  c.ours = {{"output", y.data()}, {"grad.weight", bag.weight.grad()}};
  if (psw) c.ours.emplace_back("grad.per_sample_weights", w.grad());
  return c;
}

TEST(EmbeddingBagParity, AgainstTorch) {
  if (!have_torch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch";
  const std::optional<int64_t> none, pad = 2;
  std::vector<PeerCase> cases = {
      bag_case("sum_offsets", BagMode::sum, none, true, false, false, 1),
      bag_case("mean_offsets", BagMode::mean, none, true, false, false, 2),
      bag_case("sum_psw_offsets", BagMode::sum, none, true, true, false, 3),
      bag_case("sum_fixed", BagMode::sum, none, false, false, false, 4),
      bag_case("mean_fixed", BagMode::mean, none, false, false, false, 5),
      bag_case("sum_psw_fixed", BagMode::sum, none, false, true, false, 6),
      bag_case("sum_pad_offsets", BagMode::sum, pad, true, false, false, 7),
      bag_case("mean_pad_offsets", BagMode::mean, pad, true, false, false, 8),
      bag_case("mean_pad_fixed", BagMode::mean, pad, false, false, false, 9),
      bag_case("sum_psw_pad_fixed", BagMode::sum, pad, false, true, false, 10),
      bag_case("mean_last_offset", BagMode::mean, none, true, false, true, 11),
  };
  run_peer_and_compare(cases, 1e-5);
}

}  // namespace
}  // namespace aim::layers
