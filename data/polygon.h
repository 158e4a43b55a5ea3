// Plane polygons for text detection (issue 21, docs/seglink.md): area, intersection area and IoU
// of word quadrilaterals, as the ICDAR 2015 evaluation (data/icdar_eval.h) and SegLink's rotated
// boxes (models/detection/rbox.h) need them. Lives in data/ because the metric does (data/ may
// not call models/).
//
// A polygon's region is the even-odd interior of its vertex loop, which is what the GPC clipper
// behind the ICDAR script's Polygon3 computes for `&`. A region is written as a weighted sum of
// convex pieces (indicator functions, equal almost everywhere), each piece the intersection of
// one or two convex polygons of the input's own vertices:
//   convex polygon:          1 * itself
//   any other quadrilateral: with the fan triangles T1 = (p0 p1 p2), T2 = (p0 p2 p3), the
//                            even-odd region is T1 xor T2 = 1 * T1 + 1 * T2 - 2 * (T1 n T2)
//                            (concave, self-intersecting "bow-tie" and degenerate loops alike).
// The intersection area of two regions is then the weighted sum over piece pairs of
// Sutherland-Hodgman clips of one piece's first polygon by all the others, exact in area because
// every clipping polygon is convex. Clipping only ever by input polygons (never by a computed
// one, whose near-collinear vertices may turn the wrong way under rounding) keeps it so. Non-convex
// polygons of more than 4 vertices are refused (no metric here needs them). Double precision;
// either vertex order (clockwise or not) is accepted.
#pragma once
#include <vector>

namespace aim::data {

struct Point2 {
  double x = 0, y = 0;
};
using Polygon = std::vector<Point2>;

// The 8 numbers x1, y1, ..., x4, y4 of a quadrilateral as a polygon.
Polygon quad_polygon(const double* xy8);

// Shoelace area: positive when the vertices turn counter-clockwise in a y-up frame (clockwise
// as seen on an image, whose y axis points down).
double signed_area(const Polygon& p);
// Whether the loop is convex: one turning direction, no reversal, at least 3 distinct vertices.
bool is_convex(const Polygon& p);

struct ConvexPiece {
  std::vector<Polygon> sets;  // the piece is their intersection; each convex, counter-clockwise
  double weight = 1;
};
// The region as sum(weight * indicator(piece)), see above. Throws aim::Error for a non-convex
// polygon of more than 4 vertices.
std::vector<ConvexPiece> convex_pieces(const Polygon& p);
// Sutherland-Hodgman: the part of `subject` inside `convex`, which must be convex and
// counter-clockwise (a polygon of a piece of convex_pieces).
Polygon clip_to_convex(const Polygon& subject, const Polygon& convex);

// The area of the polygon's region.
double polygon_area(const Polygon& p);
double intersection_area(const Polygon& a, const Polygon& b);
// intersection / union; 0 when the union has no area (the ICDAR script's guard).
double polygon_iou(const Polygon& a, const Polygon& b);

}  // namespace aim::data
