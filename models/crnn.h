// CRNN as benchmarked by AI Matrix (MODELS.md §5.1, MaybeShewill-CV CRNN_Tensorflow's ShadowNet);
// definitions, the reference mapping and measurements: docs/crnn.md.
//
//   x      = input / 255                      input: BGR pixel values [B, 3, 32, 100] in [0, 255]
//   conv1  3x3 SAME 64 (bias) BN ReLU, maxpool 2x2        -> [B,  64, 16, 50]
//   conv2  3x3 SAME 128 (bias) BN ReLU, maxpool 2x2       -> [B, 128,  8, 25]
//   conv3  3x3 SAME 256 BN ReLU; conv4 3x3 256 BN ReLU, maxpool (2,1) -> [B, 256, 4, 25]
//   conv5  3x3 SAME 512 BN ReLU; conv6 3x3 512 BN ReLU, maxpool (2,1) -> [B, 512, 2, 25]
//   conv7  2x2 stride (2,1) SAME 512 BN ReLU (TF pads the odd column on the right) -> [B,512,1,25]
//   seq    squeeze H, time-major                                       -> [25, B, 512]
//   rnn    2-layer bidirectional LSTM 256 (TF LSTMCell, forget bias 1)  -> [25, B, 512]
//   drop   dropout 0.5 (training only)
//   fc     linear 512 -> 37, no bias, init N(0, 0.02) truncated at 2 std -> logits [25, B, 37]
// conv3..conv7 have no bias (BN follows). BN as tf.layers.batch_normalization: eps 1e-3,
// momentum 0.99 (PyTorch momentum 0.01). The tiny configuration keeps the structure with
// channels 16-32-64-64-64-64-64 and LSTM 64.
//
// Classes: 0-9 -> 0..9, a-z -> 10..35, blank = 36 (TF's ctc_loss uses the LAST class as blank).
// Loss: TF's tf.reduce_mean(tf.nn.ctc_loss(...)): per-sample -log p(label | x) over all 25 steps
// of log_softmax(logits), averaged over the batch (not divided by the label length, unlike
// PyTorch's reduction='mean'); infeasible labels (too long for 25 steps) count 0
// (zero_infinity).
// Decoding (infer's "decoded"): greedy best path with repeats merged and blanks dropped
// (decoder=greedy, default; the reference's evaluation decoder is beam search with width 1 and
// merge_repeated=False), or prefix beam search (decoder=beam, beam_width=N, merge_repeated=False).
//
// Parameter names equal tests/peers/crnn.py's PyTorch module: conv{1..7}.weight,
// conv{1,2}.bias, bn{1..7}.{weight,bias,running_mean,running_var,num_batches_tracked},
// rnn.{weight,bias}_{ih,hh}_l{0,1}[_reverse] (torch.nn.LSTM), fc.weight.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layers/batchnorm.h"
#include "layers/conv.h"
#include "layers/dropout.h"
#include "layers/linear.h"
#include "layers/rnn.h"
#include "models/model.h"

namespace aim::models {

struct CrnnConfig {
  std::array<int64_t, 7> channels = {64, 128, 256, 256, 512, 512, 512};
  int64_t hidden = 256;  // LSTM units per direction
  int64_t layers = 2;    // stacked bidirectional LSTM layers
  int64_t classes = 37;  // 36 characters + blank (the last class)
  int64_t height = 32, width = 100;
  double dropout = 0.5;
  std::string decoder = "greedy";  // greedy | beam
  int64_t beam_width = 1;          // decoder=beam
  uint64_t seed = 0;

  int64_t blank() const { return classes - 1; }
  int64_t steps() const { return width / 4; }  // 25: two 2x2 pools, then stride-1 widths

  static CrnnConfig tiny() {
    CrnnConfig c;
    c.channels = {16, 32, 64, 64, 64, 64, 64};
    c.hidden = 64;
    return c;
  }
};

class Crnn : public Model {
 public:
  explicit Crnn(const CrnnConfig& cfg = CrnnConfig());

  // logits [T = 25, B, classes] of x [B, 3, 32, 100] (BGR pixel values in [0, 255]).
  Variable forward(const Variable& x) override;
  // TF's CTC loss of logits [T, B, C] against label [B, S] (-1 or any value past the lengths)
  // and label_length [B]: mean over the batch of -log p.
  Variable ctc_loss(const Variable& logits, const Tensor& label, const Tensor& label_length) const;
  // The configured decoder on logits [T, B, C]: labels [B, T] i64 (-1 past the length) and
  // lengths [B] i64.
  std::pair<Tensor, Tensor> decode(const Tensor& logits) const;

  // Inputs: input f32 [B, 3, 32, 100]. Labels: label i64 [B, S], label_length i64 [B].
  // Outputs: logits [25, B, 37] (also "output"), decoded [B, 25] i64, decoded_length [B] i64.
  std::vector<TensorSpec> input_specs() const override;
  std::vector<TensorSpec> label_specs() const override;
  std::vector<TensorSpec> output_specs() const override;
  std::vector<Fp32Params> amp_fp32_params() const override;
  TensorMap infer(const TensorMap& batch) override;
  // "label_length" stays on the host: CTC plans its work from the lengths there.
  TensorMap host_metadata(const TensorMap& host_batch) const override;
  Variable training_loss(const TensorMap& batch) override;
  // infer()'s FLOPs (network and decoder) in eval mode; in training mode the network (with
  // dropout), log_softmax, the CTC forward and the batch mean (training_loss()).
  double forward_flops(const TensorMap& batch) const override;
  std::string type_name() const override { return "Crnn"; }
  const CrnnConfig& config() const { return cfg_; }

  // The network's FLOPs (input scaling to logits) on a batch of B, in the current mode.
  double network_flops(int64_t B) const;

  std::array<std::shared_ptr<layers::Conv2d>, 7> conv;
  std::array<std::shared_ptr<layers::BatchNorm2d>, 7> bn;
  std::shared_ptr<layers::LSTM> rnn;
  std::shared_ptr<layers::Dropout> drop;
  std::shared_ptr<layers::Linear> fc;

 private:
  CrnnConfig cfg_;
};

// Per-character and whole-sequence accuracy as the reference's compute_accuracy: per sample,
// the fraction of label positions i < min(|label|, |prediction|) where prediction[i] equals
// label[i] (an empty label scores 1 when the prediction is empty, else 0), averaged; and the
// fraction of samples whose prediction equals the label.
struct TextAccuracy {
  double char_accuracy = 0, sequence_accuracy = 0;
};
TextAccuracy text_accuracy(const std::vector<std::vector<int64_t>>& labels,
                           const std::vector<std::vector<int64_t>>& predictions);

// "abc" of class indices (0-9a-z); an index outside [0, 36) is an error.
std::string classes_to_text(const std::vector<int64_t>& classes);

}  // namespace aim::models
