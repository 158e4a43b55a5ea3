// Host-side heatmap work of CPN (MODELS.md §5.3, megvii tf-cpn; docs/cpn.md): the Gaussian target
// heatmaps of training (dataset.py's joints_heatmap_gen) and the keypoint decoding of testing
// (mptest.py), with OpenCV's GaussianBlur semantics (sigma 0 -> 0.3 ((k - 1) / 2 - 1) + 0.8,
// separable, BORDER_REFLECT_101), computed in double (cv2 filters float32 maps in float: the
// values differ by float rounding only).
#pragma once
#include <cstdint>
#include <vector>

namespace aim::data {

// cv2.GaussianBlur(src [h, w], (k, k), 0) into dst (may not alias src); k odd, > 7 (smaller
// kernels use OpenCV's fixed tables, which nothing here needs).
void cv_gaussian_blur(const float* src, float* dst, int64_t h, int64_t w, int64_t k);

// One keypoint's target of joints_heatmap_gen: a one-hot at (int(y * out_h / in_h),
// int(x * out_w / in_w)) with x, y clipped to the input's last pixel, blurred with kernel k, then
// scaled to a peak of 255. Keypoints with v == 0 (or x, y < 0, as the reference's marker) give an
// all-zero map (the losses mask them out, so this equals the reference's loss).
void cpn_keypoint_heatmap(double x, double y, double v, int64_t in_h, int64_t in_w, int64_t out_h,
                          int64_t out_w, int64_t k, float* out);

// mptest.py's decoding of one person's heatmaps [K, h, w] (flip-averaged already) into
// (x, y, score) per keypoint in input pixels: each map divided by its maximum, zero-padded by 10,
// blurred (21 x 21), argmax, then a quarter step from it towards the second maximum, clipped to
// the map, x * sx + sx / 2 with sx = in_w / w (the reference's x * 4 + 2); score = the raw map at
// the rounded position / 255 + 0.5.
std::vector<float> cpn_decode_keypoints(const float* heat, int64_t K, int64_t h, int64_t w,
                                        int64_t in_h, int64_t in_w);

}  // namespace aim::data
