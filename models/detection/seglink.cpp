#include "models/detection/seglink.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "tensor/check.h"

namespace aim::models::detection {
namespace {

constexpr int kWithin = 8, kCross = 4;
constexpr double kEps = 1e-6;  // the reference's, inside log() when encoding and after exp()

// The first of the 2 x 2 children on the layer below (a larger map) of cell `i` of this layer:
// the reference clamps at the map's end so that odd maps still give 4 children.
int64_t first_child(int64_t i, int64_t below) { return std::min(2 * i, below - 2); }

// The anchor centre of cell p of layer l.
void anchor_centre(const SeglinkConfig& cfg, const SeglinkLayer& L, int64_t p, double* cx,
                   double* cy) {
  const double step_x = double(cfg.image_w) / double(L.map_w);
  const double step_y = double(cfg.image_h) / double(L.map_h);
  *cx = step_x * (double(p % L.map_w) + 0.5);
  *cy = step_y * (double(p / L.map_w) + 0.5);
}

// The segment of `word` seen by the square box of side a at (ax, ay), as the reference's 6
// offsets (before the variances).
void segment_offsets(const RBox& word, double ax, double ay, double a, double* out) {
  const double c = std::cos(word.theta), s = std::sin(word.theta);
  // The word's centre in the frame turned by -theta about the box centre: the word horizontal.
  const double hx = c * (word.cx - ax) + s * (word.cy - ay) + ax;
  const double hy = -s * (word.cx - ax) + c * (word.cy - ay) + ay;
  const double x1 = std::max(hx - word.w / 2, ax - a / 2),
               x2 = std::min(hx + word.w / 2, ax + a / 2);
  const double mx = 0.5 * (x1 + x2);
  // Back by +theta (the height is not clipped, its middle stays at hy).
  const double sx = c * (mx - ax) - s * (hy - ay) + ax;
  const double sy = s * (mx - ax) + c * (hy - ay) + ay;
  out[0] = (sx - ax) / a;
  out[1] = (sy - ay) / a;
  out[2] = std::log(kEps + (x2 - x1) / a);
  out[3] = std::log(kEps + word.h / a);
  out[4] = c;
  out[5] = s;
}

// Union-find over dense node indices (path halving; the smaller root wins, so a group's root is
// its first node).
struct Groups {
  std::vector<int64_t> parent;
  explicit Groups(int64_t n) : parent(size_t(n)) { std::iota(parent.begin(), parent.end(), 0); }
  int64_t find(int64_t v) {
    while (parent[size_t(v)] != v) v = parent[size_t(v)] = parent[size_t(parent[size_t(v)])];
    return v;
  }
  void join(int64_t a, int64_t b) {
    a = find(a), b = find(b);
    if (a != b) parent[size_t(std::max(a, b))] = std::min(a, b);
  }
};

}  // namespace

SeglinkConfig seglink_config(int64_t image_h, int64_t image_w) {
  AIM_CHECK(image_h >= 1 && image_w >= 1, "[seglink_config] image size must be positive, got ",
            image_h, "x", image_w);
  auto half = [](int64_t n) { return (n + 1) / 2; };
  SeglinkConfig cfg;
  cfg.image_h = image_h, cfg.image_w = image_w;
  int64_t h = half(half(half(image_h))), w = half(half(half(image_w)));
  for (double a : kSeglinkAnchors) {
    cfg.layers.push_back({h, w, a});
    h = half(h), w = half(w);
  }
  return cfg;
}

SeglinkLayout seglink_layout(const SeglinkConfig& cfg) {
  AIM_CHECK(cfg.image_h >= 1 && cfg.image_w >= 1, "[seglink] image size must be positive, got ",
            cfg.image_h, "x", cfg.image_w);
  AIM_CHECK(!cfg.layers.empty(), "[seglink] the configuration has no layers");
  AIM_CHECK(cfg.pos_scale_diff >= 1 && cfg.neg_scale_diff > cfg.pos_scale_diff,
            "[seglink] need 1 <= pos_scale_diff < neg_scale_diff, got ", cfg.pos_scale_diff, ", ",
            cfg.neg_scale_diff);
  for (double v : cfg.variances) AIM_CHECK(v > 0, "[seglink] variances must be > 0, got ", v);
  SeglinkLayout out;
  for (size_t l = 0; l < cfg.layers.size(); ++l) {
    const SeglinkLayer& L = cfg.layers[l];
    AIM_CHECK(L.map_h >= 1 && L.map_w >= 1 && L.anchor > 0, "[seglink] layers[", l,
              "] needs a map of at least 1x1 and an anchor > 0, got ", L.map_h, "x", L.map_w,
              " anchor ", L.anchor);
    if (l > 0)
      AIM_CHECK(cfg.layers[l - 1].map_h >= 2 && cfg.layers[l - 1].map_w >= 2, "[seglink] layers[",
                l, "]'s cross-layer links need 2x2 children: layers[", l - 1, "] is ",
                cfg.layers[l - 1].map_h, "x", cfg.layers[l - 1].map_w);
    const int64_t n = l == 0 ? kWithin : kWithin + kCross;
    out.node_begin.push_back(out.nodes);
    out.link_begin.push_back(out.links);
    out.links_per_node.push_back(n);
    out.nodes += L.map_h * L.map_w;
    out.links += L.map_h * L.map_w * n;
  }
  return out;
}

Tensor seglink_default_boxes(const SeglinkConfig& cfg) {
  const SeglinkLayout lay = seglink_layout(cfg);
  Tensor out = Tensor::empty({lay.nodes, 4}, DType::f32);
  float* o = out.data<float>();
  for (size_t l = 0; l < cfg.layers.size(); ++l) {
    const SeglinkLayer& L = cfg.layers[l];
    for (int64_t p = 0; p < L.map_h * L.map_w; ++p) {
      double cx, cy;
      anchor_centre(cfg, L, p, &cx, &cy);
      float* b = o + 4 * (lay.node_begin[l] + p);
      b[0] = float(cx), b[1] = float(cy), b[2] = b[3] = float(L.anchor);
    }
  }
  return out;
}

SeglinkTargets encode_seglink_targets(const SeglinkConfig& cfg, const double* quads, int64_t G,
                                      const uint8_t* dont_care) {
  const SeglinkLayout lay = seglink_layout(cfg);
  AIM_CHECK(G >= 0, "[encode_seglink_targets] negative word count ", G);
  SeglinkTargets t;
  for (int64_t g = 0; g < G; ++g) {
    RBox r = quad_to_rbox(quads + 8 * g, str("quads[", g, "]"));
    if (cfg.clip_to_image) r = clip_rbox(r, 0, 0, double(cfg.image_w), double(cfg.image_h));
    t.words.push_back(r);
  }
  t.node_labels.assign(size_t(lay.nodes), -1);
  t.node_match.assign(size_t(lay.nodes), -1);
  t.offsets.assign(size_t(6 * lay.nodes), 0.0f);
  t.link_labels.assign(size_t(lay.links), 0);
  for (size_t l = 0; l < cfg.layers.size(); ++l) {
    const SeglinkLayer& L = cfg.layers[l];
    const int64_t HW = L.map_h * L.map_w, base = lay.node_begin[l];
    int8_t* label = t.node_labels.data() + base;
    int32_t* match = t.node_match.data() + base;
    // Nodes: the word of smallest scale difference among those containing the box centre.
    for (int64_t p = 0; p < HW; ++p) {
      double ax, ay;
      anchor_centre(cfg, L, p, &ax, &ay);
      double best = std::numeric_limits<double>::infinity();
      for (int64_t g = 0; g < G; ++g) {
        const RBox& w = t.words[size_t(g)];
        const double diff = std::max(L.anchor / w.h, w.h / L.anchor);
        if (diff < cfg.neg_scale_diff && diff < best && rbox_contains(w, ax, ay))
          best = diff, match[p] = int32_t(g);
      }
      if (match[p] < 0) continue;
      label[p] = best < cfg.pos_scale_diff ? 1 : 0;
      if (cfg.ignore_dont_care && dont_care && dont_care[match[p]]) label[p] = 0;
      if (label[p] == 1) {
        double o[6];
        segment_offsets(t.words[size_t(match[p])], ax, ay, L.anchor, o);
        for (int k = 0; k < 6; ++k)
          t.offsets[size_t(6 * (base + p) + k)] = float(o[k] / cfg.variances[k]);
      }
    }
    // Links, in the head's channel order.
    const int64_t n = lay.links_per_node[l];
    for (int64_t p = 0; p < HW; ++p) {
      const int64_t py = p / L.map_w, px = p % L.map_w;
      int8_t* link = t.link_labels.data() + lay.link_begin[l] + p * n;
      int k = 0;
      for (int64_t ny = py - 1; ny <= py + 1; ++ny)
        for (int64_t nx = px - 1; nx <= px + 1; ++nx) {
          if (ny == py && nx == px) continue;
          int8_t v = 0;
          const int64_t q = ny * L.map_w + nx;
          if (ny < 0 || nx < 0 || ny >= L.map_h || nx >= L.map_w)
            v = -1;
          else if (match[p] >= 0 && match[q] >= 0 && match[p] != match[q])
            v = -1;
          else if (label[p] == -1 || label[q] == -1)
            v = -1;
          else if (label[p] == 1 && label[q] == 1)
            v = 1;  // the same word: different words were caught above
          link[k++] = v;
        }
      if (l == 0) continue;
      const SeglinkLayer& B = cfg.layers[l - 1];
      const int8_t* below_label = t.node_labels.data() + lay.node_begin[l - 1];
      const int32_t* below_match = t.node_match.data() + lay.node_begin[l - 1];
      for (int64_t by = first_child(py, B.map_h); by < first_child(py, B.map_h) + 2; ++by)
        for (int64_t bx = first_child(px, B.map_w); bx < first_child(px, B.map_w) + 2; ++bx) {
          const int64_t q = by * B.map_w + bx;
          int8_t v = 0;
          if (label[p] == -1 || below_label[q] == -1)
            v = -1;
          else if (label[p] == 1 && below_label[q] == 1 && match[p] == below_match[q])
            v = 1;
          link[k++] = v;
        }
    }
  }
  return t;
}

TensorMap encode_seglink_batch(const SeglinkConfig& cfg, const Tensor& quads,
                               const Tensor& num_boxes, const Tensor& dont_care) {
  AIM_CHECK(
      quads.defined() && quads.dtype() == DType::f32 && quads.dim() == 3 && quads.size(2) == 8,
      "[encode_seglink_batch] quads must be f32 [B, G, 8], got ",
      quads.defined() ? dtype_name(quads.dtype()) : "undefined", " ",
      quads.defined() ? to_string(quads.sizes()) : "");
  const int64_t B = quads.size(0), G = quads.size(1);
  AIM_CHECK(num_boxes.defined() && num_boxes.dtype() == DType::i64 && num_boxes.sizes() == Shape{B},
            "[encode_seglink_batch] num_boxes must be i64 [B] = [", B, "], got ",
            num_boxes.defined() ? dtype_name(num_boxes.dtype()) : "undefined", " ",
            num_boxes.defined() ? to_string(num_boxes.sizes()) : "");
  AIM_CHECK(
      !dont_care.defined() || (dont_care.dtype() == DType::u8 && dont_care.sizes() == Shape{B, G}),
      "[encode_seglink_batch] dont_care must be u8 [B, G] = [", B, ", ", G, "], got ",
      dont_care.defined() ? dtype_name(dont_care.dtype()) : "", " ",
      dont_care.defined() ? to_string(dont_care.sizes()) : "");
  const SeglinkLayout lay = seglink_layout(cfg);
  const std::vector<float> q = quads.to_vector<float>();
  const std::vector<int64_t> num = num_boxes.to_vector<int64_t>();
  const std::vector<uint8_t> dc =
      dont_care.defined() ? dont_care.to_vector<uint8_t>() : std::vector<uint8_t>(size_t(B * G));
  Tensor labels = Tensor::empty({B, lay.nodes}, DType::i8);
  Tensor offsets = Tensor::empty({B, lay.nodes, 6}, DType::f32);
  Tensor links = Tensor::empty({B, lay.links}, DType::i8);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = num[size_t(b)];
    AIM_CHECK(n >= 0 && n <= G, "[encode_seglink_batch] num_boxes[", b, "] = ", n,
              " outside [0, G = ", G, "]");
    const std::vector<double> qd(q.begin() + b * G * 8, q.begin() + (b * G + n) * 8);
    SeglinkTargets t;
    try {
      t = encode_seglink_targets(cfg, qd.data(), n, dc.data() + b * G);
    } catch (const Error& e) {
      AIM_FAIL("[encode_seglink_batch] image ", b, " of quads ", to_string(quads.sizes()), ": ",
               e.what());
    }
    std::copy(t.node_labels.begin(), t.node_labels.end(), labels.data<int8_t>() + b * lay.nodes);
    std::copy(t.offsets.begin(), t.offsets.end(), offsets.data<float>() + b * lay.nodes * 6);
    std::copy(t.link_labels.begin(), t.link_labels.end(), links.data<int8_t>() + b * lay.links);
  }
  return TensorMap{{"seg_labels", labels}, {"seg_offsets", offsets}, {"link_labels", links}};
}

std::vector<SeglinkSegment> decode_segments_links(const SeglinkConfig& cfg,
                                                  const float* node_scores,
                                                  const float* link_scores, const float* offsets,
                                                  const SeglinkThresholds& t) {
  const SeglinkLayout lay = seglink_layout(cfg);
  std::vector<char> kept(size_t(lay.nodes), 0);
  for (int64_t v = 0; v < lay.nodes; ++v) kept[size_t(v)] = node_scores[v] >= t.node;
  Groups groups(lay.nodes);
  for (size_t l = 0; l < cfg.layers.size(); ++l) {
    const SeglinkLayer& L = cfg.layers[l];
    const int64_t n = lay.links_per_node[l], base = lay.node_begin[l];
    for (int64_t p = 0; p < L.map_h * L.map_w; ++p) {
      if (!kept[size_t(base + p)]) continue;
      const int64_t py = p / L.map_w, px = p % L.map_w;
      const float* link = link_scores + lay.link_begin[l] + p * n;
      int k = 0;
      for (int64_t ny = py - 1; ny <= py + 1; ++ny)
        for (int64_t nx = px - 1; nx <= px + 1; ++nx) {
          if (ny == py && nx == px) continue;
          const bool inside = ny >= 0 && nx >= 0 && ny < L.map_h && nx < L.map_w;
          if (inside && link[k] >= t.link && kept[size_t(base + ny * L.map_w + nx)])
            groups.join(base + p, base + ny * L.map_w + nx);
          ++k;
        }
      if (l == 0) continue;
      const SeglinkLayer& B = cfg.layers[l - 1];
      const int64_t below = lay.node_begin[l - 1];
      for (int64_t by = first_child(py, B.map_h); by < first_child(py, B.map_h) + 2; ++by)
        for (int64_t bx = first_child(px, B.map_w); bx < first_child(px, B.map_w) + 2; ++bx) {
          const int64_t q = below + by * B.map_w + bx;
          if (link[k] >= t.link && kept[size_t(q)]) groups.join(base + p, q);
          ++k;
        }
    }
  }
  std::vector<SeglinkSegment> out;
  std::vector<int64_t> group_of_root(size_t(lay.nodes), -1);
  int64_t next_group = 0;
  for (size_t l = 0; l < cfg.layers.size(); ++l) {
    const SeglinkLayer& L = cfg.layers[l];
    const double a = L.anchor;
    for (int64_t p = 0; p < L.map_h * L.map_w; ++p) {
      const int64_t v = lay.node_begin[l] + p;
      if (!kept[size_t(v)]) continue;
      double ax, ay;
      anchor_centre(cfg, L, p, &ax, &ay);
      const float* o = offsets + 6 * v;
      const std::array<double, 6>& var = cfg.variances;
      SeglinkSegment s;
      s.cx = double(o[0]) * var[0] * a + ax;
      s.cy = double(o[1]) * var[1] * a + ay;
      s.w = std::exp(double(o[2]) * var[2]) * a - kEps;
      s.h = std::exp(double(o[3]) * var[3]) * a - kEps;
      s.cos = double(o[4]) * var[4];
      s.sin = double(o[5]) * var[5];
      s.score = node_scores[v];
      s.node = v;
      int64_t& g = group_of_root[size_t(groups.find(v))];
      if (g < 0) g = next_group++;
      s.group = g;
      out.push_back(s);
    }
  }
  return out;
}

std::vector<SeglinkDetection> combine_segments(const std::vector<SeglinkSegment>& segments) {
  int64_t n_groups = 0;
  for (const SeglinkSegment& s : segments) {
    AIM_CHECK(s.group >= 0, "[combine_segments] segment of node ", s.node, " has group ", s.group);
    n_groups = std::max(n_groups, s.group + 1);
  }
  std::vector<std::vector<const SeglinkSegment*>> members(static_cast<size_t>(n_groups));
  for (const SeglinkSegment& s : segments) members[size_t(s.group)].push_back(&s);
  std::vector<SeglinkDetection> out;
  for (const auto& m : members) {
    if (m.empty()) continue;
    const double n = double(m.size());
    double mc = 0, ms = 0, mx = 0, my = 0, mh = 0, score = 0;
    for (const SeglinkSegment* s : m) {
      mc += s->cos, ms += s->sin, mx += s->cx, my += s->cy, mh += s->h, score += s->score;
    }
    mc /= n, ms /= n, mx /= n, my /= n, mh /= n, score /= n;
    // atan(ms / mc) as the reference; the unit direction keeps vertical words (mc = 0) finite.
    double theta = (mc == 0 && ms == 0) ? 0.0 : std::atan2(ms, mc);
    if (theta > M_PI / 2) theta -= M_PI;
    if (theta < -M_PI / 2) theta += M_PI;
    const double ux = std::cos(theta), uy = std::sin(theta);
    // Positions of the centres' projections along u, from the mean centre (on the line).
    size_t lo = 0, hi = 0;
    std::vector<double> t(m.size());
    for (size_t i = 0; i < m.size(); ++i) {
      t[i] = (m[i]->cx - mx) * ux + (m[i]->cy - my) * uy;
      if (t[i] < t[lo]) lo = i;
      if (t[i] > t[hi]) hi = i;
    }
    SeglinkDetection d;
    const double mid = 0.5 * (t[lo] + t[hi]);
    d.box.cx = mx + mid * ux;
    d.box.cy = my + mid * uy;
    d.box.w = (t[hi] - t[lo]) + 0.5 * (m[lo]->w + m[hi]->w);
    d.box.h = mh;
    d.box.theta = theta;
    d.quad = rbox_to_quad(d.box);
    d.score = score;
    d.segments = int64_t(m.size());
    out.push_back(d);
  }
  return out;
}

}  // namespace aim::models::detection
