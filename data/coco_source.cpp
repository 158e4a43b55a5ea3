#include "data/coco_source.h"

#include <algorithm>
#include <sstream>

#include "data/philox_draw.h"
#include "tensor/check.h"

namespace aim::data {
namespace {

constexpr uint64_t kTagAugment = 51;

// One sample per image: its non-crowd boxes, [x, y, w, h] -> (x1, y1, x2, y2).
std::vector<DetectionSample> samples_of(const CocoDataset& d, const std::string& images) {
  std::vector<DetectionSample> out;
  for (const CocoImage& im : d.images) {
    DetectionSample s;
    s.image = images + "/" + im.file_name;
    s.height = im.height, s.width = im.width;
    for (size_t a : im.annotations) {
      const CocoAnnotation& x = d.annotations[a];
      if (x.iscrowd) continue;
      s.boxes.push_back({float(x.x), float(x.y), float(x.x + x.w), float(x.y + x.h), x.label});
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

CocoSource::CocoSource(const CocoSourceConfig& cfg) : cfg_(cfg) {
  AIM_CHECK(!cfg_.train_annotations.empty() && !cfg_.eval_annotations.empty(),
            "coco: needs the training and evaluation annotation files");
  AIM_CHECK(cfg_.size >= 8, "coco: size must be >= 8, got ", cfg_.size);
  const CocoDataset train = read_coco_instances(cfg_.train_annotations, cfg_.clip_boxes);
  const CocoDataset eval = read_coco_instances(cfg_.eval_annotations, cfg_.clip_boxes);
  AIM_CHECK(train.category_ids == eval.category_ids, cfg_.eval_annotations,
            ": its categories differ from ", cfg_.train_annotations, "'s");
  train_ = samples_of(train, cfg_.train_images);
  eval_ = samples_of(eval, cfg_.eval_images);
  category_ids_ = eval.category_ids;
  for (const CocoImage& im : eval.images) eval_ids_.push_back(im.id);
  for (const CocoAnnotation& a : eval.annotations) {
    CocoEvalGt g;
    g.id = a.id, g.image_id = a.image_id, g.category_id = a.category_id;
    g.x = a.x, g.y = a.y, g.w = a.w, g.h = a.h, g.area = a.area, g.iscrowd = a.iscrowd;
    eval_gt_.push_back(g);
  }
  for (const auto* v : {&train_, &eval_})
    for (const DetectionSample& s : *v)
      max_objects_ = std::max<int64_t>(max_objects_, int64_t(s.boxes.size()));
  AIM_CHECK(!train_.empty() && !eval_.empty(), "coco: no images in ", cfg_.train_annotations,
            " or ", cfg_.eval_annotations);
  aug_key_ = philox_key(cfg_.seed, kTagAugment);
}

std::string CocoSource::describe() const {
  std::ostringstream os;
  os << "coco " << train_.size() << " training images (" << cfg_.train_annotations << "), "
     << eval_.size() << " evaluation images (" << cfg_.eval_annotations << "), "
     << category_ids_.size() << " categories, " << cfg_.size << "x" << cfg_.size
     << (cfg_.augment ? ", augmented" : "");
  return os.str();
}

std::string CocoSource::fingerprint() const {
  std::ostringstream os;
  os << "coco:" << cfg_.train_annotations << "," << train_.size() << ";" << cfg_.eval_annotations
     << "," << eval_.size() << ";size=" << cfg_.size << ";augment=" << cfg_.augment
     << ";seed=" << cfg_.seed;
  return os.str();
}

TensorMap CocoSource::next(int64_t batch_size) {
  AIM_CHECK(batch_size > 0, "coco: batch_size must be > 0, got ", batch_size);
  std::vector<const DetectionSample*> samples;
  std::vector<int64_t> positions;
  for (int64_t i : stream_indices(pos_, batch_size, epoch_size(), cfg_.seed)) {
    samples.push_back(&train_[size_t(i)]);
    positions.push_back(pos_ + int64_t(positions.size()));
  }
  pos_ += batch_size;
  DetectionBatchOptions o;
  o.size = cfg_.size, o.max_objects = max_objects_, o.train = true, o.augment = cfg_.augment;
  o.augment_options = cfg_.augment_options, o.augment_key = aug_key_;
  return detection_batch(samples, positions, o);
}

void CocoSource::seek(int64_t position) {
  AIM_CHECK(position >= 0, "coco: negative position ", position);
  pos_ = position;
}

TensorMap CocoSource::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0 && start + count <= eval_size(), "coco: eval images [", start,
            ", ", start + count, ") outside the evaluation set of ", eval_size());
  std::vector<const DetectionSample*> samples;
  std::vector<int64_t> positions;
  for (int64_t k = 0; k < count; ++k) {
    samples.push_back(&eval_[size_t(start + k)]);
    positions.push_back(start + k);
  }
  DetectionBatchOptions o;
  o.size = cfg_.size, o.max_objects = max_objects_, o.train = false;
  return detection_batch(samples, positions, o);
}

}  // namespace aim::data
