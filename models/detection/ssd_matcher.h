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

// Caffe SSD's MatchBBox (MultiBoxLoss with match_type PER_PREDICTION, the ssd_resnet18 and dssd
// references): first a bipartite matching, repeatedly the largest IoU among unmatched boxes and
// unmatched objects (ties: the lower box, then the object first in the pool), until every object
// has a box or no pair overlaps (IoU > 1e-6); then each remaining box takes its best object when
// that IoU >= threshold (ties: the first object). Same arguments and result as ssd_match.
std::vector<int64_t> caffe_match(const float* gt, int64_t G, const float* priors, int64_t P,
                                 float threshold = 0.5f);

}  // namespace aim::models::detection
