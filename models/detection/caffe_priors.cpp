#include "models/detection/caffe_priors.h"

#include <algorithm>
#include <cmath>

#include "tensor/check.h"

namespace aim::models::detection {

namespace {

// PriorBoxLayer::LayerSetUp's list: 1 first, each new ratio, then its inverse when flip.
std::vector<float> layer_ratios(const CaffePriorBoxSpec& s) {
  std::vector<float> r = {1.0f};
  for (double a : s.aspect_ratios) {
    const float ar = float(a);
    bool seen = false;
    for (float x : r) seen = seen || std::fabs(ar - x) < 1e-6f;
    if (seen) continue;
    r.push_back(ar);
    if (s.flip) r.push_back(1.0f / ar);
  }
  return r;
}

std::vector<std::pair<int64_t, int64_t>> check_layers(
    const std::vector<CaffePriorBoxSpec>& layers,
    const std::vector<std::pair<int64_t, int64_t>>& maps, int64_t image_h, int64_t image_w) {
  AIM_CHECK(layers.size() == maps.size(), "Caffe PriorBox: ", layers.size(), " layers and ",
            maps.size(), " feature maps");
  AIM_CHECK(image_h > 0 && image_w > 0, "Caffe PriorBox: image ", image_h, "x", image_w);
  for (size_t k = 0; k < layers.size(); ++k) {
    const CaffePriorBoxSpec& s = layers[k];
    AIM_CHECK(!s.min_sizes.empty(), "Caffe PriorBox layer ", k, ": no min_size");
    AIM_CHECK(s.max_sizes.empty() || s.max_sizes.size() == s.min_sizes.size(),
              "Caffe PriorBox layer ", k, ": ", s.max_sizes.size(), " max sizes for ",
              s.min_sizes.size(), " min sizes");
    for (size_t i = 0; i < s.min_sizes.size(); ++i) {
      AIM_CHECK(s.min_sizes[i] > 0, "Caffe PriorBox layer ", k, ": min_size ", s.min_sizes[i]);
      AIM_CHECK(s.max_sizes.empty() || s.max_sizes[i] > s.min_sizes[i], "Caffe PriorBox layer ", k,
                ": max_size ", s.max_sizes[i], " must exceed min_size ", s.min_sizes[i]);
    }
    for (double a : s.aspect_ratios)
      AIM_CHECK(a > 0, "Caffe PriorBox layer ", k, ": aspect ratio ", a);
    AIM_CHECK(s.step >= 0, "Caffe PriorBox layer ", k, ": step ", s.step);
    AIM_CHECK(maps[k].first > 0 && maps[k].second > 0, "Caffe PriorBox layer ", k, ": map ",
              maps[k].first, "x", maps[k].second);
  }
  return maps;
}

}  // namespace

int64_t caffe_priors_per_cell(const CaffePriorBoxSpec& s) {
  return int64_t(layer_ratios(s).size() * s.min_sizes.size() + s.max_sizes.size());
}

Tensor caffe_prior_boxes(const std::vector<CaffePriorBoxSpec>& layers,
                         const std::vector<std::pair<int64_t, int64_t>>& maps, int64_t image_h,
                         int64_t image_w) {
  check_layers(layers, maps, image_h, image_w);
  std::vector<float> out;
  for (size_t k = 0; k < layers.size(); ++k) {
    const CaffePriorBoxSpec& s = layers[k];
    const auto [lh, lw] = maps[k];
    const std::vector<float> ratios = layer_ratios(s);
    const float step_w = s.step > 0 ? float(s.step) : float(image_w) / float(lw);
    const float step_h = s.step > 0 ? float(s.step) : float(image_h) / float(lh);
    const float offset = float(s.offset);
    const size_t first = out.size();
    // Caffe computes (centre -+ size / 2.) / image in double and stores f32.
    auto push = [&](float cx, float cy, double bw, double bh) {
      out.push_back(float((double(cx) - bw / 2.) / double(image_w)));
      out.push_back(float((double(cy) - bh / 2.) / double(image_h)));
      out.push_back(float((double(cx) + bw / 2.) / double(image_w)));
      out.push_back(float((double(cy) + bh / 2.) / double(image_h)));
    };
    for (int64_t h = 0; h < lh; ++h)
      for (int64_t w = 0; w < lw; ++w) {
        const float cx = (float(w) + offset) * step_w, cy = (float(h) + offset) * step_h;
        for (size_t i = 0; i < s.min_sizes.size(); ++i) {
          const double m = s.int_sizes ? double(int64_t(s.min_sizes[i])) : s.min_sizes[i];
          push(cx, cy, float(m), float(m));
          if (!s.max_sizes.empty()) {
            const double M = s.int_sizes ? double(int64_t(s.max_sizes[i])) : s.max_sizes[i];
            const float side = float(std::sqrt(m * M));
            push(cx, cy, side, side);
          }
          for (float ar : ratios) {
            if (std::fabs(ar - 1.0f) < 1e-6f) continue;
            const double q = std::sqrt(double(ar));
            push(cx, cy, float(m * q), float(m / q));
          }
        }
      }
    if (s.clip)
      for (size_t i = first; i < out.size(); ++i) out[i] = std::min(std::max(out[i], 0.0f), 1.0f);
  }
  return Tensor::from_vector(out, {int64_t(out.size() / 4), 4});
}

Tensor caffe_prior_boxes_pixels(const std::vector<CaffePriorBoxSpec>& layers,
                                const std::vector<std::pair<int64_t, int64_t>>& maps,
                                int64_t image_h, int64_t image_w) {
  Tensor t = caffe_prior_boxes(layers, maps, image_h, image_w);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.size(0); ++i, p += 4) {
    p[0] *= float(image_w), p[2] *= float(image_w);
    p[1] *= float(image_h), p[3] *= float(image_h);
  }
  return t;
}

namespace {

std::vector<CaffePriorBoxSpec> caffe321_layers(int64_t n, const std::vector<double>& steps,
                                               const std::vector<double>& starts) {
  // The reference's arithmetic (Python 2 floats; step an int).
  const double min_dim = 321;
  const int64_t pct = (95 - 20) / (n - 2);
  std::vector<double> mins = {min_dim * 10 / 100.}, maxs = {min_dim * 20 / 100.};
  for (int64_t r = 20; r <= 95; r += pct)
    mins.push_back(min_dim * double(r) / 100.), maxs.push_back(min_dim * double(r + pct) / 100.);
  std::vector<CaffePriorBoxSpec> layers(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    CaffePriorBoxSpec& s = layers[size_t(k)];
    s.min_sizes = {mins[size_t(k)]};
    s.max_sizes = {maxs[size_t(k)]};
    s.aspect_ratios = {1.6, 2.0, 3.0};
    s.step = steps[size_t(k)];
    s.offset = starts[size_t(k)] / steps[size_t(k)];
  }
  return layers;
}

}  // namespace

std::vector<CaffePriorBoxSpec> dssd321_prior_layers() {
  return caffe321_layers(6, {8, 16, 32, 64, 64, 321}, {2.5, 2.5, 10.5, 26.5, 90.5, 160.5});
}

std::vector<CaffePriorBoxSpec> ssd_resnet18_321_prior_layers() {
  return caffe321_layers(4, {8, 16, 32, 64}, {2.5, 2.5, 10.5, 26.5});
}

}  // namespace aim::models::detection
