// Box regression targets relative to anchors (torchvision's det_utils.BoxCoder, SSD's variances):
// with the anchor's and the box's centres, widths and heights,
//   encode: (wx (cx - acx) / aw, wy (cy - acy) / ah, ww log(w / aw), wh log(h / ah))
//   decode: the inverse, dw and dh clamped at log(1000 / 16) before exp.
// Boxes and anchors are (x1, y1, x2, y2); f32 arithmetic in torchvision's order.
#pragma once
#include <cmath>
#include <cstdint>

namespace aim::models::detection {

struct BoxCoderWeights {
  float wx = 10, wy = 10, ww = 5, wh = 5;  // SSD: variances 0.1 and 0.2
  float clip = float(std::log(1000.0 / 16));
};

// out[i] = encode(boxes[i] relative to anchors[i]), n boxes of 4 floats each.
void encode_boxes(const float* boxes, const float* anchors, int64_t n, const BoxCoderWeights& w,
                  float* out);
// out[i] = decode(codes[i] relative to anchors[i]).
void decode_boxes(const float* codes, const float* anchors, int64_t n, const BoxCoderWeights& w,
                  float* out);

}  // namespace aim::models::detection
