// rnn_fwd / rnn_bwd (kernels/rnn): parity of the CPU variants with PyTorch
// (tests/peers/rnn_cell.py: torch.nn.LSTM / torch.nn.GRU with packed sequences, forward and
// reverse, and hand-written GRU without linear_before_reset and AUGRU), a float64 finite-difference
// check of every gradient of cpu.ref for the three cells, and the argument checks. The registry
// test (test_variants.cpp) compares every other variant with cpu.ref.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kernels/registry.h"
#include "kernels/rnn/rnn.h"
#include "kernels/testing.h"
#include "tensor/safetensors.h"
#include "tests/support/common.h"

namespace aim::kernels {
namespace {

using ::aim::testing::source_root;

bool have_torch() {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0) return true;
  // CI installs python3-torch (tools/deps.sh): there the parity check must run, not skip.
  if (std::getenv("CI")) ADD_FAILURE() << "CI is set but /usr/bin/python3 cannot import torch";
  return false;
}

// One single-layer problem in f64: inputs, the output gradients, and its configuration.
struct Problem {
  RnnCell cell = RnnCell::LSTM;
  bool reverse = false, lbr = true;
  int64_t T = 0, B = 0, I = 0, H = 0;
  std::map<std::string, Tensor> t;  // x, w_ih, w_hh, b_ih, b_hh, h0, c0, att, lengths, dy, dhn, dcn
};

Problem make_problem(RnnCell cell, bool reverse, bool lbr, int64_t T, int64_t B, int64_t I,
                     int64_t H, std::vector<int32_t> lengths, uint64_t seed) {
  Problem p;
  p.cell = cell;
  p.reverse = reverse;
  p.lbr = lbr;
  p.T = T;
  p.B = B;
  p.I = I;
  p.H = H;
  const int64_t GH = rnn_gates(cell) * H;
  const double k = 1.0 / std::sqrt(double(H));
  const DType f = DType::f64;
  p.t["x"] = random_tensor({T, B, I}, f, seed, -1, 1);
  p.t["w_ih"] = random_tensor({GH, I}, f, seed + 1, -k, k);
  p.t["w_hh"] = random_tensor({GH, H}, f, seed + 2, -k, k);
  p.t["b_ih"] = random_tensor({GH}, f, seed + 3, -k, k);
  p.t["b_hh"] = random_tensor({GH}, f, seed + 4, -k, k);
  p.t["h0"] = random_tensor({B, H}, f, seed + 5, -1, 1);
  p.t["dy"] = random_tensor({T, B, H}, f, seed + 6, -1, 1);
  p.t["dhn"] = random_tensor({B, H}, f, seed + 7, -1, 1);
  if (cell == RnnCell::LSTM) {
    p.t["c0"] = random_tensor({B, H}, f, seed + 8, -1, 1);
    p.t["dcn"] = random_tensor({B, H}, f, seed + 9, -1, 1);
  }
  if (cell == RnnCell::AUGRU) p.t["att"] = random_tensor({T, B}, f, seed + 10, 0, 1);
  if (!lengths.empty()) p.t["lengths"] = Tensor::from_vector(lengths, {B});
  return p;
}

Tensor get(const Problem& p, const std::string& n) {
  auto it = p.t.find(n);
  return it == p.t.end() ? Tensor() : it->second;
}

struct Outputs {
  Tensor y, hn, cn, workspace;
};

Outputs forward(const Problem& p) {
  Outputs o;
  const DType f = p.t.at("x").dtype();
  RnnFwdArgs a;
  a.cell = p.cell;
  a.reverse = p.reverse;
  a.linear_before_reset = p.lbr;
  a.x = get(p, "x");
  a.lengths = get(p, "lengths");
  a.h0 = get(p, "h0");
  a.c0 = get(p, "c0");
  a.w_ih = get(p, "w_ih");
  a.w_hh = get(p, "w_hh");
  a.b_ih = get(p, "b_ih");
  a.b_hh = get(p, "b_hh");
  a.att = get(p, "att");
  a.y = o.y = Tensor::full({p.T, p.B, p.H}, NAN, f);
  a.hn = o.hn = Tensor::full({p.B, p.H}, NAN, f);
  if (p.cell == RnnCell::LSTM) a.cn = o.cn = Tensor::full({p.B, p.H}, NAN, f);
  a.workspace = o.workspace = Tensor::full({p.T, p.B, rnn_workspace_width(p.cell) * p.H}, NAN, f);
  rnn_fwd(a);
  return o;
}

// Gradients by name (dx, dh0, dc0, dw_ih, dw_hh, db_ih, db_hh, datt); the accumulated ones
// start from `acc_init` and have it subtracted again.
std::map<std::string, Tensor> backward(const Problem& p, const Outputs& o, double acc_init = 0.5) {
  const DType f = p.t.at("x").dtype();
  const int64_t GH = rnn_gates(p.cell) * p.H;
  RnnBwdArgs a;
  a.cell = p.cell;
  a.reverse = p.reverse;
  a.linear_before_reset = p.lbr;
  a.x = get(p, "x");
  a.lengths = get(p, "lengths");
  a.h0 = get(p, "h0");
  a.c0 = get(p, "c0");
  a.w_ih = get(p, "w_ih");
  a.w_hh = get(p, "w_hh");
  a.att = get(p, "att");
  a.y = o.y;
  a.workspace = o.workspace;
  a.dy = get(p, "dy");
  a.dhn = get(p, "dhn");
  a.dcn = get(p, "dcn");
  std::map<std::string, Tensor> g;
  a.dx = g["dx"] = Tensor::full({p.T, p.B, p.I}, NAN, f);
  a.dh0 = g["dh0"] = Tensor::full({p.B, p.H}, NAN, f);
  if (p.cell == RnnCell::LSTM) a.dc0 = g["dc0"] = Tensor::full({p.B, p.H}, NAN, f);
  if (p.cell == RnnCell::AUGRU) a.datt = g["datt"] = Tensor::full({p.T, p.B}, NAN, f);
  a.dw_ih = g["dw_ih"] = Tensor::full({GH, p.I}, acc_init, f);
  a.dw_hh = g["dw_hh"] = Tensor::full({GH, p.H}, acc_init, f);
  a.db_ih = g["db_ih"] = Tensor::full({GH}, acc_init, f);
  a.db_hh = g["db_hh"] = Tensor::full({GH}, acc_init, f);
  rnn_bwd(a);
  for (const char* n : {"dw_ih", "dw_hh", "db_ih", "db_hh"}) {
    Tensor d = g[n].to(DType::f64);
    double* v = d.data<double>();
    for (int64_t i = 0; i < d.numel(); ++i) v[i] -= acc_init;
    g[n] = d;
  }
  return g;
}

// max |a - b| / max(max |b|, 1e-30).
double rel_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to(kCPU).to(DType::f64).contiguous().to_vector<double>();
  const auto y = b.to(kCPU).to(DType::f64).contiguous().to_vector<double>();
  EXPECT_EQ(x.size(), y.size());
  double d = 0, m = 1e-30;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
    d = std::max(d, std::isnan(x[i]) ? INFINITY : std::abs(x[i] - y[i]));
    m = std::max(m, std::abs(y[i]));
  }
  return d / m;
}

// ---- PyTorch parity --------------------------------------------------------------------------

struct ParityCase {
  RnnCell cell;
  bool reverse, lbr, lengths;
};

std::string case_name(const ParityCase& c) {
  return std::string(rnn_cell_name(c.cell)) + (c.reverse ? " reverse" : " forward") +
         (c.cell != RnnCell::LSTM ? (c.lbr ? " lbr" : " reset-first") : "") +
         (c.lengths ? " lengths" : "");
}

// One peer run for every case; each CPU variant in `variants` is compared with it (f64).
void torch_parity(const std::vector<std::string>& variants) {
  if (!have_torch()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch";
  std::vector<ParityCase> cases;
  for (RnnCell cell : {RnnCell::LSTM, RnnCell::GRU, RnnCell::AUGRU})
    for (bool lbr : {true, false}) {
      if (cell == RnnCell::LSTM && !lbr) continue;
      for (bool reverse : {false, true})
        for (bool lengths : {false, true}) cases.push_back({cell, reverse, lbr, lengths});
    }
  const std::string dir = ::aim::testing::make_temp_dir("aim_rnn_parity");
  const int64_t T = 5, B = 4, I = 3, H = 6;
  std::vector<Problem> problems;
  for (size_t k = 0; k < cases.size(); ++k) {
    const ParityCase& c = cases[k];
    // Unsorted lengths with the full one not first (PyTorch packs need len >= 1).
    Problem p = make_problem(c.cell, c.reverse, c.lbr, T, B, I, H,
                             c.lengths ? std::vector<int32_t>{3, 5, 1, 4} : std::vector<int32_t>{},
                             100 + 20 * k);
    std::vector<std::pair<std::string, Tensor>> in;
    in.push_back(
        {"cfg", Tensor::from_vector(std::vector<int64_t>{int64_t(c.cell), c.reverse, c.lbr}, {3})});
    for (const auto& [n, t] : p.t) in.push_back({n, t});
    save_safetensors(dir + "/in_" + std::to_string(k) + ".safetensors", in);
    problems.push_back(std::move(p));
  }
  const std::string cmd = "/usr/bin/python3 " + source_root() + "/tests/peers/rnn_cell.py " + dir +
                          " " + std::to_string(cases.size());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  for (const std::string& variant : variants) {
    ScopedVariant vf("rnn_fwd", variant), vb("rnn_bwd", variant);
    for (size_t k = 0; k < cases.size(); ++k) {
      SCOPED_TRACE(variant + " " + case_name(cases[k]));
      const Problem& p = problems[k];
      const SafetensorsFile o =
          load_safetensors(dir + "/out_" + std::to_string(k) + ".safetensors");
      const Outputs f = forward(p);
      double worst = 0;
      std::string worst_name;
      auto compare = [&](const std::string& name, const Tensor& got) {
        ASSERT_TRUE(o.has(name)) << name;
        const double d = rel_diff(got, o.at(name));
        EXPECT_LT(d, 1e-10) << name;
        if (d >= worst) worst = d, worst_name = name;
      };
      compare("y", f.y);
      compare("hn", f.hn);
      if (p.cell == RnnCell::LSTM) compare("cn", f.cn);
      for (const auto& [n, g] : backward(p, f)) compare(n, g);
      std::printf("[rnn parity %s] %-34s worst rel %.3g (%s)\n", variant.c_str(),
                  case_name(cases[k]).c_str(), worst, worst_name.c_str());
    }
  }
  std::system(("rm -rf " + dir).c_str());
}

TEST(RnnParity, CpuVariantsMatchTorch) { torch_parity({"cpu.ref", "cpu.fast"}); }

// ---- finite differences ----------------------------------------------------------------------

// L = sum(y * dy) + sum(hn * dhn) + sum(cn * dcn): what backward() differentiates.
double loss(const Problem& p) {
  const Outputs o = forward(p);
  auto dot = [](const Tensor& a, const Tensor& b) {
    const auto x = a.to_vector<double>(), y = b.to_vector<double>();
    double s = 0;
    for (size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
    return s;
  };
  double l = dot(o.y, p.t.at("dy")) + dot(o.hn, p.t.at("dhn"));
  if (p.cell == RnnCell::LSTM) l += dot(o.cn, p.t.at("dcn"));
  return l;
}

void finite_differences(RnnCell cell, bool reverse, bool lbr) {
  ScopedVariant vf("rnn_fwd", "cpu.ref"), vb("rnn_bwd", "cpu.ref");
  Problem p = make_problem(cell, reverse, lbr, 4, 3, 3, 4, {4, 2, 3}, 7);
  const auto g = backward(p, forward(p));
  const std::map<std::string, std::string> grad_of = {
      {"x", "dx"},       {"h0", "dh0"},     {"c0", "dc0"},     {"att", "datt"},
      {"w_ih", "dw_ih"}, {"w_hh", "dw_hh"}, {"b_ih", "db_ih"}, {"b_hh", "db_hh"}};
  const double eps = 1e-6;
  int checked = 0;
  for (const auto& [in, gname] : grad_of) {
    if (!p.t.count(in)) continue;
    Tensor t = p.t.at(in);
    double* v = t.data<double>();
    const auto an = g.at(gname).to_vector<double>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double keep = v[i];
      v[i] = keep + eps;
      const double up = loss(p);
      v[i] = keep - eps;
      const double down = loss(p);
      v[i] = keep;
      const double num = (up - down) / (2 * eps);
      EXPECT_NEAR(an[size_t(i)], num, 1e-7 + 1e-6 * std::abs(num))
          << rnn_cell_name(cell) << (reverse ? " reverse " : " forward ") << gname << "[" << i
          << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(RnnGradcheck, Lstm) {
  finite_differences(RnnCell::LSTM, false, true);
  finite_differences(RnnCell::LSTM, true, true);
}
TEST(RnnGradcheck, Gru) {
  for (bool lbr : {true, false})
    for (bool reverse : {false, true}) finite_differences(RnnCell::GRU, reverse, lbr);
}
TEST(RnnGradcheck, Augru) {
  for (bool lbr : {true, false})
    for (bool reverse : {false, true}) finite_differences(RnnCell::AUGRU, reverse, lbr);
}

// ---- semantics the peers do not cover ---------------------------------------------------------

// A zero length leaves the state at h0/c0 and y at zero; dh0 = dhn, dc0 = dcn, dx = 0.
TEST(RnnSemantics, ZeroLengthPassesTheStateThrough) {
  ScopedVariant vf("rnn_fwd", "cpu.ref"), vb("rnn_bwd", "cpu.ref");
  for (bool reverse : {false, true}) {
    Problem p = make_problem(RnnCell::LSTM, reverse, true, 3, 2, 2, 3, {0, 3}, 3);
    const Outputs o = forward(p);
    const auto g = backward(p, o);
    auto row = [](const Tensor& t, int64_t b) { return t.select(t.dim() - 2, b).contiguous(); };
    EXPECT_EQ(rel_diff(row(o.hn, 0), row(p.t.at("h0"), 0)), 0);
    EXPECT_EQ(rel_diff(row(o.cn, 0), row(p.t.at("c0"), 0)), 0);
    EXPECT_EQ(rel_diff(row(g.at("dh0"), 0), row(p.t.at("dhn"), 0)), 0);
    EXPECT_EQ(rel_diff(row(g.at("dc0"), 0), row(p.t.at("dcn"), 0)), 0);
    for (int64_t t = 0; t < 3; ++t) {
      for (double v : o.y.select(0, t).select(0, 0).contiguous().to_vector<double>())
        EXPECT_EQ(v, 0.0);
      for (double v : g.at("dx").select(0, t).select(0, 0).contiguous().to_vector<double>())
        EXPECT_EQ(v, 0.0);
    }
  }
}

// ---- argument checks -------------------------------------------------------------------------

void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(RnnArgs, BadInputsNameTheTensor) {
  const Problem p = make_problem(RnnCell::AUGRU, false, false, 3, 2, 4, 5, {3, 2}, 1);
  auto args = [&] {
    RnnFwdArgs a;
    a.cell = p.cell;
    a.linear_before_reset = false;
    a.x = get(p, "x");
    a.lengths = get(p, "lengths");
    a.w_ih = get(p, "w_ih");
    a.w_hh = get(p, "w_hh");
    a.att = get(p, "att");
    a.y = Tensor::zeros({3, 2, 5}, DType::f64);
    return a;
  };
  EXPECT_NO_THROW(check_rnn_fwd_args(args()));
  {
    RnnFwdArgs a = args();
    a.att = Tensor();
    expect_error([&] { check_rnn_fwd_args(a); }, "AUGRU needs att");
  }
  {
    RnnFwdArgs a = args();
    a.lengths = Tensor::from_vector(std::vector<int32_t>{4, 1}, {2});
    expect_error([&] { check_rnn_fwd_args(a); }, "lengths[0] = 4");
  }
  {
    RnnFwdArgs a = args();
    a.lengths = Tensor::from_vector(std::vector<int64_t>{3, 1}, {2});
    expect_error([&] { check_rnn_fwd_args(a); }, "lengths must be a contiguous [2] i32");
  }
  {
    RnnFwdArgs a = args();
    a.c0 = Tensor::zeros({2, 5}, DType::f64);
    expect_error([&] { check_rnn_fwd_args(a); }, "c0 must be undefined");
  }
  {
    RnnFwdArgs a = args();
    a.w_hh = Tensor::zeros({12, 5}, DType::f64);
    expect_error([&] { check_rnn_fwd_args(a); }, "w_hh must be [G*H, H] with G = 3");
  }
  {
    RnnFwdArgs a = args();
    a.b_ih = Tensor::zeros({15}, DType::f64);
    expect_error([&] { check_rnn_fwd_args(a); }, "b_ih and b_hh must both be given");
  }
  {
    RnnFwdArgs a = args();
    a.y = Tensor::zeros({3, 2, 5}, DType::f32);
    expect_error([&] { check_rnn_fwd_args(a); }, "y must be contiguous [3, 2, 5] f64");
  }
  {
    RnnBwdArgs b;
    b.cell = RnnCell::AUGRU;
    b.x = get(p, "x");
    b.w_ih = get(p, "w_ih");
    b.w_hh = get(p, "w_hh");
    b.att = get(p, "att");
    b.y = Tensor::zeros({3, 2, 5}, DType::f64);
    expect_error([&] { check_rnn_bwd_args(b); }, "workspace (the forward's) must be given");
  }
}

}  // namespace
}  // namespace aim::kernels
