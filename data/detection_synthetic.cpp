#include "data/detection_synthetic.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "data/philox_draw.h"
#include "tensor/check.h"

namespace aim::data {
namespace {

constexpr uint64_t kTagLayout = 40, kTagNoise = 41;
constexpr uint64_t kLayoutBlocks = 1024;  // Philox blocks reserved per sample for its layout

// Palette (RGB in [0, 1]): red, green, blue, yellow, magenta, cyan, white, orange.
constexpr float kPalette[DetectionSyntheticSource::kColours][3] = {
    {0.9f, 0.1f, 0.1f},   {0.1f, 0.8f, 0.2f},  {0.15f, 0.25f, 0.95f}, {0.95f, 0.9f, 0.1f},
    {0.9f, 0.15f, 0.85f}, {0.1f, 0.85f, 0.9f}, {0.97f, 0.97f, 0.97f}, {1.0f, 0.55f, 0.05f}};

// Whether the point (u, v) in the shape's box, both in [-1, 1], is inside shape s.
bool inside(int s, float u, float v) {
  switch (s) {
    case 0:
      return true;  // rectangle
    case 1:
      return u * u + v * v <= 1.0f;  // ellipse
    case 2:
      return std::fabs(u) <= 0.5f * (v + 1.0f);  // triangle, apex up
    case 3:
      return std::fabs(u) <= 0.3f || std::fabs(v) <= 0.3f;  // cross
    default: {                                              // ring
      const float r = u * u + v * v;
      return r <= 1.0f && r >= 0.4f;
    }
  }
}

float iou(const SyntheticObject& a, const SyntheticObject& b) {
  const float w = std::max(0.0f, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  const float h = std::max(0.0f, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  const float inter = w * h;
  return inter / ((a.x2 - a.x1) * (a.y2 - a.y1) + (b.x2 - b.x1) * (b.y2 - b.y1) - inter);
}

}  // namespace

DetectionSyntheticSource::DetectionSyntheticSource(const DetectionSyntheticConfig& cfg)
    : cfg_(cfg) {
  AIM_CHECK(cfg_.classes >= 1 && cfg_.classes <= kShapes * kColours,
            "detection-synthetic: classes must be in [1, ", kShapes * kColours, "], got ",
            cfg_.classes);
  AIM_CHECK(cfg_.height >= 8 && cfg_.width >= 8, "detection-synthetic: the image must be at ",
            "least 8x8, got ", cfg_.height, "x", cfg_.width);
  AIM_CHECK(cfg_.max_objects >= 1 && cfg_.max_objects <= 64,
            "detection-synthetic: max_objects must be in [1, 64], got ", cfg_.max_objects);
  AIM_CHECK(cfg_.min_size > 0 && cfg_.min_size <= cfg_.max_size && cfg_.max_size <= 1,
            "detection-synthetic: need 0 < min_size <= max_size <= 1, got ", cfg_.min_size, ", ",
            cfg_.max_size);
  AIM_CHECK(cfg_.noise >= 0 && cfg_.epoch_size >= 1 && cfg_.eval_size >= 1,
            "detection-synthetic: noise must be >= 0 and the set sizes >= 1");
  layout_key_ = philox_key(cfg_.seed, kTagLayout);
  noise_key_ = philox_key(cfg_.seed, kTagNoise);
}

void DetectionSyntheticSource::colour(int64_t label, float rgb[3]) {
  AIM_CHECK(label >= 1 && label <= kShapes * kColours, "detection-synthetic: label ", label,
            " outside [1, ", kShapes * kColours, "]");
  for (int c = 0; c < 3; ++c) rgb[c] = kPalette[(label - 1) / kShapes][c];
}

std::string DetectionSyntheticSource::describe() const {
  std::ostringstream os;
  os << "detection-synthetic seed " << cfg_.seed << " (" << cfg_.classes << " classes, "
     << cfg_.height << "x" << cfg_.width << ", <= " << cfg_.max_objects << " objects)";
  return os.str();
}

std::string DetectionSyntheticSource::fingerprint() const {
  std::ostringstream os;
  os.precision(17);
  os << "detection-synthetic:seed=" << cfg_.seed << ",classes=" << cfg_.classes
     << ",height=" << cfg_.height << ",width=" << cfg_.width << ",objects=" << cfg_.max_objects
     << ",size=" << cfg_.min_size << "-" << cfg_.max_size << ",noise=" << cfg_.noise
     << ",epoch=" << cfg_.epoch_size << ",eval=" << cfg_.eval_size;
  return os.str();
}

std::vector<SyntheticObject> DetectionSyntheticSource::sample(int64_t index, float* img,
                                                              uint8_t* owner) const {
  AIM_CHECK(index >= 0, "detection-synthetic: negative sample index ", index);
  const int64_t H = cfg_.height, W = cfg_.width, HW = H * W;
  PhiloxDraw d(layout_key_, uint64_t(index) * kLayoutBlocks);
  // Background: a colour gradient per channel, values within [0.15, 0.85].
  float base[3], gx[3], gy[3];
  for (int c = 0; c < 3; ++c) {
    base[c] = float(0.3 + 0.4 * d.unit());
    gx[c] = float(-0.15 + 0.3 * d.unit());
    gy[c] = float(-0.15 + 0.3 * d.unit());
  }
  if (owner) std::fill(owner, owner + HW, uint8_t(0));
  if (img)
    for (int c = 0; c < 3; ++c)
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < W; ++j)
          img[c * HW + i * W + j] =
              base[c] + gx[c] * (float(j) / float(W) - 0.5f) + gy[c] * (float(i) / float(H) - 0.5f);
  const int64_t n = 1 + d.below(cfg_.max_objects);
  const double side = double(std::min(H, W));
  std::vector<SyntheticObject> placed, objects;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t label = 1 + d.below(cfg_.classes);
    const float bright = float(0.8 + 0.2 * d.unit());
    for (int attempt = 0; attempt < 20; ++attempt) {
      const double size = side * (cfg_.min_size + (cfg_.max_size - cfg_.min_size) * d.unit());
      const double aspect = std::exp(std::log(0.5) + std::log(4.0) * d.unit());  // [0.5, 2]
      const double w = std::min(double(W), size * std::sqrt(aspect)),
                   h = std::min(double(H), size / std::sqrt(aspect));
      SyntheticObject o;
      o.label = label;
      o.x1 = float((double(W) - w) * d.unit());
      o.y1 = float((double(H) - h) * d.unit());
      o.x2 = o.x1 + float(w);
      o.y2 = o.y1 + float(h);
      bool clear = true;
      for (const SyntheticObject& p : placed) clear = clear && iou(o, p) <= 0.3f;
      if (!clear) continue;
      placed.push_back(o);
      // Rasterise: pixel (i, j) painted when its centre lies in the shape; the box is the tight
      // extent of the painted pixels.
      const int shape = int((label - 1) % kShapes);
      const float* rgb = kPalette[(label - 1) / kShapes];
      const float cx = 0.5f * (o.x1 + o.x2), cy = 0.5f * (o.y1 + o.y2);
      const float hw = 0.5f * (o.x2 - o.x1), hh = 0.5f * (o.y2 - o.y1);
      int64_t imin = H, imax = -1, jmin = W, jmax = -1;
      for (int64_t i = std::max<int64_t>(0, int64_t(o.y1));
           i < std::min<int64_t>(H, int64_t(o.y2) + 1); ++i)
        for (int64_t j = std::max<int64_t>(0, int64_t(o.x1));
             j < std::min<int64_t>(W, int64_t(o.x2) + 1); ++j) {
          const float u = (float(j) + 0.5f - cx) / hw, v = (float(i) + 0.5f - cy) / hh;
          if (std::fabs(u) > 1.0f || std::fabs(v) > 1.0f || !inside(shape, u, v)) continue;
          imin = std::min(imin, i), imax = std::max(imax, i);
          jmin = std::min(jmin, j), jmax = std::max(jmax, j);
          if (img)
            for (int c = 0; c < 3; ++c) img[c * HW + i * W + j] = bright * rgb[c];
          if (owner) owner[i * W + j] = uint8_t(objects.size() + 1);  // max_objects <= 64
        }
      if (imax >= 0)
        objects.push_back({label, float(jmin), float(imin), float(jmax + 1), float(imax + 1)});
      break;
    }
  }
  if (img) {
    // Pixel noise over everything, then [0, 1].
    const uint64_t blocks = philox::blocks_for(uint64_t(3 * HW));
    std::vector<float> z(size_t(3 * HW));
    philox_fill_normal(noise_key_, uint64_t(index) * blocks, 3 * HW, z.data());
    for (int64_t e = 0; e < 3 * HW; ++e)
      img[e] = std::clamp(img[e] + float(cfg_.noise) * z[size_t(e)], 0.0f, 1.0f);
  }
  return objects;
}

TensorMap DetectionSyntheticSource::batch(int64_t first, int64_t count) const {
  const int64_t G = cfg_.max_objects, HW = cfg_.height * cfg_.width;
  Tensor images = Tensor::empty({count, 3, cfg_.height, cfg_.width}, DType::f32);
  Tensor boxes = Tensor::zeros({count, G, 4}, DType::f32);
  Tensor labels = Tensor::zeros({count, G}, DType::i64);
  Tensor num = Tensor::empty({count}, DType::i64);
  for (int64_t s = 0; s < count; ++s) {
    const std::vector<SyntheticObject> objs = sample(first + s, images.data<float>() + s * 3 * HW);
    num.data<int64_t>()[s] = int64_t(objs.size());
    for (size_t k = 0; k < objs.size(); ++k) {
      float* b = boxes.data<float>() + (s * G + int64_t(k)) * 4;
      b[0] = objs[k].x1, b[1] = objs[k].y1, b[2] = objs[k].x2, b[3] = objs[k].y2;
      labels.data<int64_t>()[s * G + int64_t(k)] = objs[k].label;
    }
  }
  return TensorMap{{"images", images}, {"boxes", boxes}, {"labels", labels}, {"num_boxes", num}};
}

TensorMap DetectionSyntheticSource::next(int64_t batch_size) {
  AIM_CHECK(batch_size > 0, "detection-synthetic: batch_size must be > 0, got ", batch_size);
  TensorMap b = batch(pos_, batch_size);
  pos_ += batch_size;
  return b;
}

void DetectionSyntheticSource::seek(int64_t position) {
  AIM_CHECK(position >= 0 && position < kEvalOffset, "detection-synthetic: position ", position,
            " outside [0, 2^40)");
  pos_ = position;
}

TensorMap DetectionSyntheticSource::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0 && start + count <= cfg_.eval_size,
            "detection-synthetic: eval samples [", start, ", ", start + count,
            ") outside the evaluation set of ", cfg_.eval_size);
  return batch(kEvalOffset + start, count);
}

}  // namespace aim::data
