// box_iou, nms: CPU variants, argument checks and registration.
// cpu.ref: the definitions written plainly. box_iou: every pair; nms: candidates sorted (stable,
// by decreasing score), each tested against every box kept before it; hard_negatives: each
// image's negatives stable-sorted by decreasing loss, the first k. Obviously right.
// cpu.omp: box_iou with OpenMP over (image, row) and the areas of b computed once per image;
// nms with OpenMP over images, the sorted candidates copied into a contiguous array with their
// areas, and each kept box suppressing the later candidates of its group (the same kept set:
// a candidate is removed iff some earlier kept box of its group overlaps it), stopping at
// max_out; hard_negatives with OpenMP over images and nth_element (the same strict order).
// Test cases: boxes_cases.cpp.
#include "kernels/boxes/boxes_cpu.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/boxes/boxes.h"
#include "kernels/registry.h"

namespace aim::kernels {

double nms_flops(double K) { return K * (K - 1) / 2 * 11 + (K > 1 ? K * std::log2(K) : 0); }

namespace {

void check_boxes(const char* op, const char* name, const Tensor& t, int64_t rank) {
  AIM_CHECK(t.defined(), "[", op, "] ", name, " is undefined");
  AIM_CHECK(t.dim() == rank && t.size(rank - 1) == 4, "[", op, "] ", name, " must be [",
            rank == 3 ? "B, n, 4" : "n, 4", "] boxes (x1, y1, x2, y2), got ", to_string(t.sizes()));
  AIM_CHECK(t.is_contiguous(), "[", op, "] ", name, " must be contiguous");
}

}  // namespace

void check_box_iou_args(const BoxIouArgs& a) {
  check_boxes("box_iou", "a", a.a, 3);
  check_boxes("box_iou", "b", a.b, 3);
  AIM_CHECK(a.a.size(0) == a.b.size(0), "[box_iou] a ", to_string(a.a.sizes()), " and b ",
            to_string(a.b.sizes()), " differ in the batch dimension");
  AIM_CHECK(a.a.dtype() == a.b.dtype() && a.iou.dtype() == a.a.dtype(), "[box_iou] a, b and iou ",
            "must share one dtype, got ", dtype_name(a.a.dtype()), ", ", dtype_name(a.b.dtype()),
            ", ", dtype_name(a.iou.dtype()));
  AIM_CHECK(a.a.dtype() == DType::f32 || a.a.dtype() == DType::f64,
            "[box_iou] boxes must be f32 or f64, got ", dtype_name(a.a.dtype()));
  const std::vector<int64_t> want = {a.a.size(0), a.a.size(1), a.b.size(1)};
  AIM_CHECK(a.iou.sizes() == want && a.iou.is_contiguous(), "[box_iou] iou must be contiguous ",
            to_string(want), ", got ", to_string(a.iou.sizes()));
  AIM_CHECK(a.b.device() == a.a.device() && a.iou.device() == a.a.device(),
            "[box_iou] a, b and iou must be on one device");
}

void check_nms_args(const NmsArgs& a) {
  check_boxes("nms", "boxes", a.boxes, 3);
  const int64_t B = a.boxes.size(0), K = a.boxes.size(1);
  AIM_CHECK(a.boxes.dtype() == DType::f32 || a.boxes.dtype() == DType::f64,
            "[nms] boxes must be f32 or f64, got ", dtype_name(a.boxes.dtype()));
  const std::vector<int64_t> bk = {B, K};
  AIM_CHECK(a.scores.defined() && a.scores.sizes() == bk && a.scores.is_contiguous() &&
                a.scores.dtype() == a.boxes.dtype(),
            "[nms] scores must be contiguous ", to_string(bk), " ", dtype_name(a.boxes.dtype()),
            " (the boxes' dtype), got ",
            a.scores.defined() ? to_string(a.scores.sizes()) + " " + dtype_name(a.scores.dtype())
                               : std::string("undefined"));
  if (a.groups.defined())
    AIM_CHECK(a.groups.sizes() == bk && a.groups.is_contiguous() && a.groups.dtype() == DType::i64,
              "[nms] groups must be contiguous ", to_string(bk), " i64, got ",
              to_string(a.groups.sizes()), " ", dtype_name(a.groups.dtype()));
  AIM_CHECK(a.keep.defined() && a.keep.sizes() == bk && a.keep.is_contiguous() &&
                a.keep.dtype() == DType::i64,
            "[nms] keep must be contiguous ", to_string(bk), " i64");
  AIM_CHECK(a.count.defined() && a.count.sizes() == std::vector<int64_t>{B} &&
                a.count.dtype() == DType::i64,
            "[nms] count must be [", B, "] i64");
  AIM_CHECK(!std::isnan(a.iou_threshold), "[nms] iou_threshold is NaN");
  AIM_CHECK(a.max_out >= 0, "[nms] max_out must be >= 0 (0: no limit), got ", a.max_out);
  for (const Tensor* t : {&a.scores, &a.groups, &a.keep, &a.count})
    if (t->defined())
      AIM_CHECK(t->device() == a.boxes.device(), "[nms] every tensor must be on ",
                a.boxes.device().str());
}

void check_hard_negatives_args(const HardNegativesArgs& a) {
  AIM_CHECK(a.loss.defined() && a.loss.dim() == 2 && a.loss.is_contiguous() &&
                (a.loss.dtype() == DType::f32 || a.loss.dtype() == DType::f64),
            "[hard_negatives] loss must be contiguous [B, P] f32 or f64, got ",
            a.loss.defined() ? to_string(a.loss.sizes()) + " " + dtype_name(a.loss.dtype())
                             : std::string("undefined"));
  AIM_CHECK(a.labels.defined() && a.labels.sizes() == a.loss.sizes() &&
                a.labels.dtype() == DType::i64 && a.labels.is_contiguous(),
            "[hard_negatives] labels must be contiguous ", to_string(a.loss.sizes()), " i64");
  AIM_CHECK(a.negatives.defined() && a.negatives.sizes() == a.loss.sizes() &&
                a.negatives.dtype() == DType::u8 && a.negatives.is_contiguous(),
            "[hard_negatives] negatives must be contiguous ", to_string(a.loss.sizes()), " u8");
  AIM_CHECK(a.labels.device() == a.loss.device() && a.negatives.device() == a.loss.device(),
            "[hard_negatives] loss, labels and negatives must be on one device");
  AIM_CHECK(a.ratio >= 0 && std::isfinite(a.ratio),
            "[hard_negatives] ratio must be finite and >= 0, got ", a.ratio);
}

namespace {

// ---- cpu.ref ---------------------------------------------------------------------------------

template <class T>
void box_iou_ref(const BoxIouArgs& a) {
  const int64_t B = a.a.size(0), N = a.a.size(1), M = a.b.size(1);
  const T* pa = a.a.data<T>();
  const T* pb = a.b.data<T>();
  T* out = a.iou.data<T>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < M; ++j) {
        const T* p = pa + (b * N + i) * 4;
        const T* q = pb + (b * M + j) * 4;
        out[(b * N + i) * M + j] = box_iou_value(p, box_area(p), q, box_area(q));
      }
}

// The candidates of one image in NMS order: score > threshold, decreasing score, ties by index.
template <class T>
std::vector<int64_t> candidates(const T* s, int64_t K, double threshold) {
  std::vector<int64_t> order;
  for (int64_t i = 0; i < K; ++i)
    if (double(s[i]) > threshold) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return s[x] > s[y]; });
  return order;
}

template <class T>
void nms_ref(const NmsArgs& a) {
  const int64_t B = a.boxes.size(0), K = a.boxes.size(1);
  const T* boxes = a.boxes.data<T>();
  const T* scores = a.scores.data<T>();
  const int64_t* groups = a.groups.defined() ? a.groups.data<int64_t>() : nullptr;
  int64_t* keep = a.keep.data<int64_t>();
  int64_t* count = a.count.data<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    const T* bx = boxes + b * K * 4;
    std::vector<int64_t> kept;
    for (int64_t i : candidates(scores + b * K, K, a.score_threshold)) {
      if (a.max_out > 0 && int64_t(kept.size()) == a.max_out) break;
      bool suppressed = false;
      for (int64_t k : kept) {
        if (groups && groups[b * K + k] != groups[b * K + i]) continue;
        const T* p = bx + k * 4;
        const T* q = bx + i * 4;
        if (double(box_iou_value(p, box_area(p), q, box_area(q))) > a.iou_threshold) {
          suppressed = true;
          break;
        }
      }
      if (!suppressed) kept.push_back(i);
    }
    for (int64_t r = 0; r < K; ++r) keep[b * K + r] = r < int64_t(kept.size()) ? kept[r] : -1;
    count[b] = int64_t(kept.size());
  }
}

// Stable by index: sorted by decreasing loss, ties in index order; the first k negatives chosen.
template <class T>
void hard_negatives_ref(const HardNegativesArgs& a) {
  const int64_t B = a.loss.size(0), P = a.loss.size(1);
  const T* loss = a.loss.data<T>();
  const int64_t* labels = a.labels.data<int64_t>();
  uint8_t* out = a.negatives.data<uint8_t>();
  for (int64_t b = 0; b < B; ++b) {
    std::vector<int64_t> neg;
    int64_t pos = 0;
    for (int64_t p = 0; p < P; ++p) {
      pos += labels[b * P + p] > 0;
      if (labels[b * P + p] == 0) neg.push_back(p);
      out[b * P + p] = 0;
    }
    const T* l = loss + b * P;
    std::stable_sort(neg.begin(), neg.end(), [&](int64_t x, int64_t y) { return l[x] > l[y]; });
    const int64_t k = hard_negative_count(a.ratio, pos, int64_t(neg.size()));
    for (int64_t r = 0; r < k; ++r) out[b * P + neg[size_t(r)]] = 1;
  }
}

// ---- cpu.omp ---------------------------------------------------------------------------------

template <class T>
void box_iou_omp(const BoxIouArgs& a) {
  const int64_t B = a.a.size(0), N = a.a.size(1), M = a.b.size(1);
  const T* pa = a.a.data<T>();
  const T* pb = a.b.data<T>();
  T* out = a.iou.data<T>();
  std::vector<T> area_b(size_t(B * M));
  for (int64_t j = 0; j < B * M; ++j) area_b[size_t(j)] = box_area(pb + j * 4);
#pragma omp parallel for schedule(static) if (B * N * M > (int64_t(1) << 15))
  for (int64_t r = 0; r < B * N; ++r) {
    const int64_t b = r / N;
    const T* p = pa + r * 4;
    const T area_p = box_area(p);
    const T* q = pb + b * M * 4;
    const T* aq = area_b.data() + b * M;
    T* o = out + r * M;
    for (int64_t j = 0; j < M; ++j) o[j] = box_iou_value(p, area_p, q + j * 4, aq[j]);
  }
}

template <class T>
void nms_omp(const NmsArgs& a) {
  const int64_t B = a.boxes.size(0), K = a.boxes.size(1);
  const T* boxes = a.boxes.data<T>();
  const T* scores = a.scores.data<T>();
  const int64_t* groups = a.groups.defined() ? a.groups.data<int64_t>() : nullptr;
  int64_t* keep = a.keep.data<int64_t>();
  int64_t* count = a.count.data<int64_t>();
#pragma omp parallel for schedule(dynamic, 1) if (B > 1 && B * K > 4096)
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<int64_t> order = candidates(scores + b * K, K, a.score_threshold);
    const int64_t n = int64_t(order.size());
    // Sorted copies: boxes, areas and groups contiguous in NMS order.
    std::vector<T> box(size_t(4 * n));
    std::vector<T> area(static_cast<size_t>(n));
    std::vector<int64_t> grp(size_t(groups ? n : 0));
    for (int64_t r = 0; r < n; ++r) {
      const T* src = boxes + (b * K + order[size_t(r)]) * 4;
      std::copy(src, src + 4, box.begin() + 4 * r);
      area[size_t(r)] = box_area(src);
      if (groups) grp[size_t(r)] = groups[b * K + order[size_t(r)]];
    }
    std::vector<char> removed(size_t(n), 0);
    int64_t kept = 0;
    int64_t* kb = keep + b * K;
    for (int64_t r = 0; r < n; ++r) {
      if (removed[size_t(r)]) continue;
      if (a.max_out > 0 && kept == a.max_out) break;
      kb[kept++] = order[size_t(r)];
      const T* p = box.data() + 4 * r;
      const T ap = area[size_t(r)];
      for (int64_t j = r + 1; j < n; ++j) {
        if (removed[size_t(j)] || (groups && grp[size_t(j)] != grp[size_t(r)])) continue;
        const T iou = box_iou_value(p, ap, box.data() + 4 * j, area[size_t(j)]);
        if (double(iou) > a.iou_threshold) removed[size_t(j)] = 1;  // as cpu.ref: in double
      }
    }
    for (int64_t r = kept; r < K; ++r) kb[r] = -1;
    count[b] = kept;
  }
}

// OpenMP over images; nth_element with the same strict order (loss descending, then index) picks
// the same k negatives as the stable sort.
template <class T>
void hard_negatives_omp(const HardNegativesArgs& a) {
  const int64_t B = a.loss.size(0), P = a.loss.size(1);
  const T* loss = a.loss.data<T>();
  const int64_t* labels = a.labels.data<int64_t>();
  uint8_t* out = a.negatives.data<uint8_t>();
#pragma omp parallel for schedule(dynamic, 1) if (B > 1 && B * P > 8192)
  for (int64_t b = 0; b < B; ++b) {
    std::vector<int64_t> neg;
    neg.reserve(size_t(P));
    int64_t pos = 0;
    const int64_t* lab = labels + b * P;
    for (int64_t p = 0; p < P; ++p) {
      pos += lab[p] > 0;
      if (lab[p] == 0) neg.push_back(p);
    }
    std::fill(out + b * P, out + (b + 1) * P, uint8_t(0));
    const T* l = loss + b * P;
    const int64_t k = hard_negative_count(a.ratio, pos, int64_t(neg.size()));
    if (k <= 0) continue;
    auto before = [&](int64_t x, int64_t y) { return l[x] > l[y] || (!(l[y] > l[x]) && x < y); };
    std::nth_element(neg.begin(), neg.begin() + (k - 1), neg.end(), before);
    for (int64_t r = 0; r < k; ++r) out[b * P + neg[size_t(r)]] = 1;
  }
}

template <class F>
void dispatch_boxes(DType t, const char* op, F f) {
  if (t == DType::f32)
    f(float{});
  else if (t == DType::f64)
    f(double{});
  else
    AIM_FAIL("[", op, "] boxes must be f32 or f64, got ", dtype_name(t));
}

void box_iou_cpu_ref(const BoxIouArgs& a) {
  check_box_iou_args(a);
  dispatch_boxes(a.a.dtype(), "box_iou", [&](auto t) { box_iou_ref<decltype(t)>(a); });
}
void box_iou_cpu_omp(const BoxIouArgs& a) {
  check_box_iou_args(a);
  dispatch_boxes(a.a.dtype(), "box_iou", [&](auto t) { box_iou_omp<decltype(t)>(a); });
}
void nms_cpu_ref(const NmsArgs& a) {
  check_nms_args(a);
  dispatch_boxes(a.boxes.dtype(), "nms", [&](auto t) { nms_ref<decltype(t)>(a); });
}
void nms_cpu_omp(const NmsArgs& a) {
  check_nms_args(a);
  dispatch_boxes(a.boxes.dtype(), "nms", [&](auto t) { nms_omp<decltype(t)>(a); });
}

void hard_negatives_cpu_ref(const HardNegativesArgs& a) {
  check_hard_negatives_args(a);
  dispatch_boxes(a.loss.dtype(), "hard_negatives",
                 [&](auto t) { hard_negatives_ref<decltype(t)>(a); });
}
void hard_negatives_cpu_omp(const HardNegativesArgs& a) {
  check_hard_negatives_args(a);
  dispatch_boxes(a.loss.dtype(), "hard_negatives",
                 [&](auto t) { hard_negatives_omp<decltype(t)>(a); });
}

}  // namespace

void hard_negatives(const HardNegativesArgs& a) {
  AIM_DISPATCH_OP(HardNegativesArgs, "hard_negatives", a);
}
void box_iou(const BoxIouArgs& a) { AIM_DISPATCH_OP(BoxIouArgs, "box_iou", a); }
void nms(const NmsArgs& a) { AIM_DISPATCH_OP(NmsArgs, "nms", a); }

void register_boxes_cpu(Registry& r) {
  const std::vector<DType> dt = {DType::f32, DType::f64};
  {
    auto& op = r.op<BoxIouArgs>("box_iou");
    op.description = "pairwise IoU of two box sets per image (torchvision.ops.box_iou, batched)";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, box_iou_cpu_ref, dt});
    op.add({"cpu.omp", Backend::CPU, Provider::Own, box_iou_cpu_omp, dt});
    op.set_default(Backend::CPU, "cpu.omp");
    op.set_cost(box_iou_cost);
    op.make_case = boxes_cpu::make_box_iou_case;
    op.ref_uses_case_dtype = true;  // every variant evaluates the same expression in the dtype
    op.tolerance = boxes_cpu::exact;
    op.set_shape_fields(boxes_cpu::box_iou_shape_fields());
    op.add_test_shapes(boxes_cpu::box_iou_shapes());
    op.small_enough_for_simt = boxes_cpu::box_iou_simt_small;
  }
  {
    auto& op = r.op<NmsArgs>("nms");
    op.description =
        "greedy non-maximum suppression per image and group, score threshold, max_out "
        "(torchvision.ops.batched_nms)";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, nms_cpu_ref, dt});
    op.add({"cpu.omp", Backend::CPU, Provider::Own, nms_cpu_omp, dt});
    op.set_default(Backend::CPU, "cpu.omp");
    op.set_cost(nms_cost);
    op.make_case = boxes_cpu::make_nms_case;
    op.ref_uses_case_dtype = true;
    op.tolerance = boxes_cpu::exact;
    op.set_shape_fields(boxes_cpu::nms_shape_fields());
    op.add_test_shapes(boxes_cpu::nms_shapes());
    op.small_enough_for_simt = boxes_cpu::nms_simt_small;
  }
  {
    auto& op = r.op<HardNegativesArgs>("hard_negatives");
    op.description =
        "SSD's hard negative mining: per image the ceil(ratio * positives) negatives of highest "
        "loss";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, hard_negatives_cpu_ref, dt});
    op.add({"cpu.omp", Backend::CPU, Provider::Own, hard_negatives_cpu_omp, dt});
    op.set_default(Backend::CPU, "cpu.omp");
    op.set_cost(hard_negatives_cost);
    op.make_case = boxes_cpu::make_hard_negatives_case;
    op.ref_uses_case_dtype = true;
    op.tolerance = boxes_cpu::exact;
    op.set_shape_fields(boxes_cpu::hard_negatives_shape_fields());
    op.add_test_shapes(boxes_cpu::hard_negatives_shapes());
    op.small_enough_for_simt = boxes_cpu::hard_negatives_simt_small;
  }
}

}  // namespace aim::kernels
