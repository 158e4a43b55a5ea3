// Caffe SSD's PriorBox layer (weiliu89/caffe `ssd`, and chengyangfu/caffe `dssd` which adds the
// per-layer `offset`): the default boxes of ssd_resnet18 (MODELS.md §6.2) and dssd (§6.3).
//
// Per layer, for every cell (row-major; centre ((w + offset) * step, (h + offset) * step) pixels,
// f32), per min size m: the square m; then, with a max size M, the square sqrt(m M); then for each
// aspect ratio r of the layer's list other than 1: (m sqrt(r), m / sqrt(r)). The list is [1, then
// each given ratio not already present, followed by 1 / r when flip]: {1.6, 2, 3} with flip gives
// 1.6, 0.625, 2, 0.5, 3, 1/3, i.e. 8 boxes per cell with a max size. Corners are relative to the
// image ((centre -+ size / 2) / image, in double, stored as f32), clipped to [0, 1] when clip.
// Caffe reads the sizes into `int min_size_ = min_sizes_[s]`: 32.1 becomes 32, 182.97 becomes
// 182 (int_sizes, on by default as the reference behaves).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace aim::models::detection {

struct CaffePriorBoxSpec {
  std::vector<double> min_sizes, max_sizes;  // pixels; max_sizes empty or one per min size
  std::vector<double> aspect_ratios;         // as given to the layer (1 and repeats dropped)
  bool flip = true;
  bool clip = false;
  double step = 0;      // pixels between cell centres; 0: image size / map size
  double offset = 0.5;  // the first centre, in cells
  bool int_sizes = true;
};

// Boxes per cell of one layer (as the layer's num_priors_).
int64_t caffe_priors_per_cell(const CaffePriorBoxSpec& spec);

// The layers' boxes concatenated (as Caffe's mbox_priorbox concat): [P, 4] f32 (x1, y1, x2, y2)
// relative to an image_h x image_w image; maps are the layers' (height, width).
Tensor caffe_prior_boxes(const std::vector<CaffePriorBoxSpec>& layers,
                         const std::vector<std::pair<int64_t, int64_t>>& maps, int64_t image_h,
                         int64_t image_w);

// The same in pixels of the image (x * image_w, y * image_h in f32): Ssd::set_priors's input.
Tensor caffe_prior_boxes_pixels(const std::vector<CaffePriorBoxSpec>& layers,
                                const std::vector<std::pair<int64_t, int64_t>>& maps,
                                int64_t image_h, int64_t image_w);

// The layers of MODELS.md's two Caffe models at 321 x 321, as the reference scripts compute them:
// min sizes 10% of 321, then 20% .. 95% in floor(75 / (layers - 2))% steps (each max size the
// next min size; 18% for dssd's 6 layers: 32.1, 64.2, 121.98, ..., 295.32 / max 353.1; 37% for
// ssd_resnet18's 4: 32.1, 64.2, 182.97, 301.74 / max 420.51), aspect ratios {1.6, 2, 3} with
// flip, no clip. The reference passes `starts` (pixels of the first centre, [2.5, 2.5,
// 10.5, 26.5, 90.5, 160.5]) as PriorBox's offset, which it multiplies by the step (cells): that
// puts every centre of the 10x10 and smaller maps outside the image. We take the start as pixels,
// offset = start / step, the centring its own prior visualisation tool computes
// (docs/detection.md). Maps 40, 20, 10, 5, 3, 1 with steps 8, 16, 32, 64, 64, 321 (dssd); 40, 20,
// 10, 5 with steps 8, 16, 32, 64 and the first four starts (ssd_resnet18).
std::vector<CaffePriorBoxSpec> dssd321_prior_layers();
std::vector<CaffePriorBoxSpec> ssd_resnet18_321_prior_layers();

}  // namespace aim::models::detection
