#include "models/detection/anchors.h"

#include <algorithm>

#include "tensor/check.h"

namespace aim::models::detection {
namespace {

// _whctrs and _mkanchors of generate_anchors.py.
void whctrs(const double* a, double& w, double& h, double& cx, double& cy) {
  w = a[2] - a[0] + 1, h = a[3] - a[1] + 1;
  cx = a[0] + 0.5 * (w - 1), cy = a[1] + 0.5 * (h - 1);
}
void mkanchor(double w, double h, double cx, double cy, std::vector<double>& out) {
  out.insert(out.end(),
             {cx - 0.5 * (w - 1), cy - 0.5 * (h - 1), cx + 0.5 * (w - 1), cy + 0.5 * (h - 1)});
}

}  // namespace

std::vector<double> generate_anchors(double base_size, const std::vector<double>& ratios,
                                     const std::vector<double>& scales) {
  AIM_CHECK(base_size > 0 && !ratios.empty() && !scales.empty(),
            "generate_anchors: base_size must be > 0 and ratios, scales non-empty");
  const double base[4] = {0, 0, base_size - 1, base_size - 1};
  double w, h, cx, cy;
  whctrs(base, w, h, cx, cy);
  std::vector<double> ratio_anchors;
  for (double r : ratios) {
    AIM_CHECK(r > 0, "generate_anchors: ratio ", r, " must be > 0");
    const double ws = std::nearbyint(std::sqrt(w * h / r)), hs = std::nearbyint(ws * r);
    mkanchor(ws, hs, cx, cy, ratio_anchors);
  }
  std::vector<double> out;
  for (size_t i = 0; i < ratios.size(); ++i) {
    double rw, rh, rcx, rcy;
    whctrs(ratio_anchors.data() + 4 * i, rw, rh, rcx, rcy);
    for (double s : scales) mkanchor(rw * s, rh * s, rcx, rcy, out);
  }
  return out;
}

std::vector<double> shift_anchors(const std::vector<double>& base, int64_t H, int64_t W,
                                  double stride) {
  const int64_t A = int64_t(base.size() / 4);
  std::vector<double> out(size_t(H * W * A * 4));
  double* o = out.data();
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x)
      for (int64_t a = 0; a < A; ++a, o += 4) {
        const double sx = double(x) * stride, sy = double(y) * stride;
        o[0] = base[size_t(4 * a)] + sx, o[1] = base[size_t(4 * a + 1)] + sy;
        o[2] = base[size_t(4 * a + 2)] + sx, o[3] = base[size_t(4 * a + 3)] + sy;
      }
  return out;
}

void bbox_transform(const double* ex, const double* gt, int64_t n, const BoxTransform& t,
                    double* out) {
  for (int64_t i = 0; i < n; ++i, ex += 4, gt += 4, out += 4) {
    const double ew = ex[2] - ex[0] + t.offset, eh = ex[3] - ex[1] + t.offset;
    const double ecx = ex[0] + 0.5 * ew, ecy = ex[1] + 0.5 * eh;
    const double gw = gt[2] - gt[0] + t.offset, gh = gt[3] - gt[1] + t.offset;
    const double gcx = gt[0] + 0.5 * gw, gcy = gt[1] + 0.5 * gh;
    out[0] = t.wx * ((gcx - ecx) / ew), out[1] = t.wy * ((gcy - ecy) / eh);
    out[2] = t.ww * std::log(gw / ew), out[3] = t.wh * std::log(gh / eh);
  }
}

void bbox_transform_inv(const double* boxes, const double* deltas, int64_t n, const BoxTransform& t,
                        double* out) {
  for (int64_t i = 0; i < n; ++i, boxes += 4, deltas += 4, out += 4) {
    const double w = boxes[2] - boxes[0] + t.offset, h = boxes[3] - boxes[1] + t.offset;
    const double cx = boxes[0] + 0.5 * w, cy = boxes[1] + 0.5 * h;
    const double dx = deltas[0] / t.wx, dy = deltas[1] / t.wy;
    const double dw = std::min(deltas[2] / t.ww, t.clamp), dh = std::min(deltas[3] / t.wh, t.clamp);
    const double pcx = dx * w + cx, pcy = dy * h + cy;
    const double pw = std::exp(dw) * w, ph = std::exp(dh) * h;
    out[0] = pcx - 0.5 * pw, out[1] = pcy - 0.5 * ph;
    out[2] = pcx + 0.5 * pw, out[3] = pcy + 0.5 * ph;
  }
}

void clip_boxes(double* boxes, int64_t n, double height, double width, double offset) {
  for (int64_t i = 0; i < n; ++i, boxes += 4) {
    boxes[0] = std::max(std::min(boxes[0], width - offset), 0.0);
    boxes[1] = std::max(std::min(boxes[1], height - offset), 0.0);
    boxes[2] = std::max(std::min(boxes[2], width - offset), 0.0);
    boxes[3] = std::max(std::min(boxes[3], height - offset), 0.0);
  }
}

std::vector<double> box_overlaps(const double* a, int64_t n, const double* b, int64_t m,
                                 double offset) {
  std::vector<double> iou(size_t(n * m), 0.0);
  for (int64_t j = 0; j < m; ++j) {
    const double* q = b + 4 * j;
    const double area_q = (q[2] - q[0] + offset) * (q[3] - q[1] + offset);
    for (int64_t i = 0; i < n; ++i) {
      const double* p = a + 4 * i;
      const double iw = std::min(p[2], q[2]) - std::max(p[0], q[0]) + offset;
      if (iw <= 0) continue;
      const double ih = std::min(p[3], q[3]) - std::max(p[1], q[1]) + offset;
      if (ih <= 0) continue;
      const double ua = (p[2] - p[0] + offset) * (p[3] - p[1] + offset) + area_q - iw * ih;
      iou[size_t(i * m + j)] = iw * ih / ua;
    }
  }
  return iou;
}

}  // namespace aim::models::detection
