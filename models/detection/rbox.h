// Rotated boxes for SegLink (issue 21, docs/seglink.md; bgshih/seglink's utilities.h, its
// polygons_to_rboxes and clip_rboxes ops, utils.rboxes_to_polygons).
//
// An RBox is (cx, cy, w, h, theta) in pixels: theta is the angle of the width axis u = (cos, sin)
// from the image's x axis, so positive theta turns clockwise as seen on the image (y down); the
// height axis is v = (-sin, cos). Its quadrilateral's corners, clockwise on the image from the
// word's top left, are c - u w/2 - v h/2, c + u w/2 - v h/2, c + u w/2 + v h/2, c - u w/2 + v h/2
// (ICDAR 2015's order). Polygon area and IoU are data/polygon.h's.
#pragma once
#include <array>
#include <string>

namespace aim::models::detection {

struct RBox {
  double cx = 0, cy = 0, w = 0, h = 0, theta = 0;
};

// The corners x1, y1, ..., x4, y4 (reference: utils.rboxes_to_polygons).
std::array<double, 8> rbox_to_quad(const RBox& r);

// A word quadrilateral (corners clockwise from the top left) as an RBox (reference:
// polygon_to_rbox): centre = mean of the corners; w = mean length of the top (1-2) and bottom
// (4-3) sides; h = distance of the centre from the top side's line + from the bottom side's;
// theta = the mean of the top and bottom sides' angles (atan2). When those straddle +-pi (a word
// upside down) the mean is off by pi: the same rectangle, its reading direction reversed.
// Throws aim::Error naming `what` for a degenerate quadrilateral (a top or bottom side of length
// 0, no height) or a coordinate that is not finite.
RBox quad_to_rbox(const double* xy8, const std::string& what = "quad");

// Clips the box's width to the rectangle [x1, x2] x [y1, y2] along its own axis (reference:
// clip_rboxes): each half of the width is cut where the ray from the centre along +-u leaves the
// rectangle, and the centre moves to the middle of what remains; the height is kept. A box whose
// centre lies outside the rectangle is returned unchanged, as in the reference.
RBox clip_rbox(const RBox& r, double x1, double y1, double x2, double y2);

// Whether (x, y) lies strictly inside the box, and its distances from the box's centre along u
// and v (reference: point_inside_rbox).
bool rbox_contains(const RBox& r, double x, double y, double* du = nullptr, double* dv = nullptr);

}  // namespace aim::models::detection
