// DeepSpeech as AI Matrix benchmarked it (MODELS.md §3.3: Mozilla DeepSpeech v0.1/0.2); the
// definitions, the reference mapping and measurements: docs/deepspeech.md.
//
//   audio  [B, L] mono 16 kHz samples in [-1, 1)                    (+ audio_length [B])
//   front  pre-emphasis 0.97, 25 ms frames every 10 ms (400 / 160 samples), Hamming window,
//          512-point FFT, power, 26 HTK mel bands 0-8 kHz, log(max(., 1e-4)),
//          26 MFCCs (orthonormal DCT-II, lifter 22), whitened per utterance over its own frames
//          ((x - mean) / (std + 1e-5), DeepSpeech 0.1), 0 past them     -> [B, T, 26]
//          (kernels/signal ops; T = (L - 400) / 160 + 1)
//   ctx    each frame with 9 frames of context each side, zeros past the ends -> [T, B, 494]
//   fc1..3 Linear 2048 + clipped ReLU min(max(x, 0), 20)             -> [T, B, 2048]
//   lstm   bidirectional LSTM 2048 per direction (forget-gate bias 1), sequence lengths as
//          packed sequences                                            -> [T, B, 4096]
//   fc5    Linear 2048 + clipped ReLU;  fc6 Linear 29                   -> logits [T, B, 29]
// Classes: 0 space, 1-26 a-z, 27 apostrophe, blank = 28 (the last, as TF's ctc_loss).
// Loss: per-sample CTC -log p over the sample's own frames, averaged over the batch (TF's
// reduce_mean(ctc_loss), zero_infinity). Decoders: greedy best path, or prefix beam search
// (decoder=beam, beam_width; the reference adds a KenLM language model: not here).
// Tiny configuration (tests, CI): the same front end, widths 64 (LSTM 64 per direction).
//
// Parameter names equal tests/peers/deepspeech.py's PyTorch module: fc{1,2,3,5,6}.{weight,bias},
// lstm.{weight,bias}_{ih,hh}_l0[_reverse] (torch.nn.LSTM).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/signal/signal.h"
#include "layers/linear.h"
#include "layers/rnn.h"
#include "models/model.h"

namespace aim::models {

struct DeepSpeechConfig {
  int64_t sample_rate = 16000;
  int64_t frame_length = 400, hop = 160, nfft = 512;
  double preemph = 0.97;
  int64_t n_mels = 26, n_mfcc = 26, lifter = 22;
  double log_floor = 1e-4;
  int64_t context = 9;
  int64_t hidden = 2048;           // fc1, fc2, fc3, fc5 width
  int64_t rnn_hidden = 2048;       // LSTM units per direction
  int64_t classes = 29;            // 28 characters + blank (the last)
  double clip = 20;                // clipped ReLU ceiling
  std::string decoder = "greedy";  // greedy | beam
  int64_t beam_width = 1;
  uint64_t seed = 0;

  int64_t blank() const { return classes - 1; }
  int64_t input_width() const { return n_mfcc * (2 * context + 1); }  // 494
  kernels::FrameParams frame_params() const;
  static DeepSpeechConfig tiny() {
    DeepSpeechConfig c;
    c.hidden = 64;
    c.rnn_hidden = 64;
    return c;
  }
};

class DeepSpeech : public Model {
 public:
  explicit DeepSpeech(const DeepSpeechConfig& cfg = DeepSpeechConfig());

  // The front end: MFCC features [B, T, n_mfcc] of audio [B, L] f32 or f64, whitened per sample
  // over its frames [B] (CPU; undefined: all T), 0 past them (no gradient).
  Tensor features(const Tensor& audio, const Tensor& frames);
  Tensor normalize(const Tensor& feats, const Tensor& frames) const;
  // Frames of each sample [B] i64 on the CPU from audio_length [B] (signal_frames, at least 1
  // frame counted as 0 when the audio is shorter than one frame).
  Tensor frame_lengths(const Tensor& audio_length) const;
  // logits [T, B, classes] of features [B, T, n_mfcc]; frames [B] on the CPU or undefined (all T).
  Variable network(const Tensor& feats, const Tensor& frames);
  Variable forward(const Variable& audio) override;  // all frames used
  Variable ctc_loss(const Variable& logits, const Tensor& frames, const Tensor& label,
                    const Tensor& label_length) const;
  // The configured decoder: labels [B, T] i64 (-1 past the length), lengths [B] i64.
  std::pair<Tensor, Tensor> decode(const Tensor& logits, const Tensor& frames) const;

  std::vector<TensorSpec> input_specs() const override;
  std::vector<TensorSpec> label_specs() const override;
  std::vector<TensorSpec> output_specs() const override;
  std::vector<Fp32Params> amp_fp32_params() const override { return {}; }
  TensorMap infer(const TensorMap& batch) override;
  // "audio_length" and "label_length" stay on the host (frames and CTC are planned there).
  TensorMap host_metadata(const TensorMap& host_batch) const override;
  Variable training_loss(const TensorMap& batch) override;
  double forward_flops(const TensorMap& batch) const override;
  std::string type_name() const override { return "DeepSpeech"; }
  const DeepSpeechConfig& config() const { return cfg_; }

  // FLOPs of the front end and the network on B samples of L samples (the op costs' formulas).
  double frontend_flops(int64_t B, int64_t L) const;
  double network_flops(int64_t B, int64_t T) const;

  std::shared_ptr<layers::Linear> fc1, fc2, fc3, fc5, fc6;
  std::shared_ptr<layers::LSTM> lstm;

 private:
  DeepSpeechConfig cfg_;
  Tensor fb64_;  // mel filterbank [F, n_mels] (f64, CPU)
  Tensor fb_;    // fb64_ in the audio's dtype on its device, made on first use
};

// Word and character error rates over class sequences (space = class 0 separates words): the
// Levenshtein distance summed over the samples divided by the reference's total length (words or
// characters), as Mozilla DeepSpeech's report. An empty reference set is an error.
struct ErrorRates {
  double wer = 0, cer = 0;
};
ErrorRates error_rates(const std::vector<std::vector<int64_t>>& refs,
                       const std::vector<std::vector<int64_t>>& hyps);
int64_t edit_distance(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

}  // namespace aim::models
