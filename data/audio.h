// WAV audio (RIFF/WAVE, PCM 16-bit) for the speech model (MODELS.md §3.3: LibriSpeech clips, 16 kHz
// 16-bit) and the character alphabet of its transcripts.
//
// read_wav accepts: "RIFF" <size> "WAVE", then chunks in any order (odd sizes padded to even, as
// RIFF says); one "fmt " chunk of format 1 (PCM) or 0xFFFE (WAVE_FORMAT_EXTENSIBLE whose sub-format
// is PCM), 1 or 2 channels, 16 bits per sample, block_align = 2 channels; one "data" chunk (a
// whole number of frames). Other chunks (LIST, fact, ...) are skipped. Anything else -- another
// sample format or width, a chunk running past the end of the file, a missing chunk -- is an error
// naming the file, the byte offset and what was expected.
// Samples become floats s / 32768 in [-1, 1). Stereo becomes mono as the mean of the two
// channels, (l + r) / 2 (what torchaudio users do with .mean(0); no channel is preferred).
// No resampling: read_wav_mono refuses a file whose rate differs from the expected one, naming the
// file and both rates (convert the data beforehand, e.g. sox in.wav -r 16000 out.wav).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace aim::data {

struct WavAudio {
  int64_t sample_rate = 0;
  int64_t channels = 0;
  std::vector<float> samples;  // mono, in [-1, 1)
};

WavAudio read_wav(const std::string& path);
// read_wav, checked to have `sample_rate` Hz.
std::vector<float> read_wav_mono(const std::string& path, int64_t sample_rate);
// A mono 16-bit PCM file (tests, exports): samples clamped to [-1, 1] and rounded to s * 32767.
void write_wav(const std::string& path, const std::vector<float>& samples, int64_t sample_rate);

// The speech model's characters (Mozilla DeepSpeech's alphabet): class 0 space, 1..26 a-z,
// 27 apostrophe; the CTC blank is the last class, 28.
constexpr const char* kSpeechAlphabet = " abcdefghijklmnopqrstuvwxyz'";
constexpr int64_t kSpeechChars = 28;
constexpr int64_t kSpeechClasses = 29;  // with the blank
// The class of a character (upper case is folded to lower case), or -1 when it has none.
int64_t speech_class(char c);
std::string speech_text(const std::vector<int64_t>& classes);  // classes -> characters

}  // namespace aim::data
