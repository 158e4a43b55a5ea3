// box_iou / nms (kernels/boxes): parity of the CPU variants with torchvision.ops (tests/peers/
// boxes.py: box_iou, nms, batched_nms, including batched_nms's per-class path above 4000 boxes;
// the hard negative selection of torchvision's SSD.compute_loss),
// the semantics torchvision does not have (score threshold, max_out, batches, ties), and the
// argument checks. The registry test (test_variants.cpp) compares every other variant with cpu.ref.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/boxes/boxes.h"
#include "kernels/registry.h"
#include "tensor/safetensors.h"
#include "tests/support/common.h"

namespace aim::kernels {
namespace {

using ::aim::testing::source_root;

bool have_torchvision() {
  if (std::system("/usr/bin/python3 -c 'import torchvision' >/dev/null 2>&1") == 0) return true;
  if (std::getenv("CI"))
    ADD_FAILURE() << "CI is set but /usr/bin/python3 cannot import torchvision";
  return false;
}

// Runs `f` and expects an error whose message contains `part`.
void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << part;
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << part;
  }
}

// n boxes around 6 centres, whole coordinates in [0, 256) (exact areas), no degenerate box.
Tensor cluster_boxes(int64_t n, DType t, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uni = [&](int lo, int hi) { return double(lo + int(rng() % uint64_t(hi - lo + 1))); };
  std::vector<double> cx(6), cy(6);
  for (int c = 0; c < 6; ++c) cx[size_t(c)] = uni(30, 225), cy[size_t(c)] = uni(30, 225);
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) {
    const size_t c = size_t(rng() % 6);
    v.push_back(cx[c] - uni(2, 30)), v.push_back(cy[c] - uni(2, 30));
    v.push_back(cx[c] + uni(1, 30)), v.push_back(cy[c] + uni(1, 30));
  }
  return Tensor::from_vector(v, {n, 4}).to(t);
}

// Distinct scores in (0, 1): a permutation of (i + 0.5) / n.
Tensor distinct_scores(int64_t n, DType t, uint64_t seed) {
  std::vector<double> s(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) s[size_t(i)] = (double(i) + 0.5) / double(n);
  std::shuffle(s.begin(), s.end(), std::mt19937_64(seed));
  return Tensor::from_vector(s, {n}).to(t);
}

struct Case {
  DType t;
  int64_t N, M, K, groups;
  double thr;
};

std::vector<int64_t> run_nms(const Tensor& boxes, const Tensor& scores, const Tensor& groups,
                             double thr, int64_t max_out = 0, double score_thr = -INFINITY) {
  const int64_t K = boxes.size(0);
  NmsArgs a;
  a.boxes = boxes.reshape({1, K, 4});
  a.scores = scores.reshape({1, K});
  if (groups.defined()) a.groups = groups.reshape({1, K});
  a.keep = Tensor::empty({1, K}, DType::i64);
  a.count = Tensor::empty({1}, DType::i64);
  a.iou_threshold = thr;
  a.max_out = max_out;
  a.score_threshold = score_thr;
  nms(a);
  const std::vector<int64_t> keep = a.keep.to_vector<int64_t>();
  const int64_t n = a.count.to_vector<int64_t>()[0];
  for (int64_t r = n; r < K; ++r) EXPECT_EQ(keep[size_t(r)], -1) << "keep after count";
  return std::vector<int64_t>(keep.begin(), keep.begin() + n);
}

TEST(BoxesParity, CpuVariantsMatchTorchvision) {
  if (!have_torchvision()) GTEST_SKIP() << "/usr/bin/python3 cannot import torchvision";
  const std::vector<Case> cases = {
      {DType::f32, 1, 1, 1, 0, 0.5},    {DType::f32, 17, 33, 50, 0, 0.5},
      {DType::f64, 40, 9, 300, 5, 0.3}, {DType::f32, 5, 200, 1000, 20, 0.45},
      {DType::f64, 3, 8, 2000, 0, 0.7}, {DType::f32, 2, 3, 5000, 20, 0.5},
      {DType::f64, 2, 3, 4500, 3, 0.6}};
  const std::string dir = ::aim::testing::make_temp_dir("aim_boxes_parity");
  std::vector<std::map<std::string, Tensor>> inputs;
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    std::map<std::string, Tensor> in;
    in["a"] = cluster_boxes(c.N, c.t, 10 * k + 1);
    in["b"] = cluster_boxes(c.M, c.t, 10 * k + 2);
    in["boxes"] = cluster_boxes(c.K, c.t, 10 * k + 3);
    in["scores"] = distinct_scores(c.K, c.t, 10 * k + 4);
    if (c.groups > 0) {
      std::vector<int64_t> g(static_cast<size_t>(c.K));
      std::mt19937_64 rng(10 * k + 5);
      for (auto& v : g) v = int64_t(rng() % uint64_t(c.groups));
      in["groups"] = Tensor::from_vector(g, {c.K});
    }
    in["cfg"] = Tensor::from_vector(std::vector<double>{c.thr}, {1});
    // Hard negatives: 3 images of K priors, ~2% positives, distinct losses (torch's sort is not
    // stable: ties would make the selection ambiguous).
    {
      std::vector<double> l(static_cast<size_t>(3 * c.K));
      for (size_t i = 0; i < l.size(); ++i) l[i] = (double(i) + 0.25) / double(l.size());
      std::shuffle(l.begin(), l.end(), std::mt19937_64(10 * k + 6));
      std::vector<int64_t> lab(l.size());
      std::mt19937_64 rng(10 * k + 7);
      for (auto& v : lab) v = rng() % 50 == 0 ? int64_t(1 + rng() % 20) : 0;
      in["hn_loss"] = Tensor::from_vector(l, {3, c.K}).to(c.t);
      in["hn_labels"] = Tensor::from_vector(lab, {3, c.K});
    }
    std::vector<std::pair<std::string, Tensor>> named(in.begin(), in.end());
    save_safetensors(dir + "/in_" + std::to_string(k) + ".safetensors", named);
    inputs.push_back(in);
  }
  const std::string cmd = "/usr/bin/python3 " + source_root() + "/tests/peers/boxes.py " + dir +
                          " " + std::to_string(cases.size());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  for (const std::string variant : {"cpu.ref", "cpu.omp"}) {
    ScopedVariant vi("box_iou", variant), vn("nms", variant);
    for (size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[k];
      auto& in = inputs[k];
      SCOPED_TRACE(variant + " case " + std::to_string(k) + " K " + std::to_string(c.K));
      const SafetensorsFile o =
          load_safetensors(dir + "/out_" + std::to_string(k) + ".safetensors");
      BoxIouArgs b;
      b.a = in["a"].reshape({1, c.N, 4});
      b.b = in["b"].reshape({1, c.M, 4});
      b.iou = Tensor::empty({1, c.N, c.M}, c.t);
      box_iou(b);
      // The same expression in the same order: equal, not just close.
      EXPECT_EQ(b.iou.reshape({c.N, c.M}).to(DType::f64).to_vector<double>(),
                o.at("iou").to(DType::f64).to_vector<double>());
      const std::vector<int64_t> keep =
          run_nms(in["boxes"], in["scores"], in.count("groups") ? in["groups"] : Tensor(), c.thr);
      const std::vector<int64_t> want = o.at("keep").to_vector<int64_t>();
      EXPECT_EQ(keep, want);
      HardNegativesArgs h;
      h.loss = in["hn_loss"];
      h.labels = in["hn_labels"];
      h.negatives = Tensor::empty({3, c.K}, DType::u8);
      ScopedVariant vh("hard_negatives", variant);
      hard_negatives(h);
      EXPECT_EQ(h.negatives.to_vector<uint8_t>(), o.at("hn_neg").to_vector<uint8_t>());
      std::printf("[boxes parity %s] case %zu: K %lld, kept %zu (torchvision %zu)\n",
                  variant.c_str(), k, (long long)c.K, keep.size(), want.size());
    }
  }
  std::system(("rm -rf " + dir).c_str());
}

// Semantics beyond torchvision's: ties go to the lower index, the score threshold is strict,
// max_out stops the greedy pass, images of a batch are independent.
TEST(Boxes, NmsTiesThresholdsMaxOutAndBatches) {
  // Boxes 0, 1, 2 coincide (IoU 1); 3 is apart. Scores: 1 and 2 tie; 3 (0.2) under the 0.25
  // threshold.
  const Tensor boxes = Tensor::from_vector(
      std::vector<float>{0, 0, 10, 10, 0, 0, 10, 10, 0, 0, 10, 10, 20, 20, 30, 30}, {4, 4});
  const Tensor scores = Tensor::from_vector(std::vector<float>{0.5f, 0.9f, 0.9f, 0.2f}, {4});
  for (const std::string variant : {"cpu.ref", "cpu.omp"}) {
    ScopedVariant v("nms", variant);
    SCOPED_TRACE(variant);
    EXPECT_EQ(run_nms(boxes, scores, Tensor(), 0.5), (std::vector<int64_t>{1, 3}));
    EXPECT_EQ(run_nms(boxes, scores, Tensor(), 0.5, 0, 0.25), (std::vector<int64_t>{1}));
    EXPECT_EQ(run_nms(boxes, scores, Tensor(), 1.0), (std::vector<int64_t>{1, 2, 0, 3}));
    EXPECT_EQ(run_nms(boxes, scores, Tensor(), 1.0, 2), (std::vector<int64_t>{1, 2}));
    const Tensor groups = Tensor::from_vector(std::vector<int64_t>{0, 1, 0, 1}, {4});
    EXPECT_EQ(run_nms(boxes, scores, groups, 0.5), (std::vector<int64_t>{1, 2, 3}));
    // Two images: the second is the first reversed.
    NmsArgs a;
    a.boxes = Tensor::from_vector(std::vector<float>{0,  0,  10, 10, 1, 1, 10, 10, 50, 50, 60, 60,
                                                     50, 50, 60, 60, 1, 1, 10, 10, 0,  0,  10, 10},
                                  {2, 3, 4});
    a.scores = Tensor::from_vector(std::vector<float>{0.3f, 0.8f, 0.5f, 0.5f, 0.8f, 0.3f}, {2, 3});
    a.keep = Tensor::empty({2, 3}, DType::i64);
    a.count = Tensor::empty({2}, DType::i64);
    nms(a);
    EXPECT_EQ(a.keep.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, -1, 1, 0, -1}));
    EXPECT_EQ(a.count.to_vector<int64_t>(), (std::vector<int64_t>{2, 2}));
  }
}

// Ties go to the lower index, ignored priors (label < 0) are never chosen, k = ceil(ratio * pos)
// capped at the negatives.
TEST(Boxes, HardNegativesTiesIgnoredAndCap) {
  const Tensor loss =
      Tensor::from_vector(std::vector<float>{0.5f, 0.9f, 0.9f, 0.1f, 0.95f, 0.9f}, {1, 6});
  const Tensor labels = Tensor::from_vector(std::vector<int64_t>{1, 0, 0, 0, -1, 0}, {1, 6});
  for (const std::string variant : {"cpu.ref", "cpu.omp"}) {
    ScopedVariant v("hard_negatives", variant);
    SCOPED_TRACE(variant);
    for (const auto& [ratio, want] :
         std::vector<std::pair<double, std::vector<uint8_t>>>{{3.0, {0, 1, 1, 0, 0, 1}},
                                                              {1.5, {0, 1, 1, 0, 0, 0}},
                                                              {10.0, {0, 1, 1, 1, 0, 1}},
                                                              {0.0, {0, 0, 0, 0, 0, 0}}}) {
      HardNegativesArgs h;
      h.loss = loss;
      h.labels = labels;
      h.negatives = Tensor::empty({1, 6}, DType::u8);
      h.ratio = ratio;
      hard_negatives(h);
      EXPECT_EQ(h.negatives.to_vector<uint8_t>(), want) << "ratio " << ratio;
    }
  }
}

TEST(Boxes, ArgumentErrorsNameTheTensor) {
  BoxIouArgs b;
  b.a = Tensor::zeros({1, 3, 5});
  b.b = Tensor::zeros({1, 2, 4});
  b.iou = Tensor::empty({1, 3, 2});
  expect_error([&] { box_iou(b); }, "a must be [B, n, 4] boxes");
  b.a = Tensor::zeros({1, 3, 4});
  b.iou = Tensor::empty({1, 2, 3});
  expect_error([&] { box_iou(b); }, "iou must be contiguous [1, 3, 2]");
  NmsArgs a;
  a.boxes = Tensor::zeros({1, 3, 4});
  a.scores = Tensor::zeros({1, 3}, DType::f64);
  a.keep = Tensor::empty({1, 3}, DType::i64);
  a.count = Tensor::empty({1}, DType::i64);
  expect_error([&] { nms(a); }, "scores must be contiguous [1, 3] f32");
  a.scores = Tensor::zeros({1, 3});
  a.max_out = -1;
  expect_error([&] { nms(a); }, "max_out must be >= 0");
}

}  // namespace
}  // namespace aim::kernels
