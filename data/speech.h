// The speech model's batch sources (MODELS.md §3.3; definitions and figures: docs/deepspeech.md).
// Batches: "audio" f32 [B, L] mono samples in [-1, 1) zero-padded to the longest in the batch,
// "audio_length" i64 [B] samples, "label" i64 [B, S] character classes (data/audio.h: 0 space,
// 1-26 a-z, 27 apostrophe) padded with -1, "label_length" i64 [B].
//
// SpeechSyntheticSource: characters spoken as dual tones (a "DTMF" code: class c sounds a low tone
// kLowHz[c % 7] plus a high tone kHighHz[c / 7], on the mel scale one or more filterbank bands
// apart), so the character is readable from the MFCCs and the model must learn the code, the
// segmentation and the CTC alignment. Sample i is a pure function of (seed, i) through Philox:
//   text     length ~ U{min_len..max_len}, characters ~ uniform over the 28 classes
//   speed    per utterance, a character lasts char_seconds * U[0.75, 1.25], followed by a silence
//            of gap_fraction of that; lead-in and tail silences ~ U[0, 0.05] s
//   sound    each tone's phase ~ U[0, 2 pi), level ~ U[0.2, 0.6] per utterance, 5 ms raised-cosine
//            fades; white Gaussian noise of standard deviation ~ U[0, noise_max] per utterance
// The training stream is samples 0, 1, ...; the held-out set is samples kEvalOffset + j.
//
// LibriSpeechSource: a directory in LibriSpeech's layout, <root>/<speaker>/<chapter>/ with
// <speaker>-<chapter>.trans.txt (lines "<utterance-id> <TRANSCRIPT>") beside <utterance-id>.wav
// (16-bit PCM WAV at the model's rate; LibriSpeech ships FLAC: convert once, docs/deepspeech.md).
// Every *.trans.txt under root is read in sorted path order; utterance k (in that order) is held
// out for evaluation when k % 10 == 9 (all are used for both when there are fewer than 10). The
// training stream walks the training utterances in order, cyclically. Errors name file:line: an
// empty id, a character outside the alphabet, a missing .wav; WAV errors name the file and byte.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/source.h"

namespace aim::data {

struct SpeechSyntheticConfig {
  int64_t sample_rate = 16000;
  int64_t min_len = 1, max_len = 12;
  double char_seconds = 0.08;
  double gap_fraction = 0.25;
  double noise_max = 0.03;
  uint64_t seed = 1;
  int64_t epoch_size = 28539;  // LibriSpeech train-clean-100's utterances
  int64_t eval_size = 1000;

  // The tiny model's data (tests, CI): shorter utterances, a 1000-sample held-out set.
  static SpeechSyntheticConfig tiny(uint64_t seed = 1) {
    SpeechSyntheticConfig c;
    c.seed = seed;
    c.min_len = 1;
    c.max_len = 5;
    c.eval_size = 256;
    return c;
  }
};

// One utterance: samples and character classes.
struct Utterance {
  std::vector<float> audio;
  std::vector<int64_t> label;
};
// Batch tensors of utterances (the layout above).
TensorMap speech_batch(const std::vector<Utterance>& u);

class SpeechSyntheticSource : public BatchSource {
 public:
  static constexpr int64_t kEvalOffset = int64_t(1) << 40;
  static constexpr double kLowHz[7] = {300, 380, 480, 600, 760, 960, 1200};
  static constexpr double kHighHz[4] = {1500, 2000, 2700, 3600};

  explicit SpeechSyntheticSource(const SpeechSyntheticConfig& cfg = SpeechSyntheticConfig());
  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return pos_; }
  void seek(int64_t position) override;
  int64_t epoch_size() const override { return cfg_.epoch_size; }
  int64_t eval_size() const override { return cfg_.eval_size; }
  TensorMap eval_batch(int64_t start, int64_t count) const override;

  Utterance sample(int64_t index) const;  // stream sample `index`
  const SpeechSyntheticConfig& config() const { return cfg_; }

 private:
  SpeechSyntheticConfig cfg_;
  uint64_t key_ = 0, noise_key_ = 0;
  int64_t pos_ = 0;
};

// A transcript line.
struct SpeechItem {
  std::string wav;   // path
  std::string text;  // lower case
  std::vector<int64_t> label;
};
// The utterances of a LibriSpeech-layout directory, in sorted order (errors: file:line).
std::vector<SpeechItem> read_librispeech(const std::string& root);

class LibriSpeechSource : public BatchSource {
 public:
  LibriSpeechSource(const std::string& root, int64_t sample_rate);
  std::string describe() const override;
  std::string fingerprint() const override;
  TensorMap next(int64_t batch_size) override;
  int64_t position() const override { return pos_; }
  void seek(int64_t position) override;
  int64_t epoch_size() const override { return int64_t(train_.size()); }
  int64_t eval_size() const override { return int64_t(eval_.size()); }
  TensorMap eval_batch(int64_t start, int64_t count) const override;

 private:
  Utterance load(const SpeechItem& it) const;
  std::string root_;
  int64_t sample_rate_;
  std::vector<SpeechItem> train_, eval_;
  int64_t pos_ = 0;
};

}  // namespace aim::data
