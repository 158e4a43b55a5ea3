#include "models/detection/masks.h"

#include <algorithm>
#include <cmath>

#include "kernels/interpolate/interpolate.h"
#include "kernels/roi/roi.h"
#include "tensor/check.h"

// torchvision's f32 box arithmetic, each product rounded on its own (GCC would fuse x_c - w_half *
// scale into one FMA and move a truncated box edge by a pixel now and then).
#pragma GCC optimize("fp-contract=off")

namespace aim::models::detection {

Tensor mask_target_rois(const std::vector<float>& boxes, const std::vector<int64_t>& matched,
                        int64_t G) {
  AIM_CHECK(boxes.size() == 4 * matched.size(), "[mask_target_rois] ", boxes.size() / 4,
            " boxes for ", matched.size(), " matched indices");
  std::vector<float> r;
  r.reserve(5 * matched.size());
  for (size_t p = 0; p < matched.size(); ++p) {
    AIM_CHECK(matched[p] >= 0 && matched[p] < G, "[mask_target_rois] proposal ", p,
              " is matched to object ", matched[p], ", not in [0, ", G, ")");
    r.push_back(float(matched[p]));
    r.insert(r.end(), boxes.begin() + 4 * int64_t(p), boxes.begin() + 4 * int64_t(p) + 4);
  }
  return Tensor::from_vector(r, {int64_t(matched.size()), 5});
}

Tensor project_masks_on_boxes(const Tensor& gt_masks, const Tensor& rois, int64_t M) {
  AIM_CHECK(gt_masks.dim() == 3, "[project_masks_on_boxes] gt_masks must be [G, H, W], got ",
            gt_masks.dim(), " dims");
  AIM_CHECK(rois.dim() == 2 && rois.size(1) == 5,
            "[project_masks_on_boxes] rois must be [P, 5], got ", rois.dim(), " dims");
  AIM_CHECK(M > 0, "[project_masks_on_boxes] M must be positive, got ", M);
  const int64_t P = rois.size(0);
  if (P == 0) return Tensor::zeros({0, M, M}, gt_masks.dtype(), gt_masks.device());
  kernels::RoiAlignFwdArgs a;
  a.x = gt_masks.contiguous().unsqueeze(1);  // [G, 1, H, W]
  a.rois = rois.to(gt_masks.dtype()).to(gt_masks.device()).contiguous();
  a.y = Tensor::empty({P, 1, M, M}, gt_masks.dtype(), gt_masks.device());
  a.p.spatial_scale = 1.0;
  a.p.sampling_ratio = -1;  // torchvision's roi_align default: adaptive
  a.p.aligned = false;
  kernels::roi_align_fwd(a);
  return a.y.view({P, M, M});
}

namespace {

// One mask pasted as torchvision's paste_mask_in_image; calls out(y, x, value) for each pixel of
// the image it covers.
template <class F>
void paste_one(const float* mask, int64_t M, const float* box, int64_t im_h, int64_t im_w,
               int64_t padding, F&& out) {
  // expand_masks: zero border; expand_boxes: the scale as a Python float, applied in f32.
  const int64_t E = M + 2 * padding;
  const float scale = float(double(E) / double(M));
  float w_half = (box[2] - box[0]) * 0.5f, h_half = (box[3] - box[1]) * 0.5f;
  const float x_c = (box[2] + box[0]) * 0.5f, y_c = (box[3] + box[1]) * 0.5f;
  w_half *= scale, h_half *= scale;
  // .to(int64): truncation toward zero.
  const int64_t b0 = int64_t(x_c - w_half), b1 = int64_t(y_c - h_half);
  const int64_t b2 = int64_t(x_c + w_half), b3 = int64_t(y_c + h_half);
  const int64_t w = std::max<int64_t>(b2 - b0 + 1, 1), h = std::max<int64_t>(b3 - b1 + 1, 1);
  const int64_t x0 = std::max<int64_t>(b0, 0), x1 = std::min<int64_t>(b2 + 1, im_w);
  const int64_t y0 = std::max<int64_t>(b1, 0), y1 = std::min<int64_t>(b3 + 1, im_h);
  if (x1 <= x0 || y1 <= y0) return;
  Tensor padded = Tensor::zeros({1, 1, E, E});
  float* pp = padded.data<float>();
  for (int64_t i = 0; i < M; ++i)
    std::copy(mask + i * M, mask + (i + 1) * M, pp + (i + padding) * E + padding);
  kernels::InterpolateFwdArgs a;
  a.x = padded;
  a.y = Tensor::empty({1, 1, h, w});
  a.p.mode = kernels::InterpMode::bilinear;
  a.p.align_corners = false;
  kernels::interpolate_fwd(a);
  const float* r = a.y.data<float>();
  for (int64_t y = y0; y < y1; ++y)
    for (int64_t x = x0; x < x1; ++x) out(y, x, r[(y - b1) * w + (x - b0)]);
}

void check_paste(const Tensor& masks, const Tensor& boxes, int64_t im_h, int64_t im_w,
                 int64_t padding) {
  AIM_CHECK(masks.dim() == 3 && masks.size(1) == masks.size(2) && masks.size(1) > 0,
            "[paste_masks_in_image] masks must be [N, M, M], got ", masks.dim(), " dims");
  AIM_CHECK(boxes.dim() == 2 && boxes.size(1) == 4 && boxes.size(0) == masks.size(0),
            "[paste_masks_in_image] boxes must be [N, 4] with N = ", masks.size(0));
  AIM_CHECK(im_h > 0 && im_w > 0 && padding >= 0, "[paste_masks_in_image] image ", im_h, "x", im_w,
            ", padding ", padding);
  AIM_CHECK(!masks.is_cuda() && !boxes.is_cuda(),
            "[paste_masks_in_image] runs on the host: move masks and boxes to the CPU");
}

}  // namespace

Tensor paste_masks_in_image(const Tensor& masks, const Tensor& boxes, int64_t im_h, int64_t im_w,
                            int64_t padding) {
  check_paste(masks, boxes, im_h, im_w, padding);
  const int64_t N = masks.size(0), M = masks.size(1);
  const std::vector<float> m = masks.to_vector<float>(), b = boxes.to_vector<float>();
  Tensor out = Tensor::zeros({N, im_h, im_w});
  float* o = out.data<float>();
  for (int64_t n = 0; n < N; ++n) {
    float* on = o + n * im_h * im_w;
    paste_one(m.data() + n * M * M, M, b.data() + 4 * n, im_h, im_w, padding,
              [&](int64_t y, int64_t x, float v) { on[y * im_w + x] = v; });
  }
  return out;
}

std::vector<std::vector<uint8_t>> paste_masks_binary(const Tensor& masks, const Tensor& boxes,
                                                     int64_t im_h, int64_t im_w, double threshold) {
  check_paste(masks, boxes, im_h, im_w, 1);
  const int64_t N = masks.size(0), M = masks.size(1);
  const std::vector<float> m = masks.to_vector<float>(), b = boxes.to_vector<float>();
  std::vector<std::vector<uint8_t>> out(size_t(N), std::vector<uint8_t>(size_t(im_h * im_w), 0));
  for (int64_t n = 0; n < N; ++n) {
    uint8_t* on = out[size_t(n)].data();
    paste_one(m.data() + n * M * M, M, b.data() + 4 * n, im_h, im_w, 1,
              [&](int64_t y, int64_t x, float v) { on[y * im_w + x] = double(v) > threshold; });
  }
  return out;
}

}  // namespace aim::models::detection
