// The test cases of box_iou and nms (boxes_cpu.h). Coordinates are whole numbers below 64, so
// areas, intersections and unions are exact in f32 and f64 and every variant's IoU is the same
// correctly rounded quotient: the ops' results compare exactly.
#include <random>

#include "kernels/boxes/boxes_cpu.h"
#include "kernels/testing.h"

namespace aim::kernels::boxes_cpu {
namespace {

// n boxes per image around a few centres (so that many overlap), whole coordinates in [0, 64);
// about one in 16 is degenerate (zero width or height, or x2 < x1).
Tensor make_boxes(int64_t B, int64_t n, DType t, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uni = [&](int lo, int hi) { return lo + int(rng() % uint64_t(hi - lo + 1)); };
  Tensor cpu = Tensor::empty({B, n, 4}, DType::f64);
  double* p = cpu.data<double>();
  for (int64_t b = 0; b < B; ++b) {
    int cx[4], cy[4];
    for (int c = 0; c < 4; ++c) cx[c] = uni(8, 55), cy[c] = uni(8, 55);
    for (int64_t i = 0; i < n; ++i) {
      const int c = uni(0, 3);
      int x1 = std::max(0, cx[c] - uni(1, 8)), y1 = std::max(0, cy[c] - uni(1, 8));
      int x2 = std::min(63, cx[c] + uni(1, 8)), y2 = std::min(63, cy[c] + uni(1, 8));
      const int odd = uni(0, 47);
      if (odd == 0) x2 = x1;      // zero width
      if (odd == 1) y2 = y1 - 2;  // inverted
      if (odd == 2) x1 = x2 = uni(0, 63), y1 = y2 = uni(0, 63);
      double* q = p + (b * n + i) * 4;
      q[0] = x1, q[1] = y1, q[2] = x2, q[3] = y2;
    }
  }
  return cpu.to(t);
}

}  // namespace

// Shapes: {B, N, M}: single boxes, odd sizes, and SSD's matching shape (20 objects x 8732 priors).
std::vector<std::string> box_iou_shape_fields() { return {"B", "N", "M"}; }
std::vector<TestShape> box_iou_shapes() {
  return {{1, 1, 1}, {1, 7, 5}, {2, 33, 17}, {3, 129, 65}, {1, 5, 300}, {2, 20, 8732}};
}
bool box_iou_simt_small(const TestShape& s) { return s[0] * s[1] * s[2] <= 40000; }

TestCase make_box_iou_case(const TestShape& s, DType t, uint64_t seed) {
  BoxIouArgs a;
  a.a = make_boxes(s[0], s[1], t, seed);
  a.b = make_boxes(s[0], s[2], t, seed + 1);
  a.iou = poison_tensor({s[0], s[1], s[2]}, t);
  return to_case(a);
}

// Shapes: {B, K, groups (0: none), max_out (0: all), iou threshold in %, score threshold in %
// (0: none)}. Thresholds 0 (any overlap suppresses) and 100 (nothing does: IoU > 1 never holds);
// K up to SSD's per-image candidates after its per-class top-k (20 classes).
std::vector<std::string> nms_shape_fields() {
  return {"B", "K", "groups", "max_out", "iou_pct", "score_pct"};
}
std::vector<TestShape> nms_shapes() {
  return {{1, 1, 0, 0, 50, 0},     {1, 2, 0, 0, 50, 0},     {1, 7, 0, 0, 45, 0},
          {2, 33, 3, 0, 45, 10},   {3, 129, 5, 10, 50, 20}, {2, 65, 0, 0, 0, 0},
          {1, 97, 4, 0, 100, 0},   {1, 500, 0, 100, 70, 0}, {2, 1000, 20, 200, 45, 1},
          {1, 3000, 20, 0, 50, 30}};
}
bool nms_simt_small(const TestShape& s) { return s[0] * s[1] <= 2000; }

TestCase make_nms_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t B = s[0], K = s[1];
  NmsArgs a;
  a.boxes = make_boxes(B, K, t, seed);
  // Scores on a grid of 1/64 in [0, 1): ties occur (the lower index goes first).
  std::mt19937_64 rng(seed + 7);
  Tensor sc = Tensor::empty({B, K}, DType::f64);
  for (int64_t i = 0; i < B * K; ++i) sc.data<double>()[i] = double(rng() % 64) / 64.0;
  a.scores = sc.to(t);
  if (s[2] > 0) {
    a.groups = Tensor::empty({B, K}, DType::i64);
    for (int64_t i = 0; i < B * K; ++i)
      a.groups.data<int64_t>()[i] = int64_t(rng() % uint64_t(s[2]));
  }
  a.keep = poison_tensor({B, K}, DType::i64);
  a.count = poison_tensor({B}, DType::i64);
  a.max_out = s[3];
  a.iou_threshold = double(s[4]) / 100.0;
  if (s[5] > 0) a.score_threshold = double(s[5]) / 100.0;
  return to_case(a);
}

// Shapes: {B, P, positives per 1000 priors, ties (1: losses on a coarse grid), ratio in tenths}:
// no positive, few (SSD's usual case: ~1-3%), more positives than the negatives can serve (k
// capped), SSD's 8732 priors; a few priors ignored (label -1).
std::vector<std::string> hard_negatives_shape_fields() {
  return {"B", "P", "pos_per_mille", "ties", "ratio_tenths"};
}
std::vector<TestShape> hard_negatives_shapes() {
  return {{1, 1, 0, 0, 30},     {1, 7, 300, 1, 30},  {2, 33, 0, 0, 30},    {3, 129, 20, 1, 30},
          {2, 100, 400, 0, 30}, {2, 500, 30, 1, 25}, {4, 1000, 10, 0, 30}, {2, 8732, 15, 1, 30}};
}
bool hard_negatives_simt_small(const TestShape& s) { return s[0] * s[1] <= 2000; }

TestCase make_hard_negatives_case(const TestShape& s, DType t, uint64_t seed) {
  const int64_t B = s[0], P = s[1];
  std::mt19937_64 rng(seed);
  HardNegativesArgs a;
  Tensor loss = Tensor::empty({B, P}, DType::f64);
  a.labels = Tensor::empty({B, P}, DType::i64);
  for (int64_t i = 0; i < B * P; ++i) {
    const uint64_t u = rng() % 1000;
    a.labels.data<int64_t>()[i] = u < uint64_t(s[2]) ? int64_t(1 + rng() % 20) : u >= 990 ? -1 : 0;
    loss.data<double>()[i] = s[3] ? double(rng() % 16) / 4.0 : double(rng() % 1000000) / 1e5;
  }
  a.loss = loss.to(t);
  a.negatives = poison_tensor({B, P}, DType::u8);
  a.ratio = double(s[4]) / 10.0;
  return to_case(a);
}

Tolerance exact(DType, const TestShape&) { return {0, 0}; }

}  // namespace aim::kernels::boxes_cpu
