// data/polygon.h and data/icdar_eval.h: polygon areas and intersections by hand (squares, a
// regular octagon, a concave dart, a bow-tie's even-odd region), against exact vertical-slab
// areas and shapely (when /usr/bin/python3 has it) from tests/peers/seglink_parts.py and against a
// fine raster count (always); the ICDAR 2015 rules on hand-made images (IoU exactly 0.5, greedy
// first-come matching, don't-care words and detections, images without care words); random
// images against the peer's port of the Robust Reading Competition's script.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "data/icdar_eval.h"
#include "data/polygon.h"
#include "tests/support/common.h"

namespace aim::data {
namespace {

using nlohmann::json;

Polygon rect(double x1, double y1, double x2, double y2) {
  return {{x1, y1}, {x2, y1}, {x2, y2}, {x1, y2}};
}

IcdarQuad quad_of(const Polygon& p) {
  IcdarQuad q{};
  for (size_t k = 0; k < 4; ++k) q[2 * k] = p[k].x, q[2 * k + 1] = p[k].y;
  return q;
}

IcdarWord word(const Polygon& p, bool dont_care = false) {
  IcdarWord w;
  w.quad = quad_of(p);
  w.dont_care = dont_care;
  w.text = dont_care ? "###" : "word";
  return w;
}

TEST(IcdarEval, PolygonAreasByHand) {
  EXPECT_DOUBLE_EQ(polygon_area(rect(0, 0, 4, 3)), 12);
  // Both vertex orders, and a repeated vertex.
  Polygon cw = rect(0, 0, 4, 3);
  std::reverse(cw.begin(), cw.end());
  EXPECT_DOUBLE_EQ(polygon_area(cw), 12);
  EXPECT_DOUBLE_EQ(polygon_area({{0, 0}, {4, 0}, {4, 0}, {4, 3}, {0, 3}}), 12);
  EXPECT_DOUBLE_EQ(intersection_area(rect(0, 0, 4, 3), rect(2, 1, 10, 10)), 4);
  EXPECT_DOUBLE_EQ(polygon_iou(rect(0, 0, 4, 3), rect(2, 1, 10, 10)), 4.0 / (12 + 72 - 4));
  EXPECT_EQ(intersection_area(rect(0, 0, 1, 1), rect(1, 0, 2, 1)), 0);  // touching
  // The square [-1, 1]^2 and itself turned by 45 degrees: a regular octagon of inradius 1.
  const double r = std::sqrt(2.0);
  const Polygon diamond = {{0, -r}, {r, 0}, {0, r}, {-r, 0}};
  EXPECT_NEAR(intersection_area(rect(-1, -1, 1, 1), diamond), 8 * (std::sqrt(2.0) - 1), 1e-12);
  // A concave dart (reflex vertex at (2, 1)): the triangle (0, 0) (4, 0) (2, 4) of area 8 less
  // the notch (0, 0) (2, 1) (4, 0) of area 2; its part within y <= 1: the triangle's slice
  // (integral of 4 - y over [0, 1] = 3.5) less the whole notch.
  const Polygon dart = {{0, 0}, {2, 1}, {4, 0}, {2, 4}};
  EXPECT_FALSE(is_convex(dart));
  EXPECT_DOUBLE_EQ(polygon_area(dart), 6);
  EXPECT_NEAR(intersection_area(dart, rect(0, 0, 4, 1)), 1.5, 1e-12);
  // A bow-tie (its sides 1-2 and 3-4 cross at (1, 1)): the even-odd region is two triangles of
  // area 1 each (the shoelace would give 0).
  const Polygon bow = {{0, 0}, {2, 2}, {2, 0}, {0, 2}};
  EXPECT_NEAR(signed_area(bow), 0, 1e-15);
  EXPECT_DOUBLE_EQ(polygon_area(bow), 2);
  EXPECT_DOUBLE_EQ(intersection_area(bow, rect(0, 0, 1, 2)), 1);
  // Below y = 0.5: a triangle of 0.125 from each lobe.
  EXPECT_DOUBLE_EQ(intersection_area(bow, rect(0, 0, 2, 0.5)), 0.125 + 0.125);
  // Degenerate: no area, IoU 0 (the script's guard on a zero union).
  const Polygon line = {{0, 0}, {1, 1}, {2, 2}, {3, 3}};
  EXPECT_EQ(polygon_area(line), 0);
  EXPECT_EQ(polygon_iou(line, line), 0);
  EXPECT_TRUE(is_convex(rect(0, 0, 1, 1)));
  AIM_EXPECT_ERROR(polygon_area({{0, 0}, {4, 0}, {4, 4}, {2, 1}, {0, 4}}),
                   "non-convex polygons of more than 4 vertices are not supported, got 5");
}

// Random quadrilaterals of every kind: rectangles at any angle, jittered (mostly convex), darts,
// bow-ties.
std::vector<Polygon> random_polygons(std::mt19937_64& rng, int n) {
  auto uni = [&](double lo, double hi) {
    return lo + (hi - lo) * double(rng() >> 11) * (1.0 / 9007199254740992.0);
  };
  std::vector<Polygon> out;
  for (int i = 0; i < n; ++i) {
    const double cx = uni(20, 80), cy = uni(20, 80), w = uni(5, 60), h = uni(3, 30),
                 t = uni(-M_PI, M_PI);
    const double c = std::cos(t), s = std::sin(t);
    Polygon p;
    for (auto [a, b] : {std::pair{-1, -1}, {1, -1}, {1, 1}, {-1, 1}})
      p.push_back({cx + c * a * w / 2 - s * b * h / 2, cy + s * a * w / 2 + c * b * h / 2});
    const int kind = i % 4;
    if (kind == 1)
      for (Point2& v : p) v.x += uni(-0.3, 0.3) * h, v.y += uni(-0.3, 0.3) * h;
    if (kind == 2) p[1] = {0.2 * p[0].x + 0.8 * p[2].x + uni(-2, 2), 0.2 * p[0].y + 0.8 * p[2].y};
    if (kind == 3) std::swap(p[1], p[2]);
    out.push_back(p);
  }
  return out;
}

TEST(IcdarEval, PolygonsMatchSlabAreasShapelyAndRaster) {
  std::mt19937_64 rng(3);
  const std::vector<Polygon> polys = random_polygons(rng, 160);
  std::vector<std::pair<Polygon, Polygon>> pairs;
  for (size_t i = 0; i + 1 < polys.size(); i += 2) pairs.push_back({polys[i], polys[i + 1]});
  // Always: a raster count on a 0.05 px grid over [0, 100]^2 (even-odd point-in-polygon), within
  // 0.5 px^2 (the grid's error along the boundaries of two polygons of <= 180 px perimeter).
  auto inside = [](const Polygon& p, double x, double y) {
    bool in = false;
    for (size_t i = 0, j = p.size() - 1; i < p.size(); j = i++)
      if ((p[i].y > y) != (p[j].y > y) &&
          x < (p[j].x - p[i].x) * (y - p[i].y) / (p[j].y - p[i].y) + p[i].x)
        in = !in;
    return in;
  };
  double worst_raster = 0;
  for (size_t k = 0; k < 24; ++k) {
    const auto& [a, b] = pairs[k];
    double count = 0;
    const double step = 0.05;
    for (double y = step / 2; y < 100; y += step)
      for (double x = step / 2; x < 100; x += step) count += inside(a, x, y) && inside(b, x, y);
    const double raster = count * step * step, exact = intersection_area(a, b);
    worst_raster = std::max(worst_raster, std::fabs(raster - exact));
    EXPECT_NEAR(exact, raster, 0.5) << "pair " << k;
  }
  std::printf("[polygon] raster vs exact intersection: worst %.4f px^2 over 24 pairs\n",
              worst_raster);

  AIM_REQUIRE_PYTHON_MODULE("numpy");
  json in;
  in["pairs"] = json::array();
  for (const auto& [a, b] : pairs) {
    json ja = json::array(), jb = json::array();
    for (const Point2& v : a) ja.push_back({v.x, v.y});
    for (const Point2& v : b) jb.push_back({v.x, v.y});
    in["pairs"].push_back({ja, jb});
  }
  const std::string dir = ::aim::testing::make_temp_dir("aim_polygons");
  std::ofstream(dir + "/in.json") << in.dump();
  const std::string cmd =
      std::string(::aim::testing::kPython) + " " + ::aim::testing::source_root() +
      "/tests/peers/seglink_parts.py polygons " + dir + "/in.json " + dir + "/out.json";
  ASSERT_EQ(::aim::testing::run_command(cmd), 0) << cmd;
  json out;
  std::ifstream(dir + "/out.json") >> out;
  ::aim::testing::run_command("rm -rf " + dir);
  int shapely = 0, overlapping = 0;
  for (size_t k = 0; k < pairs.size(); ++k) {
    const auto& [a, b] = pairs[k];
    const double inter = intersection_area(a, b);
    EXPECT_NEAR(polygon_area(a), out["area_a"][k].get<double>(), 1e-9) << "pair " << k;
    EXPECT_NEAR(polygon_area(b), out["area_b"][k].get<double>(), 1e-9) << "pair " << k;
    EXPECT_NEAR(inter, out["inter"][k].get<double>(), 1e-9) << "pair " << k;
    overlapping += inter > 0;
    if (!out["inter_shapely"][k].is_null()) {
      ++shapely;
      EXPECT_NEAR(inter, out["inter_shapely"][k].get<double>(), 1e-9) << "pair " << k;
    }
  }
  EXPECT_GT(overlapping, 10);
  std::printf(
      "[polygon] %zu pairs (%d overlapping) equal to the slab areas; %d also to shapely%s\n",
      pairs.size(), overlapping, shapely, shapely ? "" : " (not installed: python3-shapely)");
}

// Words 0, 1, 2 cared for, word 3 "###".
TEST(IcdarEval, RulesOnHandMadeImages) {
  const std::vector<IcdarWord> gt = {word(rect(0, 0, 10, 10)), word(rect(20, 0, 30, 10)),
                                     word(rect(40, 0, 50, 10)),
                                     word(rect(100, 100, 140, 110), true)};
  // det 0: word 0 at IoU 100/150 (matched); det 1: word 1 at IoU exactly 0.5 (not > 0.5);
  // det 2: word 2 at IoU 0.6; det 3: word 2 too at IoU 1 but word 2 is taken (first come);
  // det 4: all of it on the don't-care word (not counted); det 5: 40% on it (a false positive).
  const std::vector<IcdarQuad> dets = {
      quad_of(rect(0, 0, 10, 15)),       quad_of(rect(20, 0, 30, 20)),
      quad_of(rect(40, 0, 50, 6)),       quad_of(rect(40, 0, 50, 10)),
      quad_of(rect(130, 100, 140, 110)), quad_of(rect(136, 100, 146, 110))};
  const IcdarImageResult r = icdar_evaluate_image(gt, dets);
  EXPECT_EQ(r.pairs, (std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {2, 2}}));
  EXPECT_EQ(r.dont_care_detections, (std::vector<int64_t>{4}));
  EXPECT_EQ(r.gt_care, 3);
  EXPECT_EQ(r.det_care, 5);
  EXPECT_EQ(r.matched, 2);
  EXPECT_DOUBLE_EQ(r.recall, 2.0 / 3);
  EXPECT_DOUBLE_EQ(r.precision, 2.0 / 5);
  EXPECT_DOUBLE_EQ(r.hmean, 2 * (2.0 / 3) * (2.0 / 5) / (2.0 / 3 + 2.0 / 5));
  // Greedy, not best: det 0 (IoU 0.55 with word 0) is met before det 1 (IoU 1).
  const IcdarImageResult g = icdar_evaluate_image(
      {word(rect(0, 0, 10, 10))}, {quad_of(rect(0, 0, 10, 18)), quad_of(rect(0, 0, 10, 10))});
  EXPECT_EQ(g.pairs, (std::vector<std::pair<int64_t, int64_t>>{{0, 0}}));
  // Only don't-care words: recall 1, precision 1 without care detections, else 0.
  const std::vector<IcdarWord> only_dc = {word(rect(0, 0, 10, 10), true)};
  const IcdarImageResult e1 = icdar_evaluate_image(only_dc, {quad_of(rect(0, 0, 10, 10))});
  EXPECT_EQ(e1.recall, 1);
  EXPECT_EQ(e1.precision, 1);
  const IcdarImageResult e2 = icdar_evaluate_image(only_dc, {quad_of(rect(50, 50, 60, 60))});
  EXPECT_EQ(e2.recall, 1);
  EXPECT_EQ(e2.precision, 0);
  EXPECT_EQ(e2.hmean, 0);
  // Care words, no detections: precision 0.
  const IcdarImageResult e3 = icdar_evaluate_image(gt, {});
  EXPECT_EQ(e3.recall, 0);
  EXPECT_EQ(e3.precision, 0);

  // Totals: sums of matched and care counts over the images, not means of their ratios.
  const IcdarEvalResult t = icdar_evaluate({gt, only_dc, {word(rect(0, 0, 5, 5))}},
                                           {dets, {quad_of(rect(50, 50, 60, 60))}, {}});
  EXPECT_EQ(t.matched, 2);
  EXPECT_EQ(t.gt_care, 4);
  EXPECT_EQ(t.det_care, 6);
  EXPECT_DOUBLE_EQ(t.recall, 0.5);
  EXPECT_DOUBLE_EQ(t.precision, 2.0 / 6);
  EXPECT_DOUBLE_EQ(t.hmean, 2 * 0.5 * (2.0 / 6) / (0.5 + 2.0 / 6));
  AIM_EXPECT_ERROR(icdar_evaluate({gt}, {}), "ground truth for 1 images but detections for 0");
}

TEST(IcdarEval, MatchesThePortOfTheOfficialScript) {
  AIM_REQUIRE_PYTHON_MODULE("numpy");
  std::mt19937_64 rng(21);
  auto uni = [&](double lo, double hi) {
    return lo + (hi - lo) * double(rng() >> 11) * (1.0 / 9007199254740992.0);
  };
  std::vector<std::vector<IcdarWord>> gts;
  std::vector<std::vector<IcdarQuad>> dets;
  json in;
  in["images"] = json::array();
  for (int im = 0; im < 30; ++im) {
    const std::vector<Polygon> words = random_polygons(rng, int(rng() % 7));
    std::vector<IcdarWord> g;
    std::vector<IcdarQuad> d;
    for (size_t k = 0; k < words.size(); ++k) {
      if (k % 4 == 3) continue;  // bow-ties: Polygon3's area() would not be their even-odd area
      g.push_back(word(words[k], rng() % 5 == 0));
      // Detections: the word jittered (a little or a lot), sometimes twice; plus strays.
      const int copies = int(rng() % 3);
      for (int c = 0; c < copies; ++c) {
        Polygon p = words[k];
        const double j = c == 0 ? 2 : 8;
        for (Point2& v : p) v.x += uni(-j, j), v.y += uni(-j, j);
        d.push_back(quad_of(p));
      }
    }
    if (rng() % 2) d.push_back(quad_of(rect(uni(0, 80), uni(0, 80), uni(85, 99), uni(85, 99))));
    json ji;
    ji["gt"] = json::array(), ji["dets"] = json::array(), ji["dont_care"] = json::array();
    for (const IcdarWord& w : g)
      ji["gt"].push_back(w.quad), ji["dont_care"].push_back(w.dont_care ? 1 : 0);
    for (const IcdarQuad& q : d) ji["dets"].push_back(q);
    in["images"].push_back(ji);
    gts.push_back(g);
    dets.push_back(d);
  }
  const std::string dir = ::aim::testing::make_temp_dir("aim_icdar_eval");
  std::ofstream(dir + "/in.json") << in.dump();
  const std::string cmd = std::string(::aim::testing::kPython) + " " +
                          ::aim::testing::source_root() + "/tests/peers/seglink_parts.py icdar " +
                          dir + "/in.json " + dir + "/out.json";
  ASSERT_EQ(::aim::testing::run_command(cmd), 0) << cmd;
  json out;
  std::ifstream(dir + "/out.json") >> out;
  ::aim::testing::run_command("rm -rf " + dir);
  const IcdarEvalResult r = icdar_evaluate(gts, dets);
  for (size_t i = 0; i < gts.size(); ++i) {
    SCOPED_TRACE("image " + std::to_string(i));
    const json& o = out["images"][i];
    const IcdarImageResult& x = r.images[i];
    for (size_t g = 0; g < gts[i].size(); ++g)
      for (size_t d = 0; d < dets[i].size(); ++d)
        EXPECT_NEAR(
            polygon_iou(quad_polygon(dets[i][d].data()), quad_polygon(gts[i][g].quad.data())),
            o["iou"][g][d].get<double>(), 1e-9);
    std::vector<std::pair<int64_t, int64_t>> pairs;
    for (const auto& p : o["pairs"]) pairs.push_back({p[0].get<int64_t>(), p[1].get<int64_t>()});
    EXPECT_EQ(x.pairs, pairs);
    EXPECT_EQ(x.dont_care_detections, o["dont_care_dets"].get<std::vector<int64_t>>());
    EXPECT_EQ(x.gt_care, o["gt_care"].get<int64_t>());
    EXPECT_EQ(x.det_care, o["det_care"].get<int64_t>());
    EXPECT_NEAR(x.precision, o["precision"].get<double>(), 1e-12);
    EXPECT_NEAR(x.recall, o["recall"].get<double>(), 1e-12);
    EXPECT_NEAR(x.hmean, o["hmean"].get<double>(), 1e-12);
  }
  EXPECT_EQ(r.matched, out["matched"].get<int64_t>());
  EXPECT_NEAR(r.precision, out["precision"].get<double>(), 1e-12);
  EXPECT_NEAR(r.recall, out["recall"].get<double>(), 1e-12);
  EXPECT_NEAR(r.hmean, out["hmean"].get<double>(), 1e-12);
  int64_t dc_dets = 0;
  for (const IcdarImageResult& x : r.images) dc_dets += int64_t(x.dont_care_detections.size());
  std::printf(
      "[icdar eval vs script port] %lld care words, %lld care detections (%lld don't-care), "
      "%lld matched: P %.4f R %.4f H %.4f\n",
      (long long)r.gt_care, (long long)r.det_care, (long long)dc_dets, (long long)r.matched,
      r.precision, r.recall, r.hmean);
  EXPECT_GT(r.matched, 10);
  EXPECT_GT(dc_dets, 0);
}

}  // namespace
}  // namespace aim::data
