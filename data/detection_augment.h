// The SSD training augmentation (issue 21; Caffe SSD's distort/expand/batch_sampler, as
// ssd.pytorch's SSDAugmentation lays it out), on float RGB images in [0, 1] with their boxes, each
// step a pure function of a Philox stream (data/philox_draw.h) so a sample's augmentation depends
// only on (seed, sample index): deterministic and resumable. docs/detection.md.
//   1. photometric distortion, each part with probability 1/2: brightness (+-32/255), then either
//      contrast (x0.5-1.5) before or after saturation (x0.5-1.5) and hue (+-18 degrees) in HSV,
//      then a random channel permutation;
//   2. expand (probability 1/2): the image placed at a random offset on a canvas 1-4 times its
//      size filled with the mean colour;
//   3. IoU-constrained random crop: a mode from {none, min IoU 0.1, 0.3, 0.7, 0.9, any}; up to 50
//      trials of a crop 0.3-1 of each side with aspect 0.5-2 whose IoU with every object is at
//      least the mode's minimum (ssd.pytorch's check has `and` where Caffe's sampler means `or`:
//      here every box must reach the minimum, as Caffe) and that keeps the centre of at least one
//      object; the objects whose centres fall in the crop are kept, clipped to it; no trial
//      succeeding leaves the image as it is;
//   4. horizontal flip (probability 1/2);
//   5. resize to out_h x out_w (bilinear, half-pixel centres), boxes scaled.
// Boxes are (x1, y1, x2, y2) in pixels of the current image.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace aim::data {

struct AugmentBox {
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  int64_t label = 0;
};

struct FloatImage {
  int64_t height = 0, width = 0;
  std::vector<float> chw;  // [3, height, width], values in [0, 1]
};

struct DetectionAugmentOptions {
  bool photometric = true, expand = true, crop = true, flip = true;
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};  // expand's fill colour
  double max_expand = 4.0;
};

// Augments img and boxes in place, then resizes to out_h x out_w. `key` and `block` select the
// Philox stream (e.g. philox_key(seed, tag) and sample index * 64).
void augment_detection(FloatImage& img, std::vector<AugmentBox>& boxes, int64_t out_h,
                       int64_t out_w, const DetectionAugmentOptions& options, uint64_t key,
                       uint64_t block);

// The bilinear resize of step 5 (align_corners false, edge samples clamped), alone.
FloatImage resize_bilinear(const FloatImage& img, int64_t out_h, int64_t out_w);

}  // namespace aim::data
