#include "models/detection/box_coder.h"

#include <algorithm>

namespace aim::models::detection {

void encode_boxes(const float* boxes, const float* anchors, int64_t n, const BoxCoderWeights& w,
                  float* out) {
  for (int64_t i = 0; i < n; ++i, boxes += 4, anchors += 4, out += 4) {
    const float aw = anchors[2] - anchors[0], ah = anchors[3] - anchors[1];
    const float acx = anchors[0] + 0.5f * aw, acy = anchors[1] + 0.5f * ah;
    const float bw = boxes[2] - boxes[0], bh = boxes[3] - boxes[1];
    const float bcx = boxes[0] + 0.5f * bw, bcy = boxes[1] + 0.5f * bh;
    out[0] = w.wx * (bcx - acx) / aw;
    out[1] = w.wy * (bcy - acy) / ah;
    out[2] = w.ww * std::log(bw / aw);
    out[3] = w.wh * std::log(bh / ah);
  }
}

void decode_boxes(const float* codes, const float* anchors, int64_t n, const BoxCoderWeights& w,
                  float* out) {
  for (int64_t i = 0; i < n; ++i, codes += 4, anchors += 4, out += 4) {
    const float aw = anchors[2] - anchors[0], ah = anchors[3] - anchors[1];
    const float acx = anchors[0] + 0.5f * aw, acy = anchors[1] + 0.5f * ah;
    const float dx = codes[0] / w.wx, dy = codes[1] / w.wy;
    const float dw = std::min(codes[2] / w.ww, w.clip), dh = std::min(codes[3] / w.wh, w.clip);
    const float cx = dx * aw + acx, cy = dy * ah + acy;
    const float pw = std::exp(dw) * aw, ph = std::exp(dh) * ah;
    const float hw = 0.5f * pw, hh = 0.5f * ph;
    out[0] = cx - hw;
    out[1] = cy - hh;
    out[2] = cx + hw;
    out[3] = cy + hh;
  }
}

}  // namespace aim::models::detection
