// The SSD parts of models/detection/ against torchvision 0.14 (tests/peers/ssd_parts.py):
// ssd300_vgg16's default boxes (8732 on a 300 x 300 image; a non-square image), SSDMatcher's
// matches, BoxCoder's encoding of the matched objects and decoding of regression outputs; plus
// the matcher's rules on a hand-made case and the prior spec's errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "models/detection/box_coder.h"
#include "models/detection/priors.h"
#include "models/detection/ssd_matcher.h"
#include "tensor/safetensors.h"
#include "tests/support/common.h"

namespace aim::models::detection {
namespace {

bool have_torchvision() {
  if (std::system("/usr/bin/python3 -c 'import torchvision' >/dev/null 2>&1") == 0) return true;
  if (std::getenv("CI"))
    ADD_FAILURE() << "CI is set but /usr/bin/python3 cannot import torchvision";
  return false;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol,
                  const std::string& what, double atol = 0) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(double(got[i]) - double(want[i])) <=
          atol + tol * (1 + std::fabs(double(want[i]))))) {
      if (bad++ < 5)
        ADD_FAILURE() << what << " at " << i << ": " << got[i] << " vs torchvision " << want[i];
    }
  EXPECT_EQ(bad, 0u) << what;
}

struct Case {
  int64_t H, W;
  std::vector<std::pair<int64_t, int64_t>> maps;
  int64_t G;
};

TEST(DetectionParts, MatchTorchvisionSsd300) {
  if (!have_torchvision()) GTEST_SKIP() << "/usr/bin/python3 cannot import torchvision";
  const std::vector<Case> cases = {
      {300, 300, {{38, 38}, {19, 19}, {10, 10}, {5, 5}, {3, 3}, {1, 1}}, 7},
      {300, 500, {{38, 63}, {19, 32}, {10, 16}, {5, 8}, {3, 6}, {1, 4}}, 20},
      {300, 300, {{38, 38}, {19, 19}, {10, 10}, {5, 5}, {3, 3}, {1, 1}}, 1}};
  const std::string dir = ::aim::testing::make_temp_dir("aim_ssd_parts");
  std::vector<std::pair<Tensor, Tensor>> inputs;
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    std::vector<int64_t> cfg = {c.H, c.W};
    for (auto [h, w] : c.maps) cfg.push_back(h), cfg.push_back(w);
    std::mt19937_64 rng(k + 1);
    auto uni = [&](double lo, double hi) {
      return float(lo + (hi - lo) * double(rng() % 100000) / 100000.0);
    };
    std::vector<float> gt;
    for (int64_t g = 0; g < c.G; ++g) {
      const float x1 = uni(0, double(c.W) * 0.8), y1 = uni(0, double(c.H) * 0.8);
      gt.insert(gt.end(), {x1, y1, x1 + uni(8, double(c.W) * 0.5), y1 + uni(8, double(c.H) * 0.5)});
    }
    const int64_t P = default_boxes_xyxy(ssd300_default_boxes(), c.maps, c.H, c.W).size(0);
    std::vector<float> codes(static_cast<size_t>(4 * P));
    for (auto& v : codes) v = uni(-3, 3);
    const Tensor gt_t = Tensor::from_vector(gt, {c.G, 4}),
                 codes_t = Tensor::from_vector(codes, {P, 4});
    save_safetensors(dir + "/in_" + std::to_string(k) + ".safetensors",
                     {{"cfg", Tensor::from_vector(cfg, {int64_t(cfg.size())})},
                      {"gt", gt_t},
                      {"codes", codes_t}});
    inputs.push_back({gt_t, codes_t});
  }
  const std::string cmd = "/usr/bin/python3 " + ::aim::testing::source_root() +
                          "/tests/peers/ssd_parts.py " + dir + " " + std::to_string(cases.size());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    SCOPED_TRACE("case " + std::to_string(k));
    const SafetensorsFile o = load_safetensors(dir + "/out_" + std::to_string(k) + ".safetensors");
    const Tensor cxcywh = default_boxes_cxcywh(ssd300_default_boxes(), c.maps, c.H, c.W);
    const Tensor xyxy = default_boxes_xyxy(ssd300_default_boxes(), c.maps, c.H, c.W);
    if (k == 0) {
      EXPECT_EQ(xyxy.size(0), 8732);
    }
    // The same f32 operations: equal up to torch's vectorised division (1 ulp).
    expect_close(cxcywh.to_vector<float>(), o.at("cxcywh").to_vector<float>(), 1e-7, "cxcywh");
    expect_close(xyxy.to_vector<float>(), o.at("xyxy").to_vector<float>(), 1e-6, "xyxy");
    // Match, encode and decode on torchvision's own priors (the parts checked one at a time).
    const std::vector<float> priors = o.at("xyxy").to_vector<float>();
    const int64_t P = int64_t(priors.size() / 4);
    const std::vector<float> gt = inputs[k].first.to_vector<float>();
    const std::vector<int64_t> match = ssd_match(gt.data(), c.G, priors.data(), P);
    EXPECT_EQ(match, o.at("match").to_vector<int64_t>());
    std::vector<float> matched(static_cast<size_t>(4 * P)), enc(matched.size()),
        dec(matched.size());
    for (int64_t p = 0; p < P; ++p)
      for (int j = 0; j < 4; ++j)
        matched[size_t(4 * p + j)] = gt[size_t(4 * std::max<int64_t>(match[size_t(p)], 0) + j)];
    encode_boxes(matched.data(), priors.data(), P, BoxCoderWeights{}, enc.data());
    expect_close(enc, o.at("encoded").to_vector<float>(), 2e-6, "encoded");
    const std::vector<float> codes = inputs[k].second.to_vector<float>();
    decode_boxes(codes.data(), priors.data(), P, BoxCoderWeights{}, dec.data());
    // Corners are centre -/+ half size: a box of a few pixels at x ~ 300 keeps the absolute error
    // of its terms (libm's exp against torch's vectorised one: 1 ulp); 1e-4 px is ~3 ulp at 300.
    expect_close(dec, o.at("decoded").to_vector<float>(), 2e-6, "decoded", 1e-4);
    int64_t positives = 0;
    for (int64_t m : match) positives += m >= 0;
    std::printf("[ssd parts] case %zu: %lld priors, %lld objects, %lld matched priors\n", k,
                (long long)P, (long long)c.G, (long long)positives);
  }
  std::system(("rm -rf " + dir).c_str());
}

// Prior 0 overlaps object 0 at IoU 0.64 and object 1 at 0.49; prior 1 is object 1's best (IoU 0.2,
// below the threshold, forced); prior 2 overlaps nothing.
TEST(DetectionParts, MatcherThresholdAndForcedBestPrior) {
  const std::vector<float> gt = {0, 0, 10, 10, 20, 20, 30, 30};
  const std::vector<float> priors = {1, 1, 9, 9, 24, 24, 28, 28.5f, 50, 50, 60, 60};
  const std::vector<int64_t> m = ssd_match(gt.data(), 2, priors.data(), 3);
  EXPECT_EQ(m, (std::vector<int64_t>{0, 1, -1}));
  EXPECT_EQ(ssd_match(gt.data(), 0, priors.data(), 3), (std::vector<int64_t>{-1, -1, -1}));
}

// Two objects whose best prior is the same: torchvision forces it to the later object (the earlier
// keeps only what the threshold gives it), Caffe's bipartite matching gives it to the pair with
// the largest IoU and the other object its next best prior.
//   IoU: A = [0, 0, 10, 10] with p0 1.0, p1 0.833; B = [0, 0, 10, 10.5] with p0 0.952, p1 0.875.
TEST(DetectionParts, CaffeBipartiteMatching) {
  const std::vector<float> gt = {0, 0, 10, 10, 0, 0, 10, 10.5f};
  const std::vector<float> priors = {0, 0, 10, 10, 0, 0, 10, 12, 50, 50, 60, 60};
  EXPECT_EQ(ssd_match(gt.data(), 2, priors.data(), 3), (std::vector<int64_t>{1, 1, -1}));
  EXPECT_EQ(caffe_match(gt.data(), 2, priors.data(), 3), (std::vector<int64_t>{0, 1, -1}));
  // Below the threshold only the bipartite stage matches: object 1 of the first test case takes
  // prior 1 at IoU 0.2 (its best), object 0 prior 0; a prior overlapping nothing stays -1.
  const std::vector<float> gt2 = {0, 0, 10, 10, 20, 20, 30, 30};
  const std::vector<float> pr2 = {1, 1, 9, 9, 24, 24, 28, 28.5f, 50, 50, 60, 60};
  EXPECT_EQ(caffe_match(gt2.data(), 2, pr2.data(), 3), (std::vector<int64_t>{0, 1, -1}));
  // More objects than overlapping priors: the bipartite stage stops when no pair overlaps.
  const std::vector<float> gt3 = {0, 0, 10, 10, 1, 1, 9, 9, 200, 200, 210, 210};
  const std::vector<float> pr3 = {0, 0, 10, 10};
  EXPECT_EQ(caffe_match(gt3.data(), 3, pr3.data(), 1), (std::vector<int64_t>{0}));
  EXPECT_EQ(caffe_match(gt3.data(), 0, pr3.data(), 1), (std::vector<int64_t>{-1}));
}

TEST(DetectionParts, DefaultBoxSpecErrors) {
  DefaultBoxSpec s = ssd300_default_boxes();
  try {
    default_boxes_xyxy(s, {{38, 38}}, 300, 300);
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("1 feature maps, 6 aspect-ratio lists"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace aim::models::detection
