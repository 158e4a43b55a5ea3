#include "data/detection_batch.h"

#include <algorithm>

#include "data/din_export.h"
#include "data/image_decode.h"
#include "tensor/check.h"

namespace aim::data {

std::vector<int64_t> stream_indices(int64_t pos, int64_t count, int64_t n, uint64_t seed) {
  AIM_CHECK(n > 0 && pos >= 0 && count >= 0, "stream_indices: positions [", pos, ", ", pos + count,
            ") of ", n, " samples");
  std::vector<int64_t> out, order;
  int64_t order_epoch = -1;
  for (int64_t p = pos; p < pos + count; ++p) {
    if (p / n != order_epoch) order_epoch = p / n, order = epoch_order(n, seed, order_epoch);
    out.push_back(order[size_t(p % n)]);
  }
  return out;
}

TensorMap detection_batch(const std::vector<const DetectionSample*>& samples,
                          const std::vector<int64_t>& positions, const DetectionBatchOptions& o) {
  constexpr uint64_t kAugmentBlocks = 64;  // Philox blocks per sample's augmentation
  const int64_t B = int64_t(samples.size()), G = o.max_objects, S = o.size;
  AIM_CHECK(positions.size() == samples.size(), "detection batch: ", samples.size(),
            " samples but ", positions.size(), " positions");
  Tensor images = Tensor::empty({B, 3, S, S}, DType::f32);
  Tensor boxes = Tensor::zeros({B, G, 4}, DType::f32);
  Tensor labels = Tensor::zeros({B, G}, DType::i64);
  Tensor num = Tensor::empty({B}, DType::i64);
  Tensor difficult = Tensor::zeros({B, G}, DType::u8);
  Tensor orig = Tensor::empty({B, 2}, DType::i64);
  for (int64_t s = 0; s < B; ++s) {
    const DetectionSample& it = *samples[size_t(s)];
    AIM_CHECK(int64_t(it.boxes.size()) <= G, it.image, ": ", it.boxes.size(),
              " objects, the batch holds ", G);
    const Image im = decode_image_file(it.image);
    AIM_CHECK(im.height == it.height && im.width == it.width, it.image, ": the image is ", im.width,
              "x", im.height, " but its annotation says ", it.width, "x", it.height);
    FloatImage f;
    f.height = im.height, f.width = im.width;
    f.chw.resize(size_t(3 * im.height * im.width));
    const int64_t HW = im.height * im.width;
    for (int64_t p = 0; p < HW; ++p)
      for (int c = 0; c < 3; ++c)
        f.chw[size_t(c * HW + p)] = float(im.rgb[size_t(p * 3 + c)]) / 255.0f;
    std::vector<AugmentBox> bx = it.boxes;
    if (o.train && o.augment) {
      augment_detection(f, bx, S, S, o.augment_options, o.augment_key,
                        uint64_t(positions[size_t(s)]) * kAugmentBlocks);
    } else {
      const float sy = float(S) / float(f.height), sx = float(S) / float(f.width);
      f = resize_bilinear(f, S, S);
      for (AugmentBox& b : bx) b.x1 *= sx, b.x2 *= sx, b.y1 *= sy, b.y2 *= sy;
    }
    std::copy(f.chw.begin(), f.chw.end(), images.data<float>() + s * 3 * S * S);
    num.data<int64_t>()[s] = int64_t(bx.size());
    for (size_t k = 0; k < bx.size(); ++k) {
      float* b = boxes.data<float>() + (s * G + int64_t(k)) * 4;
      b[0] = bx[k].x1, b[1] = bx[k].y1, b[2] = bx[k].x2, b[3] = bx[k].y2;
      labels.data<int64_t>()[s * G + int64_t(k)] = bx[k].label;
      // The augmentation may drop boxes: difficult flags are for evaluation (no augmentation).
      if (!o.train && k < it.difficult.size())
        difficult.data<uint8_t>()[s * G + int64_t(k)] = it.difficult[k];
    }
    orig.data<int64_t>()[2 * s] = it.height;
    orig.data<int64_t>()[2 * s + 1] = it.width;
  }
  TensorMap m{{"images", images}, {"boxes", boxes}, {"labels", labels}, {"num_boxes", num}};
  if (!o.train) {
    m["difficult"] = difficult;
    m["orig_size"] = orig;
    m["index"] = Tensor::from_vector(positions, {B});
  }
  return m;
}

}  // namespace aim::data
