// Box ops of the detectors (issue 21): pairwise IoU and non-maximum suppression, batched over
// images, with torchvision.ops' arithmetic (boxes (x1, y1, x2, y2), no +1 on widths):
//   area = (x2 - x1) (y2 - y1); inter = max(0, min(x2) - max(x1)) max(0, min(y2) - max(y1));
//   iou = inter / (area_a + area_b - inter)   (0/0 = NaN: compares false, suppresses nothing).
// Every variant evaluates exactly this expression in the boxes' dtype (f32 or f64), in this order,
// so the same inputs give the same comparisons on the CPU and on CUDA (kernels/boxes/README.md).
#pragma once
#include <cmath>
#include <limits>

#include "kernels/op.h"

namespace aim::kernels {

// iou[b, i, j] = IoU(a[b, i], b[b, j]). a: [B, N, 4], b: [B, M, 4], iou: [B, N, M], all
// contiguous, one floating dtype. (torchvision.ops.box_iou is the B = 1 case.)
struct BoxIouArgs {
  Tensor a, b;  // [B, N, 4], [B, M, 4]
  Tensor iou;   // [B, N, M]: written
  Device device() const { return a.device(); }
  DType dtype() const { return a.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("a", s.a), f.in("b", s.b), f.out("iou", s.iou);
  }
};

// Greedy NMS per image: candidates are the boxes with score > score_threshold; in decreasing
// score (ties: lower index first) a candidate is kept unless a kept box of the same group has
// IoU > iou_threshold with it (torchvision.ops.batched_nms when groups are given, nms when not);
// at most max_out are kept (0: no limit).
// boxes [B, K, 4], scores [B, K] (the boxes' dtype), groups [B, K] i64 (optional: one group);
// keep [B, K] i64: the kept indices (into K) in the order kept, then -1; count [B] i64.
struct NmsArgs {
  Tensor boxes, scores, groups;
  Tensor keep, count;  // written
  double iou_threshold = 0.5;
  double score_threshold = -std::numeric_limits<double>::infinity();
  int64_t max_out = 0;
  Device device() const { return boxes.device(); }
  DType dtype() const { return boxes.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("boxes", s.boxes), f.in("scores", s.scores), f.in_opt("groups", s.groups);
    f.out("keep", s.keep), f.out("count", s.count);
    f.param("iou_threshold", s.iou_threshold), f.param("score_threshold", s.score_threshold);
    f.param("max_out", s.max_out);
  }
};

// SSD's hard negative mining (MultiBox loss; torchvision's SSD.compute_loss, MLPerf SSD, Caffe's
// MAX_NEGATIVE): per image, with n_pos = #{labels > 0} and the negatives {labels == 0},
// negatives[b, p] = 1 for the k = min(ceil(ratio * n_pos), #negatives) negatives of highest loss
// (ties: lower index first), 0 elsewhere (positives, ignored priors with labels < 0, the rest).
// loss [B, P] f32/f64 (the per-prior classification loss), labels [B, P] i64, negatives [B, P] u8.
struct HardNegativesArgs {
  Tensor loss, labels;
  Tensor negatives;  // written
  double ratio = 3.0;
  Device device() const { return loss.device(); }
  DType dtype() const { return loss.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("loss", s.loss), f.in("labels", s.labels), f.out("negatives", s.negatives);
    f.param("ratio", s.ratio);
  }
};

// The IoU expression above, written once for every variant (host and device). The products are
// rounded on their own (nvcc would otherwise contract `a + b - w h` into an FMA and round
// differently from the host, where -std=c++17 keeps GCC from contracting).
#if defined(__CUDACC__)
#define AIM_BOX_HD __host__ __device__ __forceinline__
#else
#define AIM_BOX_HD inline
#endif
AIM_BOX_HD float box_mul(float x, float y) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(x, y);
#else
  return x * y;
#endif
}
AIM_BOX_HD double box_mul(double x, double y) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(x, y);
#else
  return x * y;
#endif
}
template <class T>
AIM_BOX_HD T box_area(const T* p) {
  return box_mul(p[2] - p[0], p[3] - p[1]);
}
template <class T>
AIM_BOX_HD T box_iou_value(const T* p, T area_p, const T* q, T area_q) {
  const T x1 = p[0] > q[0] ? p[0] : q[0], y1 = p[1] > q[1] ? p[1] : q[1];
  const T x2 = p[2] < q[2] ? p[2] : q[2], y2 = p[3] < q[3] ? p[3] : q[3];
  const T w = x2 - x1 > T(0) ? x2 - x1 : T(0), h = y2 - y1 > T(0) ? y2 - y1 : T(0);
  const T inter = box_mul(w, h);
  const T uni = (area_p + area_q) - inter;
  return inter / uni;
}

// hard_negatives: the number of negatives an image keeps, min(ceil(ratio * positives), negatives).
AIM_BOX_HD int64_t hard_negative_count(double ratio, int64_t positives, int64_t negatives) {
  const double k = ceil(ratio * double(positives));
  return k < double(negatives) ? int64_t(k) : negatives;
}

// Compulsory work. box_iou: the two areas once per box, ~10 operations per pair (4 min/max, 2
// subtractions, 2 clamps, a product, 2 additions, a division); boxes read once, iou written once.
// nms: its worst case, every pair of candidates compared once (K (K - 1) / 2 IoUs) plus the
// ordering (K log2 K comparisons); boxes, scores and groups read once, keep and count written.
inline Cost box_iou_cost(const BoxIouArgs& a) {
  const double B = double(a.a.size(0)), N = double(a.a.size(1)), M = double(a.b.size(1)),
               e = double(dtype_size(a.a.dtype()));
  return Cost{/*flops=*/B * (N * M * 11 + 3 * (N + M)), /*bytes_read=*/B * 4 * (N + M) * e,
              /*bytes_written=*/B * N * M * e};
}
double nms_flops(double K);
inline Cost nms_cost(const NmsArgs& a) {
  const double B = double(a.boxes.size(0)), K = double(a.boxes.size(1)),
               e = double(dtype_size(a.boxes.dtype()));
  return Cost{/*flops=*/B * nms_flops(K),
              /*bytes_read=*/B * K * (5 * e + (a.groups.defined() ? 8 : 0)),
              /*bytes_written=*/B * (K + 1) * 8};
}

// hard_negatives: the selection as a sort of each image's P losses (P log2 P comparisons); loss and
// labels read once, the mask written once.
inline Cost hard_negatives_cost(const HardNegativesArgs& a) {
  const double B = double(a.loss.size(0)), P = double(a.loss.size(1)),
               e = double(dtype_size(a.loss.dtype()));
  return Cost{/*flops=*/B * (P > 1 ? P * std::log2(P) : 0), /*bytes_read=*/B * P * (e + 8),
              /*bytes_written=*/B * P};
}

// Host-side validation shared by every variant (throws "[box_iou] ..." / "[nms] ..." messages).
void check_box_iou_args(const BoxIouArgs& a);
void check_nms_args(const NmsArgs& a);
void check_hard_negatives_args(const HardNegativesArgs& a);

void box_iou(const BoxIouArgs& a);  // runs the selected variant
void nms(const NmsArgs& a);
void hard_negatives(const HardNegativesArgs& a);

}  // namespace aim::kernels
