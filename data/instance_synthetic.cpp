#include "data/instance_synthetic.h"

#include <algorithm>
#include <cstring>

#include "tensor/check.h"

namespace aim::data {

InstanceSyntheticSource::InstanceSyntheticSource(const DetectionSyntheticConfig& cfg)
    : shapes_(cfg) {}

std::string InstanceSyntheticSource::describe() const {
  return "instance-synthetic (masks) over " + shapes_.describe();
}

std::string InstanceSyntheticSource::fingerprint() const {
  return "instance-synthetic:" + shapes_.fingerprint();
}

std::vector<SyntheticInstance> InstanceSyntheticSource::sample(int64_t index, float* img) const {
  const int64_t H = config().height, W = config().width;
  std::vector<uint8_t> owner(size_t(H * W));
  const std::vector<SyntheticObject> objects = shapes_.sample(index, img, owner.data());
  std::vector<SyntheticInstance> out;
  for (size_t k = 0; k < objects.size(); ++k) {
    SyntheticInstance inst;
    inst.object.label = objects[k].label;
    inst.mask.assign(owner.size(), 0);
    int64_t imin = H, imax = -1, jmin = W, jmax = -1;
    for (int64_t i = 0; i < H; ++i)
      for (int64_t j = 0; j < W; ++j)
        if (size_t(owner[size_t(i * W + j)]) == k + 1) {
          inst.mask[size_t(i * W + j)] = 1;
          imin = std::min(imin, i), imax = std::max(imax, i);
          jmin = std::min(jmin, j), jmax = std::max(jmax, j);
        }
    if (imax < 0) continue;  // hidden by the objects painted over it
    inst.object.x1 = float(jmin), inst.object.y1 = float(imin);
    inst.object.x2 = float(jmax + 1), inst.object.y2 = float(imax + 1);
    out.push_back(std::move(inst));
  }
  return out;
}

TensorMap InstanceSyntheticSource::batch(int64_t first, int64_t count) const {
  const int64_t G = config().max_objects, H = config().height, W = config().width, HW = H * W;
  Tensor images = Tensor::empty({count, 3, H, W}, DType::f32);
  Tensor boxes = Tensor::zeros({count, G, 4}, DType::f32);
  Tensor labels = Tensor::zeros({count, G}, DType::i64);
  Tensor num = Tensor::empty({count}, DType::i64);
  Tensor masks = Tensor::zeros({count, G, H, W}, DType::u8);
  for (int64_t s = 0; s < count; ++s) {
    const std::vector<SyntheticInstance> inst =
        sample(first + s, images.data<float>() + s * 3 * HW);
    num.data<int64_t>()[s] = int64_t(inst.size());
    for (size_t k = 0; k < inst.size(); ++k) {
      const SyntheticObject& o = inst[k].object;
      float* b = boxes.data<float>() + (s * G + int64_t(k)) * 4;
      b[0] = o.x1, b[1] = o.y1, b[2] = o.x2, b[3] = o.y2;
      labels.data<int64_t>()[s * G + int64_t(k)] = o.label;
      std::memcpy(masks.data<uint8_t>() + (s * G + int64_t(k)) * HW, inst[k].mask.data(),
                  size_t(HW));
    }
  }
  return TensorMap{{"images", images},
                   {"boxes", boxes},
                   {"labels", labels},
                   {"num_boxes", num},
                   {"masks", masks}};
}

TensorMap InstanceSyntheticSource::next(int64_t batch_size) {
  AIM_CHECK(batch_size > 0, "instance-synthetic: batch_size must be > 0, got ", batch_size);
  TensorMap b = batch(pos_, batch_size);
  pos_ += batch_size;
  return b;
}

void InstanceSyntheticSource::seek(int64_t position) {
  AIM_CHECK(position >= 0 && position < DetectionSyntheticSource::kEvalOffset,
            "instance-synthetic: position ", position, " outside [0, 2^40)");
  pos_ = position;
}

TensorMap InstanceSyntheticSource::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0 && start + count <= eval_size(),
            "instance-synthetic: eval samples [", start, ", ", start + count,
            ") outside the evaluation set of ", eval_size());
  return batch(DetectionSyntheticSource::kEvalOffset + start, count);
}

std::vector<CocoSegmGt> InstanceSyntheticSource::eval_ground_truth(int64_t start,
                                                                   int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0 && start + count <= eval_size(),
            "instance-synthetic: eval samples [", start, ", ", start + count,
            ") outside the evaluation set of ", eval_size());
  std::vector<CocoSegmGt> out;
  for (int64_t s = start; s < start + count; ++s)
    for (const SyntheticInstance& inst :
         sample(DetectionSyntheticSource::kEvalOffset + s, nullptr)) {
      CocoSegmGt g;
      g.id = int64_t(out.size()) + 1;
      g.image_id = s, g.category_id = inst.object.label;
      g.mask = coco_rle_encode(inst.mask, config().height, config().width);
      g.area = double(coco_rle_area(g.mask));
      out.push_back(std::move(g));
    }
  return out;
}

}  // namespace aim::data
