#include "data/audio.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "tensor/check.h"

namespace aim::data {
namespace {

uint32_t u32(const std::vector<uint8_t>& b, size_t o) {
  return uint32_t(b[o]) | uint32_t(b[o + 1]) << 8 | uint32_t(b[o + 2]) << 16 |
         uint32_t(b[o + 3]) << 24;
}
uint16_t u16(const std::vector<uint8_t>& b, size_t o) { return uint16_t(b[o] | b[o + 1] << 8); }
std::string tag(const std::vector<uint8_t>& b, size_t o) {
  std::string s(reinterpret_cast<const char*>(b.data() + o), 4);
  for (char& c : s)
    if (c < 32 || c > 126) c = '?';
  return s;
}

}  // namespace

WavAudio read_wav(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  AIM_CHECK(f.good(), path, ": cannot open the WAV file");
  const std::vector<uint8_t> b((std::istreambuf_iterator<char>(f)),
                               std::istreambuf_iterator<char>());
  const size_t n = b.size();
  AIM_CHECK(n >= 12, path, ": ", n, " bytes, too short for a RIFF/WAVE header (12 bytes)");
  AIM_CHECK(tag(b, 0) == "RIFF", path, ": byte 0: expected 'RIFF', found '", tag(b, 0), "'");
  AIM_CHECK(tag(b, 8) == "WAVE", path, ": byte 8: expected 'WAVE', found '", tag(b, 8), "'");
  bool have_fmt = false;
  int64_t channels = 0, rate = 0;
  size_t data_off = 0, data_size = 0;
  bool have_data = false;
  size_t o = 12;
  while (o + 8 <= n) {
    const std::string id = tag(b, o);
    const size_t size = u32(b, o + 4);
    AIM_CHECK(size <= n - o - 8, path, ": byte ", o, ": chunk '", id, "' declares ", size,
              " bytes but the file ends ", n - o - 8, " bytes later (truncated file)");
    const size_t body = o + 8;
    if (id == "fmt ") {
      AIM_CHECK(size >= 16, path, ": byte ", o, ": 'fmt ' chunk of ", size,
                " bytes, expected >= 16");
      const uint16_t format = u16(b, body);
      bool pcm = format == 1;
      if (format == 0xFFFE) {  // WAVE_FORMAT_EXTENSIBLE: the sub-format GUID starts with the code
        AIM_CHECK(size >= 40, path, ": byte ", o, ": extensible 'fmt ' chunk of ", size,
                  " bytes, expected 40");
        pcm = u16(b, body + 24) == 1;
      }
      AIM_CHECK(pcm, path, ": byte ", body, ": audio format ", format,
                " is not PCM (1, or extensible PCM); only 16-bit PCM is read");
      channels = u16(b, body + 2);
      rate = u32(b, body + 4);
      const uint16_t align = u16(b, body + 12), bits = u16(b, body + 14);
      AIM_CHECK(channels == 1 || channels == 2, path, ": byte ", body + 2, ": ", channels,
                " channels, expected 1 or 2");
      AIM_CHECK(bits == 16, path, ": byte ", body + 14, ": ", bits,
                " bits per sample, expected 16");
      AIM_CHECK(align == 2 * channels, path, ": byte ", body + 12, ": block align ", align,
                ", expected ", 2 * channels, " for ", channels, " channel(s) of 16 bits");
      AIM_CHECK(rate > 0, path, ": byte ", body + 4, ": sample rate 0");
      have_fmt = true;
    } else if (id == "data") {
      AIM_CHECK(have_fmt, path, ": byte ", o, ": 'data' chunk before the 'fmt ' chunk");
      data_off = body;
      data_size = size;
      have_data = true;
      break;
    }
    o = body + size + (size & 1);
  }
  AIM_CHECK(have_fmt, path, ": no 'fmt ' chunk in ", n, " bytes");
  AIM_CHECK(have_data, path, ": no 'data' chunk in ", n, " bytes");
  AIM_CHECK(data_size % size_t(2 * channels) == 0, path, ": byte ", data_off - 8,
            ": data chunk of ", data_size, " bytes is not a whole number of ", 2 * channels,
            "-byte frames");
  WavAudio w;
  w.sample_rate = rate;
  w.channels = channels;
  const size_t frames = data_size / size_t(2 * channels);
  w.samples.resize(frames);
  for (size_t i = 0; i < frames; ++i) {
    float s = 0;
    for (int64_t c = 0; c < channels; ++c) {
      const int16_t v = int16_t(u16(b, data_off + (i * size_t(channels) + size_t(c)) * 2));
      s += float(v) / 32768.0f;
    }
    w.samples[i] = s / float(channels);
  }
  return w;
}

std::vector<float> read_wav_mono(const std::string& path, int64_t sample_rate) {
  WavAudio w = read_wav(path);
  AIM_CHECK(w.sample_rate == sample_rate, path, ": sample rate ", w.sample_rate,
            " Hz, the model expects ", sample_rate,
            " Hz (aim does not resample: convert the file, e.g. sox in.wav -r ", sample_rate,
            " out.wav)");
  return std::move(w.samples);
}

void write_wav(const std::string& path, const std::vector<float>& samples, int64_t sample_rate) {
  std::ofstream f(path, std::ios::binary);
  AIM_CHECK(f.good(), path, ": cannot create the WAV file");
  auto put32 = [&](uint32_t v) {
    const char c[4] = {char(v), char(v >> 8), char(v >> 16), char(v >> 24)};
    f.write(c, 4);
  };
  auto put16 = [&](uint16_t v) {
    const char c[2] = {char(v), char(v >> 8)};
    f.write(c, 2);
  };
  const uint32_t data = uint32_t(samples.size() * 2);
  f.write("RIFF", 4), put32(36 + data), f.write("WAVE", 4);
  f.write("fmt ", 4), put32(16), put16(1), put16(1), put32(uint32_t(sample_rate));
  put32(uint32_t(sample_rate * 2)), put16(2), put16(16);
  f.write("data", 4), put32(data);
  for (float s : samples)
    put16(uint16_t(int16_t(std::lround(std::clamp(s, -1.0f, 1.0f) * 32767.0f))));
  AIM_CHECK(f.good(), path, ": write failed");
}

int64_t speech_class(char c) {
  if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  const char* p = std::strchr(kSpeechAlphabet, c);
  return c != '\0' && p ? int64_t(p - kSpeechAlphabet) : -1;
}

std::string speech_text(const std::vector<int64_t>& classes) {
  std::string s;
  for (int64_t c : classes) {
    AIM_CHECK(c >= 0 && c < kSpeechChars, "speech_text: class ", c, " outside [0, ", kSpeechChars,
              ")");
    s += kSpeechAlphabet[c];
  }
  return s;
}

}  // namespace aim::data
