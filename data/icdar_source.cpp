#include "data/icdar_source.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>

#include "data/detection_batch.h"
#include "data/image_decode.h"
#include "data/philox_draw.h"
#include "tensor/check.h"

namespace aim::data {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kTagAugment = 60;
constexpr uint64_t kAugmentBlocks = 1024;  // Philox blocks per sample (it uses at most 302)

const char* const kLayout =
    "ICDAR 2015 Challenge 4 layout: ROOT/ch4_training_images/img_N.jpg, "
    "ROOT/ch4_training_localization_transcription_gt/gt_img_N.txt, ROOT/ch4_test_images/img_N.jpg, "
    "ROOT/Challenge4_Test_Task1_GT/gt_img_N.txt";

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Natural order: runs of digits compare as numbers (img_2 < img_10), the rest as text.
bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const bool da = std::isdigit(static_cast<unsigned char>(a[i])) != 0;
    const bool db = std::isdigit(static_cast<unsigned char>(b[j])) != 0;
    if (da && db) {
      size_t ie = i, je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      std::string na = a.substr(i, ie - i), nb = b.substr(j, je - j);
      na.erase(0, std::min(na.find_first_not_of('0'), na.size()));
      nb.erase(0, std::min(nb.find_first_not_of('0'), nb.size()));
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = ie, j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i, ++j;
    }
  }
  return a.size() - i < b.size() - j || (a.size() - i == b.size() - j && a < b);
}

FloatImage decode_float(const std::string& path) {
  const Image im = decode_image_file(path);
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

std::array<double, 8> icdar_to_original(const std::array<double, 8>& q, int64_t height,
                                        int64_t width, int64_t size, bool as_detection) {
  AIM_CHECK(height > 0 && width > 0 && size > 0, "icdar_to_original: image ", height, "x", width,
            ", size ", size);
  std::array<double, 8> r{};
  for (int j = 0; j < 8; ++j) {
    const double side = double(j % 2 ? height : width);
    r[size_t(j)] = q[size_t(j)] * side / double(size);
    if (as_detection) r[size_t(j)] = std::round(std::clamp(r[size_t(j)], 0.0, side - 1));
  }
  return r;
}

bool icdar_quad_usable(const std::array<double, 8>& q) {
  const double top = std::hypot(q[2] - q[0], q[3] - q[1]);
  const double bottom = std::hypot(q[4] - q[6], q[5] - q[7]);
  if (!(top > 0 && bottom > 0)) return false;
  const double cx = (q[0] + q[2] + q[4] + q[6]) / 4, cy = (q[1] + q[3] + q[5] + q[7]) / 4;
  auto dist = [&](double ax, double ay, double bx, double by) {
    return std::fabs((cx - ax) * (by - ay) - (cy - ay) * (bx - ax)) / std::hypot(bx - ax, by - ay);
  };
  return dist(q[0], q[1], q[2], q[3]) + dist(q[6], q[7], q[4], q[5]) > 0;
}

std::vector<IcdarItem> read_icdar_split(const std::string& root, const std::string& split) {
  AIM_CHECK(split == "train" || split == "test", "icdar: split '", split,
            "': expected train or test");
  const fs::path image_dir =
      fs::path(root) / (split == "train" ? "ch4_training_images" : "ch4_test_images");
  const fs::path gt_dir =
      fs::path(root) / (split == "train" ? "ch4_training_localization_transcription_gt"
                                         : "Challenge4_Test_Task1_GT");
  for (const fs::path& d : {image_dir, gt_dir})
    AIM_CHECK(fs::is_directory(d), "icdar: ", d.string(), ": no such folder (", kLayout, ")");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(image_dir)) {
    const std::string ext = lower(e.path().extension().string());
    if (e.is_regular_file() && (ext == ".jpg" || ext == ".jpeg" || ext == ".png"))
      names.push_back(e.path().filename().string());
  }
  AIM_CHECK(!names.empty(), "icdar: ", image_dir.string(), ": no .jpg images (", kLayout, ")");
  std::sort(names.begin(), names.end(), natural_less);
  std::map<std::string, std::string> image_of_gt;  // gt file name -> image file name
  for (const std::string& n : names) {
    const std::string gt = "gt_" + fs::path(n).stem().string() + ".txt";
    AIM_CHECK(!image_of_gt.count(gt), "icdar: ", (image_dir / n).string(), " and ",
              (image_dir / image_of_gt[gt]).string(), " would share the ground truth ",
              (gt_dir / gt).string());
    image_of_gt[gt] = n;
  }
  for (const auto& e : fs::directory_iterator(gt_dir)) {
    const std::string n = e.path().filename().string();
    if (e.is_regular_file() && lower(e.path().extension().string()) == ".txt")
      AIM_CHECK(image_of_gt.count(n), "icdar: ", e.path().string(), ": no image ",
                (image_dir / (n.substr(0, 3) == "gt_" ? n.substr(3, n.size() - 7) : n)).string(),
                ".jpg for this ground truth");
  }
  std::vector<IcdarItem> items;
  for (const std::string& n : names) {
    IcdarItem it;
    it.image = (image_dir / n).string();
    it.gt = (gt_dir / ("gt_" + fs::path(n).stem().string() + ".txt")).string();
    AIM_CHECK(fs::is_regular_file(it.gt), "icdar: ", it.gt, ": missing ground truth of ", it.image);
    it.words = read_icdar_gt(it.gt);
    items.push_back(std::move(it));
  }
  return items;
}

IcdarSource::IcdarSource(const IcdarSourceConfig& cfg) : cfg_(cfg) {
  AIM_CHECK(cfg_.size >= 129, "icdar: size must be >= 129 (SegLink's six maps), got ", cfg_.size);
  train_ = read_icdar_split(cfg_.root, "train");
  eval_ = cfg_.eval_split == "train" ? train_ : read_icdar_split(cfg_.root, cfg_.eval_split);
  for (const auto* v : {&train_, &eval_})
    for (const IcdarItem& it : *v) max_words_ = std::max<int64_t>(max_words_, it.words.size());
  for (IcdarItem& it : train_) {
    auto& w = it.words;
    const size_t n = w.size();
    w.erase(std::remove_if(w.begin(), w.end(),
                           [](const IcdarWord& x) { return !icdar_quad_usable(x.quad); }),
            w.end());
    degenerate_ += int64_t(n - w.size());
  }
  aug_key_ = philox_key(cfg_.seed, kTagAugment);
}

std::string IcdarSource::describe() const {
  std::ostringstream os;
  os << "icdar2015 " << cfg_.root << ": " << train_.size() << " training images, " << eval_.size()
     << " evaluation images (" << cfg_.eval_split << "), " << cfg_.size << "x" << cfg_.size
     << (cfg_.augment ? ", seglink augmentation" : "");
  if (degenerate_) os << ", " << degenerate_ << " degenerate training words left out";
  return os.str();
}

std::string IcdarSource::fingerprint() const {
  std::ostringstream os;
  os << "icdar2015:" << cfg_.root << ";train=" << train_.size() << ";eval=" << cfg_.eval_split
     << "," << eval_.size() << ";size=" << cfg_.size << ";augment=" << cfg_.augment
     << ";seed=" << cfg_.seed;
  return os.str();
}

std::vector<IcdarWord> IcdarSource::train_sample(int64_t p, float* img,
                                                 SeglinkAugmentInfo* info) const {
  const IcdarItem& it = train_[size_t(stream_indices(p, 1, epoch_size(), cfg_.seed)[0])];
  FloatImage f = decode_float(it.image);
  std::vector<IcdarWord> words = it.words;
  const int64_t S = cfg_.size;
  SeglinkAugmentOptions o = cfg_.augment_options;
  if (!cfg_.augment) o.crop = false, o.random_interpolation = false;
  const SeglinkAugmentInfo in =
      augment_seglink(f, words, S, S, o, aug_key_, uint64_t(p) * kAugmentBlocks);
  if (info) *info = in;
  if (img) std::copy(f.chw.begin(), f.chw.end(), img);
  return words;
}

TensorMap IcdarSource::pack(const std::vector<std::vector<IcdarWord>>& words, Tensor images) const {
  const int64_t B = int64_t(words.size()), G = max_words_;
  Tensor quads = Tensor::zeros({B, G, 8}, DType::f32);
  Tensor num = Tensor::empty({B}, DType::i64);
  Tensor dc = Tensor::zeros({B, G}, DType::u8);
  for (int64_t b = 0; b < B; ++b) {
    const auto& w = words[size_t(b)];
    num.data<int64_t>()[b] = int64_t(w.size());
    for (size_t k = 0; k < w.size(); ++k) {
      for (int j = 0; j < 8; ++j)
        quads.data<float>()[(b * G + int64_t(k)) * 8 + j] = float(w[k].quad[size_t(j)]);
      dc.data<uint8_t>()[b * G + int64_t(k)] = w[k].dont_care;
    }
  }
  return {{"images", images}, {"quads", quads}, {"num_boxes", num}, {"dont_care", dc}};
}

TensorMap IcdarSource::next(int64_t batch_size) {
  AIM_CHECK(batch_size > 0, "icdar: batch_size must be > 0, got ", batch_size);
  const int64_t S = cfg_.size;
  Tensor images = Tensor::empty({batch_size, 3, S, S}, DType::f32);
  std::vector<std::vector<IcdarWord>> words;
  for (int64_t b = 0; b < batch_size; ++b)
    words.push_back(train_sample(pos_ + b, images.data<float>() + b * 3 * S * S, nullptr));
  pos_ += batch_size;
  return pack(words, images);
}

void IcdarSource::seek(int64_t position) {
  AIM_CHECK(position >= 0, "icdar: negative position ", position);
  pos_ = position;
}

TensorMap IcdarSource::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0 && start + count <= eval_size(), "icdar: eval images [", start,
            ", ", start + count, ") outside the evaluation set of ", eval_size());
  const int64_t S = cfg_.size;
  Tensor images = Tensor::empty({count, 3, S, S}, DType::f32);
  Tensor orig = Tensor::empty({count, 2}, DType::i64);
  std::vector<std::vector<IcdarWord>> words;
  std::vector<int64_t> index;
  for (int64_t b = 0; b < count; ++b) {
    const IcdarItem& it = eval_[size_t(start + b)];
    const FloatImage f = decode_float(it.image);
    const FloatImage r = tf_resize(f, S, S, SeglinkResize::bilinear);
    std::copy(r.chw.begin(), r.chw.end(), images.data<float>() + b * 3 * S * S);
    std::vector<IcdarWord> w = it.words;
    const double sx = double(S) / double(f.width), sy = double(S) / double(f.height);
    for (IcdarWord& x : w)
      for (int k = 0; k < 4; ++k) x.quad[size_t(2 * k)] *= sx, x.quad[size_t(2 * k + 1)] *= sy;
    words.push_back(std::move(w));
    orig.data<int64_t>()[2 * b] = f.height, orig.data<int64_t>()[2 * b + 1] = f.width;
    index.push_back(start + b);
  }
  TensorMap m = pack(words, images);
  m["orig_size"] = orig;
  m["index"] = Tensor::from_vector(index, {count});
  return m;
}

}  // namespace aim::data
