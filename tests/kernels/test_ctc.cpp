// CTC (kernels/loss/ctc.h, autograd/functions/ctc.h): parity of the loss and its gradient with
// torch.nn.functional.ctc_loss (tests/peers/ctc_loss.py) for every reduction, repeated labels,
// blank != 0, varying lengths, 1-D targets and infeasible samples with and without
// zero_infinity; gradcheck of the autograd function through log_softmax in f64; the gradient's
// PyTorch convention against finite differences of the op; edge lengths; greedy decoding on
// hand-made cases; beam search (width 1 = greedy on peaked inputs, a wider beam finds a more
// probable labelling than greedy); argument errors; and the CRNN-shape timing of cpu.ref vs
// cpu.omp. The registry test (test_variants.cpp) compares every other variant with cpu.ref.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "autograd/functions/ctc.h"
#include "autograd/functions/softmax.h"
#include "autograd/gradcheck.h"
#include "kernels/loss/ctc.h"
#include "kernels/registry.h"
#include "kernels/testing.h"
#include "tensor/safetensors.h"
#include "tests/support/common.h"

namespace aim::kernels {
namespace {

using ::aim::testing::kPython;
using ::aim::testing::make_temp_dir;
using ::aim::testing::run_command;
using ::aim::testing::source_root;

// One CTC problem: log-softmaxed inputs, targets per sample, lengths, options.
struct Problem {
  int64_t T = 0, B = 0, C = 0, blank = 0;
  Reduction r = Reduction::mean;
  bool zi = false, concat = false;
  Tensor log_probs;                       // [T, B, C]
  std::vector<std::vector<int64_t>> tgt;  // labels per sample
  std::vector<int64_t> input_len;         // [B]
  Tensor targets, input_lengths, target_lengths;
};

Tensor log_softmax_rows(Tensor x) {  // x f64 [.., C], in place
  const int64_t C = x.size(-1);
  double* v = x.data<double>();
  for (int64_t r = 0; r < x.numel() / C; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, v[r * C + c]);
    for (int64_t c = 0; c < C; ++c) s += std::exp(v[r * C + c] - m);
    for (int64_t c = 0; c < C; ++c) v[r * C + c] -= m + std::log(s);
  }
  return x;
}

// Targets/lengths tensors from p.tgt (padded [B, S] with a junk value past each length, or 1-D).
void finish(Problem& p) {
  int64_t S = 0;
  std::vector<int64_t> tl, flat;
  for (const auto& t : p.tgt) {
    S = std::max<int64_t>(S, int64_t(t.size()));
    tl.push_back(int64_t(t.size()));
    flat.insert(flat.end(), t.begin(), t.end());
  }
  if (p.concat) {
    p.targets = Tensor::from_vector(flat, {int64_t(flat.size())});
  } else {
    std::vector<int64_t> pad(size_t(p.B * S), p.blank);  // padding must never be read
    for (int64_t b = 0; b < p.B; ++b)
      for (size_t i = 0; i < p.tgt[size_t(b)].size(); ++i)
        pad[size_t(b * S) + i] = p.tgt[size_t(b)][i];
    p.targets = Tensor::from_vector(pad, {p.B, S});
  }
  p.input_lengths = Tensor::from_vector(p.input_len, {p.B});
  p.target_lengths = Tensor::from_vector(tl, {p.B});
}

// Labels given as indices into the non-blank classes, so every problem works for any blank.
Problem make_problem(int64_t T, int64_t C, int64_t blank, std::vector<std::vector<int64_t>> tgt,
                     std::vector<int64_t> input_len, uint64_t seed) {
  Problem p;
  p.T = T;
  p.B = int64_t(tgt.size());
  p.C = C;
  p.blank = blank;
  for (auto& t : tgt)
    for (auto& v : t) v = v >= blank ? v + 1 : v;
  p.tgt = std::move(tgt);
  p.input_len = std::move(input_len);
  p.log_probs = log_softmax_rows(random_tensor({T, p.B, C}, DType::f64, seed, -2.0, 2.0));
  finish(p);
  return p;
}

struct Result {
  Tensor loss, log_alpha;
};

Result forward(const Problem& p, DType dt = DType::f64) {
  CtcFwdArgs a;
  a.log_probs = p.log_probs.to(dt);
  a.targets = p.targets;
  a.input_lengths = p.input_lengths;
  a.target_lengths = p.target_lengths;
  a.blank = p.blank;
  a.reduction = p.r;
  a.zero_infinity = p.zi;
  const DType ld = loss_dtype(dt);
  a.loss = Tensor::full(p.r == Reduction::none ? Shape{p.B} : Shape{}, NAN, ld);
  a.log_alpha =
      Tensor::full(ctc_log_alpha_shape(a.log_probs, p.targets, p.target_lengths), NAN, ld);
  ctc_fwd(a);
  return {a.loss, a.log_alpha};
}

Tensor backward(const Problem& p, const Result& f, const Tensor& dloss, DType dt = DType::f64) {
  CtcBwdArgs a;
  a.dloss = dloss.to(loss_dtype(dt));
  a.log_probs = p.log_probs.to(dt);
  a.targets = p.targets;
  a.input_lengths = p.input_lengths;
  a.target_lengths = p.target_lengths;
  a.log_alpha = f.log_alpha;
  a.blank = p.blank;
  a.reduction = p.r;
  a.zero_infinity = p.zi;
  a.dlog_probs = Tensor::full({p.T, p.B, p.C}, NAN, dt);
  ctc_bwd(a);
  return a.dlog_probs;
}

Shape loss_shape(const Problem& p) { return p.r == Reduction::none ? Shape{p.B} : Shape{}; }

std::vector<double> vec(const Tensor& t) {
  return t.to(DType::f64).contiguous().to_vector<double>();
}

// The workhorse problem: repeated labels (1 1 ..., ... 3 3), an empty target, varying lengths;
// the last sample is infeasible (5 labels, 4 steps) unless `feasible`.
Problem standard(int64_t blank, Reduction r, bool zi, bool concat, bool feasible, uint64_t seed) {
  Problem p = make_problem(8, 5, blank, {{0, 0, 1}, {2, 3, 2, 2}, {}, {1, 2, 0, 3, 1}},
                           {8, 7, 5, feasible ? 8 : 4}, seed);
  p.r = r;
  p.zi = zi;
  p.concat = concat;
  finish(p);
  return p;
}

// ---- PyTorch parity --------------------------------------------------------------------------

struct ParityCase {
  int64_t blank;
  Reduction r;
  bool zi, concat, feasible;
};

std::string case_name(const ParityCase& c) {
  return std::string("blank ") + std::to_string(c.blank) + " " + reduction_name(c.r) +
         (c.zi ? " zero_inf" : "") + (c.concat ? " 1-D" : " padded") +
         (c.feasible ? "" : " infeasible");
}

TEST(CtcParity, LossAndGradientMatchTorch) {
  AIM_REQUIRE_PYTHON_MODULE("torch");
  std::vector<ParityCase> cases;
  for (int64_t blank : {0, 2, 4})
    for (Reduction r : {Reduction::none, Reduction::mean, Reduction::sum})
      for (bool zi : {false, true})
        for (bool feasible : {true, false}) cases.push_back({blank, r, zi, blank == 2, feasible});
  const std::string dir = make_temp_dir("aim_ctc_parity");
  std::vector<Problem> problems;
  std::vector<Tensor> dlosses;
  for (size_t k = 0; k < cases.size(); ++k) {
    const ParityCase& c = cases[k];
    Problem p = standard(c.blank, c.r, c.zi, c.concat, c.feasible, 40 + k);
    Tensor dl = random_tensor(loss_shape(p), DType::f64, 900 + k, 0.5, 1.5);
    save_safetensors(
        dir + "/in_" + std::to_string(k) + ".safetensors",
        {{"cfg", Tensor::from_vector(std::vector<int64_t>{c.blank, int64_t(c.r), c.zi}, {3})},
         {"log_probs", p.log_probs},
         {"targets", p.targets},
         {"input_lengths", p.input_lengths},
         {"target_lengths", p.target_lengths},
         {"dloss", dl}});
    problems.push_back(std::move(p));
    dlosses.push_back(dl);
  }
  const std::string cmd = std::string(kPython) + " " + source_root() + "/tests/peers/ctc_loss.py " +
                          dir + " " + std::to_string(cases.size());
  ASSERT_EQ(run_command(cmd), 0) << cmd;
  for (const char* variant : {"cpu.ref", "cpu.omp"}) {
    for (DType dt : {DType::f64, DType::f32}) {
      ScopedVariant vf("ctc_fwd", variant), vb("ctc_bwd", variant);
      const double tol = dt == DType::f64 ? 1e-10 : 2e-5;
      double worst = 0;
      for (size_t k = 0; k < cases.size(); ++k) {
        SCOPED_TRACE(std::string(variant) + " " + dtype_name(dt) + " " + case_name(cases[k]));
        const Problem& p = problems[k];
        const SafetensorsFile o =
            load_safetensors(dir + "/out_" + std::to_string(k) + ".safetensors");
        const Result f = forward(p, dt);
        const Tensor g = backward(p, f, dlosses[k], dt);
        const auto lv = vec(f.loss), tv = vec(o.at("loss"));
        ASSERT_EQ(lv.size(), tv.size());
        for (size_t i = 0; i < lv.size(); ++i) {
          if (std::isinf(tv[i])) {
            EXPECT_EQ(lv[i], tv[i]) << "loss[" << i << "]";  // +inf: infeasible, no zero_infinity
          } else {
            EXPECT_NEAR(lv[i], tv[i], tol * std::max(1.0, std::abs(tv[i]))) << "loss[" << i << "]";
            worst = std::max(worst, std::abs(lv[i] - tv[i]) / std::max(1.0, std::abs(tv[i])));
          }
        }
        // The gradient: PyTorch's wherever it is finite. An infeasible sample without
        // zero_infinity gets NaN from PyTorch and 0 from aim (CTC.md: NaN-free by design).
        const auto gv = vec(g), tg = vec(o.at("grad"));
        const auto none = vec(o.at("loss_none"));
        for (int64_t t = 0; t < p.T; ++t)
          for (int64_t b = 0; b < p.B; ++b)
            for (int64_t c = 0; c < p.C; ++c) {
              const size_t i = size_t((t * p.B + b) * p.C + c);
              if (std::isinf(none[size_t(b)])) {
                if (t < p.input_len[size_t(b)]) {  // PyTorch: 0 past the input length
                  EXPECT_TRUE(std::isnan(tg[i])) << "torch's infeasible gradient is no longer NaN";
                }
                EXPECT_EQ(gv[i], 0.0) << "grad[" << t << "," << b << "," << c << "]";
              } else {
                EXPECT_NEAR(gv[i], tg[i], tol) << "grad[" << t << "," << b << "," << c << "]";
                worst = std::max(worst, std::abs(gv[i] - tg[i]));
              }
            }
      }
      std::printf("[ctc parity %s %s] %zu cases, worst difference %.3g\n", variant, dtype_name(dt),
                  cases.size(), worst);
    }
  }
  run_command("rm -rf " + dir);
}

// ---- gradients -------------------------------------------------------------------------------

// The autograd function through log_softmax (how CTC is used): exact gradients, f64 cpu.ref.
TEST(CtcGrad, GradcheckThroughLogSoftmax) {
  using autograd::Variable;
  for (Reduction r : {Reduction::none, Reduction::mean, Reduction::sum})
    for (bool zi : {false, true}) {
      // zero_infinity: the last sample is infeasible (loss 0, gradient 0); otherwise all feasible
      // (an infinite loss has no finite differences).
      Problem p =
          make_problem(5, 4, 1, {{0, 0}, {2, 1, 2}, {}, {0, 1, 2, 0}}, {5, 5, 3, zi ? 3 : 5}, 11);
      p.concat = r == Reduction::sum;
      finish(p);
      Variable x(random_tensor({p.T, p.B, p.C}, DType::f64, 5, -2.0, 2.0), true, "logits");
      const autograd::GradcheckResult res = autograd::gradcheck(
          [&](const std::vector<Variable>& v) {
            return autograd::ctc_loss(autograd::log_softmax(v[0], 2), p.targets, p.input_lengths,
                                      p.target_lengths, p.blank, r, zi);
          },
          {x});
      EXPECT_TRUE(res.ok) << reduction_name(r) << (zi ? " zero_infinity" : "") << ": "
                          << res.message;
    }
}

// The op's gradient is PyTorch's: d loss / d log_probs + exp(log_probs) * scale (the term that
// log_softmax's backward cancels). Checked against central differences of the op itself.
TEST(CtcGrad, OpGradientIsTorchConvention) {
  for (const char* variant : {"cpu.ref", "cpu.omp"}) {
    ScopedVariant vf("ctc_fwd", variant), vb("ctc_bwd", variant);
    for (Reduction r : {Reduction::none, Reduction::mean, Reduction::sum}) {
      Problem p = standard(3, r, false, false, true, 77);
      const Tensor dl = random_tensor(loss_shape(p), DType::f64, 78, 0.5, 1.5);
      const auto g = vec(backward(p, forward(p), dl));
      const auto w = vec(dl);
      auto objective = [&] {
        const auto l = vec(forward(p).loss);
        double s = 0;
        for (size_t i = 0; i < l.size(); ++i) s += l[i] * w[i];
        return s;
      };
      double* x = p.log_probs.data<double>();
      const double eps = 1e-6;
      for (int64_t t = 0; t < p.T; ++t)
        for (int64_t b = 0; b < p.B; ++b) {
          const int64_t tl = int64_t(p.tgt[size_t(b)].size());
          double scale = r == Reduction::none ? w[size_t(b)] : w[0];
          if (r == Reduction::mean) scale /= double(p.B) * double(std::max<int64_t>(tl, 1));
          for (int64_t c = 0; c < p.C; ++c) {
            const size_t i = size_t((t * p.B + b) * p.C + c);
            const double keep = x[i];
            x[i] = keep + eps;
            const double up = objective();
            x[i] = keep - eps;
            const double down = objective();
            x[i] = keep;
            const double num = (up - down) / (2 * eps);
            const double extra = t < p.input_len[size_t(b)] ? std::exp(keep) * scale : 0.0;
            EXPECT_NEAR(g[i] - extra, num, 1e-6)
                << variant << " " << reduction_name(r) << " [" << t << "," << b << "," << c << "]";
          }
        }
    }
  }
}

// ---- semantics --------------------------------------------------------------------------------

TEST(CtcSemantics, EdgeLengthsAndWorkspaceLayout) {
  for (const char* variant : {"cpu.ref", "cpu.omp"}) {
    ScopedVariant vf("ctc_fwd", variant), vb("ctc_bwd", variant);
    // Input length 0: an empty target has probability 1 (loss 0), a non-empty one is infeasible.
    Problem p = make_problem(4, 3, 0, {{}, {1}, {0, 1}}, {0, 0, 4}, 3);
    p.r = Reduction::none;
    finish(p);
    Result f = forward(p);
    const auto l = vec(f.loss);
    EXPECT_EQ(l[0], 0.0) << variant;
    EXPECT_EQ(l[1], INFINITY) << variant;
    EXPECT_TRUE(std::isfinite(l[2])) << variant;
    // log_alpha [B, T, 2S+1]: -inf past each input length and past 2*target_len+1, and the loss
    // is -logsumexp of the last row's final two positions.
    EXPECT_EQ(f.log_alpha.sizes(), (Shape{3, 4, 5}));
    const auto la = vec(f.log_alpha);
    for (int64_t t = 0; t < 4; ++t)
      for (int64_t s = 0; s < 5; ++s) {
        EXPECT_EQ(la[size_t((0 * 4 + t) * 5 + s)], -INFINITY);
        EXPECT_EQ(la[size_t((1 * 4 + t) * 5 + s)], -INFINITY);
      }
    const double a3 = la[size_t((2 * 4 + 3) * 5 + 3)], a4 = la[size_t((2 * 4 + 3) * 5 + 4)];
    const double m = std::max(a3, a4);
    EXPECT_NEAR(l[2], -(m + std::log(std::exp(a3 - m) + std::exp(a4 - m))), 1e-12);
    // Gradients: none for length 0 (and the infeasible one), finite elsewhere.
    const auto g = vec(backward(p, f, Tensor::ones({3}, DType::f64)));
    for (int64_t t = 0; t < 4; ++t)
      for (int64_t c = 0; c < 3; ++c) {
        EXPECT_EQ(g[size_t((t * 3 + 0) * 3 + c)], 0.0);
        EXPECT_EQ(g[size_t((t * 3 + 1) * 3 + c)], 0.0);
        EXPECT_TRUE(std::isfinite(g[size_t((t * 3 + 2) * 3 + c)]));
      }
    // zero_infinity: the infeasible loss becomes 0; mean over the batch counts it.
    p.zi = true;
    p.r = Reduction::mean;
    EXPECT_NEAR(vec(forward(p).loss)[0], l[2] / 2 / 3, 1e-12) << variant;
  }
}

// A repeated label needs a blank between its copies: "1 1" fits in 3 steps, not in 2.
TEST(CtcSemantics, RepeatedLabelsNeedABlank) {
  Problem p = make_problem(3, 3, 0, {{0, 0}, {0, 0}, {0, 1}}, {3, 2, 2}, 9);
  p.r = Reduction::none;
  finish(p);
  const auto l = vec(forward(p).loss);
  EXPECT_TRUE(std::isfinite(l[0]));
  EXPECT_EQ(l[1], INFINITY);
  EXPECT_TRUE(std::isfinite(l[2]));
  // "1 1" in 3 steps has exactly one alignment: 1, blank, 1.
  const double* x = p.log_probs.data<double>();
  auto at = [&](int64_t t, int64_t b, int64_t c) { return x[(t * 3 + b) * 3 + c]; };
  EXPECT_NEAR(l[0], -(at(0, 0, 1) + at(1, 0, 0) + at(2, 0, 1)), 1e-12);
}

// ---- decoding ---------------------------------------------------------------------------------

// log_probs whose argmax per step follows `path` (probability `peak`, the rest spread evenly).
Tensor peaked(const std::vector<std::vector<int64_t>>& paths, int64_t C, double peak) {
  const int64_t T = int64_t(paths[0].size()), B = int64_t(paths.size());
  std::vector<double> v(size_t(T * B * C), std::log((1 - peak) / double(C - 1)));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      v[size_t((t * B + b) * C + paths[size_t(b)][size_t(t)])] = std::log(peak);
  return Tensor::from_vector(v, {T, B, C});
}

struct Decoded {
  std::vector<std::vector<int64_t>> labels;
  std::vector<double> log_prob;
};

Decoded unpack(const Tensor& labels, const Tensor& lengths, const Tensor& log_prob) {
  const int64_t B = labels.size(0), T = labels.size(1);
  const auto lv = labels.to_vector<int64_t>(), n = lengths.to_vector<int64_t>();
  Decoded d;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<int64_t> row;
    for (int64_t i = 0; i < T; ++i) {
      const int64_t v = lv[size_t(b * T + i)];
      if (i < n[size_t(b)])
        row.push_back(v);
      else
        EXPECT_EQ(v, -1) << "padding of row " << b;
    }
    d.labels.push_back(row);
  }
  if (log_prob.defined()) d.log_prob = vec(log_prob);
  return d;
}

Decoded greedy(const Tensor& lp, int64_t blank, bool merge, const Tensor& lengths = Tensor()) {
  CtcGreedyDecodeArgs a;
  a.log_probs = lp;
  a.input_lengths = lengths;
  a.blank = blank;
  a.merge_repeated = merge;
  a.labels = Tensor::full({lp.size(1), lp.size(0)}, 7, DType::i64);
  a.lengths = Tensor::full({lp.size(1)}, 7, DType::i64);
  a.log_prob = Tensor::full({lp.size(1)}, NAN, loss_dtype(lp.dtype()));
  ctc_greedy_decode(a);
  return unpack(a.labels, a.lengths, a.log_prob);
}

Decoded beam(const Tensor& lp, int64_t blank, int64_t width, bool merge,
             const Tensor& lengths = Tensor()) {
  CtcBeamDecodeArgs a;
  a.log_probs = lp;
  a.input_lengths = lengths;
  a.blank = blank;
  a.beam_width = width;
  a.merge_repeated = merge;
  a.labels = Tensor::full({lp.size(1), lp.size(0)}, 7, DType::i64);
  a.lengths = Tensor::full({lp.size(1)}, 7, DType::i64);
  a.log_prob = Tensor::full({lp.size(1)}, NAN, loss_dtype(lp.dtype()));
  ctc_beam_decode(a);
  return unpack(a.labels, a.lengths, a.log_prob);
}

using Labels = std::vector<std::vector<int64_t>>;

TEST(CtcDecode, GreedyHandMadeCases) {
  // blank 0: 1 1 _ 1 2 2 _ _ 3 -> merged "1 1 2 3"; unmerged "1 1 1 2 2 3".
  // blank 3: 3 0 0 3 3 2 0 1 1 -> merged "0 2 0 1"; unmerged "0 0 2 0 1 1".
  const Tensor lp = peaked({{1, 1, 0, 1, 2, 2, 0, 0, 3}, {3, 0, 0, 3, 3, 2, 0, 1, 1}}, 4, 0.7);
  const Decoded m0 = greedy(lp, 0, true);
  EXPECT_EQ(m0.labels[0], (std::vector<int64_t>{1, 1, 2, 3}));
  const Decoded u0 = greedy(lp, 0, false);
  EXPECT_EQ(u0.labels[0], (std::vector<int64_t>{1, 1, 1, 2, 2, 3}));
  const Decoded m3 = greedy(lp, 3, true);
  EXPECT_EQ(m3.labels[1], (std::vector<int64_t>{0, 2, 0, 1}));
  EXPECT_EQ(greedy(lp, 3, false).labels[1], (std::vector<int64_t>{0, 0, 2, 0, 1, 1}));
  // Best path's log-probability: every step's max.
  EXPECT_NEAR(m0.log_prob[0], 9 * std::log(0.7), 1e-5);
  // Input lengths cut the sequence: 5 steps of row 0 -> "1 1 2", 0 steps -> nothing.
  const Decoded cut = greedy(lp, 0, true, Tensor::from_vector(std::vector<int32_t>{5, 0}, {2}));
  EXPECT_EQ(cut.labels[0], (std::vector<int64_t>{1, 1, 2}));
  EXPECT_TRUE(cut.labels[1].empty());
  EXPECT_NEAR(cut.log_prob[1], 0.0, 0);
  // Ties: the first maximum wins (class 1 over class 2).
  const Tensor tie = Tensor::from_vector(std::vector<float>{-2.0f, -0.5f, -0.5f}, {1, 1, 3});
  EXPECT_EQ(greedy(tie, 0, true).labels[0], (std::vector<int64_t>{1}));
}

// Random paths that visit blanks and repeats; every step's argmax has probability 0.9.
std::vector<std::vector<int64_t>> random_paths(int64_t B, int64_t T, int64_t C, uint64_t seed) {
  const auto r = random_indices({B, T}, C, DType::i64, seed).to_vector<int64_t>();
  std::vector<std::vector<int64_t>> paths(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      int64_t c = r[size_t(b * T + t)];
      if (t > 0 && c == C - 1) c = paths[size_t(b)].back();  // more repeats
      paths[size_t(b)].push_back(c);
    }
  return paths;
}

TEST(CtcDecode, BeamWidthOneEqualsGreedy) {
  for (int64_t blank : {0, 2}) {
    const Tensor lp = peaked(random_paths(16, 12, 5, 31 + blank), 5, 0.9);
    const Tensor lengths = random_indices({16}, 13, DType::i64, 5);
    const Decoded g = greedy(lp, blank, true, lengths);
    // The beam's prefix is the CTC labelling itself (merge_repeated off) ...
    const Decoded b1 = beam(lp, blank, 1, false, lengths);
    EXPECT_EQ(b1.labels, g.labels) << "blank " << blank;
    // ... and TF's merge_repeated also collapses equal neighbours separated by a blank.
    Labels collapsed = g.labels;
    for (auto& row : collapsed) row.erase(std::unique(row.begin(), row.end()), row.end());
    EXPECT_EQ(beam(lp, blank, 1, true, lengths).labels, collapsed) << "blank " << blank;
  }
}

// -log p(labels | lp) summed over alignments, by the loss.
double neg_log_p(const Tensor& lp, int64_t blank, const std::vector<int64_t>& labels) {
  Problem p;
  p.T = lp.size(0);
  p.B = 1;
  p.C = lp.size(2);
  p.blank = blank;
  p.r = Reduction::none;
  p.log_probs = lp.to(DType::f64);
  p.tgt = {labels};
  p.input_len = {p.T};
  finish(p);
  return vec(forward(p).loss)[0];
}

TEST(CtcDecode, WiderBeamBeatsGreedy) {
  // Every step: blank 0.4, "1" 0.35, "2" 0.25. Greedy reads blanks: "" (p = 0.4^3 = 0.064);
  // "1" sums 6 alignments to 0.309, the most probable labelling, which a beam finds.
  std::vector<double> v;
  for (int t = 0; t < 3; ++t)
    for (double q : {0.4, 0.35, 0.25}) v.push_back(std::log(q));
  const Tensor lp = Tensor::from_vector(v, {3, 1, 3});
  const Decoded g = greedy(lp, 0, true);
  EXPECT_TRUE(g.labels[0].empty());
  const Decoded b = beam(lp, 0, 16, false);
  EXPECT_EQ(b.labels[0], (std::vector<int64_t>{1}));
  const double p_beam = std::exp(-neg_log_p(lp, 0, b.labels[0]));
  const double p_greedy = std::exp(-neg_log_p(lp, 0, g.labels[0]));
  EXPECT_NEAR(p_greedy, 0.064, 1e-12);
  EXPECT_NEAR(p_beam, 3 * 0.35 * 0.16 + 2 * 0.35 * 0.35 * 0.4 + 0.35 * 0.35 * 0.35, 1e-12);
  EXPECT_GT(p_beam, p_greedy);
  // With every prefix in the beam (15 < 16) the search is exact: its score is the labelling's
  // probability summed over alignments.
  EXPECT_NEAR(b.log_prob[0], std::log(p_beam), 1e-12);
  // A width-1 beam keeps only the empty prefix here (it is the most probable prefix after every
  // step) and ends where greedy does.
  EXPECT_TRUE(beam(lp, 0, 1, false).labels[0].empty());

  // Random inputs: a beam's score is a lower bound of its labelling's probability (alignments
  // through pruned prefixes are lost, none is counted twice).
  const Tensor r = log_softmax_rows(random_tensor({10, 6, 4}, DType::f64, 3, -1.0, 1.0));
  const Decoded br = beam(r, 0, 8, false);
  for (int64_t k = 0; k < 6; ++k) {
    const Tensor rk = r.select(1, k).contiguous().view({10, 1, 4});
    EXPECT_LE(br.log_prob[size_t(k)], -neg_log_p(rk, 0, br.labels[size_t(k)]) + 1e-9)
        << "sample " << k;
  }
}

// ---- argument errors --------------------------------------------------------------------------

TEST(CtcArgs, BadInputsNameTheTensor) {
  const Problem p = standard(0, Reduction::mean, false, false, true, 1);
  auto args = [&] {
    CtcFwdArgs a;
    a.log_probs = p.log_probs;
    a.targets = p.targets;
    a.input_lengths = p.input_lengths;
    a.target_lengths = p.target_lengths;
    a.loss = Tensor::empty({}, DType::f64);
    a.log_alpha =
        Tensor::empty(ctc_log_alpha_shape(p.log_probs, p.targets, p.target_lengths), DType::f64);
    return a;
  };
  EXPECT_NO_THROW(check_ctc_fwd_args(args()));
  {
    CtcFwdArgs a = args();
    a.targets = p.targets.clone();
    a.targets.data<int64_t>()[1] = 0;  // the blank, inside sample 0's target
    AIM_EXPECT_ERROR(ctc_fwd(a), "target 0 of sample 0 at position 1 is not a label");
    a.targets.data<int64_t>()[1] = 5;
    AIM_EXPECT_ERROR(ctc_fwd(a), "target 5 of sample 0 at position 1");
  }
  {
    CtcFwdArgs a = args();
    a.input_lengths = Tensor::from_vector(std::vector<int64_t>{9, 1, 1, 1}, {4});
    AIM_EXPECT_ERROR(check_ctc_fwd_args(a), "input_lengths[0] = 9 is outside [0, T = 8]");
  }
  {
    CtcFwdArgs a = args();
    a.target_lengths = Tensor::from_vector(std::vector<int64_t>{3, 4, 0, 6}, {4});
    AIM_EXPECT_ERROR(check_ctc_fwd_args(a), "target_lengths[3] = 6 is outside [0, S");
  }
  {
    CtcFwdArgs a = args();
    a.input_lengths = p.input_lengths.to(DType::f32);
    AIM_EXPECT_ERROR(check_ctc_fwd_args(a), "input_lengths must be a contiguous [4] i32/i64");
  }
  {
    CtcFwdArgs a = args();
    a.log_alpha = Tensor::empty({4, 8, 9}, DType::f32);
    AIM_EXPECT_ERROR(check_ctc_fwd_args(a), "log_alpha must be a contiguous [4, 8, 11] f64");
  }
  {
    CtcFwdArgs a = args();
    a.blank = 5;
    AIM_EXPECT_ERROR(check_ctc_fwd_args(a), "blank = 5 is outside [0, C = 5)");
  }
  {
    CtcFwdArgs a = args();
    a.targets = Tensor::from_vector(std::vector<int64_t>(13, 1), {13});
    AIM_EXPECT_ERROR(check_ctc_fwd_args(a),
                     "1-D targets hold 13 labels but target_lengths sum to 12");
  }
  {
    CtcBeamDecodeArgs b;
    b.log_probs = p.log_probs;
    b.labels = Tensor::empty({4, 8}, DType::i64);
    b.lengths = Tensor::empty({4}, DType::i64);
    b.log_prob = Tensor::empty({4}, DType::f64);
    b.beam_width = 0;
    AIM_EXPECT_ERROR(check_ctc_beam_args(b), "beam_width must be >= 1");
    b.beam_width = 3;
    b.labels = Tensor::empty({4, 8}, DType::i32);
    AIM_EXPECT_ERROR(check_ctc_beam_args(b), "labels must be a contiguous [4, 8] i64");
  }
}

// ---- timing -----------------------------------------------------------------------------------

// CRNN's shape (MODELS.md §5.1): T 25, B 64, 37 classes, targets of up to 10 labels, f32.
// cpu.omp must agree with cpu.ref there; the timings (best of 7) are printed for the record, not
// asserted (shared machines: a busy second core stalls any OpenMP barrier by milliseconds).
TEST(CtcBench, CrnnShapeRefVsOmp) {
  std::vector<std::vector<int64_t>> tgt;
  std::vector<int64_t> il(64, 25);
  const auto r = random_indices({64, 10}, 36, DType::i64, 8).to_vector<int64_t>();
  const auto n = random_indices({64}, 10, DType::i64, 9).to_vector<int64_t>();
  for (int64_t b = 0; b < 64; ++b)
    tgt.emplace_back(r.begin() + b * 10, r.begin() + b * 10 + 1 + n[size_t(b)]);
  Problem p = make_problem(25, 37, 0, tgt, il, 12);
  p.log_probs = p.log_probs.to(DType::f32);
  const Tensor dl = Tensor::ones({}, DType::f32);
  std::map<std::string, double> ms;
  std::map<std::string, std::vector<double>> loss, grad;
  for (const char* variant : {"cpu.ref", "cpu.omp"}) {
    ScopedVariant vf("ctc_fwd", variant), vb("ctc_bwd", variant);
    double best = 1e30;
    for (int rep = 0; rep < 7; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      const Result f = forward(p, DType::f32);
      const Tensor g = backward(p, f, dl, DType::f32);
      best = std::min(
          best,
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      loss[variant] = vec(f.loss);
      grad[variant] = vec(g);
    }
    ms[variant] = best;
  }
  EXPECT_NEAR(loss["cpu.omp"][0], loss["cpu.ref"][0], 1e-4 * std::abs(loss["cpu.ref"][0]));
  double worst = 0;
  for (size_t i = 0; i < grad["cpu.ref"].size(); ++i)
    worst = std::max(worst, std::abs(grad["cpu.omp"][i] - grad["cpu.ref"][i]));
  EXPECT_LT(worst, 1e-6);
  std::printf(
      "[ctc timing] T 25 B 64 C 37 S 10 f32, forward + backward, %d OpenMP threads: "
      "cpu.ref %.3f ms, cpu.omp %.3f ms (%.1fx); loss %.6f, max grad difference %.2g\n",
      omp_get_max_threads(), ms["cpu.ref"], ms["cpu.omp"], ms["cpu.ref"] / ms["cpu.omp"],
      loss["cpu.ref"][0], worst);
}

}  // namespace
}  // namespace aim::kernels
