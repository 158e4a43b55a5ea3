#include "data/voc_source.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "data/din_export.h"
#include "data/image_decode.h"
#include "data/philox_draw.h"
#include "tensor/check.h"

namespace aim::data {
namespace {

constexpr uint64_t kTagAugment = 50;
constexpr uint64_t kAugmentBlocks = 64;  // Philox blocks per sample's augmentation

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

FloatImage to_float(const Image& im) {
  FloatImage f;
  f.height = im.height, f.width = im.width;
  f.chw.resize(size_t(3 * im.height * im.width));
  const int64_t HW = im.height * im.width;
  for (int64_t p = 0; p < HW; ++p)
    for (int c = 0; c < 3; ++c)
      f.chw[size_t(c * HW + p)] = float(im.rgb[size_t(p * 3 + c)]) / 255.0f;
  return f;
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
    it.image = dir + "/JPEGImages/" + id + ".jpg";
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
  const int64_t B = int64_t(items.size()), G = max_objects_, S = cfg_.size;
  Tensor images = Tensor::empty({B, 3, S, S}, DType::f32);
  Tensor boxes = Tensor::zeros({B, G, 4}, DType::f32);
  Tensor labels = Tensor::zeros({B, G}, DType::i64);
  Tensor num = Tensor::empty({B}, DType::i64);
  Tensor difficult = Tensor::zeros({B, G}, DType::u8);
  Tensor orig = Tensor::empty({B, 2}, DType::i64);
  for (int64_t s = 0; s < B; ++s) {
    const Item& it = *items[size_t(s)];
    const Image im = decode_image_file(it.image);
    AIM_CHECK(im.height == it.ann.height && im.width == it.ann.width, it.image, ": the image is ",
              im.width, "x", im.height, " but its annotation says ", it.ann.width, "x",
              it.ann.height);
    FloatImage f = to_float(im);
    std::vector<AugmentBox> bx;
    std::vector<uint8_t> diff;
    for (const VocObject& o : it.ann.objects) {
      bx.push_back({float(o.xmin - 1), float(o.ymin - 1), float(o.xmax), float(o.ymax), o.label});
      diff.push_back(o.difficult);
    }
    if (train && cfg_.augment) {
      augment_detection(f, bx, S, S, cfg_.augment_options, aug_key_,
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
      if (!train) difficult.data<uint8_t>()[s * G + int64_t(k)] = diff[k];
    }
    orig.data<int64_t>()[2 * s] = it.ann.height;
    orig.data<int64_t>()[2 * s + 1] = it.ann.width;
  }
  TensorMap m{{"images", images}, {"boxes", boxes}, {"labels", labels}, {"num_boxes", num}};
  if (!train) {
    m["difficult"] = difficult;
    m["orig_size"] = orig;
    m["index"] = Tensor::from_vector(positions, {B});
  }
  return m;
}

TensorMap VocSource::next(int64_t batch_size) {
  AIM_CHECK(batch_size > 0, "voc: batch_size must be > 0, got ", batch_size);
  const int64_t n = epoch_size();
  std::vector<const Item*> items;
  std::vector<int64_t> positions;
  int64_t order_epoch = -1;
  std::vector<int64_t> order;
  for (int64_t k = 0; k < batch_size; ++k) {
    const int64_t p = pos_ + k, epoch = p / n;
    if (epoch != order_epoch) order = epoch_order(n, cfg_.seed, epoch), order_epoch = epoch;
    items.push_back(&train_[size_t(order[size_t(p % n)])]);
    positions.push_back(p);
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
