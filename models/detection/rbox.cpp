#include "models/detection/rbox.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tensor/check.h"

namespace aim::models::detection {
namespace {

std::string quad_text(const double* q) {
  return str("(", q[0], ", ", q[1], ", ", q[2], ", ", q[3], ", ", q[4], ", ", q[5], ", ", q[6],
             ", ", q[7], ")");
}

// Distance of p from the line through a and b (a != b).
double line_distance(double px, double py, double ax, double ay, double bx, double by) {
  const double dx = bx - ax, dy = by - ay;
  return std::fabs((px - ax) * dy - (py - ay) * dx) / std::hypot(dx, dy);
}

// How far the ray from (x, y) along (dx, dy) (a unit vector) runs inside the rectangle; infinite
// when (x, y) is outside it (the reference then leaves the box alone).
double ray_in_rect(double x, double y, double dx, double dy, double x1, double y1, double x2,
                   double y2) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (x < x1 || x > x2 || y < y1 || y > y2) return kInf;
  double t = kInf;
  if (dx > 0) t = std::min(t, (x2 - x) / dx);
  if (dx < 0) t = std::min(t, (x1 - x) / dx);
  if (dy > 0) t = std::min(t, (y2 - y) / dy);
  if (dy < 0) t = std::min(t, (y1 - y) / dy);
  return t;
}

}  // namespace

std::array<double, 8> rbox_to_quad(const RBox& r) {
  const double c = std::cos(r.theta), s = std::sin(r.theta);
  const double ux = c * r.w / 2, uy = s * r.w / 2;   // half width along u
  const double vx = -s * r.h / 2, vy = c * r.h / 2;  // half height along v
  return {r.cx - ux - vx, r.cy - uy - vy, r.cx + ux - vx, r.cy + uy - vy,
          r.cx + ux + vx, r.cy + uy + vy, r.cx - ux + vx, r.cy - uy + vy};
}

RBox quad_to_rbox(const double* q, const std::string& what) {
  for (int k = 0; k < 8; ++k)
    AIM_CHECK(std::isfinite(q[k]), "[quad_to_rbox] ", what, " has a coordinate that is not ",
              "finite: ", quad_text(q));
  const double xtl = q[0], ytl = q[1], xtr = q[2], ytr = q[3];
  const double xbr = q[4], ybr = q[5], xbl = q[6], ybl = q[7];
  const double top = std::hypot(xtr - xtl, ytr - ytl), bottom = std::hypot(xbr - xbl, ybr - ybl);
  AIM_CHECK(top > 0 && bottom > 0, "[quad_to_rbox] ", what, " is degenerate: its top (1-2) or ",
            "bottom (4-3) side has length 0: ", quad_text(q));
  RBox r;
  r.cx = (xtl + xtr + xbr + xbl) / 4;
  r.cy = (ytl + ytr + ybr + ybl) / 4;
  r.w = (top + bottom) / 2;
  r.h =
      line_distance(r.cx, r.cy, xtl, ytl, xtr, ytr) + line_distance(r.cx, r.cy, xbl, ybl, xbr, ybr);
  AIM_CHECK(r.h > 0, "[quad_to_rbox] ", what, " is degenerate: it has no height: ", quad_text(q));
  // The plain mean of the two angles, as the reference: when they straddle +-pi it is off by pi,
  // which is the same rectangle read the other way round.
  r.theta = (std::atan2(ytr - ytl, xtr - xtl) + std::atan2(ybr - ybl, xbr - xbl)) / 2;
  return r;
}

RBox clip_rbox(const RBox& r, double x1, double y1, double x2, double y2) {
  const double c = std::cos(r.theta), s = std::sin(r.theta), half = r.w / 2;
  const double fwd = ray_in_rect(r.cx, r.cy, c, s, x1, y1, x2, y2);
  const double back = ray_in_rect(r.cx, r.cy, -c, -s, x1, y1, x2, y2);
  RBox out = r;
  out.w = std::min(half, fwd) + std::min(half, back);
  // The middle of the kept part [-min(half, back), min(half, fwd)] along u.
  const double move = 0.5 * (std::min(half, fwd) - std::min(half, back));
  out.cx = r.cx + c * move;
  out.cy = r.cy + s * move;
  return out;
}

bool rbox_contains(const RBox& r, double x, double y, double* du, double* dv) {
  const double c = std::cos(r.theta), s = std::sin(r.theta);
  const double u = std::fabs((r.cx - x) * c + (r.cy - y) * s);
  const double v = std::fabs(-(r.cx - x) * s + (r.cy - y) * c);
  if (du) *du = u;
  if (dv) *dv = v;
  return u < r.w / 2 && v < r.h / 2;
}

}  // namespace aim::models::detection
