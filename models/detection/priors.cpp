#include "models/detection/priors.h"

#include <algorithm>
#include <cmath>

#include "tensor/check.h"

namespace aim::models::detection {

namespace {

void check_spec(const DefaultBoxSpec& spec, size_t maps) {
  const size_t K = spec.aspect_ratios.size();
  AIM_CHECK(maps == K && spec.steps.size() == K && spec.scales.size() == K + 1,
            "default boxes: ", maps, " feature maps, ", K, " aspect-ratio lists, ",
            spec.steps.size(), " steps and ", spec.scales.size(),
            " scales (expected maps = lists = steps = scales - 1)");
}

// Map k's (w, h) pairs in double, in the references' order: [s_k, s'_k, (ar, 1/ar)...].
std::vector<std::pair<double, double>> box_sizes(const DefaultBoxSpec& spec, size_t k) {
  const double s = spec.scales[k], sp = std::sqrt(spec.scales[k] * spec.scales[k + 1]);
  std::vector<std::pair<double, double>> wh = {{s, s}, {sp, sp}};
  for (double ar : spec.aspect_ratios[k]) {
    const double q = std::sqrt(ar);
    wh.push_back({s * q, s / q});
    wh.push_back({s / q, s * q});
  }
  return wh;
}

// (cx, cy, w, h) relative -> (x1, y1, x2, y2) pixels, in place: (c -+ 0.5 w) in f32, then times
// the image size (torchvision's generator and MLPerf's dboxes_ltrb both round in this order).
void to_xyxy_pixels(Tensor& d, int64_t image_h, int64_t image_w) {
  float* p = d.data<float>();
  const float sx = float(image_w), sy = float(image_h);
  for (int64_t i = 0; i < d.size(0); ++i, p += 4) {
    const float cx = p[0], cy = p[1], w = p[2], h = p[3];
    p[0] = (cx - 0.5f * w) * sx;
    p[1] = (cy - 0.5f * h) * sy;
    p[2] = (cx + 0.5f * w) * sx;
    p[3] = (cy + 0.5f * h) * sy;
  }
}

}  // namespace

DefaultBoxSpec ssd300_default_boxes() {
  DefaultBoxSpec s;
  s.aspect_ratios = {{2}, {2, 3}, {2, 3}, {2, 3}, {2}, {2}};
  s.scales = {0.07, 0.15, 0.33, 0.51, 0.69, 0.87, 1.05};
  s.steps = {8, 16, 32, 64, 100, 300};
  return s;
}

Tensor default_boxes_cxcywh(const DefaultBoxSpec& spec,
                            const std::vector<std::pair<int64_t, int64_t>>& feature_maps,
                            int64_t image_h, int64_t image_w) {
  const size_t K = spec.aspect_ratios.size();
  check_spec(spec, feature_maps.size());
  AIM_CHECK(image_h > 0 && image_w > 0, "default boxes: image ", image_h, "x", image_w);
  std::vector<float> out;
  for (size_t k = 0; k < K; ++k) {
    const auto [fh, fw] = feature_maps[k];
    AIM_CHECK(fh > 0 && fw > 0 && spec.steps[k] > 0, "default boxes: feature map ", k, " is ", fh,
              "x", fw, " with step ", spec.steps[k]);
    // The (w, h) pairs in double, then f32 (torch.as_tensor(wh_pairs, dtype=float32)), clipped.
    std::vector<std::pair<float, float>> wh;
    for (const auto& [w, h] : box_sizes(spec, k)) wh.push_back({float(w), float(h)});
    if (spec.clip)
      for (auto& [w, h] : wh) w = std::clamp(w, 0.0f, 1.0f), h = std::clamp(h, 0.0f, 1.0f);
    // Centres in f32: (arange + 0.5) / (image / step), the divisor rounded to f32 first.
    const float xf = float(double(image_w) / spec.steps[k]),
                yf = float(double(image_h) / spec.steps[k]);
    for (int64_t i = 0; i < fh; ++i)
      for (int64_t j = 0; j < fw; ++j) {
        const float cx = (float(j) + 0.5f) / xf, cy = (float(i) + 0.5f) / yf;
        for (const auto& [w, h] : wh) out.insert(out.end(), {cx, cy, w, h});
      }
  }
  const int64_t P = int64_t(out.size()) / 4;
  return Tensor::from_vector(out, {P, 4});
}

Tensor default_boxes_xyxy(const DefaultBoxSpec& spec,
                          const std::vector<std::pair<int64_t, int64_t>>& feature_maps,
                          int64_t image_h, int64_t image_w) {
  Tensor d = default_boxes_cxcywh(spec, feature_maps, image_h, image_w);
  to_xyxy_pixels(d, image_h, image_w);
  return d;
}

DefaultBoxSpec mlperf_ssd300_default_boxes() {
  DefaultBoxSpec s = ssd300_default_boxes();
  s.scales.clear();
  for (double v : {21, 45, 99, 153, 207, 261, 315}) s.scales.push_back(v / 300.0);
  return s;
}

Tensor size_major_default_boxes_cxcywh(const DefaultBoxSpec& spec,
                                       const std::vector<int64_t>& map_sizes, int64_t image_size) {
  check_spec(spec, map_sizes.size());
  AIM_CHECK(image_size > 0, "default boxes: image ", image_size, "x", image_size);
  std::vector<float> out;
  for (size_t k = 0; k < map_sizes.size(); ++k) {
    const int64_t n = map_sizes[k];
    AIM_CHECK(n > 0 && spec.steps[k] > 0, "default boxes: feature map ", k, " is ", n, "x", n,
              " with step ", spec.steps[k]);
    const double fk = double(image_size) / spec.steps[k];
    for (const auto& [w, h] : box_sizes(spec, k))
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j)
          for (double v : {(double(j) + 0.5) / fk, (double(i) + 0.5) / fk, w, h})
            out.push_back(std::clamp(float(v), 0.0f, 1.0f));
  }
  const int64_t P = int64_t(out.size()) / 4;
  return Tensor::from_vector(out, {P, 4});
}

Tensor size_major_default_boxes_xyxy(const DefaultBoxSpec& spec,
                                     const std::vector<int64_t>& map_sizes, int64_t image_size) {
  Tensor d = size_major_default_boxes_cxcywh(spec, map_sizes, image_size);
  to_xyxy_pixels(d, image_size, image_size);
  return d;
}

}  // namespace aim::models::detection
