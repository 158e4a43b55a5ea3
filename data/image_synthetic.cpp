#include "data/image_synthetic.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "data/philox_draw.h"
#include "tensor/check.h"
#include "tensor/philox.h"

namespace aim::data {
namespace {

// Tags of the independent Philox keys derived from the seed.
constexpr uint64_t kTagGrid = 20, kTagLabel = 21, kTagNoise = 22;

// Per output coordinate of an axis of n samples: lower grid index i0 (i0 + 1 < g) and the weight
// of i0 + 1; grid point 0 sits on sample 0, grid point g - 1 on sample n - 1.
void upsample_axis(int64_t n, int64_t g, std::vector<int32_t>* i0, std::vector<float>* w) {
  i0->resize(size_t(n));
  w->resize(size_t(n));
  for (int64_t y = 0; y < n; ++y) {
    const double pos = n > 1 ? double(y) * double(g - 1) / double(n - 1) : 0.0;
    const int64_t i = std::min<int64_t>(int64_t(pos), g - 2);
    (*i0)[size_t(y)] = int32_t(i);
    (*w)[size_t(y)] = float(pos - double(i));
  }
}

// A[i][j] = sum over samples of weight_i * weight_j (the Gram matrix of the upsampling basis).
std::vector<double> gram(const std::vector<int32_t>& i0, const std::vector<float>& w, int64_t g) {
  std::vector<double> a(size_t(g * g), 0.0);
  for (size_t y = 0; y < i0.size(); ++y) {
    const int64_t i = i0[y];
    const double w1 = w[y], w0 = 1.0 - w1;
    a[size_t(i * g + i)] += w0 * w0;
    a[size_t((i + 1) * g + i + 1)] += w1 * w1;
    a[size_t(i * g + i + 1)] += w0 * w1;
    a[size_t((i + 1) * g + i)] += w0 * w1;
  }
  return a;
}

}  // namespace

ImageSyntheticSource::ImageSyntheticSource(const ImageSyntheticConfig& cfg) : cfg_(cfg) {
  AIM_CHECK(cfg_.classes >= 1 && cfg_.height >= 1 && cfg_.width >= 1,
            "image-synthetic: classes, height and width must be >= 1, got ", cfg_.classes, ", ",
            cfg_.height, ", ", cfg_.width);
  AIM_CHECK(cfg_.grid >= 2 && cfg_.grid <= 64, "image-synthetic: grid must be in [2, 64], got ",
            cfg_.grid);
  AIM_CHECK(cfg_.epoch_size >= 1 && cfg_.eval_size >= 1,
            "image-synthetic: epoch_size and eval_size must be >= 1, got ", cfg_.epoch_size, ", ",
            cfg_.eval_size);
  AIM_CHECK(cfg_.signal >= 0.0, "image-synthetic: signal must be >= 0, got ", cfg_.signal);
  noise_key_ = philox_key(cfg_.seed, kTagNoise);
  label_key_ = philox_key(cfg_.seed, kTagLabel);
  const int64_t g = cfg_.grid, gg = g * g;
  upsample_axis(cfg_.height, g, &y0_, &wy_);
  upsample_axis(cfg_.width, g, &x0_, &wx_);
  // Sum of squares of an upsampled grid G = sum_{i,j,k,l} G[i,k] G[j,l] Ay[i,j] Ax[k,l]: exact
  // unit RMS without rendering (1000 x 3 x 224 x 224 would be 600 MB).
  const std::vector<double> ay = gram(y0_, wy_, g), ax = gram(x0_, wx_, g);
  grid_.resize(size_t(cfg_.classes * 3 * gg));
  const uint64_t grid_key = philox_key(cfg_.seed, kTagGrid);
  for (int64_t p = 0; p < cfg_.classes * 3; ++p) {
    float* G = grid_.data() + p * gg;
    for (int64_t e = 0; e < gg; ++e) G[e] = philox::normal(grid_key, 0, uint64_t(p * gg + e));
    double ss = 0.0;
    for (int64_t i = 0; i < g; ++i)
      for (int64_t j = 0; j < g; ++j)
        for (int64_t k = 0; k < g; ++k)
          for (int64_t l = 0; l < g; ++l)
            ss +=
                double(G[i * g + k]) * G[j * g + l] * ay[size_t(i * g + j)] * ax[size_t(k * g + l)];
    const double rms = std::sqrt(ss / double(cfg_.height * cfg_.width));
    AIM_CHECK(rms > 0.0, "image-synthetic: degenerate prototype grid");
    for (int64_t e = 0; e < gg; ++e) G[e] = float(G[e] / rms);
  }
}

std::string ImageSyntheticSource::describe() const {
  std::ostringstream os;
  os << "image-synthetic seed " << cfg_.seed << " (" << cfg_.classes << " classes, " << cfg_.height
     << "x" << cfg_.width << ")";
  return os.str();
}

std::string ImageSyntheticSource::fingerprint() const {
  std::ostringstream os;
  os.precision(17);
  os << "image-synthetic:seed=" << cfg_.seed << ",classes=" << cfg_.classes
     << ",height=" << cfg_.height << ",width=" << cfg_.width << ",epoch=" << cfg_.epoch_size
     << ",eval=" << cfg_.eval_size << ",grid=" << cfg_.grid << ",signal=" << cfg_.signal;
  return os.str();
}

int64_t ImageSyntheticSource::label(int64_t index) const {
  AIM_CHECK(index >= 0, "image-synthetic: negative sample index ", index);
  const philox::U4 w = philox::block_words(label_key_, uint64_t(index));
  return int64_t((uint64_t(w.x) * uint64_t(cfg_.classes)) >> 32);
}

void ImageSyntheticSource::add_prototype(int64_t c, float scale, float* img) const {
  const int64_t g = cfg_.grid, H = cfg_.height, W = cfg_.width;
  float row[64];  // grid <= 64 (constructor)
  for (int64_t ch = 0; ch < 3; ++ch) {
    const float* G = grid_.data() + (c * 3 + ch) * g * g;
    for (int64_t y = 0; y < H; ++y) {
      // The grid interpolated at row y, pre-scaled; then along x.
      const float w1 = wy_[size_t(y)], w0 = 1.f - w1;
      const float* g0 = G + y0_[size_t(y)] * g;
      for (int64_t k = 0; k < g; ++k) row[k] = scale * (w0 * g0[k] + w1 * g0[g + k]);
      float* out = img + (ch * H + y) * W;
      for (int64_t x = 0; x < W; ++x) {
        const float v1 = wx_[size_t(x)];
        const int32_t k = x0_[size_t(x)];
        out[x] += (1.f - v1) * row[k] + v1 * row[k + 1];
      }
    }
  }
}

std::vector<float> ImageSyntheticSource::prototype(int64_t c) const {
  AIM_CHECK(c >= 0 && c < cfg_.classes, "image-synthetic: class ", c, " outside [0, ", cfg_.classes,
            ")");
  std::vector<float> p(size_t(3 * cfg_.height * cfg_.width), 0.f);
  add_prototype(c, 1.f, p.data());
  return p;
}

void ImageSyntheticSource::samples(int64_t first, int64_t count, float* input,
                                   int64_t* labels) const {
  AIM_CHECK(first >= 0 && count >= 0, "image-synthetic: bad sample range [", first, ", ",
            first + count, ")");
  const int64_t n = 3 * cfg_.height * cfg_.width;
  const uint64_t blocks = philox::blocks_for(uint64_t(n));  // each sample owns its blocks
  for (int64_t s = 0; s < count; ++s) {
    const int64_t i = first + s;
    const int64_t y = label(i);
    labels[s] = y;
    float* img = input + s * n;
    philox_fill_normal(noise_key_, uint64_t(i) * blocks, n, img);
    add_prototype(y, float(cfg_.signal), img);
  }
}

TensorMap ImageSyntheticSource::next(int64_t batch_size) {
  AIM_CHECK(batch_size > 0, "image-synthetic: batch_size must be > 0, got ", batch_size);
  Tensor x = Tensor::empty({batch_size, 3, cfg_.height, cfg_.width}, DType::f32);
  Tensor y = Tensor::empty({batch_size}, DType::i64);
  samples(pos_, batch_size, x.data<float>(), y.data<int64_t>());
  pos_ += batch_size;
  return TensorMap{{"input", x}, {"label", y}};
}

void ImageSyntheticSource::seek(int64_t position) {
  AIM_CHECK(position >= 0 && position < kEvalOffset, "image-synthetic: position ", position,
            " outside [0, 2^40)");
  pos_ = position;
}

TensorMap ImageSyntheticSource::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0 && start + count <= cfg_.eval_size,
            "image-synthetic: eval samples [", start, ", ", start + count,
            ") outside the evaluation set of ", cfg_.eval_size);
  Tensor x = Tensor::empty({count, 3, cfg_.height, cfg_.width}, DType::f32);
  Tensor y = Tensor::empty({count}, DType::i64);
  samples(kEvalOffset + start, count, x.data<float>(), y.data<int64_t>());
  return TensorMap{{"input", x}, {"label", y}};
}

double ImageSyntheticSource::oracle_accuracy(int64_t n) const {
  AIM_CHECK(n >= 1, "image-synthetic: oracle_accuracy needs n >= 1, got ", n);
  // <x, prototype[c]> = sum_{ch,i,k} G[c,ch,i,k] Z[ch,i,k], where Z is x projected on the
  // upsampling basis: Z[ch,i,k] = sum_{y,x} wy_i(y) wx_k(x) x[ch,y,x]. Exact, and it needs no
  // rendered prototypes.
  const int64_t g = cfg_.grid, gg = g * g, H = cfg_.height, W = cfg_.width;
  const int64_t chunk = 64;
  std::vector<float> x(size_t(chunk * 3 * H * W));
  std::vector<int64_t> y(static_cast<size_t>(chunk));
  std::vector<double> t(static_cast<size_t>(g)), z(static_cast<size_t>(3 * gg));
  int64_t correct = 0;
  for (int64_t s0 = 0; s0 < n; s0 += chunk) {
    const int64_t m = std::min(chunk, n - s0);
    samples(kEvalOffset + s0, m, x.data(), y.data());
    for (int64_t s = 0; s < m; ++s) {
      std::fill(z.begin(), z.end(), 0.0);
      for (int64_t ch = 0; ch < 3; ++ch)
        for (int64_t r = 0; r < H; ++r) {
          std::fill(t.begin(), t.end(), 0.0);
          const float* row = x.data() + ((s * 3 + ch) * H + r) * W;
          for (int64_t c = 0; c < W; ++c) {
            const int32_t k = x0_[size_t(c)];
            t[size_t(k)] += (1.0 - wx_[size_t(c)]) * row[c];
            t[size_t(k + 1)] += double(wx_[size_t(c)]) * row[c];
          }
          double* zc = z.data() + ch * gg;
          const int32_t i = y0_[size_t(r)];
          const double w1 = wy_[size_t(r)], w0 = 1.0 - w1;
          for (int64_t k = 0; k < g; ++k) {
            zc[i * g + k] += w0 * t[size_t(k)];
            zc[(i + 1) * g + k] += w1 * t[size_t(k)];
          }
        }
      int64_t best = 0;
      double best_score = -INFINITY;
      for (int64_t c = 0; c < cfg_.classes; ++c) {
        const float* G = grid_.data() + c * 3 * gg;
        double score = 0.0;
        for (int64_t e = 0; e < 3 * gg; ++e) score += double(G[e]) * z[size_t(e)];
        if (score > best_score) {
          best_score = score;
          best = c;
        }
      }
      correct += best == y[size_t(s)];
    }
  }
  return double(correct) / double(n);
}

}  // namespace aim::data
