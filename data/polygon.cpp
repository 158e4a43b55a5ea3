#include "data/polygon.h"

#include <algorithm>
#include <cmath>

#include "tensor/check.h"

namespace aim::data {
namespace {

double cross(const Point2& o, const Point2& a, const Point2& b) {
  return (a.x - o.x) * (b.y - o.y) - (a.y - o.y) * (b.x - o.x);
}

// Consecutive repeated vertices (the closing one included) add no edge: drop them.
Polygon distinct(const Polygon& p) {
  Polygon q;
  for (const Point2& v : p)
    if (q.empty() || v.x != q.back().x || v.y != q.back().y) q.push_back(v);
  while (q.size() > 1 && q.back().x == q.front().x && q.back().y == q.front().y) q.pop_back();
  return q;
}

Polygon counter_clockwise(Polygon p) {
  if (signed_area(p) < 0) std::reverse(p.begin(), p.end());
  return p;
}

bool boxes_overlap(const Polygon& a, const Polygon& b) {
  auto bounds = [](const Polygon& p, double* lo_x, double* lo_y, double* hi_x, double* hi_y) {
    *lo_x = *hi_x = p[0].x, *lo_y = *hi_y = p[0].y;
    for (const Point2& v : p) {
      *lo_x = std::min(*lo_x, v.x), *hi_x = std::max(*hi_x, v.x);
      *lo_y = std::min(*lo_y, v.y), *hi_y = std::max(*hi_y, v.y);
    }
  };
  double ax0, ay0, ax1, ay1, bx0, by0, bx1, by1;
  bounds(a, &ax0, &ay0, &ax1, &ay1);
  bounds(b, &bx0, &by0, &bx1, &by1);
  return ax0 < bx1 && bx0 < ax1 && ay0 < by1 && by0 < ay1;
}

}  // namespace

Polygon quad_polygon(const double* xy8) {
  return {{xy8[0], xy8[1]}, {xy8[2], xy8[3]}, {xy8[4], xy8[5]}, {xy8[6], xy8[7]}};
}

double signed_area(const Polygon& p) {
  double s = 0;
  for (size_t i = 0, n = p.size(); i < n; ++i) {
    const Point2 &a = p[i], &b = p[(i + 1) % n];
    s += a.x * b.y - b.x * a.y;
  }
  return 0.5 * s;
}

bool is_convex(const Polygon& p) {
  const Polygon q = distinct(p);
  const size_t n = q.size();
  if (n < 3) return false;
  bool pos = false, neg = false;
  double turning = 0;
  for (size_t i = 0; i < n; ++i) {
    const Point2 &a = q[i], &b = q[(i + 1) % n], &c = q[(i + 2) % n];
    const double cr = cross(a, b, c);
    const double dot = (b.x - a.x) * (c.x - b.x) + (b.y - a.y) * (c.y - b.y);
    if (cr == 0 && dot < 0) return false;  // the loop turns back on itself
    pos = pos || cr > 0;
    neg = neg || cr < 0;
    turning += std::atan2(cr, dot);
  }
  // One turning direction and one turn in all (a star's loop turns twice).
  return pos != neg && std::fabs(turning) < 3 * M_PI;
}

std::vector<ConvexPiece> convex_pieces(const Polygon& p) {
  const Polygon q = distinct(p);
  if (q.size() < 3) return {};
  if (is_convex(q)) return {{{counter_clockwise(q)}, 1.0}};
  if (q.size() == 3) return {};  // not convex: its three points are on a line
  AIM_CHECK(q.size() == 4, "[polygon] non-convex polygons of more than 4 vertices are not ",
            "supported, got ", q.size(), " vertices");
  // Even-odd region of any 4-vertex loop: T1 xor T2 over the fan from vertex 0 (a point's
  // winding number is the sum of its signed windings in T1 and T2, each 0 or +-1).
  std::vector<ConvexPiece> out;
  const Polygon t1 = counter_clockwise({q[0], q[1], q[2]}),
                t2 = counter_clockwise({q[0], q[2], q[3]});
  const bool has1 = signed_area(t1) > 0, has2 = signed_area(t2) > 0;
  if (has1) out.push_back({{t1}, 1.0});
  if (has2) out.push_back({{t2}, 1.0});
  if (has1 && has2) out.push_back({{t1, t2}, -2.0});
  return out;
}

Polygon clip_to_convex(const Polygon& subject, const Polygon& convex) {
  Polygon out = subject;
  for (size_t e = 0, m = convex.size(); e < m && !out.empty(); ++e) {
    const Point2 &a = convex[e], &b = convex[(e + 1) % m];
    const Polygon in = std::move(out);
    out.clear();
    for (size_t j = 0, n = in.size(); j < n; ++j) {
      const Point2 &prev = in[(j + n - 1) % n], &cur = in[j];
      const double sp = cross(a, b, prev), sc = cross(a, b, cur);  // >= 0: inside (left of a->b)
      if ((sp >= 0) != (sc >= 0)) {
        const double t = sp / (sp - sc);
        out.push_back({prev.x + t * (cur.x - prev.x), prev.y + t * (cur.y - prev.y)});
      }
      if (sc >= 0) out.push_back(cur);
    }
  }
  return out;
}

namespace {

// The area of the intersection of the pieces' polygons (all convex): the first clipped by the rest.
double common_area(const std::vector<const Polygon*>& sets) {
  Polygon c = *sets[0];
  for (size_t k = 1; k < sets.size() && c.size() >= 3; ++k) c = clip_to_convex(c, *sets[k]);
  return c.size() >= 3 ? signed_area(c) : 0.0;
}

}  // namespace

double polygon_area(const Polygon& p) {
  double s = 0;
  for (const ConvexPiece& c : convex_pieces(p)) {
    std::vector<const Polygon*> sets;
    for (const Polygon& q : c.sets) sets.push_back(&q);
    s += c.weight * common_area(sets);
  }
  return std::max(0.0, s);
}

double intersection_area(const Polygon& a, const Polygon& b) {
  if (a.size() < 3 || b.size() < 3 || !boxes_overlap(a, b)) return 0;
  const std::vector<ConvexPiece> pa = convex_pieces(a), pb = convex_pieces(b);
  double s = 0;
  for (const ConvexPiece& x : pa)
    for (const ConvexPiece& y : pb) {
      std::vector<const Polygon*> sets;
      for (const Polygon& q : x.sets) sets.push_back(&q);
      for (const Polygon& q : y.sets) sets.push_back(&q);
      s += x.weight * y.weight * common_area(sets);
    }
  return std::max(0.0, s);
}

double polygon_iou(const Polygon& a, const Polygon& b) {
  const double inter = intersection_area(a, b);
  const double uni = polygon_area(a) + polygon_area(b) - inter;
  return uni > 0 ? inter / uni : 0.0;
}

}  // namespace aim::data
