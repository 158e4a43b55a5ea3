// roi_align, roi_pool (kernels/roi) and interpolate (kernels/interpolate):
//  - parity of every variant this build can run (CPU; CUDA on a GPU or the emulated device) with
//    torchvision.ops.roi_align / roi_pool and F.interpolate (tests/peers/roi.py) in forward and
//    input gradient, 1e-5 (f32) and 1e-10 (f64) absolute + relative, argmax exactly, on random
//    maps and the registry's RoI mix (inside, hanging over, entirely outside, empty, inverted,
//    sub-cell RoIs; several images), adaptive and fixed sampling, aligned both ways, strides 1-16;
//    nearest and bilinear (both align_corners) up and down, from sizes and from scale factors;
//  - f64 finite-difference gradchecks of the autograd functions on cpu.ref and cpu.omp;
//  - what torchvision leaves implicit (no RoIs, bad batch indices) and the argument errors.
// The registry test (test_variants.cpp) compares every other variant with cpu.ref.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autograd/functions/interpolate.h"
#include "autograd/functions/roi.h"
#include "autograd/gradcheck.h"
#include "kernels/interpolate/interpolate.h"
#include "kernels/registry.h"
#include "kernels/roi/roi.h"
#include "kernels/roi/roi_cpu.h"
#include "kernels/testing.h"
#include "tensor/safetensors.h"
#include "tests/support/common.h"

namespace aim::kernels {
namespace {

using ::aim::testing::source_root;

// The variants of `op` this binary can run, with the device their tensors go to.
std::vector<std::pair<std::string, Device>> runnable(const std::string& op) {
  std::vector<std::pair<std::string, Device>> r;
  for (const VariantInfo& v : registry().find(op)->variant_infos()) {
    if (v.backend == Backend::CPU) r.push_back({v.name, kCPU});
    if (v.backend == Backend::CUDA && cuda_device_count() > 0)
      r.push_back({v.name, cuda_device(0)});
  }
  return r;
}

// |got - want| <= tol (1 + |want|) everywhere; the first miss and the largest error in `what`.
void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const std::vector<double> g = got.to(kCPU).to(DType::f64).to_vector<double>();
  const std::vector<double> w = want.to(DType::f64).to_vector<double>();
  double worst = 0;
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < g.size(); ++i) {
    const double e = std::fabs(g[i] - w[i]);
    worst = std::fmax(worst, e);
    if (!(e <= tol * (1 + std::fabs(w[i])))) {
      if (first < 0) first = int64_t(i);
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << g.size() << " differ, first at " << first
                    << ": " << (first >= 0 ? g[size_t(first)] : 0) << " vs torch "
                    << (first >= 0 ? w[size_t(first)] : 0) << "; max abs error " << worst;
}

double tol_of(DType t) { return t == DType::f64 ? 1e-10 : 1e-5; }

struct RoiCase {
  int op;  // 0 roi_align, 1 roi_pool
  DType t;
  int64_t N, C, H, W, K, PH, PW, scale_inv, sampling;
  bool aligned;
};
struct InterpCase {
  DType t;
  int64_t N, C, H, W, P, Q;
  InterpMode mode;
  bool align;
  double sh, sw;  // scale factors, 0: size given
};

TEST(RoiParity, EveryVariantMatchesTorchvision) {
  AIM_REQUIRE_PYTHON_MODULE("torchvision");
  const DType f = DType::f32, d = DType::f64;
  const std::vector<RoiCase> rc = {
      {0, f, 2, 3, 11, 13, 60, 2, 2, 1, 0, false},   {0, f, 2, 3, 11, 13, 60, 2, 2, 1, 0, true},
      {0, f, 1, 4, 20, 17, 50, 7, 7, 4, 2, true},    {0, f, 1, 4, 20, 17, 50, 7, 7, 4, 2, false},
      {0, f, 3, 2, 9, 10, 80, 3, 4, 16, -1, false},  {0, f, 2, 5, 16, 12, 40, 5, 5, 8, 3, true},
      {0, f, 1, 8, 32, 32, 100, 7, 7, 4, 0, true},   {0, f, 2, 2, 6, 7, 30, 14, 14, 2, 0, true},
      {0, f, 1, 1, 1, 1, 20, 2, 2, 1, 0, false},     {0, f, 2, 3, 25, 19, 40, 7, 7, 8, 0, false},
      {0, d, 2, 3, 11, 13, 60, 2, 2, 1, 0, true},    {0, d, 1, 4, 20, 17, 50, 7, 7, 4, 2, false},
      {0, d, 2, 2, 6, 7, 30, 14, 14, 2, 0, false},   {1, f, 2, 3, 11, 13, 60, 2, 2, 1, 0, false},
      {1, f, 1, 4, 20, 17, 50, 7, 7, 4, 0, false},   {1, f, 3, 2, 9, 10, 80, 3, 4, 16, 0, false},
      {1, f, 1, 8, 38, 50, 100, 7, 7, 16, 0, false}, {1, f, 2, 2, 6, 7, 30, 14, 14, 2, 0, false},
      {1, f, 1, 1, 1, 1, 20, 2, 2, 1, 0, false},     {1, d, 2, 3, 11, 13, 60, 2, 2, 1, 0, false},
      {1, d, 1, 4, 20, 17, 50, 7, 7, 4, 0, false}};
  const InterpMode nearest = InterpMode::nearest, bilinear = InterpMode::bilinear;
  std::vector<InterpCase> ic;
  struct Size {
    int64_t H, W, P, Q;
    double sh, sw;
  };
  const std::vector<Size> sizes = {
      {4, 5, 8, 10, 0, 0},    {5, 7, 11, 13, 0, 0},    {13, 11, 5, 4, 0, 0},
      {7, 7, 7, 7, 0, 0},     {1, 1, 3, 4, 0, 0},      {5, 6, 1, 1, 0, 0},
      {3, 4, 9, 16, 0, 0},    {16, 16, 5, 3, 0, 0},    {25, 34, 50, 68, 0, 0},
      {12, 7, 12, 15, 0, 0},  {6, 9, 0, 0, 2.5, 2.25}, {10, 10, 0, 0, 0.3, 0.7},
      {7, 9, 0, 0, 1.1, 1.5}, {9, 9, 0, 0, 0.5, 0.5},  {11, 13, 0, 0, 1.7, 3.0},
      {5, 6, 0, 0, 2.05, 2.0}};
  for (size_t i = 0; i < sizes.size(); ++i) {
    const Size& s = sizes[i];
    const int64_t P = s.sh > 0 ? interpolate_out_size(s.H, s.sh) : s.P;
    const int64_t Q = s.sw > 0 ? interpolate_out_size(s.W, s.sw) : s.Q;
    const DType t = i % 4 == 3 ? d : f;
    // torch 1.13's NCHW nearest kernel ignores nearest_idx's copy and shift rules when a scale
    // factor is given (floor(o / scale) on every axis); its one-plane path and later torch apply
    // them, as aim does. With scale factors, nearest is compared on one plane.
    const int64_t planes = s.sh > 0 ? 1 : 2;
    ic.push_back({t, planes, planes, s.H, s.W, P, Q, nearest, false, s.sh, s.sw});
    ic.push_back({t, 2, 3, s.H, s.W, P, Q, bilinear, false, s.sh, s.sw});
    ic.push_back({t, 2, 3, s.H, s.W, P, Q, bilinear, true, s.sh, s.sw});
  }

  const std::string dir = ::aim::testing::make_temp_dir("aim_roi_parity");
  std::vector<std::map<std::string, Tensor>> in;
  uint64_t seed = 100;
  for (const RoiCase& c : rc) {
    std::map<std::string, Tensor> m;
    m["x"] = random_tensor({c.N, c.C, c.H, c.W}, c.t, seed++, -2.0, 2.0);
    m["rois"] = roi_cpu::make_rois(c.N, c.H, c.W, c.K, c.scale_inv, c.t, seed++);
    if (c.op == 0 && c.aligned && c.sampling <= 0) {
      // torchvision's CPU roi_align sizes its sample table grid_h * grid_w * PH * PW: a RoI
      // inverted along one axis only (a negative adaptive grid there) makes that negative and
      // throws. Such RoIs are straightened here; inverted along both, they stay (output 0).
      std::vector<double> r = m["rois"].to(DType::f64).to_vector<double>();
      for (size_t i = 0; i < r.size(); i += 5)
        if (const bool ix = r[i + 3] < r[i + 1], iy = r[i + 4] < r[i + 2]; ix != iy)
          ix ? std::swap(r[i + 1], r[i + 3]) : std::swap(r[i + 2], r[i + 4]);
      m["rois"] = Tensor::from_vector(r, {c.K, 5}).to(c.t);
    }
    m["dy"] = random_tensor({c.K, c.C, c.PH, c.PW}, c.t, seed++, -1.0, 1.0);
    m["cfg"] = Tensor::from_vector(
        std::vector<double>{double(c.op), double(c.PH), double(c.PW), 1.0 / double(c.scale_inv),
                            double(c.sampling), double(c.aligned), 0, 0},
        {8});
    in.push_back(m);
  }
  for (const InterpCase& c : ic) {
    std::map<std::string, Tensor> m;
    m["x"] = random_tensor({c.N, c.C, c.H, c.W}, c.t, seed++, -2.0, 2.0);
    m["dy"] = random_tensor({c.N, c.C, c.P, c.Q}, c.t, seed++, -1.0, 1.0);
    m["cfg"] = Tensor::from_vector(
        std::vector<double>{2, double(c.P), double(c.Q), double(int64_t(c.mode)), double(c.align),
                            c.sh, c.sw, 0},
        {8});
    in.push_back(m);
  }
  for (size_t k = 0; k < in.size(); ++k) {
    std::vector<std::pair<std::string, Tensor>> named(in[k].begin(), in[k].end());
    save_safetensors(dir + "/in_" + std::to_string(k) + ".safetensors", named);
  }
  const std::string cmd = std::string(::aim::testing::kPython) + " " + source_root() +
                          "/tests/peers/roi.py " + dir + " " + std::to_string(in.size());
  ASSERT_EQ(::aim::testing::run_command(cmd), 0) << cmd;

  int compared = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    const SafetensorsFile o = load_safetensors(dir + "/out_" + std::to_string(k) + ".safetensors");
    std::map<std::string, Tensor>& m = in[k];
    const DType t = m["x"].dtype();
    if (k < rc.size()) {
      const RoiCase& c = rc[k];
      const std::string fwd = c.op == 0 ? "roi_align_fwd" : "roi_pool_fwd";
      const std::string bwd = c.op == 0 ? "roi_align_bwd" : "roi_pool_bwd";
      RoiAlignParams p;
      p.spatial_scale = 1.0 / double(c.scale_inv);
      p.sampling_ratio = c.sampling;
      p.aligned = c.aligned;
      const Shape ys = {c.K, c.C, c.PH, c.PW};
      // argmax for roi_pool's backward: torchvision's own.
      for (const auto& [v, dev] : runnable(fwd)) {
        SCOPED_TRACE(fwd + " " + v + " case " + std::to_string(k));
        ScopedVariant sv(fwd, v);
        const Tensor x = m["x"].to(dev), rois = m["rois"].to(dev);
        const Tensor y = Tensor::empty(ys, t, dev);
        if (c.op == 0) {
          roi_align_fwd({x, rois, y, p});
        } else {
          const Tensor am = Tensor::empty(ys, DType::i32, dev);
          roi_pool_fwd({x, rois, y, am, p.spatial_scale});
          EXPECT_EQ(am.to(kCPU).to_vector<int32_t>(), o.at("argmax").to_vector<int32_t>());
        }
        expect_close(y, o.at("y"), tol_of(t), "y");
        ++compared;
      }
      for (const auto& [v, dev] : runnable(bwd)) {
        SCOPED_TRACE(bwd + " " + v + " case " + std::to_string(k));
        ScopedVariant sv(bwd, v);
        const Tensor dy = m["dy"].to(dev), rois = m["rois"].to(dev);
        const Tensor dx = Tensor::empty({c.N, c.C, c.H, c.W}, t, dev);
        if (c.op == 0)
          roi_align_bwd({dy, rois, dx, p});
        else
          roi_pool_bwd({dy, o.at("argmax").to(dev), rois, dx});
        expect_close(dx, o.at("dx"), tol_of(t), "dx");
        ++compared;
      }
    } else {
      const InterpCase& c = ic[k - rc.size()];
      InterpolateParams p;
      p.mode = c.mode;
      p.align_corners = c.align;
      p.scale_h = c.sh;
      p.scale_w = c.sw;
      const std::string what = std::string(c.mode == nearest ? "nearest" : "bilinear") +
                               (c.align ? " align_corners" : "") + " " + std::to_string(c.H) + "x" +
                               std::to_string(c.W) + " -> " + std::to_string(c.P) + "x" +
                               std::to_string(c.Q) + " scale " + std::to_string(c.sh) + ", " +
                               std::to_string(c.sw) + " case " + std::to_string(k);
      for (const auto& [v, dev] : runnable("interpolate_fwd")) {
        SCOPED_TRACE("interpolate_fwd " + v + " " + what);
        ScopedVariant sv("interpolate_fwd", v);
        const Tensor y = Tensor::empty({c.N, c.C, c.P, c.Q}, t, dev);
        interpolate_fwd({m["x"].to(dev), y, p});
        expect_close(y, o.at("y"), tol_of(t), "y");
        ++compared;
      }
      for (const auto& [v, dev] : runnable("interpolate_bwd")) {
        SCOPED_TRACE("interpolate_bwd " + v + " " + what);
        ScopedVariant sv("interpolate_bwd", v);
        const Tensor dx = Tensor::empty({c.N, c.C, c.H, c.W}, t, dev);
        interpolate_bwd({m["dy"].to(dev), dx, p});
        expect_close(dx, o.at("dx"), tol_of(t), "dx");
        ++compared;
      }
    }
  }
  std::printf("[roi parity] %zu RoI cases, %zu interpolate cases, %d variant comparisons\n",
              rc.size(), ic.size(), compared);
  ::aim::testing::run_command("rm -rf " + dir);
}

// ---- gradchecks ------------------------------------------------------------------------------

using autograd::GradcheckResult;
using autograd::Variable;

Variable leaf(const Shape& s, uint64_t seed) {
  return Variable(random_tensor(s, DType::f64, seed, -2.0, 2.0), true, "x");
}

TEST(RoiAutograd, GradcheckBothCpuVariants) {
  const Tensor rois = roi_cpu::make_rois(2, 6, 7, 10, 2, DType::f64, 5);
  for (const std::string v : {"cpu.ref", "cpu.omp"}) {
    ScopedVariant af("roi_align_fwd", v), ab("roi_align_bwd", v), pf("roi_pool_fwd", v),
        pb("roi_pool_bwd", v);
    for (const auto& [sampling, aligned] :
         std::vector<std::pair<int64_t, bool>>{{0, false}, {0, true}, {2, false}, {3, true}}) {
      const GradcheckResult r = autograd::gradcheck(
          [&](const std::vector<Variable>& x) {
            return autograd::roi_align(x[0], rois, 3, 2, 0.5, sampling, aligned);
          },
          {leaf({2, 3, 6, 7}, 1)});
      EXPECT_TRUE(r.ok) << v << " roi_align sampling " << sampling << " aligned " << aligned << ": "
                        << r.message;
    }
    const GradcheckResult r = autograd::gradcheck(
        [&](const std::vector<Variable>& x) { return autograd::roi_pool(x[0], rois, 3, 2, 0.5); },
        {leaf({2, 3, 6, 7}, 2)});
    EXPECT_TRUE(r.ok) << v << " roi_pool: " << r.message;
  }
}

TEST(InterpolateAutograd, GradcheckBothCpuVariants) {
  for (const std::string v : {"cpu.ref", "cpu.omp"}) {
    ScopedVariant vf("interpolate_fwd", v), vb("interpolate_bwd", v);
    for (const auto& [P, Q] : std::vector<std::pair<int64_t, int64_t>>{{9, 11}, {3, 2}, {8, 4}}) {
      for (const InterpMode mode : {InterpMode::nearest, InterpMode::bilinear})
        for (const bool align : {false, true}) {
          if (mode == InterpMode::nearest && align) continue;
          const GradcheckResult r = autograd::gradcheck(
              [&](const std::vector<Variable>& x) {
                return autograd::interpolate(x[0], P, Q, mode, align);
              },
              {leaf({2, 2, 4, 5}, 3)});
          EXPECT_TRUE(r.ok) << v << " " << P << "x" << Q << " mode " << int64_t(mode) << " align "
                            << align << ": " << r.message;
        }
    }
    const GradcheckResult r = autograd::gradcheck(
        [&](const std::vector<Variable>& x) {
          return autograd::interpolate_scale(x[0], 2.5, 0.7, InterpMode::bilinear);
        },
        {leaf({1, 2, 4, 6}, 4)});
    EXPECT_TRUE(r.ok) << v << " scale factors: " << r.message;
  }
}

// The CPU backward passes own their output (channels, planes): dx is bitwise the same with one
// thread and with all of them.
TEST(Roi, CpuBackwardIsDeterministicAcrossThreadCounts) {
  const int threads = omp_get_max_threads();
  if (threads < 2) GTEST_SKIP() << "one OpenMP thread: nothing to compare";
  const Tensor rois = roi_cpu::make_rois(2, 20, 24, 200, 4, DType::f32, 11);
  const Tensor dy = random_tensor({200, 16, 7, 7}, DType::f32, 12, -1.0, 1.0);
  const Tensor am = random_indices({200, 16, 7, 7}, 20 * 24, DType::i32, 13);
  const Tensor dyi = random_tensor({2, 16, 41, 47}, DType::f32, 14, -1.0, 1.0);
  RoiAlignParams p;
  p.spatial_scale = 0.25;
  InterpolateParams ip;
  ip.align_corners = true;
  auto run = [&](int n) {
    omp_set_num_threads(n);
    std::vector<Tensor> r = {Tensor::empty({2, 16, 20, 24}), Tensor::empty({2, 16, 20, 24}),
                             Tensor::empty({2, 16, 20, 24})};
    ScopedVariant a("roi_align_bwd", "cpu.omp"), b("roi_pool_bwd", "cpu.omp"),
        c("interpolate_bwd", "cpu.omp");
    roi_align_bwd({dy, rois, r[0], p});
    roi_pool_bwd({dy, am, rois, r[1]});
    interpolate_bwd({dyi, r[2], ip});
    omp_set_num_threads(threads);
    return r;
  };
  const std::vector<Tensor> one = run(1), all = run(threads);
  for (size_t i = 0; i < one.size(); ++i)
    EXPECT_EQ(one[i].to_vector<float>(), all[i].to_vector<float>()) << "op " << i;
}

// ---- semantics and errors --------------------------------------------------------------------

TEST(Roi, NoRoisAndRoisOutsideTheMap) {
  const Tensor x = random_tensor({1, 2, 4, 4}, DType::f32, 9, -2.0, 2.0);
  // A RoI far outside the map: every sample is more than a pixel away, so 0; roi_pool's bins are
  // clipped to nothing: 0 with argmax -1.
  const Tensor far = Tensor::from_vector(std::vector<float>{0, 20, 20, 30, 30}, {1, 5});
  for (const std::string v : {"cpu.ref", "cpu.omp"}) {
    SCOPED_TRACE(v);
    ScopedVariant af("roi_align_fwd", v), pf("roi_pool_fwd", v), ab("roi_align_bwd", v);
    const Tensor y = Tensor::empty({1, 2, 2, 2});
    roi_align_fwd({x, far, y, RoiAlignParams{}});
    EXPECT_EQ(y.to_vector<float>(), std::vector<float>(8, 0.0f));
    const Tensor yp = Tensor::empty({1, 2, 2, 2}), am = Tensor::empty({1, 2, 2, 2}, DType::i32);
    roi_pool_fwd({x, far, yp, am, 1.0});
    EXPECT_EQ(yp.to_vector<float>(), std::vector<float>(8, 0.0f));
    EXPECT_EQ(am.to_vector<int32_t>(), std::vector<int32_t>(8, -1));
    // No RoIs: an empty output, and a zero gradient.
    const Tensor none = Tensor::empty({0, 5});
    roi_align_fwd({x, none, Tensor::empty({0, 2, 2, 2}), RoiAlignParams{}});
    const Tensor dx = Tensor::full({1, 2, 4, 4}, 7.0);
    roi_align_bwd({Tensor::empty({0, 2, 2, 2}), none, dx, RoiAlignParams{}});
    EXPECT_EQ(dx.to_vector<float>(), std::vector<float>(32, 0.0f));
  }
}

TEST(Roi, ArgumentErrorsNameTheProblem) {
  const Tensor x = Tensor::zeros({2, 3, 5, 5});
  const Tensor y = Tensor::empty({1, 3, 2, 2});
  for (const std::string v : {"cpu.ref", "cpu.omp"}) {
    ScopedVariant af("roi_align_fwd", v), pf("roi_pool_fwd", v);
    AIM_EXPECT_ERROR(
        roi_align_fwd({x, Tensor::from_vector(std::vector<float>{2, 0, 0, 1, 1}, {1, 5}), y,
                       RoiAlignParams{}}),
        "RoI 0 has batch index 2, outside [0, 2)");
    AIM_EXPECT_ERROR(
        roi_pool_fwd(
            {x, Tensor::from_vector(std::vector<float>{-1, 0, 0, 1, 1}, {1, 5}), y, Tensor(), 1.0}),
        "RoI 0 has batch index -1");
  }
  AIM_EXPECT_ERROR(roi_align_fwd({x, Tensor::zeros({1, 4}), y, RoiAlignParams{}}),
                   "rois must be [K, 5]");
  AIM_EXPECT_ERROR(roi_align_fwd({x, Tensor::zeros({2, 5}), y, RoiAlignParams{}}),
                   "y [1, 3, 2, 2] must be [K, C, PH, PW] for rois [2, 5]");
  AIM_EXPECT_ERROR(roi_align_fwd({x, Tensor::zeros({1, 5}, DType::f64), y, RoiAlignParams{}}),
                   "must share one dtype");
  RoiAlignParams bad;
  bad.spatial_scale = 0;
  AIM_EXPECT_ERROR(roi_align_fwd({x, Tensor::zeros({1, 5}), y, bad}),
                   "spatial_scale must be finite and > 0");
  AIM_EXPECT_ERROR(roi_pool_bwd({y, Tensor::zeros({1, 3, 2, 2}), Tensor::zeros({1, 5}), x}),
                   "argmax must be the forward's contiguous [1, 3, 2, 2] i32");
  AIM_EXPECT_ERROR(roi_pool_bwd({y, Tensor::full({1, 3, 2, 2}, 25, DType::i32),
                                 Tensor::zeros({1, 5}), Tensor::empty({2, 3, 5, 5})}),
                   "argmax 25 at 0 is outside the plane of 25 elements");
  InterpolateParams ip;
  ip.mode = InterpMode::nearest;
  ip.align_corners = true;
  AIM_EXPECT_ERROR(interpolate_fwd({x, Tensor::empty({2, 3, 7, 7}), ip}),
                   "align_corners is for bilinear only");
  ip.align_corners = false;
  AIM_EXPECT_ERROR(interpolate_fwd({x, Tensor::empty({2, 4, 7, 7}), ip}),
                   "must have the same N and C");
  AIM_EXPECT_ERROR(autograd::interpolate_scale(Variable(x), 0.0, 2.0, InterpMode::nearest),
                   "scale factors must be finite and > 0");
}

}  // namespace
}  // namespace aim::kernels
