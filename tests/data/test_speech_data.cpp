// data/audio and data/speech: the WAV reader (formats it takes, every malformed-file error with
// the file and byte offset, the rate check), the speech alphabet, the LibriSpeech-layout reader
// (file:line errors) and the synthetic tone speech (determinism, shapes, the code's frequencies).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/audio.h"
#include "data/speech.h"
#include "tests/support/common.h"

namespace aim::data {
namespace {

using Bytes = std::vector<uint8_t>;

void put32(Bytes& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(uint8_t(v >> (8 * i)));
}
void put16(Bytes& b, uint16_t v) { b.push_back(uint8_t(v)), b.push_back(uint8_t(v >> 8)); }
void puts4(Bytes& b, const char* s) { b.insert(b.end(), s, s + 4); }

// A WAV file image: fmt (format, channels, rate, bits), an optional extra chunk, the data.
Bytes wav_bytes(uint16_t format, uint16_t channels, uint32_t rate, uint16_t bits,
                const std::vector<int16_t>& samples, bool extra_chunk = false) {
  Bytes b;
  puts4(b, "RIFF"), put32(b, 0), puts4(b, "WAVE");
  if (extra_chunk) puts4(b, "LIST"), put32(b, 3), b.insert(b.end(), {'a', 'b', 'c', 0});
  puts4(b, "fmt "), put32(b, 16), put16(b, format), put16(b, channels), put32(b, rate);
  put32(b, rate * channels * bits / 8), put16(b, uint16_t(channels * bits / 8)), put16(b, bits);
  puts4(b, "data"), put32(b, uint32_t(samples.size() * 2));
  for (int16_t s : samples) put16(b, uint16_t(s));
  const uint32_t riff = uint32_t(b.size() - 8);
  std::memcpy(b.data() + 4, &riff, 4);
  return b;
}

std::string write_file(const std::string& dir, const std::string& name, const Bytes& b) {
  const std::string p = dir + "/" + name;
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  return p;
}

TEST(SpeechData, WavReadsMonoStereoAndSkipsChunks) {
  const std::string dir = testing::make_temp_dir("aim_wav");
  const WavAudio m =
      read_wav(write_file(dir, "m.wav", wav_bytes(1, 1, 16000, 16, {0, 16384, -32768, 32767})));
  EXPECT_EQ(m.sample_rate, 16000);
  EXPECT_EQ(m.channels, 1);
  ASSERT_EQ(m.samples.size(), 4u);
  EXPECT_FLOAT_EQ(m.samples[1], 0.5f);
  EXPECT_FLOAT_EQ(m.samples[2], -1.0f);
  // Stereo: the mean of the two channels; an odd-sized LIST chunk before fmt is skipped (padded).
  const WavAudio s = read_wav(
      write_file(dir, "s.wav", wav_bytes(1, 2, 8000, 16, {16384, 0, -16384, -16384}, true)));
  EXPECT_EQ(s.channels, 2);
  ASSERT_EQ(s.samples.size(), 2u);
  EXPECT_FLOAT_EQ(s.samples[0], 0.25f);
  EXPECT_FLOAT_EQ(s.samples[1], -0.5f);
  // write_wav -> read_wav round trip within one 16-bit step.
  const std::vector<float> x = {0.f, 0.25f, -0.75f, 0.999f};
  write_wav(dir + "/w.wav", x, 16000);
  const std::vector<float> y = read_wav_mono(dir + "/w.wav", 16000);
  ASSERT_EQ(y.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], x[i], 1.0 / 16384);
  std::filesystem::remove_all(dir);
}

TEST(SpeechData, WavBadInputsNameFileAndOffset) {
  const std::string dir = testing::make_temp_dir("aim_wav_bad");
  const std::vector<int16_t> pcm = {1, 2, 3, 4};
  AIM_EXPECT_ERROR(read_wav(dir + "/missing.wav"), "cannot open");
  AIM_EXPECT_ERROR(read_wav(write_file(dir, "short.wav", Bytes{'R', 'I', 'F', 'F'})),
                   "too short for a RIFF/WAVE header");
  Bytes b = wav_bytes(1, 1, 16000, 16, pcm);
  b[0] = 'X';
  AIM_EXPECT_ERROR(read_wav(write_file(dir, "riff.wav", b)), "byte 0: expected 'RIFF'");
  b = wav_bytes(1, 1, 16000, 16, pcm);
  b[8] = 'A';
  AIM_EXPECT_ERROR(read_wav(write_file(dir, "wave.wav", b)), "byte 8: expected 'WAVE'");
  AIM_EXPECT_ERROR(read_wav(write_file(dir, "float.wav", wav_bytes(3, 1, 16000, 32, pcm))),
                   "audio format 3 is not PCM");
  AIM_EXPECT_ERROR(read_wav(write_file(dir, "b8.wav", wav_bytes(1, 1, 16000, 8, pcm))),
                   "byte 34: 8 bits per sample, expected 16");
  AIM_EXPECT_ERROR(read_wav(write_file(dir, "c3.wav", wav_bytes(1, 3, 16000, 16, pcm))),
                   "3 channels, expected 1 or 2");
  // Truncated: the data chunk declares more bytes than the file holds.
  b = wav_bytes(1, 1, 16000, 16, pcm);
  b.resize(b.size() - 3);
  const std::string trunc = write_file(dir, "trunc.wav", b);
  AIM_EXPECT_ERROR(read_wav(trunc), "byte 36: chunk 'data' declares 8 bytes");
  AIM_EXPECT_ERROR(read_wav(trunc), "truncated");
  AIM_EXPECT_ERROR(read_wav(trunc), trunc);
  // Stereo data that is not a whole number of frames.
  AIM_EXPECT_ERROR(read_wav(write_file(dir, "odd.wav", wav_bytes(1, 2, 16000, 16, {1, 2, 3}))),
                   "not a whole number of 4-byte frames");
  // No data chunk.
  b = wav_bytes(1, 1, 16000, 16, {});
  b.resize(b.size() - 8);
  AIM_EXPECT_ERROR(read_wav(write_file(dir, "nodata.wav", b)), "no 'data' chunk");
  // Rate mismatch names the file and both rates; no resampling.
  const std::string r8 = write_file(dir, "r8.wav", wav_bytes(1, 1, 8000, 16, pcm));
  AIM_EXPECT_ERROR(read_wav_mono(r8, 16000), "sample rate 8000 Hz, the model expects 16000 Hz");
  AIM_EXPECT_ERROR(read_wav_mono(r8, 16000), "r8.wav");
  std::filesystem::remove_all(dir);
}

TEST(SpeechData, Alphabet) {
  EXPECT_EQ(speech_class(' '), 0);
  EXPECT_EQ(speech_class('a'), 1);
  EXPECT_EQ(speech_class('Z'), 26);
  EXPECT_EQ(speech_class('\''), 27);
  EXPECT_EQ(speech_class('1'), -1);
  EXPECT_EQ(speech_class('\0'), -1);
  EXPECT_EQ(speech_text({8, 9, 0, 27}), "hi '");
  AIM_EXPECT_ERROR(speech_text({28}), "class 28");
}

TEST(SpeechData, LibriSpeechLayoutAndErrors) {
  namespace fs = std::filesystem;
  const std::string root = testing::make_temp_dir("aim_libri");
  const std::string ch = root + "/19/198";
  fs::create_directories(ch);
  write_wav(ch + "/19-198-0000.wav", std::vector<float>(800, 0.1f), 16000);
  write_wav(ch + "/19-198-0001.wav", std::vector<float>(1200, -0.1f), 16000);
  {
    std::ofstream f(ch + "/19-198.trans.txt");
    f << "19-198-0000 HELLO WORLD\n19-198-0001 IT'S ME\n";
  }
  const std::vector<SpeechItem> items = read_librispeech(root);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].text, "hello world");
  EXPECT_EQ(items[1].label.size(), 7u);
  LibriSpeechSource src(root, 16000);
  EXPECT_EQ(src.epoch_size(), 2);
  EXPECT_EQ(src.eval_size(), 2);  // fewer than 10: all are used for both
  const TensorMap b = src.next(2);
  EXPECT_EQ(b.at("audio").sizes(), (Shape{2, 1200}));
  EXPECT_EQ(b.at("audio_length").to_vector<int64_t>(), (std::vector<int64_t>{800, 1200}));
  EXPECT_EQ(b.at("label").sizes(), (Shape{2, 11}));
  EXPECT_EQ(b.at("label").to_vector<int64_t>()[8 + 11 * 1 - 1], -1);
  // A wrong rate is reported when the batch is read.
  LibriSpeechSource at8k(root, 8000);
  AIM_EXPECT_ERROR(at8k.next(1), "sample rate 16000 Hz, the model expects 8000 Hz");

  // Errors name file:line.
  {
    std::ofstream f(ch + "/19-198.trans.txt");
    f << "19-198-0000 HELLO WORLD\n19-198-0001 IT'S ME 2\n";
  }
  AIM_EXPECT_ERROR(read_librispeech(root), "19-198.trans.txt:2: character '2'");
  {
    std::ofstream f(ch + "/19-198.trans.txt");
    f << "19-198-0000 HELLO\n\n19-198-0002 GONE\n";
  }
  AIM_EXPECT_ERROR(read_librispeech(root), "19-198.trans.txt:3: utterance '19-198-0002'");
  AIM_EXPECT_ERROR(read_librispeech(root), "does not exist");
  // An id that is a path would read a .wav outside the chapter's directory.
  write_wav(root + "/19/elsewhere.wav", std::vector<float>(800, 0.1f), 16000);
  {
    std::ofstream f(ch + "/19-198.trans.txt");
    f << "19-198-0000 HELLO\n../elsewhere OUTSIDE\n";
  }
  AIM_EXPECT_ERROR(read_librispeech(root),
                   "19-198.trans.txt:2: utterance id '../elsewhere' contains a path separator");
  {
    std::ofstream f(ch + "/19-198.trans.txt");
    f << "NOTEXT\n";
  }
  AIM_EXPECT_ERROR(read_librispeech(root),
                   "19-198.trans.txt:1: expected '<utterance-id> <TRANSCRIPT>'");
  AIM_EXPECT_ERROR(read_librispeech(root + "/nonexistent"), "not a directory");
  fs::remove(ch + "/19-198.trans.txt");
  AIM_EXPECT_ERROR(read_librispeech(root), "no *.trans.txt");
  fs::remove_all(root);
}

TEST(SpeechData, SyntheticIsDeterministicAndShaped) {
  SpeechSyntheticSource a(SpeechSyntheticConfig::tiny(3)), b(SpeechSyntheticConfig::tiny(3)),
      c(SpeechSyntheticConfig::tiny(4));
  const Utterance u = a.sample(17), v = b.sample(17), w = c.sample(17);
  EXPECT_EQ(u.audio, v.audio);
  EXPECT_EQ(u.label, v.label);
  EXPECT_NE(u.audio, w.audio);
  ASSERT_GE(u.label.size(), 1u);
  ASSERT_LE(u.label.size(), 5u);
  for (float s : u.audio) ASSERT_LT(std::abs(s), 1.0f);
  // Each character sounds for 60..100 ms plus a quarter of that in silence, with <= 100 ms of
  // lead-in and tail.
  const double secs = double(u.audio.size()) / 16000.0, n = double(u.label.size());
  EXPECT_GE(secs, n * 0.06 * 1.25 - 1e-3);
  EXPECT_LE(secs, n * 0.1 * 1.25 + 0.1 + 1e-3);
  const TensorMap t = a.next(4);
  EXPECT_EQ(t.at("audio").dim(), 2);
  EXPECT_EQ(a.position(), 4);
  const TensorMap e1 = a.eval_batch(2, 3), e2 = b.eval_batch(2, 3);
  EXPECT_EQ(e1.at("audio").to_vector<float>(), e2.at("audio").to_vector<float>());
  AIM_EXPECT_ERROR(a.eval_batch(250, 10), "outside [0, 256)");
  // The dual-tone code: class c's tones dominate its spectrum (a DFT at the two frequencies
  // against one at another code frequency), here on a noise-free single-character sample.
  SpeechSyntheticConfig q = SpeechSyntheticConfig::tiny(1);
  q.noise_max = 0;
  q.max_len = 1;
  SpeechSyntheticSource clean(q);
  const Utterance one = clean.sample(5);
  const int64_t cls = one.label[0];
  auto energy = [&](double hz) {
    double re = 0, im = 0;
    for (size_t k = 0; k < one.audio.size(); ++k) {
      re += one.audio[k] * std::cos(2 * M_PI * hz * double(k) / 16000);
      im += one.audio[k] * std::sin(2 * M_PI * hz * double(k) / 16000);
    }
    return re * re + im * im;
  };
  const double lo = energy(SpeechSyntheticSource::kLowHz[cls % 7]);
  const double hi = energy(SpeechSyntheticSource::kHighHz[cls / 7]);
  const double other = energy(SpeechSyntheticSource::kLowHz[(cls + 3) % 7]);
  EXPECT_GT(lo, 20 * other);
  EXPECT_GT(hi, 20 * other);
}

}  // namespace
}  // namespace aim::data
