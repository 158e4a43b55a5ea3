#include "data/speech.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/audio.h"
#include "data/philox_draw.h"
#include "tensor/check.h"

namespace aim::data {
namespace {

constexpr uint64_t kTagSpeech = 60, kTagSpeechNoise = 61;
constexpr uint64_t kBlocksPerSample = 64;             // words of one sample's draws: 256 max
constexpr uint64_t kNoiseBlocks = uint64_t(1) << 22;  // 4 normals a block: 16M samples max
constexpr double kTwoPi = 6.283185307179586;

}  // namespace

TensorMap speech_batch(const std::vector<Utterance>& u) {
  AIM_CHECK(!u.empty(), "speech batch: no utterances");
  int64_t L = 1, S = 1;
  for (const Utterance& x : u) {
    L = std::max<int64_t>(L, int64_t(x.audio.size()));
    S = std::max<int64_t>(S, int64_t(x.label.size()));
  }
  const int64_t B = int64_t(u.size());
  std::vector<float> audio(size_t(B * L), 0.0f);
  std::vector<int64_t> alen(static_cast<size_t>(B)), label(static_cast<size_t>(B * S), -1),
      llen(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const Utterance& x = u[size_t(b)];
    std::copy(x.audio.begin(), x.audio.end(), audio.begin() + b * L);
    std::copy(x.label.begin(), x.label.end(), label.begin() + b * S);
    alen[size_t(b)] = int64_t(x.audio.size());
    llen[size_t(b)] = int64_t(x.label.size());
  }
  return {{"audio", Tensor::from_vector(audio, {B, L})},
          {"audio_length", Tensor::from_vector(alen, {B})},
          {"label", Tensor::from_vector(label, {B, S})},
          {"label_length", Tensor::from_vector(llen, {B})}};
}

// ---- synthetic -------------------------------------------------------------------------------
SpeechSyntheticSource::SpeechSyntheticSource(const SpeechSyntheticConfig& cfg) : cfg_(cfg) {
  AIM_CHECK(cfg_.sample_rate >= 8000, "speech-synthetic: sample_rate must be >= 8000 (the tones ",
            "reach 3600 Hz), got ", cfg_.sample_rate);
  AIM_CHECK(cfg_.min_len >= 1 && cfg_.max_len >= cfg_.min_len && cfg_.max_len <= 100,
            "speech-synthetic: lengths must satisfy 1 <= min_len <= max_len <= 100, got ",
            cfg_.min_len, " and ", cfg_.max_len);
  AIM_CHECK(cfg_.char_seconds > 0 && cfg_.gap_fraction >= 0 && cfg_.noise_max >= 0,
            "speech-synthetic: char_seconds must be > 0, gap_fraction and noise_max >= 0");
  AIM_CHECK(cfg_.epoch_size >= 1 && cfg_.eval_size >= 1,
            "speech-synthetic: epoch_size and eval_size must be >= 1");
  key_ = philox_key(cfg_.seed, kTagSpeech);
  noise_key_ = philox_key(cfg_.seed, kTagSpeechNoise);
}

std::string SpeechSyntheticSource::describe() const {
  std::ostringstream os;
  os << "speech-synthetic seed " << cfg_.seed << " (" << cfg_.min_len << ".." << cfg_.max_len
     << " chars, " << cfg_.sample_rate << " Hz)";
  return os.str();
}

std::string SpeechSyntheticSource::fingerprint() const {
  std::ostringstream os;
  os.precision(17);
  os << "speech-synthetic:seed=" << cfg_.seed << ",rate=" << cfg_.sample_rate
     << ",len=" << cfg_.min_len << "-" << cfg_.max_len << ",char=" << cfg_.char_seconds
     << ",gap=" << cfg_.gap_fraction << ",noise=" << cfg_.noise_max << ",epoch=" << cfg_.epoch_size
     << ",eval=" << cfg_.eval_size;
  return os.str();
}

Utterance SpeechSyntheticSource::sample(int64_t index) const {
  AIM_CHECK(index >= 0, "speech-synthetic: negative sample index ", index);
  PhiloxDraw d(key_, uint64_t(index) * kBlocksPerSample);
  Utterance u;
  const int64_t n = cfg_.min_len + d.below(cfg_.max_len - cfg_.min_len + 1);
  for (int64_t i = 0; i < n; ++i) u.label.push_back(d.below(kSpeechChars));
  const double sr = double(cfg_.sample_rate);
  const double char_s = cfg_.char_seconds * (0.75 + 0.5 * d.unit());
  const double level = 0.2 + 0.4 * d.unit();
  const double noise = cfg_.noise_max * d.unit();
  const int64_t lead = int64_t(0.05 * d.unit() * sr), tail = int64_t(0.05 * d.unit() * sr);
  const int64_t tone = std::max<int64_t>(1, int64_t(char_s * sr));
  const int64_t gap = int64_t(cfg_.gap_fraction * char_s * sr);
  const int64_t fade = std::min<int64_t>(tone / 2, int64_t(0.005 * sr));
  const int64_t L = lead + n * (tone + gap) + tail;
  u.audio.assign(size_t(L), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = u.label[size_t(i)];
    const double f0 = kLowHz[c % 7], f1 = kHighHz[c / 7];
    const double p0 = kTwoPi * d.unit(), p1 = kTwoPi * d.unit();
    const int64_t start = lead + i * (tone + gap);
    for (int64_t k = 0; k < tone; ++k) {
      double env = 1.0;
      if (k < fade) env = 0.5 - 0.5 * std::cos(kTwoPi * 0.5 * double(k) / double(fade));
      if (tone - 1 - k < fade)
        env =
            std::min(env, 0.5 - 0.5 * std::cos(kTwoPi * 0.5 * double(tone - 1 - k) / double(fade)));
      const double t = double(k) / sr;
      u.audio[size_t(start + k)] = float(
          level * env * 0.5 * (std::sin(kTwoPi * f0 * t + p0) + std::sin(kTwoPi * f1 * t + p1)));
    }
  }
  if (noise > 0) {
    std::vector<float> z(static_cast<size_t>(L));
    philox_fill_normal(noise_key_, uint64_t(index) * kNoiseBlocks, L, z.data());
    for (int64_t k = 0; k < L; ++k) u.audio[size_t(k)] += float(noise) * z[size_t(k)];
  }
  return u;
}

TensorMap SpeechSyntheticSource::next(int64_t batch_size) {
  AIM_CHECK(batch_size >= 1, "speech-synthetic: batch size must be >= 1, got ", batch_size);
  std::vector<Utterance> u;
  for (int64_t i = 0; i < batch_size; ++i) u.push_back(sample(pos_ + i));
  pos_ += batch_size;
  return speech_batch(u);
}

void SpeechSyntheticSource::seek(int64_t position) {
  AIM_CHECK(position >= 0, "speech-synthetic: negative position ", position);
  pos_ = position;
}

TensorMap SpeechSyntheticSource::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count >= 1 && start + count <= cfg_.eval_size,
            "speech-synthetic: evaluation samples [", start, ", ", start + count, ") outside [0, ",
            cfg_.eval_size, ")");
  std::vector<Utterance> u;
  for (int64_t i = 0; i < count; ++i) u.push_back(sample(kEvalOffset + start + i));
  return speech_batch(u);
}

// ---- LibriSpeech layout ----------------------------------------------------------------------
std::vector<SpeechItem> read_librispeech(const std::string& root) {
  namespace fs = std::filesystem;
  AIM_CHECK(fs::is_directory(root), root, ": not a directory (expected LibriSpeech's layout ",
            "<root>/<speaker>/<chapter>/<speaker>-<chapter>.trans.txt)");
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string p = e.path().string();
    if (e.is_regular_file() && p.size() > 10 && p.compare(p.size() - 10, 10, ".trans.txt") == 0)
      files.push_back(p);
  }
  std::sort(files.begin(), files.end());
  AIM_CHECK(!files.empty(), root, ": no *.trans.txt transcript under this directory");
  std::vector<SpeechItem> items;
  for (const std::string& file : files) {
    std::ifstream f(file);
    AIM_CHECK(f.good(), file, ": cannot open");
    const fs::path dir = fs::path(file).parent_path();
    std::string line;
    int64_t ln = 0;
    while (std::getline(f, line)) {
      ++ln;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank line
      const size_t sp = line.find(' ');
      AIM_CHECK(sp != std::string::npos && sp > 0, file, ":", ln,
                ": expected '<utterance-id> <TRANSCRIPT>', got '", line, "'");
      SpeechItem it;
      const std::string id = line.substr(0, sp);
      it.text = line.substr(sp + 1);
      for (size_t k = 0; k < it.text.size(); ++k) {
        const int64_t c = speech_class(it.text[k]);
        AIM_CHECK(c >= 0, file, ":", ln, ": character '", it.text[k], "' (byte ",
                  int(static_cast<unsigned char>(it.text[k])), ") at column ", sp + 2 + k,
                  " is not in the alphabet (space, a-z, apostrophe)");
        it.label.push_back(c);
        it.text[k] = kSpeechAlphabet[c];
      }
      AIM_CHECK(!it.label.empty(), file, ":", ln, ": utterance '", id, "' has an empty transcript");
      // An id names a file beside its transcript: a path in it would read any file ending in
      // .wav, anywhere.
      AIM_CHECK(id.find('/') == std::string::npos && id.find('\\') == std::string::npos, file,
                ":", ln, ": utterance id '", id,
                "' contains a path separator: ids name <id>.wav beside this transcript");
      it.wav = (dir / (id + ".wav")).string();
      // The error_code form: an id the system refuses to look up (over 255 bytes) is this line's
      // error too, not a std::filesystem_error escaping the reader.
      std::error_code ec;
      const bool found = fs::is_regular_file(it.wav, ec);
      AIM_CHECK(
          !ec || ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory,
          file, ":", ln, ": utterance '", id, "': ", it.wav,
          " cannot be looked up: ", ec.message());
      AIM_CHECK(found, file, ":", ln, ": utterance '", id, "': ", it.wav,
                " does not exist (FLAC is not read: convert to 16-bit WAV, docs/deepspeech.md)");
      items.push_back(std::move(it));
    }
  }
  AIM_CHECK(!items.empty(), root, ": the transcripts list no utterance");
  return items;
}

LibriSpeechSource::LibriSpeechSource(const std::string& root, int64_t sample_rate)
    : root_(root), sample_rate_(sample_rate) {
  std::vector<SpeechItem> all = read_librispeech(root);
  for (size_t k = 0; k < all.size(); ++k) {
    if (all.size() >= 10 && k % 10 == 9)
      eval_.push_back(all[k]);
    else
      train_.push_back(all[k]);
  }
  if (all.size() < 10) eval_ = train_;
}

std::string LibriSpeechSource::describe() const {
  std::ostringstream os;
  os << "librispeech " << root_ << " (" << train_.size() << " train, " << eval_.size()
     << " held out)";
  return os.str();
}
std::string LibriSpeechSource::fingerprint() const {
  return "librispeech:" + root_ + ",train=" + std::to_string(train_.size()) +
         ",eval=" + std::to_string(eval_.size());
}

Utterance LibriSpeechSource::load(const SpeechItem& it) const {
  return Utterance{read_wav_mono(it.wav, sample_rate_), it.label};
}

TensorMap LibriSpeechSource::next(int64_t batch_size) {
  AIM_CHECK(batch_size >= 1, "librispeech: batch size must be >= 1, got ", batch_size);
  std::vector<Utterance> u;
  for (int64_t i = 0; i < batch_size; ++i)
    u.push_back(load(train_[size_t((pos_ + i) % int64_t(train_.size()))]));
  pos_ += batch_size;
  return speech_batch(u);
}

void LibriSpeechSource::seek(int64_t position) {
  AIM_CHECK(position >= 0, "librispeech: negative position ", position);
  pos_ = position;
}

TensorMap LibriSpeechSource::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count >= 1 && start + count <= eval_size(), "librispeech: evaluation ",
            "samples [", start, ", ", start + count, ") outside [0, ", eval_size(), ")");
  std::vector<Utterance> u;
  for (int64_t i = 0; i < count; ++i) u.push_back(load(eval_[size_t(start + i)]));
  return speech_batch(u);
}

}  // namespace aim::data
