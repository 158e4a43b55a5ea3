// The test cases of roi_align and roi_pool (roi_cpu.h): shapes and their fields, the RoI mix,
// case makers, the emulator's budget.
#include <algorithm>
#include <random>

#include "kernels/roi/roi_cpu.h"
#include "kernels/testing.h"

namespace aim::kernels::roi_cpu {
namespace {

// The emulator runs one fiber per output (or dy) element: keep its cases small.
constexpr int64_t kSimtMaxWork = int64_t(1) << 17;

}  // namespace

Tensor make_rois(int64_t N, int64_t H, int64_t W, int64_t K, int64_t scale_inv, DType t,
                 uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uni = [&](double lo, double hi) {
    return lo + (hi - lo) * double(rng() >> 11) * (1.0 / 9007199254740992.0);
  };
  // One axis of a RoI in feature coordinates, of the given kind, for a map `extent` long.
  auto axis = [&](int kind, double extent, double& a, double& b) {
    switch (kind) {
      case 0:  // inside the map
        a = uni(0, extent - 0.5), b = uni(a + 0.25, extent);
        break;
      case 1:  // hanging over one border
        if (rng() % 2)
          a = uni(-extent / 2 - 2, 0), b = uni(0.5, extent);
        else
          a = uni(0, extent - 0.5), b = uni(extent, 1.5 * extent + 2);
        break;
      case 2:  // entirely outside (beyond the one-pixel margin bilinear sampling still reads)
        if (rng() % 2)
          a = uni(-3 * extent - 4, -extent - 3), b = uni(a, -1.5);
        else
          a = uni(extent + 1.5, 2 * extent + 4), b = uni(a, 3 * extent + 6);
        break;
      case 3:  // empty: zero extent
        a = b = uni(0, extent);
        break;
      case 4:  // inverted
        b = uni(0, extent - 0.5), a = uni(b + 0.25, extent + 1);
        break;
      default:  // smaller than a cell
        a = uni(-0.5, extent), b = a + uni(0.05, 0.9);
        break;
    }
  };
  Tensor r = Tensor::empty({K, 5}, DType::f64);
  double* p = r.data<double>();
  for (int64_t k = 0; k < K; ++k) {
    // Kinds: half inside, the rest spread over the edge cases; one axis may be normal while the
    // other is the odd one.
    const uint64_t u = rng() % 20;
    const int kind = u < 10 ? 0 : u < 13 ? 1 : u < 15 ? 2 : u < 17 ? 3 : u < 18 ? 4 : 5;
    const uint64_t which = rng() % 3;  // 0: x odd, 1: y odd, 2: both
    double x1, x2, y1, y2;
    axis(which != 1 ? kind : 0, double(W), x1, x2);
    axis(which != 0 ? kind : 0, double(H), y1, y2);
    // Image coordinates: feature coordinates times the map's stride.
    const double s = double(scale_inv);
    double* q = p + k * 5;
    q[0] = double(rng() % uint64_t(N));
    q[1] = x1 * s, q[2] = y1 * s, q[3] = x2 * s, q[4] = y2 * s;
  }
  return r.to(t);
}

// {N, C, H, W, K, PH, PW, sampling (<= 0: adaptive), aligned, scale_inv (spatial_scale =
// 1 / scale_inv)}: single cells, odd sizes, adaptive and fixed sampling with and without
// alignment, Mask R-CNN's 7x7 and 14x14 heads on FPN-like strides (4, 8, 16).
std::vector<std::string> roi_align_shape_fields() {
  return {"N", "C", "H", "W", "K", "PH", "PW", "sampling", "aligned", "scale_inv"};
}
std::vector<TestShape> roi_align_shapes() {
  return {{1, 1, 1, 1, 1, 1, 1, 0, 0, 1},       {1, 1, 1, 1, 6, 2, 2, 2, 1, 1},
          {2, 3, 7, 9, 17, 2, 2, 2, 0, 1},      {2, 4, 13, 11, 23, 3, 3, 0, 1, 1},
          {3, 5, 10, 12, 20, 4, 5, 0, 0, 2},    {2, 2, 5, 5, 31, 2, 3, 3, 1, 1},
          {1, 3, 25, 19, 12, 7, 7, 0, 1, 8},    {2, 6, 16, 16, 40, 7, 7, 2, 1, 4},
          {2, 3, 9, 14, 25, 5, 3, 1, 0, 16},    {1, 2, 12, 12, 9, 14, 14, -1, 0, 4},
          {2, 64, 50, 50, 128, 7, 7, 2, 1, 16}, {1, 32, 64, 48, 64, 14, 14, 0, 1, 4}};
}
bool roi_align_simt_small(const TestShape& s) {
  const int64_t out = s[4] * s[1] * s[5] * s[6];
  return out <= kSimtMaxWork / 4 && s[0] * s[1] * s[2] * s[3] <= kSimtMaxWork;
}

namespace {
RoiAlignParams align_params(const TestShape& s) {
  RoiAlignParams p;
  p.sampling_ratio = s[7];
  p.aligned = s[8] != 0;
  p.spatial_scale = 1.0 / double(s[9]);
  return p;
}
}  // namespace

TestCase make_roi_align_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  RoiAlignFwdArgs a;
  a.x = random_tensor({s[0], s[1], s[2], s[3]}, t, seed, -2.0, 2.0);
  a.rois = make_rois(s[0], s[2], s[3], s[4], s[9], t, seed + 1);
  a.y = poison_tensor({s[4], s[1], s[5], s[6]}, t);
  a.p = align_params(s);
  return to_case(a);
}

TestCase make_roi_align_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  RoiAlignBwdArgs a;
  a.dy = random_tensor({s[4], s[1], s[5], s[6]}, t, seed, -1.0, 1.0);
  a.rois = make_rois(s[0], s[2], s[3], s[4], s[9], t, seed + 1);
  a.dx = poison_tensor({s[0], s[1], s[2], s[3]}, t);
  a.p = align_params(s);
  return to_case(a);
}

// {N, C, H, W, K, PH, PW, scale_inv, argmax wanted}: as roi_align's, plus Faster R-CNN's VGG16
// head (7x7 on the stride-16 map) and one forward without argmax (inference).
std::vector<std::string> roi_pool_shape_fields() {
  return {"N", "C", "H", "W", "K", "PH", "PW", "scale_inv", "argmax"};
}
std::vector<TestShape> roi_pool_shapes() {
  return {{1, 1, 1, 1, 1, 1, 1, 1, 1},     {1, 1, 1, 1, 6, 2, 2, 1, 1},
          {2, 3, 7, 9, 17, 2, 2, 1, 1},    {2, 4, 13, 11, 23, 3, 3, 1, 1},
          {3, 5, 10, 12, 20, 4, 5, 2, 1},  {1, 3, 25, 19, 12, 7, 7, 8, 1},
          {2, 6, 16, 16, 40, 7, 7, 4, 1},  {2, 3, 9, 14, 25, 5, 3, 16, 0},
          {1, 2, 12, 12, 9, 14, 14, 4, 1}, {2, 64, 38, 50, 128, 7, 7, 16, 1}};
}
bool roi_pool_simt_small(const TestShape& s) {
  return s[4] * s[1] * s[5] * s[6] <= kSimtMaxWork / 4 && s[0] * s[1] * s[2] * s[3] <= kSimtMaxWork;
}

TestCase make_roi_pool_fwd_case(const TestShape& s, DType t, uint64_t seed) {
  RoiPoolFwdArgs a;
  a.x = random_tensor({s[0], s[1], s[2], s[3]}, t, seed, -2.0, 2.0);
  a.rois = make_rois(s[0], s[2], s[3], s[4], s[7], t, seed + 1);
  a.y = poison_tensor({s[4], s[1], s[5], s[6]}, t);
  if (s[8]) a.argmax = poison_tensor({s[4], s[1], s[5], s[6]}, DType::i32);
  a.spatial_scale = 1.0 / double(s[7]);
  return to_case(a);
}

// argmax from a real forward (cpu.ref on a random x), so several bins pick the same element and
// empty bins carry -1.
TestCase make_roi_pool_bwd_case(const TestShape& s, DType t, uint64_t seed) {
  RoiPoolFwdArgs f;
  f.x = random_tensor({s[0], s[1], s[2], s[3]}, t, seed, -2.0, 2.0);
  f.rois = make_rois(s[0], s[2], s[3], s[4], s[7], t, seed + 1);
  f.y = Tensor::empty({s[4], s[1], s[5], s[6]}, t);
  f.argmax = Tensor::empty({s[4], s[1], s[5], s[6]}, DType::i32);
  f.spatial_scale = 1.0 / double(s[7]);
  roi_pool_fwd_cpu_ref(f);
  RoiPoolBwdArgs a;
  a.dy = random_tensor({s[4], s[1], s[5], s[6]}, t, seed + 2, -1.0, 1.0);
  a.argmax = f.argmax;
  a.rois = f.rois;
  a.dx = poison_tensor({s[0], s[1], s[2], s[3]}, t);
  return to_case(a);
}

}  // namespace aim::kernels::roi_cpu
