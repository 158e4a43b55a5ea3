#include "data/coco_mask.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "tensor/check.h"

// Bit-identical to maskApi.c (compiled without FMA): no a * b + c fused into one rounding here
// (GCC contracts in C++ whatever -std says, and the build targets x86-64-v3, which has FMA).
#pragma GCC optimize("fp-contract=off")

namespace aim::data {
namespace {

// maskApi works in 32-bit unsigned positions; keep an image well inside them.
constexpr int64_t kMaxPixels = int64_t(1) << 31;
constexpr double kMaxCoord = 1e6;

void check_size(int64_t h, int64_t w, const std::string& what) {
  AIM_CHECK(h >= 0 && w >= 0 && h * w < kMaxPixels, what, ": mask size ", h, "x", w,
            " is negative or too large");
}

// bbIou's test for one pair: do the boxes [x, y, w, h] overlap (positive IoU)?
bool boxes_overlap(const std::array<double, 4>& d, const std::array<double, 4>& g) {
  const double w = std::fmin(d[2] + d[0], g[2] + g[0]) - std::fmax(d[0], g[0]);
  if (w <= 0) return false;
  const double h = std::fmin(d[3] + d[1], g[3] + g[1]) - std::fmax(d[1], g[1]);
  return h > 0;
}

}  // namespace

void coco_rle_check(const CocoRle& r, const std::string& what) {
  check_size(r.h, r.w, what);
  uint64_t sum = 0;
  for (uint32_t c : r.counts) sum += c;
  AIM_CHECK(sum == uint64_t(r.h * r.w), what, ": the counts sum to ", sum, ", not h * w = ", r.h,
            " * ", r.w, " = ", r.h * r.w);
}

CocoRle coco_rle_encode(const uint8_t* mask, int64_t h, int64_t w) {
  check_size(h, w, "coco_rle_encode");
  CocoRle r;
  r.h = h, r.w = w;
  uint8_t prev = 0;
  uint32_t run = 0;
  for (int64_t x = 0; x < w; ++x)
    for (int64_t y = 0; y < h; ++y) {
      const uint8_t v = mask[y * w + x] != 0;
      if (v != prev) r.counts.push_back(run), run = 0, prev = v;
      ++run;
    }
  r.counts.push_back(run);
  return r;
}

CocoRle coco_rle_encode(const std::vector<uint8_t>& mask, int64_t h, int64_t w) {
  check_size(h, w, "coco_rle_encode");
  AIM_CHECK(int64_t(mask.size()) == h * w, "coco_rle_encode: mask has ", mask.size(),
            " pixels, expected h * w = ", h * w);
  return coco_rle_encode(mask.data(), h, w);
}

std::vector<uint8_t> coco_rle_decode(const CocoRle& r) {
  coco_rle_check(r, "coco_rle_decode");
  std::vector<uint8_t> m(size_t(r.h * r.w), 0);
  int64_t pos = 0;
  for (size_t i = 0; i < r.counts.size(); ++i) {
    if (i % 2 == 1)
      for (int64_t p = pos; p < pos + int64_t(r.counts[i]); ++p)
        m[size_t((p % r.h) * r.w + p / r.h)] = 1;  // column-major p -> row-major
    pos += r.counts[i];
  }
  return m;
}

std::string coco_rle_to_string(const CocoRle& r) {
  std::string s;
  for (size_t i = 0; i < r.counts.size(); ++i) {
    int64_t x = int64_t(r.counts[i]);
    if (i > 2) x -= int64_t(r.counts[i - 2]);  // the delta coding starts at the fourth count
    bool more = true;
    while (more) {
      char c = char(x & 0x1f);
      x >>= 5;  // arithmetic: the sign carries over
      more = (c & 0x10) ? x != -1 : x != 0;
      if (more) c = char(c | 0x20);
      s.push_back(char(c + 48));
    }
  }
  return s;
}

CocoRle coco_rle_from_string(const std::string& s, int64_t h, int64_t w, const std::string& what) {
  check_size(h, w, what);
  CocoRle r;
  r.h = h, r.w = w;
  size_t p = 0;
  while (p < s.size()) {
    const size_t start = p;
    int64_t x = 0;
    int k = 0;
    bool more = true;
    while (more) {
      AIM_CHECK(p < s.size(), what, ": counts string ends inside count ", r.counts.size(),
                " (started at character ", start, ")");
      const int c = int(static_cast<unsigned char>(s[p])) - 48;
      AIM_CHECK(c >= 0 && c < 64, what, ": counts character ", p, " ('", s[p],
                "') is outside '0'..'o'");
      AIM_CHECK(k < 7, what, ": count ", r.counts.size(), " (from character ", start,
                ") has more than 7 groups");
      x |= int64_t(c & 0x1f) << (5 * k);
      more = (c & 0x20) != 0;
      ++p, ++k;
      if (!more && (c & 0x10)) x |= int64_t(-1) * (int64_t(1) << (5 * k));  // sign extension
    }
    const size_t m = r.counts.size();
    if (m > 2) x += int64_t(r.counts[m - 2]);
    AIM_CHECK(x >= 0 && x <= int64_t(UINT32_MAX), what, ": count ", m, " (from character ", start,
              ") decodes to ", x);
    r.counts.push_back(uint32_t(x));
  }
  return r;
}

CocoRle coco_rle_from_polygon(const std::vector<double>& xy, int64_t h, int64_t w,
                              const std::string& what) {
  check_size(h, w, what);
  AIM_CHECK(h > 0 && w > 0, what, ": image size ", h, "x", w, " must be positive");
  AIM_CHECK(!xy.empty() && xy.size() % 2 == 0, what, ": ", xy.size(),
            " coordinates, expected a positive even number (x, y pairs)");
  for (size_t i = 0; i < xy.size(); ++i)
    AIM_CHECK(std::fabs(xy[i]) <= kMaxCoord, what, ": coordinate ", i, " = ", xy[i],
              " is not a number within +-", kMaxCoord);
  // The vertices on a grid 5x finer than the pixels, closed.
  const double scale = 5;
  const size_t k = xy.size() / 2;
  std::vector<int> vx(k + 1), vy(k + 1);
  for (size_t j = 0; j < k; ++j) {
    vx[j] = int(scale * xy[2 * j] + 0.5);  // C's truncating conversion, as maskApi
    vy[j] = int(scale * xy[2 * j + 1] + 0.5);
  }
  vx[k] = vx[0], vy[k] = vy[0];
  // Every grid point along the edges (one per step of the longer axis), in edge order.
  std::vector<int> u, v;
  for (size_t j = 0; j < k; ++j) {
    int xs = vx[j], xe = vx[j + 1], ys = vy[j], ye = vy[j + 1];
    const int dx = std::abs(xe - xs), dy = std::abs(ys - ye);
    const bool flip = (dx >= dy && xs > xe) || (dx < dy && ys > ye);
    if (flip) std::swap(xs, xe), std::swap(ys, ye);
    if (dx == 0 && dy == 0) {  // a repeated vertex: maskApi's 0/0 slope; the point never counts
      u.push_back(xs), v.push_back(ys);
      continue;
    }
    // The points are walked from the original start even when flipped: the slope is taken from
    // the swapped ends so that rounding is the same for an edge and its reverse.
    if (dx >= dy) {
      const double s = double(ye - ys) / double(dx);
      for (int d = 0; d <= dx; ++d) {
        const int t = flip ? dx - d : d;
        u.push_back(t + xs);
        v.push_back(int(double(ys) + s * double(t) + 0.5));
      }
    } else {
      const double s = double(xe - xs) / double(dy);
      for (int d = 0; d <= dy; ++d) {
        const int t = flip ? dy - d : d;
        v.push_back(t + ys);
        u.push_back(int(double(xs) + s * double(t) + 0.5));
      }
    }
  }
  // Where the boundary crosses from one grid column to the next on a pixel centre, the first
  // pixel of that column below the boundary starts or ends a run.
  std::vector<uint32_t> a;
  for (size_t j = 1; j < u.size(); ++j) {
    if (u[j] == u[j - 1]) continue;
    double xd = double(u[j] < u[j - 1] ? u[j] : u[j] - 1);
    xd = (xd + 0.5) / scale - 0.5;
    if (std::floor(xd) != xd || xd < 0 || xd > double(w - 1)) continue;
    double yd = double(v[j] < v[j - 1] ? v[j] : v[j - 1]);
    yd = (yd + 0.5) / scale - 0.5;
    if (yd < 0)
      yd = 0;
    else if (yd > double(h))
      yd = double(h);
    yd = std::ceil(yd);
    a.push_back(uint32_t(int(xd) * int(h) + int(yd)));
  }
  a.push_back(uint32_t(h * w));
  std::sort(a.begin(), a.end());
  // Positions -> run lengths; two toggles at one position cancel (their runs join).
  uint32_t prev = 0;
  for (uint32_t& c : a) {
    const uint32_t t = c;
    c -= prev;
    prev = t;
  }
  CocoRle r;
  r.h = h, r.w = w;
  size_t j = 0;
  r.counts.push_back(a[j++]);
  while (j < a.size()) {
    if (a[j] > 0) {
      r.counts.push_back(a[j++]);
    } else {
      ++j;
      if (j < a.size()) r.counts.back() += a[j++];
    }
  }
  return r;
}

CocoRle coco_rle_from_bbox(const std::array<double, 4>& b, int64_t h, int64_t w) {
  const double xs = b[0], xe = b[0] + b[2], ys = b[1], ye = b[1] + b[3];
  return coco_rle_from_polygon({xs, ys, xs, ye, xe, ye, xe, ys}, h, w, "coco bbox");
}

CocoRle coco_rle_merge(const std::vector<CocoRle>& rles, bool intersect) {
  AIM_CHECK(!rles.empty(), "coco_rle_merge: no masks");
  for (size_t i = 0; i < rles.size(); ++i) {
    coco_rle_check(rles[i], "coco_rle_merge: mask " + std::to_string(i));
    AIM_CHECK(rles[i].h == rles[0].h && rles[i].w == rles[0].w, "coco_rle_merge: mask ", i, " is ",
              rles[i].h, "x", rles[i].w, ", mask 0 is ", rles[0].h, "x", rles[0].w);
  }
  CocoRle acc = rles[0];
  for (size_t i = 1; i < rles.size(); ++i) {
    const std::vector<uint32_t>& A = acc.counts;
    const std::vector<uint32_t>& B = rles[i].counts;
    std::vector<uint32_t> out;
    // Walk both run lists at once; a run of the result ends where its value changes.
    uint32_t ca = A[0], cb = B[0], cc = 0, rest = 1;
    size_t ia = 1, ib = 1;
    bool va = false, vb = false, v = false;
    while (rest > 0) {
      const uint32_t c = std::min(ca, cb);
      cc += c;
      rest = 0;
      ca -= c;
      if (!ca && ia < A.size()) ca = A[ia++], va = !va;
      rest += ca;
      cb -= c;
      if (!cb && ib < B.size()) cb = B[ib++], vb = !vb;
      rest += cb;
      const bool vp = v;
      v = intersect ? (va && vb) : (va || vb);
      if (v != vp || rest == 0) out.push_back(cc), cc = 0;
    }
    acc.counts = std::move(out);
  }
  return acc;
}

uint64_t coco_rle_area(const CocoRle& r) {
  uint64_t a = 0;
  for (size_t j = 1; j < r.counts.size(); j += 2) a += r.counts[j];
  return a;
}

std::array<double, 4> coco_rle_to_bbox(const CocoRle& r) {
  // maskApi's 32-bit unsigned arithmetic, kept so that odd RLEs give the same boxes.
  const uint32_t h = uint32_t(r.h), w = uint32_t(r.w);
  const size_t m = r.counts.size() / 2 * 2;  // a trailing run of zeros does not matter
  if (m == 0 || h == 0) return {0, 0, 0, 0};
  uint32_t xs = w, ys = h, xe = 0, ye = 0, cc = 0, xp = 0;
  for (size_t j = 0; j < m; ++j) {
    cc += r.counts[j];
    const uint32_t t = cc - uint32_t(j % 2);  // a run's first pixel, or the last one of ones
    const uint32_t y = t % h, x = (t - y) / h;
    if (j % 2 == 0)
      xp = x;
    else if (xp < x)
      ys = 0, ye = h - 1;  // the run of ones wraps into the next column
    xs = std::min(xs, x), xe = std::max(xe, x);
    ys = std::min(ys, y), ye = std::max(ye, y);
  }
  return {double(xs), double(ys), double(xe - xs + 1), double(ye - ys + 1)};
}

double coco_rle_iou(const CocoRle& dt, const CocoRle& gt, bool iscrowd) {
  AIM_CHECK(dt.h == gt.h && dt.w == gt.w, "coco_rle_iou: detection mask ", dt.h, "x", dt.w,
            ", ground truth ", gt.h, "x", gt.w);
  // maskApi skips the runs when the boxes do not overlap; the result is 0 either way.
  if (!boxes_overlap(coco_rle_to_bbox(dt), coco_rle_to_bbox(gt))) return 0;
  if (dt.counts.empty() || gt.counts.empty()) return 0;
  uint32_t ca = dt.counts[0], cb = gt.counts[0], inter = 0, uni = 0, rest = 1;
  size_t ia = 1, ib = 1;
  bool va = false, vb = false;
  while (rest > 0) {
    const uint32_t c = std::min(ca, cb);
    if (va || vb) {
      uni += c;
      if (va && vb) inter += c;
    }
    rest = 0;
    ca -= c;
    if (!ca && ia < dt.counts.size()) ca = dt.counts[ia++], va = !va;
    rest += ca;
    cb -= c;
    if (!cb && ib < gt.counts.size()) cb = gt.counts[ib++], vb = !vb;
    rest += cb;
  }
  if (inter == 0) return 0;
  if (iscrowd) uni = uint32_t(coco_rle_area(dt));
  return double(inter) / double(uni);
}

}  // namespace aim::data
