#include "data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <exception>
#include <filesystem>
#include <sstream>
#include <thread>

#include "data/din_export.h"
#include "data/philox_draw.h"
#include "tensor/check.h"
#include "tensor/philox.h"

namespace aim::data {
namespace fs = std::filesystem;
namespace {

constexpr uint64_t kTagFlip = 30;

bool hidden(const fs::path& p) {
  const std::string n = p.filename().string();
  return !n.empty() && n[0] == '.';
}

bool is_image_name(const fs::path& p) {
  std::string e = p.extension().string();
  for (char& c : e) c = char(std::tolower(static_cast<unsigned char>(c)));
  return e == ".jpg" || e == ".jpeg" || e == ".png";
}

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

// Sorted names of the visible subdirectories of dir.
std::vector<std::string> subdirs(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  AIM_CHECK(!ec, "image folder: ", dir.string(), ": cannot list (", ec.message(), ")");
  for (; it != end; it.increment(ec)) {
    AIM_CHECK(!ec, "image folder: ", dir.string(), ": cannot list (", ec.message(), ")");
    if (!hidden(it->path()) && is_dir(it->path())) names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Sorted image files of a class folder; *ignored counts the other files. Empty -> error.
std::vector<std::string> image_files(const fs::path& dir, int64_t* ignored) {
  std::vector<std::string> names;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  AIM_CHECK(!ec, "image folder: ", dir.string(), ": cannot list (", ec.message(), ")");
  for (; it != end; it.increment(ec)) {
    AIM_CHECK(!ec, "image folder: ", dir.string(), ": cannot list (", ec.message(), ")");
    if (hidden(it->path()) || is_dir(it->path())) continue;
    if (is_image_name(it->path()))
      names.push_back(it->path().filename().string());
    else
      ++*ignored;
  }
  AIM_CHECK(!names.empty(), "image folder: ", dir.string(),
            ": class folder has no image files (.jpg, .jpeg, .png)");
  std::sort(names.begin(), names.end());
  return names;
}

void fnv1a(uint64_t* h, const std::string& s) {
  for (unsigned char c : s) {
    *h ^= c;
    *h *= 1099511628211ull;
  }
  *h ^= 0xFF;  // separator
  *h *= 1099511628211ull;
}

}  // namespace

ImageFolderSource::ImageFolderSource(const ImageFolderConfig& cfg) : cfg_(cfg) {
  check_transform(cfg_.transform);
  AIM_CHECK(cfg_.threads >= 1, "image folder: threads must be >= 1, got ", cfg_.threads);
  AIM_CHECK(cfg_.eval_every >= 2, "image folder: eval_every must be >= 2, got ", cfg_.eval_every);
  const fs::path root(cfg_.root);
  AIM_CHECK(is_dir(root), "image folder: ", cfg_.root, ": not a directory");
  flip_key_ = philox_key(cfg_.seed, kTagFlip);
  list_hash_ = 14695981039346656037ull;
  imagenet_layout_ = is_dir(root / "train");
  const fs::path train_dir = imagenet_layout_ ? root / "train" : root;
  classes_ = subdirs(train_dir);
  AIM_CHECK(!classes_.empty(), "image folder: ", train_dir.string(), ": no class folders");
  if (imagenet_layout_) {
    const fs::path val_dir = root / "val";
    AIM_CHECK(is_dir(val_dir), "image folder: ", val_dir.string(), ": not a directory (",
              (root / "train").string(), " exists, so val/ is needed)");
    const std::vector<std::string> val_classes = subdirs(val_dir);
    for (const std::string& c : classes_)
      AIM_CHECK(std::binary_search(val_classes.begin(), val_classes.end(), c),
                "image folder: ", (val_dir / c).string(), " is missing (", train_dir.string(),
                " has class ", c, ")");
    for (const std::string& c : val_classes)
      AIM_CHECK(std::binary_search(classes_.begin(), classes_.end(), c),
                "image folder: ", (val_dir / c).string(), " is not a class of ",
                train_dir.string());
    for (int64_t k = 0; k < int64_t(classes_.size()); ++k) {
      const std::string& c = classes_[size_t(k)];
      for (const std::string& f : image_files(train_dir / c, &ignored_)) {
        train_.push_back({(train_dir / c / f).string(), k});
        fnv1a(&list_hash_, "train/" + c + "/" + f);
      }
      for (const std::string& f : image_files(val_dir / c, &ignored_)) {
        eval_.push_back({(val_dir / c / f).string(), k});
        fnv1a(&list_hash_, "val/" + c + "/" + f);
      }
    }
  } else {
    int64_t g = 0;
    for (int64_t k = 0; k < int64_t(classes_.size()); ++k) {
      const std::string& c = classes_[size_t(k)];
      for (const std::string& f : image_files(train_dir / c, &ignored_)) {
        (g++ % cfg_.eval_every == 0 ? eval_ : train_).push_back({(train_dir / c / f).string(), k});
        fnv1a(&list_hash_, c + "/" + f);
      }
    }
    AIM_CHECK(!train_.empty(), "image folder: ", cfg_.root, ": ", eval_.size(),
              " image(s) in all, too few for a training set (every ", cfg_.eval_every,
              "th file is held out for evaluation)");
  }
}

std::string ImageFolderSource::describe() const {
  std::ostringstream os;
  os << "image-folder " << cfg_.root << " (" << (imagenet_layout_ ? "train/val" : "flat") << ", "
     << classes_.size() << " classes, " << train_.size() << " train, " << eval_.size()
     << " eval images";
  if (ignored_ > 0) os << ", " << ignored_ << " other files ignored";
  os << "; resize " << cfg_.transform.resize << (cfg_.transform.antialias ? " antialiased" : "")
     << ", crop " << cfg_.transform.crop << (cfg_.train_flip ? ", train flips" : "")
     << ", shuffle seed " << cfg_.seed << ")";
  return os.str();
}

std::string ImageFolderSource::fingerprint() const {
  const ImageTransform& t = cfg_.transform;
  std::ostringstream os;
  os << "image-folder:classes=" << classes_.size() << ",train=" << train_.size()
     << ",eval=" << eval_.size() << ",files=" << std::hex << list_hash_ << std::dec
     << ",seed=" << cfg_.seed << ",resize=" << t.resize << ",crop=" << t.crop
     << ",antialias=" << t.antialias << ",mean=" << t.mean[0] << "/" << t.mean[1] << "/"
     << t.mean[2] << ",std=" << t.stddev[0] << "/" << t.stddev[1] << "/" << t.stddev[2]
     << ",flip=" << cfg_.train_flip;
  return os.str();
}

void ImageFolderSource::seek(int64_t position) {
  AIM_CHECK(position >= 0, "image folder: negative stream position ", position);
  pos_ = position;
}

TensorMap ImageFolderSource::load(const std::vector<File>& files, const std::vector<int64_t>& index,
                                  const std::vector<uint8_t>& flip) const {
  const int64_t B = int64_t(index.size()), C = cfg_.transform.crop;
  Tensor x = Tensor::empty({B, 3, C, C}, DType::f32);
  Tensor y = Tensor::empty({B}, DType::i64);
  float* xp = x.data<float>();
  int64_t* yp = y.data<int64_t>();
  std::vector<std::exception_ptr> errors(static_cast<size_t>(B));
  auto work = [&](int64_t first, int64_t step) {
    for (int64_t i = first; i < B; i += step) {
      const File& f = files[size_t(index[size_t(i)])];
      yp[i] = f.label;
      try {
        preprocess(decode_image_file(f.path), cfg_.transform, xp + i * 3 * C * C, flip[size_t(i)]);
      } catch (const Error& e) {
        errors[size_t(i)] =
            std::make_exception_ptr(Error(std::string("image folder: ") + e.what()));
      } catch (...) {
        errors[size_t(i)] = std::current_exception();
      }
    }
  };
  const int64_t T = std::min<int64_t>(cfg_.threads, B);
  if (T <= 1) {
    work(0, 1);
  } else {
    std::vector<std::thread> pool;
    try {
      for (int64_t t = 0; t < T; ++t) pool.emplace_back(work, t, T);
    } catch (...) {  // could not start a thread: finish the started ones before rethrowing
      for (std::thread& th : pool) th.join();
      throw;
    }
    for (std::thread& th : pool) th.join();
  }
  // The first failing sample of the batch, whatever the thread timing.
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return TensorMap{{"input", x}, {"label", y}};
}

TensorMap ImageFolderSource::next(int64_t batch_size) {
  const int64_t n = int64_t(train_.size());
  AIM_CHECK(batch_size > 0 && batch_size <= n, "image folder ", cfg_.root, ": batch size ",
            batch_size, " must be in [1, ", n, "] (training images)");
  const int64_t per_epoch = (n / batch_size) * batch_size;  // last partial batch skipped
  const int64_t epoch = pos_ / per_epoch, start = pos_ % per_epoch;
  AIM_CHECK(start % batch_size == 0, "image folder ", cfg_.root, ": stream position ", pos_,
            " is not a multiple of the batch size ", batch_size,
            " (resume with the batch size of the checkpoint)");
  if (epoch != order_epoch_) {
    order_ = epoch_order(n, cfg_.seed, epoch);
    order_epoch_ = epoch;
  }
  std::vector<int64_t> index(static_cast<size_t>(batch_size));
  std::vector<uint8_t> flip(static_cast<size_t>(batch_size), 0);
  for (int64_t i = 0; i < batch_size; ++i) {
    index[size_t(i)] = order_[size_t(start + i)];
    if (cfg_.train_flip) flip[size_t(i)] = philox::block_words(flip_key_, uint64_t(pos_ + i)).x & 1;
  }
  TensorMap b = load(train_, index, flip);
  pos_ += batch_size;  // only once the batch is made: a failed batch can be retried
  return b;
}

TensorMap ImageFolderSource::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0 && start + count <= int64_t(eval_.size()), "image folder ",
            cfg_.root, ": eval samples [", start, ", ", start + count,
            ") outside the evaluation set of ", eval_.size());
  std::vector<int64_t> index(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) index[size_t(i)] = start + i;
  return load(eval_, index, std::vector<uint8_t>(static_cast<size_t>(count), 0));
}

}  // namespace aim::data
