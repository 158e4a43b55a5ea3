// SegLink's parts (models/detection/rbox.h, seglink.h): the layer sizes and default boxes, the
// rotated-box conversions and clipping, hand-computed targets of a horizontal and a rotated word
// (segments, within- and cross-layer links, an ignored layer), the targets and the decoding /
// combination against the numpy peer written from bgshih/seglink's ops (tests/peers/
// seglink_parts.py), words recovered from their own targets at many angles and sizes (and the
// synthetic text source's words through the ICDAR metric), the batch encoder and the errors.
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
#include "data/text_detection_synthetic.h"
#include "models/detection/seglink.h"
#include "tests/support/common.h"

namespace aim::models::detection {
namespace {

using nlohmann::json;

constexpr double kDeg = M_PI / 180;

std::array<double, 8> word_quad(double cx, double cy, double w, double h, double theta_deg) {
  return rbox_to_quad(RBox{cx, cy, w, h, theta_deg * kDeg});
}

double quad_iou(const std::array<double, 8>& a, const std::array<double, 8>& b) {
  return data::polygon_iou(data::quad_polygon(a.data()), data::quad_polygon(b.data()));
}

// Node index of cell (y, x) on layer l.
int64_t node(const SeglinkConfig& c, const SeglinkLayout& lay, size_t l, int64_t y, int64_t x) {
  return lay.node_begin[l] + y * c.layers[l].map_w + x;
}

const int8_t* links_of(const SeglinkTargets& t, const SeglinkConfig& c, const SeglinkLayout& lay,
                       size_t l, int64_t y, int64_t x) {
  return t.link_labels.data() + lay.link_begin[l] +
         (y * c.layers[l].map_w + x) * lay.links_per_node[l];
}

TEST(SeglinkParts, ConfigLayoutAndDefaultBoxes) {
  const SeglinkConfig c = seglink_config();
  const std::vector<int64_t> maps = {48, 24, 12, 6, 3, 2};
  ASSERT_EQ(c.layers.size(), 6u);
  for (size_t l = 0; l < 6; ++l) {
    EXPECT_EQ(c.layers[l].map_h, maps[l]);
    EXPECT_EQ(c.layers[l].map_w, maps[l]);
    EXPECT_EQ(c.layers[l].anchor, kSeglinkAnchors[l]);
  }
  // test_ic15.json's 1280 x 768: conv4_3 at 160 x 96 ... conv11 at 5 x 3.
  const SeglinkConfig t = seglink_config(1280, 768);
  EXPECT_EQ(t.layers[0].map_h, 160);
  EXPECT_EQ(t.layers[0].map_w, 96);
  EXPECT_EQ(t.layers[5].map_h, 5);
  EXPECT_EQ(t.layers[5].map_w, 3);
  const SeglinkLayout lay = seglink_layout(c);
  EXPECT_EQ(lay.nodes, 2304 + 576 + 144 + 36 + 9 + 4);
  EXPECT_EQ(lay.links, 8 * 2304 + 12 * (576 + 144 + 36 + 9 + 4));
  EXPECT_EQ(lay.link_begin[1], 8 * 2304);
  const std::vector<float> b = seglink_default_boxes(c).to_vector<float>();
  ASSERT_EQ(int64_t(b.size()), 4 * lay.nodes);
  // Cell (0, 0) of conv4_3 (step 8), cell (1, 2) of fc7 (step 16), the last of conv11 (step 192).
  EXPECT_EQ(std::vector<float>(b.begin(), b.begin() + 4),
            (std::vector<float>{4, 4, float(kSeglinkAnchors[0]), float(kSeglinkAnchors[0])}));
  const int64_t f = node(c, lay, 1, 1, 2);
  EXPECT_EQ(std::vector<float>(b.begin() + 4 * f, b.begin() + 4 * f + 4),
            (std::vector<float>{40, 24, float(kSeglinkAnchors[1]), float(kSeglinkAnchors[1])}));
  EXPECT_EQ(std::vector<float>(b.end() - 4, b.end()), (std::vector<float>{288, 288, 285, 285}));

  SeglinkConfig bad = c;
  bad.layers[4].map_h = 1;  // conv11's cross links need 2 rows below
  AIM_EXPECT_ERROR(seglink_layout(bad), "layers[5]'s cross-layer links need 2x2 children");
  bad = c;
  bad.neg_scale_diff = 1.5;
  AIM_EXPECT_ERROR(seglink_layout(bad), "need 1 <= pos_scale_diff < neg_scale_diff");
}

TEST(SeglinkParts, RboxQuadConversions) {
  // theta 0: corners clockwise on the image from the top left; theta 90: reading downwards, the
  // word's top left is the image's top right.
  const std::array<double, 8> q0 = rbox_to_quad({50, 20, 40, 10, 0});
  const std::array<double, 8> want0 = {30, 15, 70, 15, 70, 25, 30, 25};
  for (int k = 0; k < 8; ++k) EXPECT_NEAR(q0[size_t(k)], want0[size_t(k)], 1e-12);
  const std::array<double, 8> q90 = rbox_to_quad({50, 20, 40, 10, M_PI / 2});
  const std::array<double, 8> want90 = {55, 0, 55, 40, 45, 40, 45, 0};
  for (int k = 0; k < 8; ++k) EXPECT_NEAR(q90[size_t(k)], want90[size_t(k)], 1e-12);
  // A trapezoid: centre = mean corner, width = mean of the top (10) and bottom (14) sides,
  // height = the centre's distances to both lines (2 + 2).
  const double trap[8] = {0, 0, 10, 0, 12, 4, -2, 4};
  const RBox r = quad_to_rbox(trap);
  EXPECT_DOUBLE_EQ(r.cx, 5);
  EXPECT_DOUBLE_EQ(r.cy, 2);
  EXPECT_DOUBLE_EQ(r.w, 12);
  EXPECT_DOUBLE_EQ(r.h, 4);
  EXPECT_DOUBLE_EQ(r.theta, 0);
  // Round trips at many angles (theta within (-pi, pi) comes back as given).
  for (double deg : {-170.0, -90.0, -45.0, -3.0, 0.0, 17.0, 60.0, 90.0, 135.0}) {
    const RBox in{123.5, 77.25, 61, 19, deg * kDeg};
    const std::array<double, 8> q = rbox_to_quad(in);
    const RBox out = quad_to_rbox(q.data());
    EXPECT_NEAR(out.cx, in.cx, 1e-9) << deg;
    EXPECT_NEAR(out.cy, in.cy, 1e-9) << deg;
    EXPECT_NEAR(out.w, in.w, 1e-9) << deg;
    EXPECT_NEAR(out.h, in.h, 1e-9) << deg;
    EXPECT_NEAR(out.theta, in.theta, 1e-12) << deg;
  }
  // The reference's angle mean when the sides straddle +-pi: off by pi, the same rectangle.
  const std::array<double, 8> flip = rbox_to_quad({60, 60, 40, 12, M_PI - 0.01});
  std::array<double, 8> straddle = flip;
  straddle[5] -= 1.0;  // the bottom side (4 -> 3) now points just below -pi
  const RBox s = quad_to_rbox(straddle.data());
  EXPECT_LT(std::fabs(s.theta), 0.1);
  EXPECT_GT(quad_iou(rbox_to_quad(s), straddle), 0.95);

  // Clipping to a 384 x 384 image: a horizontal word [360, 400] keeps [360, 384], its centre
  // moving to 372; a 45-degree one is cut where its axis leaves the image; a box whose centre is
  // outside is left as it is (the reference).
  const RBox c = clip_rbox({380, 100, 40, 10, 0}, 0, 0, 384, 384);
  EXPECT_DOUBLE_EQ(c.w, 24);
  EXPECT_DOUBLE_EQ(c.cx, 372);
  EXPECT_DOUBLE_EQ(c.cy, 100);
  EXPECT_DOUBLE_EQ(c.h, 10);
  const RBox d = clip_rbox({10, 10, 40, 8, M_PI / 4}, 0, 0, 384, 384);
  EXPECT_NEAR(d.w, 20 + 10 * std::sqrt(2.0), 1e-12);  // 20 forward, 10 sqrt(2) back to x = 0
  EXPECT_NEAR(d.cx, 10 + (20 - 10 * std::sqrt(2.0)) / 2 / std::sqrt(2.0), 1e-12);
  const RBox e = clip_rbox({390, 10, 40, 8, 0}, 0, 0, 384, 384);
  EXPECT_EQ(e.w, 40);
  EXPECT_EQ(e.cx, 390);

  const double flat[8] = {0, 0, 10, 0, 20, 0, 5, 0};
  AIM_EXPECT_ERROR(quad_to_rbox(flat, "quads[1]"), "quads[1] is degenerate: it has no height");
  const double point_top[8] = {3, 3, 3, 3, 9, 9, 0, 9};
  AIM_EXPECT_ERROR(quad_to_rbox(point_top, "quads[2]"), "quads[2] is degenerate: its top");
  const double nan_quad[8] = {0, 0, 1, 0, 1, NAN, 0, 1};
  AIM_EXPECT_ERROR(quad_to_rbox(nan_quad), "quad has a coordinate that is not finite");
}

// A horizontal word of height 30 from x = 100 to 300, y = 193 to 223: scale differences
// 2.53 (conv4_3, too small: negative), 1.27 (fc7) and 1.5 (conv8_2) positive, 3 (conv9_2 up)
// negative. fc7 (step 16): rows 12, 13 (centres 200, 216), columns 6 .. 18 (104 .. 296);
// conv8_2 (step 32): row 6 (208), columns 3 .. 8 (112 .. 272).
TEST(SeglinkParts, HorizontalWordTargets) {
  const SeglinkConfig c = seglink_config();
  const SeglinkLayout lay = seglink_layout(c);
  const std::array<double, 8> q = {100, 193, 300, 193, 300, 223, 100, 223};
  const SeglinkTargets t = encode_seglink_targets(c, q.data(), 1);
  std::vector<int64_t> pos(6, 0), ign(6, 0);
  for (size_t l = 0; l < 6; ++l)
    for (int64_t p = 0; p < c.layers[l].map_h * c.layers[l].map_w; ++p) {
      const int8_t v = t.node_labels[size_t(lay.node_begin[l] + p)];
      pos[l] += v == 1, ign[l] += v == 0;
    }
  EXPECT_EQ(pos, (std::vector<int64_t>{0, 26, 6, 0, 0, 0}));
  EXPECT_EQ(ign, (std::vector<int64_t>{0, 0, 0, 0, 0, 0}));
  for (int64_t y = 12; y <= 13; ++y)
    for (int64_t x = 6; x <= 18; ++x) EXPECT_EQ(t.node_labels[size_t(node(c, lay, 1, y, x))], 1);
  for (int64_t x = 3; x <= 8; ++x) EXPECT_EQ(t.node_labels[size_t(node(c, lay, 2, 6, x))], 1);
  EXPECT_EQ(t.node_match[size_t(node(c, lay, 2, 6, 3))], 0);
  EXPECT_EQ(t.node_match[size_t(node(c, lay, 0, 25, 20))], -1);  // inside, but too small a box

  // fc7 (12, 6): box centre (104, 200), a = 23.684; the word's part between x = 92.16 and
  // 115.84 is [100, 115.84] x [193, 223].
  const double a = kSeglinkAnchors[1], x2 = 104 + a / 2;
  const float* o = t.offsets.data() + 6 * node(c, lay, 1, 12, 6);
  EXPECT_NEAR(o[0], ((100 + x2) / 2 - 104) / a / 0.1, 1e-5);
  EXPECT_NEAR(o[1], (208.0 - 200) / a / 0.1, 1e-5);
  EXPECT_NEAR(o[2], std::log(1e-6 + (x2 - 100) / a) / 0.1, 1e-5);
  EXPECT_NEAR(o[3], std::log(1e-6 + 30 / a) / 0.1, 1e-5);
  EXPECT_NEAR(o[4], 1 / 0.1, 1e-6);
  EXPECT_NEAR(o[5], 0, 1e-6);
  // An inner cell: the whole box width, centred on the box.
  const float* m = t.offsets.data() + 6 * node(c, lay, 1, 13, 10);
  EXPECT_NEAR(m[0], 0, 1e-6);
  EXPECT_NEAR(m[1], (208.0 - 216) / a / 0.1, 1e-5);
  EXPECT_NEAR(m[2], std::log(1e-6 + 1) / 0.1, 1e-5);

  // Within-layer links of fc7 (12, 6), neighbours (11, 5) (11, 6) (11, 7) (12, 5) (12, 7)
  // (13, 5) (13, 6) (13, 7): positive to the word's cells, negative to the negatives around.
  const int8_t* l12_6 = links_of(t, c, lay, 1, 12, 6);
  EXPECT_EQ(std::vector<int8_t>(l12_6, l12_6 + 8),
            (std::vector<int8_t>{-1, -1, -1, -1, 1, -1, 1, 1}));
  // Cross links of conv8_2 (6, 3) to fc7 (12, 6) (12, 7) (13, 6) (13, 7): all positive; (6, 8)'s
  // children (12, 16) .. (13, 17) too; (6, 9) is negative, so are its links.
  const int8_t* l6_3 = links_of(t, c, lay, 2, 6, 3);
  EXPECT_EQ(std::vector<int8_t>(l6_3 + 8, l6_3 + 12), (std::vector<int8_t>{1, 1, 1, 1}));
  const int8_t* l6_8 = links_of(t, c, lay, 2, 6, 8);
  EXPECT_EQ(std::vector<int8_t>(l6_8 + 8, l6_8 + 12), (std::vector<int8_t>{1, 1, 1, 1}));
  const int8_t* l6_9 = links_of(t, c, lay, 2, 6, 9);
  EXPECT_EQ(std::vector<int8_t>(l6_9, l6_9 + 12), std::vector<int8_t>(12, -1));
  // fc7's cross links to conv4_3 (all negative there): -1; so are the corner cell's out-of-map
  // neighbours.
  const int8_t* l13_18 = links_of(t, c, lay, 1, 13, 18);
  EXPECT_EQ(std::vector<int8_t>(l13_18 + 8, l13_18 + 12), std::vector<int8_t>(4, -1));
  const int8_t* l0_0 = links_of(t, c, lay, 0, 0, 0);
  EXPECT_EQ(l0_0[0], -1);

  // A second word right below (y 224 .. 254) at the same height: the boxes on the boundary rows
  // keep their own word, and a link between the two words' cells is negative.
  const std::vector<double> two = {100, 193, 300, 193, 300, 223, 100, 223,
                                   100, 224, 300, 224, 300, 254, 100, 254};
  const SeglinkTargets t2 = encode_seglink_targets(c, two.data(), 2);
  EXPECT_EQ(t2.node_match[size_t(node(c, lay, 1, 13, 10))], 0);  // centre y 216
  EXPECT_EQ(t2.node_match[size_t(node(c, lay, 1, 14, 10))], 1);  // centre y 232
  EXPECT_EQ(links_of(t2, c, lay, 1, 13, 10)[6], -1);             // (13, 10) -> (14, 10)
  EXPECT_EQ(links_of(t2, c, lay, 1, 14, 10)[6], 1);              // (14, 10) -> (15, 10)
}

// A word of height 43 at 30 degrees: scale differences 1.82 on fc7 (ignored: between 1.7 and 2),
// 1.05 on conv8_2 (positive), 2.09 on conv9_2 (negative). Every positive segment is checked
// against the projection of the box centre on the word's axis (not the reference's rotations).
TEST(SeglinkParts, RotatedWordTargets) {
  const SeglinkConfig c = seglink_config();
  const SeglinkLayout lay = seglink_layout(c);
  const double cx = 190, cy = 180, w = 220, h = 43, th = 30 * kDeg;
  const std::array<double, 8> q = word_quad(cx, cy, w, h, 30);
  const SeglinkTargets t = encode_seglink_targets(c, q.data(), 1);
  const double ux = std::cos(th), uy = std::sin(th);
  int64_t positives = 0, ignored = 0;
  for (size_t l = 0; l < 6; ++l) {
    const SeglinkLayer& L = c.layers[l];
    const double step = 384.0 / double(L.map_w), a = L.anchor;
    for (int64_t y = 0; y < L.map_h; ++y)
      for (int64_t x = 0; x < L.map_w; ++x) {
        const int64_t v = node(c, lay, l, y, x);
        const double ax = step * (double(x) + 0.5), ay = step * (double(y) + 0.5);
        const double along = (ax - cx) * ux + (ay - cy) * uy;
        const double across = -(ax - cx) * uy + (ay - cy) * ux;
        const bool inside = std::fabs(along) < w / 2 && std::fabs(across) < h / 2;
        const int8_t want = !inside ? -1 : l == 1 ? 0 : l == 2 ? 1 : -1;
        ASSERT_EQ(t.node_labels[size_t(v)], want) << "layer " << l << " cell " << y << "," << x;
        if (want == 0) ++ignored;
        if (want != 1) continue;
        ++positives;
        const double lo = std::max(along - a / 2, -w / 2), hi = std::min(along + a / 2, w / 2);
        const double sx = cx + ux * (lo + hi) / 2, sy = cy + uy * (lo + hi) / 2;
        const float* o = t.offsets.data() + 6 * v;
        EXPECT_NEAR(o[0] * 0.1, (sx - ax) / a, 1e-6);
        EXPECT_NEAR(o[1] * 0.1, (sy - ay) / a, 1e-6);
        EXPECT_NEAR(o[2] * 0.1, std::log(1e-6 + (hi - lo) / a), 1e-6);
        EXPECT_NEAR(o[3] * 0.1, std::log(1e-6 + h / a), 1e-6);
        EXPECT_NEAR(o[4] * 0.1, ux, 1e-6);
        EXPECT_NEAR(o[5] * 0.1, uy, 1e-6);
        // Cross links to fc7's children: the ignored ones give 0, the negatives -1.
        const int8_t* lk = links_of(t, c, lay, 2, y, x);
        const SeglinkLayer& B = c.layers[1];
        int k = 8;
        for (int64_t by = 2 * y; by < 2 * y + 2; ++by)
          for (int64_t bx = 2 * x; bx < 2 * x + 2; ++bx, ++k) {
            const int8_t child = t.node_labels[size_t(lay.node_begin[1] + by * B.map_w + bx)];
            EXPECT_EQ(lk[k], child == -1 ? -1 : 0);
          }
      }
  }
  EXPECT_GT(positives, 8);
  EXPECT_GT(ignored, 30);
  std::printf("[seglink rotated word] %lld positive, %lld ignored boxes\n", (long long)positives,
              (long long)ignored);
}

json run_peer(const std::string& mode, const json& in) {
  const std::string dir = ::aim::testing::make_temp_dir("aim_seglink_parts");
  std::ofstream(dir + "/in.json") << in.dump();
  const std::string cmd = std::string(::aim::testing::kPython) + " " +
                          ::aim::testing::source_root() + "/tests/peers/seglink_parts.py " + mode +
                          " " + dir + "/in.json " + dir + "/out.json";
  EXPECT_EQ(::aim::testing::run_command(cmd), 0) << cmd;
  json out;
  std::ifstream(dir + "/out.json") >> out;
  ::aim::testing::run_command("rm -rf " + dir);
  return out;
}

json config_json(const SeglinkConfig& c) {
  json j;
  j["image"] = {c.image_h, c.image_w};
  j["layers"] = json::array();
  for (const SeglinkLayer& L : c.layers) j["layers"].push_back({L.map_h, L.map_w, L.anchor});
  j["pos"] = c.pos_scale_diff, j["neg"] = c.neg_scale_diff;
  j["variances"] = c.variances;
  j["clip"] = c.clip_to_image, j["ignore_dont_care"] = c.ignore_dont_care;
  return j;
}

struct PeerCase {
  SeglinkConfig cfg;
  std::vector<double> quads;
  std::vector<uint8_t> dont_care;
};

// Random words: rotated rectangles of heights 6 .. 120 px and 1 .. 6 heights long at angles within
// +-60 degrees (+-150 for the encoder), their corners jittered into general quadrilaterals; some
// stick out of the image (clipped, or left alone when their centre is outside).
std::vector<PeerCase> random_cases(double max_deg) {
  std::mt19937_64 rng(7);
  auto uni = [&](double lo, double hi) {
    return lo + (hi - lo) * double(rng() >> 11) * (1.0 / 9007199254740992.0);
  };
  std::vector<PeerCase> cases;
  SeglinkConfig odd;  // odd maps: the cross-link clamp at the map's end
  odd.image_h = 200, odd.image_w = 136;
  odd.layers = {{25, 17, 11.84210526}, {13, 9, 23.68421053}, {7, 5, 45}, {4, 3, 90},
                {2, 2, 150},           {1, 1, 285}};
  SeglinkConfig ignoring = seglink_config();
  ignoring.ignore_dont_care = true;
  const std::vector<SeglinkConfig> cfgs = {seglink_config(), seglink_config(), ignoring,
                                           seglink_config(512, 320), odd};
  for (const SeglinkConfig& cfg : cfgs) {
    PeerCase pc;
    pc.cfg = cfg;
    const int64_t G = 3 + int64_t(rng() % 8);
    for (int64_t g = 0; g < G; ++g) {
      const double h = std::exp(uni(std::log(6.0), std::log(120.0)));
      const double w = h * uni(1, 6);
      const double cx = uni(-0.05, 1.05) * double(cfg.image_w),
                   cy = uni(0, 1) * double(cfg.image_h);
      std::array<double, 8> q = word_quad(cx, cy, w, h, uni(-max_deg, max_deg));
      for (double& v : q) v += uni(-0.08, 0.08) * h;
      pc.quads.insert(pc.quads.end(), q.begin(), q.end());
      pc.dont_care.push_back(rng() % 4 == 0);
    }
    cases.push_back(pc);
  }
  return cases;
}

void expect_near_all(const std::vector<double>& got, const json& want, double rel, double abs,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = want[i].get<double>();
    if (!(std::fabs(got[i] - w) <= abs + rel * std::fabs(w)) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: " << got[i] << " vs peer " << w;
  }
}

TEST(SeglinkParts, EncodeMatchesNumpyPeer) {
  AIM_REQUIRE_PYTHON_MODULE("numpy");
  const std::vector<PeerCase> cases = random_cases(150);
  json in = json::array();
  for (const PeerCase& pc : cases) {
    json j = config_json(pc.cfg);
    j["quads"] = json::array();
    for (size_t g = 0; g < pc.dont_care.size(); ++g)
      j["quads"].push_back(
          std::vector<double>(pc.quads.begin() + 8 * g, pc.quads.begin() + 8 * g + 8));
    j["dont_care"] = pc.dont_care;
    in.push_back(j);
  }
  const json out = run_peer("encode", in);
  ASSERT_EQ(out.size(), cases.size());
  for (size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE("case " + std::to_string(k));
    const PeerCase& pc = cases[k];
    const int64_t G = int64_t(pc.dont_care.size());
    const SeglinkTargets t =
        encode_seglink_targets(pc.cfg, pc.quads.data(), G, pc.dont_care.data());
    for (int64_t g = 0; g < G; ++g) {
      const RBox r = quad_to_rbox(pc.quads.data() + 8 * g);
      const RBox& cl = t.words[size_t(g)];
      expect_near_all({r.cx, r.cy, r.w, r.h, r.theta}, out[k]["rboxes"][size_t(g)], 1e-12, 1e-12,
                      "rbox " + std::to_string(g));
      expect_near_all({cl.cx, cl.cy, cl.w, cl.h, cl.theta}, out[k]["clipped"][size_t(g)], 1e-12,
                      1e-10, "clipped rbox " + std::to_string(g));
    }
    EXPECT_EQ(t.node_labels, out[k]["labels"].get<std::vector<int8_t>>());
    EXPECT_EQ(t.node_match, out[k]["match"].get<std::vector<int32_t>>());
    EXPECT_EQ(t.link_labels, out[k]["links"].get<std::vector<int8_t>>());
    // f32 targets against the peer's f64.
    expect_near_all(std::vector<double>(t.offsets.begin(), t.offsets.end()), out[k]["offsets"],
                    1e-6, 1e-6, "offsets");
    int64_t counts[3] = {0, 0, 0}, link_counts[3] = {0, 0, 0};
    for (int8_t v : t.node_labels) ++counts[v + 1];
    for (int8_t v : t.link_labels) ++link_counts[v + 1];
    std::printf(
        "[seglink encode vs peer] case %zu: %lld words; nodes -1/0/1 %lld/%lld/%lld; "
        "links %lld/%lld/%lld\n",
        k, (long long)G, (long long)counts[0], (long long)counts[1], (long long)counts[2],
        (long long)link_counts[0], (long long)link_counts[1], (long long)link_counts[2]);
  }
}

// Noisy "network outputs" around the true targets: node and link probabilities that straddle the
// thresholds, offsets jittered, so groups split and merge as they would in a real decode.
TEST(SeglinkParts, DecodeAndCombineMatchNumpyPeer) {
  AIM_REQUIRE_PYTHON_MODULE("numpy");
  const std::vector<PeerCase> cases = random_cases(60);
  std::mt19937_64 rng(11);
  auto uni = [&](double lo, double hi) {
    return lo + (hi - lo) * double(rng() >> 11) * (1.0 / 9007199254740992.0);
  };
  json in = json::array();
  struct Inputs {
    std::vector<float> nodes, links, offsets;
  };
  std::vector<Inputs> inputs;
  const SeglinkThresholds thr;
  for (const PeerCase& pc : cases) {
    const SeglinkTargets t =
        encode_seglink_targets(pc.cfg, pc.quads.data(), int64_t(pc.dont_care.size()));
    Inputs x;
    for (int8_t v : t.node_labels) x.nodes.push_back(float(v == 1 ? uni(0.8, 1) : uni(0, 0.905)));
    for (int8_t v : t.link_labels) x.links.push_back(float(v == 1 ? uni(0.6, 1) : uni(0, 0.75)));
    x.offsets = t.offsets;
    for (float& v : x.offsets) v += float(uni(-0.3, 0.3));
    json j = config_json(pc.cfg);
    j["node_scores"] = x.nodes, j["link_scores"] = x.links, j["offsets"] = x.offsets;
    j["node_threshold"] = thr.node, j["link_threshold"] = thr.link;
    in.push_back(j);
    inputs.push_back(x);
  }
  const json out = run_peer("decode", in);
  ASSERT_EQ(out.size(), cases.size());
  for (size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE("case " + std::to_string(k));
    const std::vector<SeglinkSegment> segs =
        decode_segments_links(cases[k].cfg, inputs[k].nodes.data(), inputs[k].links.data(),
                              inputs[k].offsets.data(), thr);
    ASSERT_EQ(segs.size(), out[k]["nodes"].size());
    for (size_t i = 0; i < segs.size(); ++i) {
      const SeglinkSegment& s = segs[i];
      EXPECT_EQ(s.node, out[k]["nodes"][i].get<int64_t>());
      EXPECT_EQ(s.group, out[k]["groups"][i].get<int64_t>());
      expect_near_all({s.cx, s.cy, s.w, s.h, s.cos, s.sin}, out[k]["segments"][i], 1e-12, 1e-12,
                      "segment " + std::to_string(i));
    }
    const std::vector<SeglinkDetection> dets = combine_segments(segs);
    ASSERT_EQ(dets.size(), out[k]["combined"].size());
    for (size_t i = 0; i < dets.size(); ++i) {
      const RBox& b = dets[i].box;
      // The unit-direction form against the reference's y = m x + b form: rounding only.
      expect_near_all({b.cx, b.cy, b.w, b.h, b.theta}, out[k]["combined"][i], 1e-9, 1e-9,
                      "combined " + std::to_string(i));
      expect_near_all(std::vector<double>(dets[i].quad.begin(), dets[i].quad.end()),
                      out[k]["quads"][i], 1e-9, 1e-9, "quad " + std::to_string(i));
    }
    std::printf("[seglink decode vs peer] case %zu: %zu segments in %zu groups\n", k, segs.size(),
                dets.size());
  }
}

// encode -> decode with the true labels (probability 1 for positives, 0 otherwise) -> combine:
// one detection per word, over IoU 0.9 with the word, for angles of -90 .. 90 degrees and
// character heights 10 .. 100 px, words of 6 characters' height centred off the cell grid (the
// end segments stop short of the word's ends by up to a cell step less half an anchor).
TEST(SeglinkParts, CombineRecoversWordsFromTheirTargets) {
  const SeglinkConfig c = seglink_config();
  const SeglinkLayout lay = seglink_layout(c);
  auto recover = [&](const std::array<double, 8>& q) {
    const SeglinkTargets t = encode_seglink_targets(c, q.data(), 1);
    std::vector<float> nodes(size_t(lay.nodes)), links(size_t(lay.links));
    for (size_t i = 0; i < nodes.size(); ++i) nodes[i] = t.node_labels[i] == 1 ? 1.f : 0.f;
    for (size_t i = 0; i < links.size(); ++i) links[i] = t.link_labels[i] == 1 ? 1.f : 0.f;
    return combine_segments(decode_segments_links(c, nodes.data(), links.data(), t.offsets.data()));
  };
  double worst = 1, sum = 0;
  int n = 0;
  for (double deg : {-90.0, -60.0, -45.0, -20.0, -5.0, 0.0, 12.0, 30.0, 45.0, 75.0, 90.0})
    for (double h : {10.0, 16.0, 30.0, 55.0, 100.0}) {
      const std::array<double, 8> q = word_quad(187.3, 194.6, std::min(6 * h, 330.0), h, deg);
      const std::vector<SeglinkDetection> d = recover(q);
      ASSERT_EQ(d.size(), 1u) << deg << " degrees, height " << h;
      const double iou = quad_iou(d[0].quad, q);
      EXPECT_GT(iou, 0.9) << deg << " degrees, height " << h;
      EXPECT_NEAR(d[0].box.h, h, 1e-3) << deg << " degrees, height " << h;
      EXPECT_EQ(d[0].score, 1.0);
      EXPECT_EQ(d[0].segments > 1, true);
      worst = std::min(worst, iou), sum += iou, ++n;
    }
  std::printf(
      "[seglink combine] %d words recovered from their targets: IoU mean %.4f, worst %.4f\n", n,
      sum / n, worst);
  // The reference's limit: a 330 x 160 word at 45 degrees is positive on conv10_2 only (scale
  // differences 1.78 on conv9_2 and conv11: ignored), whose 3 x 3 map puts one box centre in it:
  // one segment, the box's 150 px of the word, IoU 150 / 330.
  const std::vector<SeglinkDetection> one = recover(word_quad(192, 192, 330, 160, 45));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].segments, 1);
  EXPECT_NEAR(quad_iou(one[0].quad, word_quad(192, 192, 330, 160, 45)), 150.0 / 330, 1e-6);
}

// The synthetic source's words through their own targets and the ICDAR metric: every word
// (those the default boxes can see at all) comes back as one box.
TEST(SeglinkParts, SyntheticWordsRecoveredThroughTargets) {
  data::TextDetectionSyntheticConfig sc;
  data::TextDetectionSyntheticSource src(sc);
  const SeglinkConfig c = seglink_config(sc.height, sc.width);
  const SeglinkLayout lay = seglink_layout(c);
  std::vector<std::vector<data::IcdarWord>> gts;
  std::vector<std::vector<data::IcdarQuad>> dets;
  for (int64_t i = 0; i < 40; ++i) {
    const std::vector<data::SyntheticWord> words = src.sample(i, nullptr);
    std::vector<double> quads;
    gts.emplace_back();
    for (const data::SyntheticWord& w : words) {
      quads.insert(quads.end(), w.quad.begin(), w.quad.end());
      data::IcdarWord g;
      g.quad = w.quad;
      gts.back().push_back(g);
    }
    const SeglinkTargets t = encode_seglink_targets(c, quads.data(), int64_t(words.size()));
    std::vector<float> nodes(size_t(lay.nodes)), links(size_t(lay.links));
    for (size_t k = 0; k < nodes.size(); ++k) nodes[k] = t.node_labels[k] == 1 ? 1.f : 0.f;
    for (size_t k = 0; k < links.size(); ++k) links[k] = t.link_labels[k] == 1 ? 1.f : 0.f;
    dets.emplace_back();
    for (const SeglinkDetection& d :
         combine_segments(decode_segments_links(c, nodes.data(), links.data(), t.offsets.data())))
      dets.back().push_back(d.quad);
  }
  const data::IcdarEvalResult r = data::icdar_evaluate(gts, dets);
  std::printf(
      "[seglink synthetic oracle] %lld words, %lld boxes: precision %.4f recall %.4f "
      "hmean %.4f\n",
      (long long)r.gt_care, (long long)r.det_care, r.precision, r.recall, r.hmean);
  EXPECT_GT(r.gt_care, 80);
  EXPECT_GT(r.recall, 0.95);
  EXPECT_GT(r.precision, 0.9);
}

TEST(SeglinkParts, BatchEncoderAndErrors) {
  // 192 x 160: maps 24 x 20 .. 1 x 1 (conv10_2's 2 x 2 still gives conv11 its 4 children).
  const SeglinkConfig c = seglink_config(192, 160);
  const SeglinkLayout lay = seglink_layout(c);
  AIM_EXPECT_ERROR(seglink_layout(seglink_config(96, 96)),
                   "layers[5]'s cross-layer links need 2x2 children: layers[4] is 1x1");
  const std::array<double, 8> a = word_quad(40, 30, 50, 12, 10), b = word_quad(60, 70, 30, 20, -30);
  std::vector<float> quads(2 * 3 * 8, 0.f);
  for (int e = 0; e < 8; ++e) {
    quads[size_t(e)] = float(a[size_t(e)]);
    quads[size_t(8 + e)] = float(b[size_t(e)]);
    quads[size_t(24 + e)] = float(b[size_t(e)]);
  }
  const Tensor q = Tensor::from_vector(quads, {2, 3, 8});
  const Tensor num = Tensor::from_vector(std::vector<int64_t>{2, 1}, {2});
  const Tensor dc = Tensor::from_vector(std::vector<uint8_t>{0, 1, 0, 0, 0, 0}, {2, 3});
  SeglinkConfig ci = c;
  ci.ignore_dont_care = true;
  const TensorMap m = encode_seglink_batch(ci, q, num, dc);
  EXPECT_EQ(m.at("seg_labels").sizes(), (Shape{2, lay.nodes}));
  EXPECT_EQ(m.at("seg_offsets").sizes(), (Shape{2, lay.nodes, 6}));
  EXPECT_EQ(m.at("link_labels").sizes(), (Shape{2, lay.links}));
  // Image 0 as the per-image encoder gives it from the same (f32) corners; image 1 holds word b
  // alone, not don't-care there.
  std::vector<double> q0(quads.begin(), quads.begin() + 16), q1(quads.begin() + 24, quads.end());
  const uint8_t dc0[2] = {0, 1};
  const SeglinkTargets t0 = encode_seglink_targets(ci, q0.data(), 2, dc0);
  const SeglinkTargets t1 = encode_seglink_targets(ci, q1.data(), 1);
  const std::vector<int8_t> labels = m.at("seg_labels").to_vector<int8_t>();
  EXPECT_EQ(std::vector<int8_t>(labels.begin(), labels.begin() + lay.nodes), t0.node_labels);
  EXPECT_EQ(std::vector<int8_t>(labels.begin() + lay.nodes, labels.end()), t1.node_labels);
  const std::vector<int8_t> links = m.at("link_labels").to_vector<int8_t>();
  EXPECT_EQ(std::vector<int8_t>(links.begin() + lay.links, links.end()), t1.link_labels);
  const std::vector<float> offs = m.at("seg_offsets").to_vector<float>();
  EXPECT_EQ(std::vector<float>(offs.begin(), offs.begin() + 6 * lay.nodes), t0.offsets);
  // The don't-care word is only ignored where it is don't-care: word b's positives in image 1
  // are ignored boxes in image 0.
  int64_t pos0 = 0, pos1 = 0;
  for (int64_t v = 0; v < lay.nodes; ++v) {
    pos0 += t0.node_labels[size_t(v)] == 1 && t0.node_match[size_t(v)] == 1;
    pos1 += t1.node_labels[size_t(v)] == 1;
  }
  EXPECT_EQ(pos0, 0);
  EXPECT_GT(pos1, 0);

  AIM_EXPECT_ERROR(encode_seglink_batch(c, Tensor::zeros({2, 5, 4}), num, Tensor()),
                   "quads must be f32 [B, G, 8], got f32 [2, 5, 4]");
  AIM_EXPECT_ERROR(encode_seglink_batch(c, q, Tensor::zeros({3}, DType::i64), Tensor()),
                   "num_boxes must be i64 [B] = [2], got i64 [3]");
  AIM_EXPECT_ERROR(encode_seglink_batch(c, q, num, Tensor::zeros({2, 3}, DType::f32)),
                   "dont_care must be u8 [B, G] = [2, 3], got f32 [2, 3]");
  AIM_EXPECT_ERROR(
      encode_seglink_batch(c, q, Tensor::from_vector(std::vector<int64_t>{4, 0}, {2}), Tensor()),
      "num_boxes[0] = 4 outside [0, G = 3]");
  // A degenerate word: the error names the image and the word.
  std::vector<float> flat = quads;
  for (int e = 0; e < 8; ++e) flat[size_t(24 + e)] = 5.f;
  AIM_EXPECT_ERROR(encode_seglink_batch(c, Tensor::from_vector(flat, {2, 3, 8}), num, Tensor()),
                   "image 1 of quads [2, 3, 8]");
  AIM_EXPECT_ERROR(encode_seglink_batch(c, Tensor::from_vector(flat, {2, 3, 8}), num, Tensor()),
                   "quads[0] is degenerate");
}

}  // namespace
}  // namespace aim::models::detection
