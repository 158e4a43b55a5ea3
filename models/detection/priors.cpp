#include "models/detection/priors.h"

#include <algorithm>
#include <cmath>

#include "tensor/check.h"

namespace aim::models::detection {

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
  AIM_CHECK(feature_maps.size() == K && spec.steps.size() == K && spec.scales.size() == K + 1,
            "default boxes: ", feature_maps.size(), " feature maps, ", K, " aspect-ratio lists, ",
            spec.steps.size(), " steps and ", spec.scales.size(),
            " scales (expected maps = lists = steps = scales - 1)");
  AIM_CHECK(image_h > 0 && image_w > 0, "default boxes: image ", image_h, "x", image_w);
  std::vector<float> out;
  for (size_t k = 0; k < K; ++k) {
    const auto [fh, fw] = feature_maps[k];
    AIM_CHECK(fh > 0 && fw > 0 && spec.steps[k] > 0, "default boxes: feature map ", k, " is ", fh,
              "x", fw, " with step ", spec.steps[k]);
    // The (w, h) pairs in double, then f32 (torch.as_tensor(wh_pairs, dtype=float32)), clipped.
    std::vector<std::pair<float, float>> wh;
    const double s = spec.scales[k], sp = std::sqrt(spec.scales[k] * spec.scales[k + 1]);
    wh.push_back({float(s), float(s)});
    wh.push_back({float(sp), float(sp)});
    for (double ar : spec.aspect_ratios[k]) {
      const double q = std::sqrt(ar);
      wh.push_back({float(s * q), float(s / q)});
      wh.push_back({float(s / q), float(s * q)});
    }
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
  float* p = d.data<float>();
  const float sx = float(image_w), sy = float(image_h);
  for (int64_t i = 0; i < d.size(0); ++i, p += 4) {
    const float cx = p[0], cy = p[1], w = p[2], h = p[3];
    p[0] = (cx - 0.5f * w) * sx;
    p[1] = (cy - 0.5f * h) * sy;
    p[2] = (cx + 0.5f * w) * sx;
    p[3] = (cy + 0.5f * h) * sy;
  }
  return d;
}

}  // namespace aim::models::detection
