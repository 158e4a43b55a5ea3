#include "data/text_synthetic.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "data/philox_draw.h"
#include "data/text_font.h"
#include "tensor/check.h"
#include "tensor/philox.h"

namespace aim::data {
namespace {

// Tags of the independent Philox keys derived from the seed.
constexpr uint64_t kTagText = 40, kTagStyle = 41, kTagNoise = 42;
constexpr uint64_t kTextBlocks = 3, kStyleBlocks = 4;  // 12 and 16 uniforms per sample

}  // namespace

TextSyntheticSource::TextSyntheticSource(const TextSyntheticConfig& cfg) : cfg_(cfg) {
  AIM_CHECK(cfg_.height >= 9 && cfg_.width >= 9, "text-synthetic: the image must be at least 9x9 ",
            "(a 5x7 glyph and its margins), got ", cfg_.height, "x", cfg_.width);
  AIM_CHECK(cfg_.min_len >= 1 && cfg_.max_len >= cfg_.min_len && cfg_.max_len <= 12,
            "text-synthetic: lengths must satisfy 1 <= min_len <= max_len <= 12, got ",
            cfg_.min_len, " and ", cfg_.max_len);
  AIM_CHECK(cfg_.noise_max >= 0 && cfg_.contrast_min >= 0 && cfg_.contrast_min <= 200,
            "text-synthetic: noise_max must be >= 0 and contrast_min in [0, 200], got ",
            cfg_.noise_max, " and ", cfg_.contrast_min);
  AIM_CHECK(cfg_.epoch_size >= 1 && cfg_.eval_size >= 1,
            "text-synthetic: epoch_size and eval_size must be >= 1, got ", cfg_.epoch_size, ", ",
            cfg_.eval_size);
  text_key_ = philox_key(cfg_.seed, kTagText);
  style_key_ = philox_key(cfg_.seed, kTagStyle);
  noise_key_ = philox_key(cfg_.seed, kTagNoise);
}

std::string TextSyntheticSource::describe() const {
  std::ostringstream os;
  os << "text-synthetic seed " << cfg_.seed << " (" << cfg_.height << "x" << cfg_.width << ", "
     << cfg_.min_len << ".." << cfg_.max_len << " chars)";
  return os.str();
}

std::string TextSyntheticSource::fingerprint() const {
  std::ostringstream os;
  os.precision(17);
  os << "text-synthetic:seed=" << cfg_.seed << ",height=" << cfg_.height << ",width=" << cfg_.width
     << ",len=" << cfg_.min_len << "-" << cfg_.max_len << ",noise=" << cfg_.noise_max
     << ",contrast=" << cfg_.contrast_min << ",epoch=" << cfg_.epoch_size
     << ",eval=" << cfg_.eval_size;
  return os.str();
}

std::string TextSyntheticSource::text(int64_t index) const {
  AIM_CHECK(index >= 0, "text-synthetic: negative sample index ", index);
  const uint64_t off = uint64_t(index) * kTextBlocks;
  const int64_t span = cfg_.max_len - cfg_.min_len + 1;
  const int64_t n = cfg_.min_len +
                    std::min<int64_t>(span - 1, int64_t(philox::uniform(text_key_, off, 0) * span));
  std::string s;
  for (int64_t k = 0; k < n; ++k) {
    const int c = std::min(kTextClasses - 1,
                           int(philox::uniform(text_key_, off, uint64_t(1 + k)) * kTextClasses));
    s += kTextAlphabet[c];
  }
  return s;
}

void TextSyntheticSource::samples(int64_t first, int64_t count, float* images, int64_t* labels,
                                  int64_t* lengths) const {
  AIM_CHECK(first >= 0 && count >= 0, "text-synthetic: bad sample range [", first, ", ",
            first + count, ")");
  const int64_t H = cfg_.height, W = cfg_.width, plane = H * W, S = cfg_.max_len;
  const uint64_t noise_blocks = philox::blocks_for(uint64_t(3 * plane));
  std::vector<float> cov(static_cast<size_t>(plane));
  for (int64_t s = 0; s < count; ++s) {
    const int64_t i = first + s;
    const std::string str = text(i);
    const int64_t n = int64_t(str.size());
    lengths[s] = n;
    for (int64_t k = 0; k < S; ++k) labels[s * S + k] = k < n ? text_class(str[size_t(k)]) : -1;

    auto u = [&](int j) {
      return double(philox::uniform(style_key_, uint64_t(i) * kStyleBlocks, uint64_t(j)));
    };
    // Layout in font units: advance 5 + spacing columns per glyph, 7 rows.
    const double spacing = 0.6 + 0.8 * u(0);
    const double cols = double(n) * (kGlyphW + spacing) - spacing;
    const double sy = std::min(2.4 + 1.2 * u(1), double(H - 2) / kGlyphH);
    const double sx = std::min(1.0 + 1.0 * u(2), double(W - 4) / cols);
    const double x0 = 2.0 + u(3) * (double(W - 4) - sx * cols);
    const double y0 = 1.0 + u(4) * (double(H - 2) - sy * kGlyphH);
    const double bg = 255.0 * u(5),
                 contrast = cfg_.contrast_min + (200.0 - cfg_.contrast_min) * u(6);
    const bool up_fits = bg + contrast <= 255.0, down_fits = bg - contrast >= 0.0;
    const bool up = up_fits && (!down_fits || u(7) < 0.5);
    // Neither direction fits (mid-grey paper, high contrast): ink at the farther extreme, whose
    // contrast exceeds 127.5.
    const double fg = up ? bg + contrast : down_fits ? bg - contrast : bg < 127.5 ? 255.0 : 0.0;
    const double tint[3] = {40.0 * u(8) - 20.0, 40.0 * u(9) - 20.0, 40.0 * u(10) - 20.0};
    const double sigma = cfg_.noise_max * u(11);

    // Glyph coverage by 2x2 supersampling.
    const double adv = kGlyphW + spacing;
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x) {
        int hits = 0;
        for (int sy2 = 0; sy2 < 2; ++sy2)
          for (int sx2 = 0; sx2 < 2; ++sx2) {
            const double fv = (double(y) + 0.25 + 0.5 * sy2 - y0) / sy;
            const double fu = (double(x) + 0.25 + 0.5 * sx2 - x0) / sx;
            if (fv < 0 || fv >= kGlyphH || fu < 0 || fu >= cols) continue;
            const int64_t k = int64_t(fu / adv);
            const double gu = fu - double(k) * adv;
            if (k >= n || gu >= kGlyphW) continue;
            const int cls = text_class(str[size_t(k)]);
            hits += kTextGlyphs[cls][int(fv)][int(gu)] == '#';
          }
        cov[size_t(y * W + x)] = 0.25f * float(hits);
      }
    float* img = images + s * 3 * plane;
    philox_fill_normal(noise_key_, uint64_t(i) * noise_blocks, 3 * plane, img);
    for (int c = 0; c < 3; ++c) {
      const double b = bg + tint[c], f = fg + tint[c];
      float* ch = img + c * plane;
      for (int64_t p = 0; p < plane; ++p) {
        const double v = b + double(cov[size_t(p)]) * (f - b) + sigma * double(ch[p]);
        ch[p] = float(std::min(255.0, std::max(0.0, std::nearbyint(v))));
      }
    }
  }
}

TensorMap TextSyntheticSource::batch(int64_t first, int64_t count) const {
  Tensor x = Tensor::empty({count, 3, cfg_.height, cfg_.width}, DType::f32);
  Tensor y = Tensor::empty({count, cfg_.max_len}, DType::i64);
  Tensor len = Tensor::empty({count}, DType::i64);
  samples(first, count, x.data<float>(), y.data<int64_t>(), len.data<int64_t>());
  return TensorMap{{"input", x}, {"label", y}, {"label_length", len}};
}

TensorMap TextSyntheticSource::next(int64_t batch_size) {
  AIM_CHECK(batch_size > 0, "text-synthetic: batch_size must be > 0, got ", batch_size);
  TensorMap b = batch(pos_, batch_size);
  pos_ += batch_size;
  return b;
}

void TextSyntheticSource::seek(int64_t position) {
  AIM_CHECK(position >= 0 && position < kEvalOffset, "text-synthetic: position ", position,
            " outside [0, 2^40)");
  pos_ = position;
}

TensorMap TextSyntheticSource::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0 && start + count <= cfg_.eval_size,
            "text-synthetic: eval samples [", start, ", ", start + count,
            ") outside the held-out set of ", cfg_.eval_size);
  return batch(kEvalOffset + start, count);
}

}  // namespace aim::data
