// roi_align, roi_pool: argument checks, CPU variants and registration.
// cpu.ref: the oracle. Plain loops over every output (forward) or every dy element (backward
// scatter into a double buffer), the shared geometry of roi.h in the data's dtype, sums in double.
// cpu.omp, roi_align: RoIs in chunks whose sample tables (four offsets and weights per bilinear
// sample, shared by every channel: torchvision's pre_calc) fit in 32 MB; the tables built with
// OpenMP over RoIs, then the forward runs OpenMP over (RoI, channel), the backward over channels:
// a thread owns channel c of every image and adds the chunk's RoIs in order, so dx is the same
// whatever the thread count (deterministic, no atomics). Sums in the data's dtype.
// cpu.omp, roi_pool: forward OpenMP over (RoI, channel) with the RoIs' bins computed once;
// backward OpenMP over channels (owned, as roi_align's), argmax checked.
// The gathers through the tables do not vectorise; the bins' few samples leave nothing to gain.
// Test cases: roi_cases.cpp.
#include "kernels/roi/roi_cpu.h"

#include <algorithm>
#include <cfloat>
#include <limits>
#include <vector>

#include "kernels/registry.h"
#include "kernels/roi/roi.h"

// The geometry of roi.h rounded as torchvision's CPU kernel rounds it: GCC contracts a * b + c
// into an FMA in C++ whatever -std says (x86-64-v3 has FMA), which moved samples by an ulp and
// mask targets by up to 1e-5 (tests/models/test_mask_parts.cpp).
#pragma GCC optimize("fp-contract=off")

namespace aim::kernels {
namespace {

std::string desc(const Tensor& t) {
  return t.defined() ? to_string(t.sizes()) + " " + dtype_name(t.dtype()) : "undefined";
}

// x-like [N, C, H, W], rois [K, 5] and y-like [K, C, PH, PW]: ranks, one float dtype (f32, f64),
// contiguous, one device, non-empty planes.
void check_roi_tensors(const char* op, const char* xn, const Tensor& x, const Tensor& rois,
                       const char* yn, const Tensor& y) {
  AIM_CHECK(x.defined() && x.dim() == 4, "[", op, "] ", xn, " must be [N, C, H, W], got ", desc(x));
  AIM_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, "[", op, "] ", xn,
            " must be f32 or f64, got ", dtype_name(x.dtype()));
  AIM_CHECK(rois.defined() && rois.dim() == 2 && rois.size(1) == 5, "[", op,
            "] rois must be [K, 5] rows (batch index, x1, y1, x2, y2), got ", desc(rois));
  AIM_CHECK(y.defined() && y.dim() == 4, "[", op, "] ", yn, " must be [K, C, PH, PW], got ",
            desc(y));
  AIM_CHECK(rois.dtype() == x.dtype() && y.dtype() == x.dtype(), "[", op, "] ", xn, ", rois and ",
            yn, " must share one dtype, got ", dtype_name(x.dtype()), ", ",
            dtype_name(rois.dtype()), ", ", dtype_name(y.dtype()));
  AIM_CHECK(y.size(0) == rois.size(0) && y.size(1) == x.size(1), "[", op, "] ", yn, " ",
            to_string(y.sizes()), " must be [K, C, PH, PW] for rois ", to_string(rois.sizes()),
            " and ", xn, " ", to_string(x.sizes()));
  AIM_CHECK(x.size(2) >= 1 && x.size(3) >= 1 && y.size(2) >= 1 && y.size(3) >= 1, "[", op,
            "] feature maps and bins must not be empty, got ", xn, " ", to_string(x.sizes()),
            " and ", yn, " ", to_string(y.sizes()));
  AIM_CHECK(x.size(2) * x.size(3) <= int64_t(std::numeric_limits<int32_t>::max()), "[", op,
            "] planes must have H*W < 2^31 (i32 offsets), got ", to_string(x.sizes()));
  AIM_CHECK(x.is_contiguous() && rois.is_contiguous() && y.is_contiguous(), "[", op, "] ", xn,
            ", rois and ", yn, " must be contiguous");
  AIM_CHECK(rois.device() == x.device() && y.device() == x.device(), "[", op, "] ", xn,
            ", rois and ", yn, " must be on one device");
}

void check_scale(const char* op, double s) {
  AIM_CHECK(std::isfinite(s) && s > 0, "[", op, "] spatial_scale must be finite and > 0, got ", s);
}

}  // namespace

void check_roi_align_fwd_args(const RoiAlignFwdArgs& a) {
  check_roi_tensors("roi_align_fwd", "x", a.x, a.rois, "y", a.y);
  check_scale("roi_align_fwd", a.p.spatial_scale);
}
void check_roi_align_bwd_args(const RoiAlignBwdArgs& a) {
  check_roi_tensors("roi_align_bwd", "dx", a.dx, a.rois, "dy", a.dy);
  check_scale("roi_align_bwd", a.p.spatial_scale);
}
void check_roi_pool_fwd_args(const RoiPoolFwdArgs& a) {
  check_roi_tensors("roi_pool_fwd", "x", a.x, a.rois, "y", a.y);
  check_scale("roi_pool_fwd", a.spatial_scale);
  if (a.argmax.defined())
    AIM_CHECK(a.argmax.sizes() == a.y.sizes() && a.argmax.dtype() == DType::i32 &&
                  a.argmax.is_contiguous() && a.argmax.device() == a.y.device(),
              "[roi_pool_fwd] argmax must be contiguous ", to_string(a.y.sizes()),
              " i32 beside y, got ", desc(a.argmax));
}
void check_roi_pool_bwd_args(const RoiPoolBwdArgs& a) {
  check_roi_tensors("roi_pool_bwd", "dx", a.dx, a.rois, "dy", a.dy);
  AIM_CHECK(a.argmax.defined() && a.argmax.sizes() == a.dy.sizes() &&
                a.argmax.dtype() == DType::i32 && a.argmax.is_contiguous() &&
                a.argmax.device() == a.dy.device(),
            "[roi_pool_bwd] argmax must be the forward's contiguous ", to_string(a.dy.sizes()),
            " i32, got ", desc(a.argmax));
}

namespace {

// The CPU variants read the RoIs anyway: a batch index outside [0, N) is an error here.
template <class T>
void check_batch_indices(const char* op, const T* rois, int64_t K, int64_t N) {
  for (int64_t k = 0; k < K; ++k) {
    const T b = rois[k * 5];
    AIM_CHECK(roi_batch_ok(b, N), "[", op, "] RoI ", k, " has batch index ", double(b),
              ", outside [0, ", N, ")");
  }
}

template <class F>
void dispatch_roi(DType t, const char* op, F f) {
  if (t == DType::f32)
    f(float{});
  else if (t == DType::f64)
    f(double{});
  else
    AIM_FAIL("[", op, "] takes f32 or f64, got ", dtype_name(t));
}

// ---- cpu.ref ---------------------------------------------------------------------------------

template <class T>
void roi_align_fwd_ref(const RoiAlignFwdArgs& a) {
  const int64_t C = a.x.size(1), H = a.x.size(2), W = a.x.size(3);
  const int64_t K = a.rois.size(0), PH = a.y.size(2), PW = a.y.size(3);
  const T* x = a.x.data<T>();
  const T* rois = a.rois.data<T>();
  T* y = a.y.data<T>();
  check_batch_indices("roi_align_fwd", rois, K, a.x.size(0));
  const T scale = T(a.p.spatial_scale);
  for (int64_t k = 0; k < K; ++k) {
    const RoiAlignBox<T> b =
        roi_align_box(rois + k * 5, scale, PH, PW, a.p.sampling_ratio, a.p.aligned);
    for (int64_t c = 0; c < C; ++c) {
      const T* plane = x + (b.n * C + c) * H * W;
      for (int64_t ph = 0; ph < PH; ++ph)
        for (int64_t pw = 0; pw < PW; ++pw) {
          double acc = 0;
          for (int64_t iy = 0; iy < b.grid_h; ++iy) {
            const T sy = roi_align_sample(b.start_h, ph, b.bin_h, iy, b.grid_h);
            for (int64_t ix = 0; ix < b.grid_w; ++ix) {
              const T sx = roi_align_sample(b.start_w, pw, b.bin_w, ix, b.grid_w);
              const RoiBilinear<T> s = roi_bilinear(sy, sx, H, W);
              if (!s.valid) continue;
              acc += double(s.w1) * double(plane[s.o1]) + double(s.w2) * double(plane[s.o2]) +
                     double(s.w3) * double(plane[s.o3]) + double(s.w4) * double(plane[s.o4]);
            }
          }
          y[((k * C + c) * PH + ph) * PW + pw] = T(acc / double(b.count));
        }
    }
  }
}

template <class T>
void roi_align_bwd_ref(const RoiAlignBwdArgs& a) {
  const int64_t N = a.dx.size(0), C = a.dx.size(1), H = a.dx.size(2), W = a.dx.size(3);
  const int64_t K = a.rois.size(0), PH = a.dy.size(2), PW = a.dy.size(3);
  const T* dy = a.dy.data<T>();
  const T* rois = a.rois.data<T>();
  check_batch_indices("roi_align_bwd", rois, K, N);
  std::vector<double> acc(size_t(N * C * H * W), 0.0);
  const T scale = T(a.p.spatial_scale);
  for (int64_t k = 0; k < K; ++k) {
    const RoiAlignBox<T> b =
        roi_align_box(rois + k * 5, scale, PH, PW, a.p.sampling_ratio, a.p.aligned);
    for (int64_t c = 0; c < C; ++c) {
      double* plane = acc.data() + (b.n * C + c) * H * W;
      for (int64_t ph = 0; ph < PH; ++ph)
        for (int64_t pw = 0; pw < PW; ++pw) {
          const double g = double(dy[((k * C + c) * PH + ph) * PW + pw]) / double(b.count);
          for (int64_t iy = 0; iy < b.grid_h; ++iy) {
            const T sy = roi_align_sample(b.start_h, ph, b.bin_h, iy, b.grid_h);
            for (int64_t ix = 0; ix < b.grid_w; ++ix) {
              const T sx = roi_align_sample(b.start_w, pw, b.bin_w, ix, b.grid_w);
              const RoiBilinear<T> s = roi_bilinear(sy, sx, H, W);
              if (!s.valid) continue;
              plane[s.o1] += g * double(s.w1);
              plane[s.o2] += g * double(s.w2);
              plane[s.o3] += g * double(s.w3);
              plane[s.o4] += g * double(s.w4);
            }
          }
        }
    }
  }
  T* dx = a.dx.data<T>();
  for (size_t i = 0; i < acc.size(); ++i) dx[i] = T(acc[i]);
}

template <class T>
void roi_pool_fwd_ref(const RoiPoolFwdArgs& a) {
  const int64_t C = a.x.size(1), H = a.x.size(2), W = a.x.size(3);
  const int64_t K = a.rois.size(0), PH = a.y.size(2), PW = a.y.size(3);
  const T* x = a.x.data<T>();
  const T* rois = a.rois.data<T>();
  T* y = a.y.data<T>();
  int32_t* am = a.argmax.defined() ? a.argmax.data<int32_t>() : nullptr;
  check_batch_indices("roi_pool_fwd", rois, K, a.x.size(0));
  for (int64_t k = 0; k < K; ++k) {
    const RoiPoolBox<T> b = roi_pool_box(rois + k * 5, T(a.spatial_scale), PH, PW);
    for (int64_t c = 0; c < C; ++c) {
      const T* plane = x + (b.n * C + c) * H * W;
      for (int64_t ph = 0; ph < PH; ++ph) {
        const RoiSpan hs = roi_pool_span(ph, b.bin_h, b.start_h, H);
        for (int64_t pw = 0; pw < PW; ++pw) {
          const RoiSpan ws = roi_pool_span(pw, b.bin_w, b.start_w, W);
          const bool empty = hs.end <= hs.start || ws.end <= ws.start;
          // torchvision: an empty bin is 0 with argmax -1; otherwise the first element above
          // -FLT_MAX (strict >), so a NaN is never taken.
          T m = empty ? T(0) : T(-FLT_MAX);
          int64_t at = -1;
          for (int64_t h = hs.start; h < hs.end; ++h)
            for (int64_t w = ws.start; w < ws.end; ++w)
              if (plane[h * W + w] > m) m = plane[h * W + w], at = h * W + w;
          const int64_t o = ((k * C + c) * PH + ph) * PW + pw;
          y[o] = m;
          if (am) am[o] = int32_t(at);
        }
      }
    }
  }
}

template <class T>
void roi_pool_bwd_ref(const RoiPoolBwdArgs& a) {
  const int64_t N = a.dx.size(0), C = a.dx.size(1), HW = a.dx.size(2) * a.dx.size(3);
  const int64_t K = a.rois.size(0), P = a.dy.size(2) * a.dy.size(3);
  const T* dy = a.dy.data<T>();
  const T* rois = a.rois.data<T>();
  const int32_t* am = a.argmax.data<int32_t>();
  check_batch_indices("roi_pool_bwd", rois, K, N);
  std::vector<double> acc(size_t(N * C * HW), 0.0);
  for (int64_t k = 0; k < K; ++k) {
    const int64_t n = int64_t(rois[k * 5]);
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < P; ++p) {
        const int64_t o = (k * C + c) * P + p, i = am[o];
        AIM_CHECK(i >= -1 && i < HW, "[roi_pool_bwd] argmax ", i, " at ", o,
                  " is outside the plane of ", HW, " elements (-1: empty bin)");
        if (i >= 0) acc[size_t((n * C + c) * HW + i)] += double(dy[o]);
      }
  }
  T* dx = a.dx.data<T>();
  for (size_t i = 0; i < acc.size(); ++i) dx[i] = T(acc[i]);
}

// ---- cpu.omp ---------------------------------------------------------------------------------

// One bilinear sample of a RoI's table: offsets into the plane and weights (zero for a sample
// outside the map, whose offsets are 0: read, never used).
template <class T>
struct Sample {
  int32_t o1, o2, o3, o4;
  T w1, w2, w3, w4;
};

constexpr int64_t kTableBudget = (int64_t(32) << 20) / int64_t(sizeof(Sample<double>));

template <class T>
struct AlignChunk {
  std::vector<RoiAlignBox<T>> box;  // per RoI of the chunk
  std::vector<int64_t> first;       // per RoI: its first sample in `table`; one past the end last
  std::vector<Sample<T>> table;     // per RoI, bins in (ph, pw) order, samples in (iy, ix) order
};

template <class T>
int64_t samples_of(const RoiAlignBox<T>& b, int64_t PH, int64_t PW) {
  return b.grid_h > 0 && b.grid_w > 0 ? PH * PW * b.grid_h * b.grid_w : 0;
}

// RoIs [k0, k1): k1 as far as the budget allows (at least one RoI).
template <class T>
int64_t build_chunk(AlignChunk<T>& ch, const std::vector<RoiAlignBox<T>>& boxes, int64_t k0,
                    int64_t PH, int64_t PW, int64_t H, int64_t W) {
  const int64_t K = int64_t(boxes.size());
  int64_t k1 = k0, total = 0;
  ch.first.assign(1, 0);
  while (k1 < K) {
    const int64_t s = samples_of(boxes[size_t(k1)], PH, PW);
    if (k1 > k0 && total + s > kTableBudget) break;
    total += s;
    ch.first.push_back(total);
    ++k1;
  }
  ch.box.assign(boxes.begin() + k0, boxes.begin() + k1);
  ch.table.resize(size_t(total));
#pragma omp parallel for schedule(dynamic, 1) if (total > 4096)
  for (int64_t r = 0; r < k1 - k0; ++r) {
    const RoiAlignBox<T>& b = ch.box[size_t(r)];
    if (samples_of(b, PH, PW) == 0) continue;
    Sample<T>* t = ch.table.data() + ch.first[size_t(r)];
    for (int64_t ph = 0; ph < PH; ++ph)
      for (int64_t pw = 0; pw < PW; ++pw)
        for (int64_t iy = 0; iy < b.grid_h; ++iy) {
          const T sy = roi_align_sample(b.start_h, ph, b.bin_h, iy, b.grid_h);
          for (int64_t ix = 0; ix < b.grid_w; ++ix) {
            const T sx = roi_align_sample(b.start_w, pw, b.bin_w, ix, b.grid_w);
            const RoiBilinear<T> s = roi_bilinear(sy, sx, H, W);
            *t++ = {int32_t(s.o1), int32_t(s.o2), int32_t(s.o3), int32_t(s.o4),
                    s.w1,          s.w2,          s.w3,          s.w4};
          }
        }
  }
  return k1;
}

template <class T>
std::vector<RoiAlignBox<T>> align_boxes(const T* rois, int64_t K, int64_t PH, int64_t PW,
                                        const RoiAlignParams& p) {
  std::vector<RoiAlignBox<T>> boxes(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k)
    boxes[size_t(k)] =
        roi_align_box(rois + k * 5, T(p.spatial_scale), PH, PW, p.sampling_ratio, p.aligned);
  return boxes;
}

template <class T>
void roi_align_fwd_omp(const RoiAlignFwdArgs& a) {
  const int64_t C = a.x.size(1), H = a.x.size(2), W = a.x.size(3);
  const int64_t K = a.rois.size(0), PH = a.y.size(2), PW = a.y.size(3), P = PH * PW;
  const T* x = a.x.data<T>();
  const T* rois = a.rois.data<T>();
  T* y = a.y.data<T>();
  check_batch_indices("roi_align_fwd", rois, K, a.x.size(0));
  const std::vector<RoiAlignBox<T>> boxes = align_boxes(rois, K, PH, PW, a.p);
  AlignChunk<T> ch;
  for (int64_t k0 = 0; k0 < K;) {
    const int64_t k1 = build_chunk(ch, boxes, k0, PH, PW, H, W);
    const int64_t work = (k1 - k0) * C;
#pragma omp parallel for schedule(static) if (work * P > 4096)
    for (int64_t r = 0; r < work; ++r) {
      const int64_t kr = r / C, c = r % C;
      const RoiAlignBox<T>& b = ch.box[size_t(kr)];
      const T* plane = x + (b.n * C + c) * H * W;
      T* out = y + ((k0 + kr) * C + c) * P;
      const int64_t per_bin = b.grid_h > 0 && b.grid_w > 0 ? b.grid_h * b.grid_w : 0;
      const Sample<T>* s = ch.table.data() + ch.first[size_t(kr)];
      for (int64_t bin = 0; bin < P; ++bin) {
        T acc = 0;
        for (int64_t i = 0; i < per_bin; ++i, ++s)
          acc += s->w1 * plane[s->o1] + s->w2 * plane[s->o2] + s->w3 * plane[s->o3] +
                 s->w4 * plane[s->o4];
        out[bin] = acc / b.count;
      }
    }
    k0 = k1;
  }
}

template <class T>
void roi_align_bwd_omp(const RoiAlignBwdArgs& a) {
  const int64_t N = a.dx.size(0), C = a.dx.size(1), H = a.dx.size(2), W = a.dx.size(3);
  const int64_t K = a.rois.size(0), PH = a.dy.size(2), PW = a.dy.size(3), P = PH * PW;
  const T* dy = a.dy.data<T>();
  const T* rois = a.rois.data<T>();
  T* dx = a.dx.data<T>();
  check_batch_indices("roi_align_bwd", rois, K, N);
  const int64_t total = N * C * H * W;
#pragma omp parallel for schedule(static) if (total > 65536)
  for (int64_t i = 0; i < total; ++i) dx[i] = T(0);
  const std::vector<RoiAlignBox<T>> boxes = align_boxes(rois, K, PH, PW, a.p);
  AlignChunk<T> ch;
  for (int64_t k0 = 0; k0 < K;) {
    const int64_t k1 = build_chunk(ch, boxes, k0, PH, PW, H, W);
    // Channel c of every image belongs to one thread, which adds the chunk's RoIs in order.
#pragma omp parallel for schedule(static) if (C > 1 && (k1 - k0) * C * P > 4096)
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t kr = 0; kr < k1 - k0; ++kr) {
        const RoiAlignBox<T>& b = ch.box[size_t(kr)];
        const int64_t per_bin = b.grid_h > 0 && b.grid_w > 0 ? b.grid_h * b.grid_w : 0;
        if (per_bin == 0) continue;
        T* plane = dx + (b.n * C + c) * H * W;
        const T* g = dy + ((k0 + kr) * C + c) * P;
        const Sample<T>* s = ch.table.data() + ch.first[size_t(kr)];
        for (int64_t bin = 0; bin < P; ++bin) {
          const T gb = g[bin] / b.count;
          for (int64_t i = 0; i < per_bin; ++i, ++s) {
            plane[s->o1] += gb * s->w1;
            plane[s->o2] += gb * s->w2;
            plane[s->o3] += gb * s->w3;
            plane[s->o4] += gb * s->w4;
          }
        }
      }
    }
    k0 = k1;
  }
}

template <class T>
void roi_pool_fwd_omp(const RoiPoolFwdArgs& a) {
  const int64_t C = a.x.size(1), H = a.x.size(2), W = a.x.size(3);
  const int64_t K = a.rois.size(0), PH = a.y.size(2), PW = a.y.size(3);
  const T* x = a.x.data<T>();
  const T* rois = a.rois.data<T>();
  T* y = a.y.data<T>();
  int32_t* am = a.argmax.defined() ? a.argmax.data<int32_t>() : nullptr;
  check_batch_indices("roi_pool_fwd", rois, K, a.x.size(0));
  // Bins of every RoI, once: rows then columns.
  std::vector<RoiSpan> hs(size_t(K * PH)), ws(size_t(K * PW));
  std::vector<int64_t> img(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) {
    const RoiPoolBox<T> b = roi_pool_box(rois + k * 5, T(a.spatial_scale), PH, PW);
    img[size_t(k)] = b.n;
    for (int64_t ph = 0; ph < PH; ++ph)
      hs[size_t(k * PH + ph)] = roi_pool_span(ph, b.bin_h, b.start_h, H);
    for (int64_t pw = 0; pw < PW; ++pw)
      ws[size_t(k * PW + pw)] = roi_pool_span(pw, b.bin_w, b.start_w, W);
  }
#pragma omp parallel for schedule(static) if (K * C * PH * PW > 4096)
  for (int64_t r = 0; r < K * C; ++r) {
    const int64_t k = r / C, c = r % C;
    const T* plane = x + (img[size_t(k)] * C + c) * H * W;
    for (int64_t ph = 0; ph < PH; ++ph) {
      const RoiSpan h = hs[size_t(k * PH + ph)];
      for (int64_t pw = 0; pw < PW; ++pw) {
        const RoiSpan w = ws[size_t(k * PW + pw)];
        const bool empty = h.end <= h.start || w.end <= w.start;
        T m = empty ? T(0) : T(-FLT_MAX);
        int64_t at = -1;
        for (int64_t i = h.start; i < h.end; ++i) {
          const T* row = plane + i * W;
          for (int64_t j = w.start; j < w.end; ++j)
            if (row[j] > m) m = row[j], at = i * W + j;
        }
        const int64_t o = (r * PH + ph) * PW + pw;
        y[o] = m;
        if (am) am[o] = int32_t(at);
      }
    }
  }
}

template <class T>
void roi_pool_bwd_omp(const RoiPoolBwdArgs& a) {
  const int64_t N = a.dx.size(0), C = a.dx.size(1), HW = a.dx.size(2) * a.dx.size(3);
  const int64_t K = a.rois.size(0), P = a.dy.size(2) * a.dy.size(3);
  const T* dy = a.dy.data<T>();
  const T* rois = a.rois.data<T>();
  const int32_t* am = a.argmax.data<int32_t>();
  T* dx = a.dx.data<T>();
  check_batch_indices("roi_pool_bwd", rois, K, N);
  for (int64_t o = 0; o < K * C * P; ++o)
    AIM_CHECK(am[o] >= -1 && am[o] < HW, "[roi_pool_bwd] argmax ", am[o], " at ", o,
              " is outside the plane of ", HW, " elements (-1: empty bin)");
#pragma omp parallel for schedule(static) if (N * C * HW > 65536)
  for (int64_t i = 0; i < N * C * HW; ++i) dx[i] = T(0);
    // Channel c of every image belongs to one thread, which adds the RoIs in order.
#pragma omp parallel for schedule(static) if (C > 1 && K * C * P > 4096)
  for (int64_t c = 0; c < C; ++c)
    for (int64_t k = 0; k < K; ++k) {
      T* plane = dx + (int64_t(rois[k * 5]) * C + c) * HW;
      const int64_t o = (k * C + c) * P;
      for (int64_t p = 0; p < P; ++p)
        if (am[o + p] >= 0) plane[am[o + p]] += dy[o + p];
    }
}

void roi_align_fwd_cpu_ref(const RoiAlignFwdArgs& a) {
  check_roi_align_fwd_args(a);
  dispatch_roi(a.x.dtype(), "roi_align_fwd", [&](auto t) { roi_align_fwd_ref<decltype(t)>(a); });
}
void roi_align_fwd_cpu_omp(const RoiAlignFwdArgs& a) {
  check_roi_align_fwd_args(a);
  dispatch_roi(a.x.dtype(), "roi_align_fwd", [&](auto t) { roi_align_fwd_omp<decltype(t)>(a); });
}
void roi_align_bwd_cpu_ref(const RoiAlignBwdArgs& a) {
  check_roi_align_bwd_args(a);
  dispatch_roi(a.dy.dtype(), "roi_align_bwd", [&](auto t) { roi_align_bwd_ref<decltype(t)>(a); });
}
void roi_align_bwd_cpu_omp(const RoiAlignBwdArgs& a) {
  check_roi_align_bwd_args(a);
  dispatch_roi(a.dy.dtype(), "roi_align_bwd", [&](auto t) { roi_align_bwd_omp<decltype(t)>(a); });
}
void roi_pool_fwd_cpu_omp(const RoiPoolFwdArgs& a) {
  check_roi_pool_fwd_args(a);
  dispatch_roi(a.x.dtype(), "roi_pool_fwd", [&](auto t) { roi_pool_fwd_omp<decltype(t)>(a); });
}
void roi_pool_bwd_cpu_ref(const RoiPoolBwdArgs& a) {
  check_roi_pool_bwd_args(a);
  dispatch_roi(a.dy.dtype(), "roi_pool_bwd", [&](auto t) { roi_pool_bwd_ref<decltype(t)>(a); });
}
void roi_pool_bwd_cpu_omp(const RoiPoolBwdArgs& a) {
  check_roi_pool_bwd_args(a);
  dispatch_roi(a.dy.dtype(), "roi_pool_bwd", [&](auto t) { roi_pool_bwd_omp<decltype(t)>(a); });
}

}  // namespace

void roi_cpu::roi_pool_fwd_cpu_ref(const RoiPoolFwdArgs& a) {
  check_roi_pool_fwd_args(a);
  dispatch_roi(a.x.dtype(), "roi_pool_fwd", [&](auto t) { roi_pool_fwd_ref<decltype(t)>(a); });
}

void roi_align_fwd(const RoiAlignFwdArgs& a) {
  AIM_DISPATCH_OP(RoiAlignFwdArgs, "roi_align_fwd", a);
}
void roi_align_bwd(const RoiAlignBwdArgs& a) {
  AIM_DISPATCH_OP(RoiAlignBwdArgs, "roi_align_bwd", a);
}
void roi_pool_fwd(const RoiPoolFwdArgs& a) { AIM_DISPATCH_OP(RoiPoolFwdArgs, "roi_pool_fwd", a); }
void roi_pool_bwd(const RoiPoolBwdArgs& a) { AIM_DISPATCH_OP(RoiPoolBwdArgs, "roi_pool_bwd", a); }

void register_roi_cpu(Registry& r) {
  const std::vector<DType> dt = {DType::f32, DType::f64};
  {
    auto& op = r.op<RoiAlignFwdArgs>("roi_align_fwd");
    op.description =
        "RoIAlign: bilinear samples averaged per bin (torchvision.ops.roi_align: sampling_ratio, "
        "aligned)";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, roi_align_fwd_cpu_ref, dt});
    op.add({"cpu.omp", Backend::CPU, Provider::Own, roi_align_fwd_cpu_omp, dt});
    op.set_default(Backend::CPU, "cpu.omp");
    op.set_cost(roi_align_fwd_cost);
    op.make_case = roi_cpu::make_roi_align_fwd_case;
    op.set_shape_fields(roi_cpu::roi_align_shape_fields());
    op.add_test_shapes(roi_cpu::roi_align_shapes());
    op.small_enough_for_simt = roi_cpu::roi_align_simt_small;
  }
  {
    auto& op = r.op<RoiAlignBwdArgs>("roi_align_bwd");
    op.description = "RoIAlign gradient: dy / count scattered to the samples' four corners";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, roi_align_bwd_cpu_ref, dt});
    op.add({"cpu.omp", Backend::CPU, Provider::Own, roi_align_bwd_cpu_omp, dt});
    op.set_default(Backend::CPU, "cpu.omp");
    op.set_cost(roi_align_bwd_cost);
    op.make_case = roi_cpu::make_roi_align_bwd_case;
    op.set_shape_fields(roi_cpu::roi_align_shape_fields());
    op.add_test_shapes(roi_cpu::roi_align_shapes());
    op.small_enough_for_simt = roi_cpu::roi_align_simt_small;
  }
  {
    auto& op = r.op<RoiPoolFwdArgs>("roi_pool_fwd");
    op.description = "RoIPool: max per bin of rounded RoIs, argmax (torchvision.ops.roi_pool)";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, roi_cpu::roi_pool_fwd_cpu_ref, dt});
    op.add({"cpu.omp", Backend::CPU, Provider::Own, roi_pool_fwd_cpu_omp, dt});
    op.set_default(Backend::CPU, "cpu.omp");
    op.set_cost(roi_pool_fwd_cost);
    op.make_case = roi_cpu::make_roi_pool_fwd_case;
    op.set_shape_fields(roi_cpu::roi_pool_shape_fields());
    op.add_test_shapes(roi_cpu::roi_pool_shapes());
    op.small_enough_for_simt = roi_cpu::roi_pool_simt_small;
  }
  {
    auto& op = r.op<RoiPoolBwdArgs>("roi_pool_bwd");
    op.description = "RoIPool gradient: dx = 0, dx[argmax] += dy";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, roi_pool_bwd_cpu_ref, dt});
    op.add({"cpu.omp", Backend::CPU, Provider::Own, roi_pool_bwd_cpu_omp, dt});
    op.set_default(Backend::CPU, "cpu.omp");
    op.set_cost(roi_pool_bwd_cost);
    op.make_case = roi_cpu::make_roi_pool_bwd_case;
    op.set_shape_fields(roi_cpu::roi_pool_shape_fields());
    op.add_test_shapes(roi_cpu::roi_pool_shapes());
    op.small_enough_for_simt = roi_cpu::roi_pool_simt_small;
  }
}

}  // namespace aim::kernels
