// SSD's matching of ground truth to default boxes (torchvision's SSDMatcher, the reference SSDs):
// each default box takes the object it overlaps most when that IoU >= threshold (ties: the first
// object), else background (-1); then every object's best default box (ties: the first box) is
// given to it, later objects winning a box two objects share.
#pragma once
#include <cstdint>
#include <vector>

namespace aim::models::detection {

// gt: G boxes, priors: P boxes, both (x1, y1, x2, y2) f32. Returns P matched object indices or -1.
std::vector<int64_t> ssd_match(const float* gt, int64_t G, const float* priors, int64_t P,
                               float threshold = 0.5f);

}  // namespace aim::models::detection
