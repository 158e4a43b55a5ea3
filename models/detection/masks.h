// Mask R-CNN's mask parts outside the network (issue 22; torchvision 0.14's roi_heads.py):
//   mask targets: project_masks_on_boxes, each positive proposal's ground-truth mask sampled at
//     M x M by roi_align (spatial scale 1, adaptive sampling, aligned=False, as torchvision);
//   pasting: paste_masks_in_image, each M x M mask probability map padded by one pixel, its box
//     expanded by (M + 2) / M and truncated to integers, the map resized bilinearly
//     (align_corners=False) to that box's integer extent and copied into an empty image;
//     torchvision's evaluation then keeps pixels > 0.5 (paste_masks_binary).
// Targets run roi_align's kernel on the masks' device; pasting runs on the host (with the
// interpolate kernel's CPU variant), as aim-infer's post-processing does. Checked against
// torchvision in tests/models/test_mask_parts.cpp (tests/peers/mask_parts.py).
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace aim::models::detection {

// The RoIs of project_masks_on_boxes: rows (matched ground-truth index, x1, y1, x2, y2), f32 on
// the host. boxes: [P, 4] proposals in image coordinates; matched: P indices in [0, G).
Tensor mask_target_rois(const std::vector<float>& boxes, const std::vector<int64_t>& matched,
                        int64_t G);

// gt_masks [G, H, W] (0/1, f32 or f64), rois [P, 5] from mask_target_rois (moved to the masks'
// device and dtype here) -> [P, M, M] targets in [0, 1], on the masks' device.
Tensor project_masks_on_boxes(const Tensor& gt_masks, const Tensor& rois, int64_t M);

// masks [N, M, M] f32 probabilities (host), boxes [N, 4] f32 (x1, y1, x2, y2) in the image of
// im_h x im_w -> [N, im_h, im_w] f32 (host). torchvision fails on a box whose expanded integer
// box starts below or right of the image (its slices disagree); here such a mask stays empty.
Tensor paste_masks_in_image(const Tensor& masks, const Tensor& boxes, int64_t im_h, int64_t im_w,
                            int64_t padding = 1);

// The pasted masks thresholded as torchvision's COCO evaluation does (prob > threshold): one
// row-major [im_h, im_w] byte mask per detection, ready for coco_rle_encode.
std::vector<std::vector<uint8_t>> paste_masks_binary(const Tensor& masks, const Tensor& boxes,
                                                     int64_t im_h, int64_t im_w,
                                                     double threshold = 0.5);

}  // namespace aim::models::detection
