#include "data/keypoint_synthetic.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "data/keypoint_heatmap.h"
#include "data/philox_draw.h"
#include "tensor/check.h"

namespace aim::data {
namespace {

constexpr uint64_t kTagLayout = 50, kTagNoise = 51;
constexpr uint64_t kLayoutBlocks = 256;  // Philox blocks reserved per sample for its layout
constexpr double kPi = 3.14159265358979323846;

struct Canvas {
  float* img;
  int64_t H, W;
  void disc(double cx, double cy, double r, const float rgb[3]) {
    if (!img) return;
    for (int64_t i = std::max<int64_t>(0, int64_t(cy - r));
         i <= std::min<int64_t>(H - 1, int64_t(cy + r)); ++i)
      for (int64_t j = std::max<int64_t>(0, int64_t(cx - r));
           j <= std::min<int64_t>(W - 1, int64_t(cx + r)); ++j) {
        const double dx = double(j) + 0.5 - cx, dy = double(i) + 0.5 - cy;
        if (dx * dx + dy * dy <= r * r)
          for (int c = 0; c < 3; ++c) img[c * H * W + i * W + j] = rgb[c];
      }
  }
  // A thick segment: pixels within r of the segment.
  void line(double x0, double y0, double x1, double y1, double r, const float rgb[3]) {
    if (!img) return;
    const double lx = x1 - x0, ly = y1 - y0, l2 = std::max(1e-9, lx * lx + ly * ly);
    for (int64_t i = std::max<int64_t>(0, int64_t(std::min(y0, y1) - r));
         i <= std::min<int64_t>(H - 1, int64_t(std::max(y0, y1) + r)); ++i)
      for (int64_t j = std::max<int64_t>(0, int64_t(std::min(x0, x1) - r));
           j <= std::min<int64_t>(W - 1, int64_t(std::max(x0, x1) + r)); ++j) {
        const double px = double(j) + 0.5 - x0, py = double(i) + 0.5 - y0;
        const double t = std::clamp((px * lx + py * ly) / l2, 0.0, 1.0);
        const double dx = px - t * lx, dy = py - t * ly;
        if (dx * dx + dy * dy <= r * r)
          for (int c = 0; c < 3; ++c) img[c * H * W + i * W + j] = rgb[c];
      }
  }
};

}  // namespace

KeypointSyntheticSource::KeypointSyntheticSource(const KeypointSyntheticConfig& cfg) : cfg_(cfg) {
  AIM_CHECK(cfg_.height >= 16 && cfg_.width >= 16, "keypoint-synthetic: the image must be at ",
            "least 16x16, got ", cfg_.height, "x", cfg_.width);
  AIM_CHECK(
      cfg_.out_h >= 4 && cfg_.out_w >= 4 && cfg_.out_h <= cfg_.height && cfg_.out_w <= cfg_.width,
      "keypoint-synthetic: heatmaps ", cfg_.out_h, "x", cfg_.out_w,
      " must be at least 4x4 and at most the image");
  AIM_CHECK(cfg_.kernels.size() == 4, "keypoint-synthetic: 4 Gaussian kernels expected, got ",
            cfg_.kernels.size());
  AIM_CHECK(cfg_.min_scale > 0 && cfg_.min_scale <= cfg_.max_scale && cfg_.max_scale <= 1,
            "keypoint-synthetic: need 0 < min_scale <= max_scale <= 1");
  AIM_CHECK(cfg_.epoch_size >= 1 && cfg_.eval_size >= 1, "keypoint-synthetic: set sizes >= 1");
  layout_key_ = philox_key(cfg_.seed, kTagLayout);
  noise_key_ = philox_key(cfg_.seed, kTagNoise);
}

std::string KeypointSyntheticSource::describe() const {
  std::ostringstream os;
  os << "keypoint-synthetic seed " << cfg_.seed << " (" << cfg_.height << "x" << cfg_.width
     << ", heatmaps " << cfg_.out_h << "x" << cfg_.out_w << ")";
  return os.str();
}

std::string KeypointSyntheticSource::fingerprint() const {
  std::ostringstream os;
  os.precision(17);
  os << "keypoint-synthetic:seed=" << cfg_.seed << ",size=" << cfg_.height << "x" << cfg_.width
     << ",out=" << cfg_.out_h << "x" << cfg_.out_w << ",kernels=";
  for (int64_t k : cfg_.kernels) os << k << ";";
  os << ",scale=" << cfg_.min_scale << "-" << cfg_.max_scale << ",occlusion=" << cfg_.occlusion
     << ",noise=" << cfg_.noise << ",epoch=" << cfg_.epoch_size << ",eval=" << cfg_.eval_size;
  return os.str();
}

std::array<float, 51> KeypointSyntheticSource::sample(int64_t index, float* img,
                                                      float* area) const {
  AIM_CHECK(index >= 0, "keypoint-synthetic: negative sample index ", index);
  const int64_t H = cfg_.height, W = cfg_.width, HW = H * W;
  PhiloxDraw d(layout_key_, uint64_t(index) * kLayoutBlocks);
  auto uni = [&](double lo, double hi) { return lo + (hi - lo) * d.unit(); };
  Canvas cv{img, H, W};
  // Background: a gradient per channel and a few soft-coloured discs and bars as texture.
  float base[3], gx[3], gy[3];
  for (int c = 0; c < 3; ++c)
    base[c] = float(uni(0.3, 0.7)), gx[c] = float(uni(-0.2, 0.2)), gy[c] = float(uni(-0.2, 0.2));
  if (img)
    for (int c = 0; c < 3; ++c)
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < W; ++j)
          img[c * HW + i * W + j] =
              base[c] + gx[c] * (float(j) / float(W) - 0.5f) + gy[c] * (float(i) / float(H) - 0.5f);
  for (int t = 0; t < 6; ++t) {
    float rgb[3];
    for (float& v : rgb) v = float(uni(0.25, 0.75));
    const double x = uni(0, double(W)), y = uni(0, double(H)), r = uni(0.03, 0.12) * double(H);
    if (t % 2)
      cv.disc(x, y, r, rgb);
    else
      cv.line(x, y, x + uni(-2, 2) * r, y + uni(-2, 2) * r, 0.15 * r, rgb);
  }
  // The figure, in pixels: body height s, pelvis (px, py), lean angle.
  const double s = double(H) * uni(cfg_.min_scale, cfg_.max_scale);
  const double px = uni(0.3, 0.7) * double(W), py = uni(0.45, 0.6) * double(H);
  const double lean = uni(-0.25, 0.25);
  auto at = [&](double ox, double oy, double len, double ang, double& x, double& y) {
    x = ox + len * s * std::sin(ang), y = oy + len * s * std::cos(ang);  // ang 0: straight down
  };
  double nx, ny;  // neck
  at(px, py, 0.32, kPi + lean, nx, ny);
  const double head_r = 0.07 * s;
  double hx, hy;
  at(nx, ny, 0.11, kPi + lean + uni(-0.3, 0.3), hx, hy);
  const double turn = uni(-0.6, 0.6);  // head turn: moves the face sideways
  std::array<double, 34> p{};          // x, y of the 17 keypoints
  auto set = [&](int k, double x, double y) { p[size_t(2 * k)] = x, p[size_t(2 * k + 1)] = y; };
  const double cl = std::cos(lean), sl = std::sin(lean);  // body axes: across (cl, -sl)
  auto across = [&](double ox, double oy, double off, int k) {
    set(k, ox + off * s * cl, oy - off * s * sl);
  };
  across(hx, hy, 0.03 * turn, 0);                                          // nose
  across(hx - 0.02 * s * sl, hy - 0.02 * s * cl, 0.03 * turn + 0.025, 1);  // left eye
  across(hx - 0.02 * s * sl, hy - 0.02 * s * cl, 0.03 * turn - 0.025, 2);  // right eye
  across(hx, hy, 0.06 + 0.02 * turn, 3);                                   // left ear
  across(hx, hy, -0.06 + 0.02 * turn, 4);                                  // right ear
  across(nx, ny, 0.11, 5);                                                 // left shoulder
  across(nx, ny, -0.11, 6);                                                // right shoulder
  across(px, py, 0.075, 11);                                               // left hip
  across(px, py, -0.075, 12);                                              // right hip
  // Limbs: (start, middle, end) keypoints, lengths, angles from straight down.
  const int limbs[4][3] = {{5, 7, 9}, {6, 8, 10}, {11, 13, 15}, {12, 14, 16}};
  const double lens[4][2] = {{0.16, 0.15}, {0.16, 0.15}, {0.24, 0.23}, {0.24, 0.23}};
  for (int l = 0; l < 4; ++l) {
    const bool arm = l < 2, left = l % 2 == 0;
    const double side = left ? 1.0 : -1.0;
    // Arms swing anywhere from down to raised; legs from straight to a step / kick.
    const double a1 = lean + side * (arm ? uni(-0.4, 2.4) : uni(-0.35, 0.8));
    const double a2 = a1 + side * (arm ? uni(-1.8, 1.8) : uni(-1.2, 0.1));
    double x, y;
    at(p[size_t(2 * limbs[l][0])], p[size_t(2 * limbs[l][0] + 1)], lens[l][0], a1, x, y);
    set(limbs[l][1], x, y);
    at(x, y, lens[l][1], a2, x, y);
    set(limbs[l][2], x, y);
  }
  // Drawing: torso and head neutral, left limbs warm, right limbs cool; far side first.
  const float torso[3] = {float(uni(0.1, 0.3)), float(uni(0.1, 0.3)), float(uni(0.1, 0.3))};
  const float skin[3] = {0.95f, 0.8f, 0.65f};
  const float warm[2][3] = {{0.95f, 0.25f, 0.1f}, {0.95f, 0.7f, 0.1f}};
  const float cool[2][3] = {{0.1f, 0.35f, 0.95f}, {0.1f, 0.85f, 0.75f}};
  const double thick = 0.028 * s;
  cv.line(p[10], p[11], p[12], p[13], thick, torso);
  cv.line(p[22], p[23], p[24], p[25], thick, torso);
  cv.line(0.5 * (p[10] + p[12]), 0.5 * (p[11] + p[13]), 0.5 * (p[22] + p[24]),
          0.5 * (p[23] + p[25]), 2 * thick, torso);
  cv.disc(hx, hy, head_r, skin);
  for (int l = 0; l < 4; ++l) {
    const float(*col)[3] = l % 2 == 0 ? warm : cool;
    const int* k = limbs[l];
    cv.line(p[size_t(2 * k[0])], p[size_t(2 * k[0] + 1)], p[size_t(2 * k[1])],
            p[size_t(2 * k[1] + 1)], thick, col[0]);
    cv.line(p[size_t(2 * k[1])], p[size_t(2 * k[1] + 1)], p[size_t(2 * k[2])],
            p[size_t(2 * k[2] + 1)], 0.8 * thick, col[1]);
  }
  const float eye[3] = {0.05f, 0.05f, 0.05f}, ear[2][3] = {{0.8f, 0.3f, 0.3f}, {0.3f, 0.3f, 0.8f}};
  cv.disc(p[0], p[1], 0.012 * s, torso);
  cv.disc(p[2], p[3], 0.01 * s, eye);
  cv.disc(p[4], p[5], 0.01 * s, eye);
  cv.disc(p[6], p[7], 0.014 * s, ear[0]);
  cv.disc(p[8], p[9], 0.014 * s, ear[1]);
  std::array<float, 51> kp{};
  double x0 = 1e30, y0 = 1e30, x1 = -1e30, y1 = -1e30;
  for (int k = 0; k < 17; ++k) {
    const double x = p[size_t(2 * k)], y = p[size_t(2 * k + 1)];
    const bool inside = x >= 0 && y >= 0 && x < double(W) && y < double(H);
    int v = inside ? 2 : 0;
    if (inside && d.unit() < cfg_.occlusion) {
      v = 1;  // an occluder square over the joint
      float rgb[3];
      for (float& c : rgb) c = float(uni(0.2, 0.8));
      const double r = uni(0.04, 0.07) * s;
      for (double t = -r; t <= r; t += 0.5) cv.line(x - r, y + t, x + r, y + t, 0.5, rgb);
    }
    if (v > 0) {
      kp[size_t(3 * k)] = float(x), kp[size_t(3 * k + 1)] = float(y);
      x0 = std::min(x0, x), y0 = std::min(y0, y), x1 = std::max(x1, x), y1 = std::max(y1, y);
    }
    kp[size_t(3 * k + 2)] = float(v);
  }
  if (area) *area = x1 >= x0 ? float(0.5 * (x1 - x0 + 2 * head_r) * (y1 - y0 + 2 * head_r)) : 0.0f;
  if (img) {
    const uint64_t blocks = philox::blocks_for(uint64_t(3 * HW));
    std::vector<float> z(size_t(3 * HW));
    philox_fill_normal(noise_key_, uint64_t(index) * blocks, 3 * HW, z.data());
    for (int64_t e = 0; e < 3 * HW; ++e)
      img[e] = std::clamp(img[e] + float(cfg_.noise) * z[size_t(e)], 0.0f, 1.0f);
  }
  return kp;
}

TensorMap KeypointSyntheticSource::batch(int64_t first, int64_t count) const {
  const int64_t H = cfg_.height, W = cfg_.width, HW = H * W, oh = cfg_.out_h, ow = cfg_.out_w;
  Tensor images = Tensor::empty({count, 3, H, W}, DType::f32);
  Tensor kps = Tensor::empty({count, 17, 3}, DType::f32);
  Tensor valid = Tensor::empty({count, 17}, DType::f32);
  Tensor area = Tensor::empty({count}, DType::f32);
  Tensor heat = Tensor::empty({count, 4, 17, oh, ow}, DType::f32);
  for (int64_t s = 0; s < count; ++s) {
    const std::array<float, 51> kp =
        sample(first + s, images.data<float>() + s * 3 * HW, area.data<float>() + s);
    std::copy(kp.begin(), kp.end(), kps.data<float>() + s * 51);
    for (int k = 0; k < 17; ++k) {
      valid.data<float>()[s * 17 + k] = kp[size_t(3 * k + 2)];
      for (int64_t l = 0; l < 4; ++l)
        cpn_keypoint_heatmap(kp[size_t(3 * k)], kp[size_t(3 * k + 1)], kp[size_t(3 * k + 2)], H, W,
                             oh, ow, cfg_.kernels[size_t(l)],
                             heat.data<float>() + ((s * 4 + l) * 17 + k) * oh * ow);
    }
  }
  return TensorMap{
      {"images", images}, {"keypoints", kps}, {"valid", valid}, {"area", area}, {"heatmaps", heat}};
}

TensorMap KeypointSyntheticSource::next(int64_t batch_size) {
  AIM_CHECK(batch_size > 0, "keypoint-synthetic: batch_size must be > 0, got ", batch_size);
  TensorMap b = batch(pos_, batch_size);
  pos_ += batch_size;
  return b;
}

void KeypointSyntheticSource::seek(int64_t position) {
  AIM_CHECK(position >= 0 && position < kEvalOffset, "keypoint-synthetic: position ", position,
            " outside [0, 2^40)");
  pos_ = position;
}

TensorMap KeypointSyntheticSource::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0 && start + count <= cfg_.eval_size,
            "keypoint-synthetic: eval samples [", start, ", ", start + count,
            ") outside the evaluation set of ", cfg_.eval_size);
  return batch(kEvalOffset + start, count);
}

}  // namespace aim::data
