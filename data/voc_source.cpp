#include "data/voc_source.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "data/philox_draw.h"
#include "tensor/check.h"

namespace aim::data {
namespace {

constexpr uint64_t kTagAugment = 50;

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// The sample's boxes from the annotation's objects: VOC's 1-based inclusive pixels to continuous
// coordinates (x1 = xmin - 1, x2 = xmax).
void set_boxes(VocSource::Item& it) {
  it.sample.boxes.clear(), it.sample.difficult.clear();
  for (const VocObject& o : it.ann.objects) {
    it.sample.boxes.push_back(
        {float(o.xmin - 1), float(o.ymin - 1), float(o.xmax), float(o.ymax), o.label});
    it.sample.difficult.push_back(o.difficult);
  }
}

}  // namespace

std::vector<VocSource::Item> read_voc_set(const std::string& set, bool clip_boxes,
                                          int64_t* clipped) {
  const size_t colon = set.rfind(':');
  AIM_CHECK(colon != std::string::npos && colon > 0 && colon + 1 < set.size(), "voc: set '", set,
            "' must be DIR:split (e.g. VOCdevkit/VOC2007:trainval)");
  const std::string dir = set.substr(0, colon), split = set.substr(colon + 1);
  const std::string list = dir + "/ImageSets/Main/" + split + ".txt";
  std::ifstream in(list);
  AIM_CHECK(in, list, ": cannot open the image list (a VOC year folder holds Annotations/, ",
            "ImageSets/Main/<split>.txt and JPEGImages/)");
  std::vector<VocSource::Item> items;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    const std::string id = trim(line);
    if (id.empty()) continue;
    AIM_CHECK(id.find_first_of(" \t/") == std::string::npos, list, ":", n, ": bad image id '", id,
              "'");
    VocSource::Item it;
    it.ann = read_voc_annotation(dir + "/Annotations/" + id + ".xml", {clip_boxes}, clipped);
    it.sample.image = dir + "/JPEGImages/" + id + ".jpg";
    it.sample.height = it.ann.height, it.sample.width = it.ann.width;
    set_boxes(it);
    items.push_back(std::move(it));
  }
  AIM_CHECK(!items.empty(), list, ": no image ids");
  return items;
}

VocSource::VocSource(const VocSourceConfig& cfg) : cfg_(cfg) {
  AIM_CHECK(!cfg_.train_sets.empty() && !cfg_.eval_set.empty(),
            "voc: needs at least one training set and an evaluation set");
  AIM_CHECK(cfg_.size >= 8, "voc: size must be >= 8, got ", cfg_.size);
  for (const std::string& s : cfg_.train_sets) {
    std::vector<Item> v = read_voc_set(s, cfg_.clip_boxes, &clipped_);
    for (Item& it : v) {
      // Training targets drop difficult objects; an image left without any keeps none (the
      // augmentation's crop then has nothing to keep: such images pass through uncropped).
      auto& o = it.ann.objects;
      o.erase(std::remove_if(o.begin(), o.end(), [](const VocObject& x) { return x.difficult; }),
              o.end());
      set_boxes(it);
      train_.push_back(std::move(it));
    }
  }
  eval_ = read_voc_set(cfg_.eval_set, cfg_.clip_boxes, &clipped_);
  for (const auto* v : {&train_, &eval_})
    for (const Item& it : *v)
      max_objects_ = std::max<int64_t>(max_objects_, int64_t(it.ann.objects.size()));
  aug_key_ = philox_key(cfg_.seed, kTagAugment);
}

std::string VocSource::describe() const {
  std::ostringstream os;
  os << "voc " << train_.size() << " training images (";
  for (size_t i = 0; i < cfg_.train_sets.size(); ++i) os << (i ? " + " : "") << cfg_.train_sets[i];
  os << "), " << eval_.size() << " evaluation images (" << cfg_.eval_set << "), " << cfg_.size
     << "x" << cfg_.size << (cfg_.augment ? ", augmented" : "");
  if (clipped_) os << ", " << clipped_ << " boxes clipped";
  return os.str();
}

std::string VocSource::fingerprint() const {
  std::ostringstream os;
  os << "voc:";
  for (const std::string& s : cfg_.train_sets) os << s << "," << train_.size() << ";";
  os << "eval=" << cfg_.eval_set << "," << eval_.size() << ";size=" << cfg_.size
     << ";augment=" << cfg_.augment << ";seed=" << cfg_.seed;
  return os.str();
}

TensorMap VocSource::load(const std::vector<const Item*>& items,
                          const std::vector<int64_t>& positions, bool train) const {
  std::vector<const DetectionSample*> samples;
  for (const Item* it : items) samples.push_back(&it->sample);
  DetectionBatchOptions o;
  o.size = cfg_.size;
  o.max_objects = max_objects_;
  o.train = train;
  o.augment = cfg_.augment;
  o.augment_options = cfg_.augment_options;
  o.augment_key = aug_key_;
  return detection_batch(samples, positions, o);
}

TensorMap VocSource::next(int64_t batch_size) {
  AIM_CHECK(batch_size > 0, "voc: batch_size must be > 0, got ", batch_size);
  std::vector<const Item*> items;
  std::vector<int64_t> positions;
  for (int64_t i : stream_indices(pos_, batch_size, epoch_size(), cfg_.seed)) {
    items.push_back(&train_[size_t(i)]);
    positions.push_back(pos_ + int64_t(positions.size()));
  }
  pos_ += batch_size;
  return load(items, positions, true);
}

void VocSource::seek(int64_t position) {
  AIM_CHECK(position >= 0, "voc: negative position ", position);
  pos_ = position;
}

TensorMap VocSource::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0 && start + count <= eval_size(), "voc: eval images [", start,
            ", ", start + count, ") outside the evaluation set of ", eval_size());
  std::vector<const Item*> items;
  std::vector<int64_t> positions;
  for (int64_t k = 0; k < count; ++k) {
    items.push_back(&eval_[size_t(start + k)]);
    positions.push_back(start + k);
  }
  return load(items, positions, false);
}

}  // namespace aim::data
