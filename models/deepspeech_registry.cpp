// The DeepSpeech registry entry (MODELS.md §3.3): MFCC front end, 3 FC + bidirectional LSTM + FC
// with clipped ReLU, CTC over 28 characters, on the synthetic tone speech (data/speech.h) or a
// LibriSpeech-layout directory of WAV files; evaluated by CER and WER of the decoded text. Adam
// 1e-3 as the reference (docs/deepspeech.md).
#include <algorithm>

#include "autograd/variable.h"
#include "data/speech.h"
#include "models/ctc_eval.h"
#include "models/deepspeech.h"
#include "models/registry.h"
#include "tensor/check.h"

namespace aim::models {
namespace {

DeepSpeechConfig deepspeech_config(const ModelConfig& c, uint64_t seed) {
  DeepSpeechConfig m = c.at("size") == "tiny" ? DeepSpeechConfig::tiny() : DeepSpeechConfig();
  m.decoder = c.at("decoder");
  m.beam_width = config_int(c, "beam_width", 1, kMaxBeamWidth);
  m.seed = seed;
  return m;
}

std::unique_ptr<data::BatchSource> deepspeech_source(const ModelConfig& c, const std::string& data,
                                                     uint64_t seed) {
  if (data == "synthetic") {
    data::SpeechSyntheticConfig d = c.at("size") == "tiny" ? data::SpeechSyntheticConfig::tiny(seed)
                                                           : data::SpeechSyntheticConfig();
    d.seed = seed;
    return std::make_unique<data::SpeechSyntheticSource>(d);
  }
  return std::make_unique<data::LibriSpeechSource>(data, DeepSpeechConfig().sample_rate);
}

Metrics deepspeech_evaluate(Model& m, const data::BatchSource& src, int64_t n, Device dev) {
  const DecodedSequences d = ctc_eval_sequences(m, src, n, dev, 64, "deepspeech");
  const ErrorRates e = error_rates(d.labels, d.preds);
  return {{"cer", e.cer}, {"wer", e.wer}};
}

}  // namespace

void add_deepspeech_model(std::vector<ModelEntry>& r) {
  ModelEntry e;
  e.name = "deepspeech";
  e.infer_defaults = {"--batch-size=1"};  // MODELS.md §1.1
  e.task = "speech";
  e.description =
      "DeepSpeech as benchmarked by AI Matrix (MODELS.md \xC2\xA7"
      "3.3): 26 MFCC x 19 frames, 3 FC 2048 clipped ReLU, BiLSTM 2048, FC, CTC over 28 chars";
  e.config = {
      {"size", "full", {"full", "tiny"}, "full: widths 2048; tiny: widths 64"},
      {"decoder", "greedy", {"greedy", "beam"}, "greedy best path or prefix beam search"},
      {"beam_width", "1", {}, "beam width of decoder=beam (the reference: 1024 with KenLM)"}};
  e.data_doc =
      "'synthetic' (characters as dual-tone sequences), or a LibriSpeech-layout directory of "
      "16 kHz 16-bit WAV files with *.trans.txt transcripts (docs/deepspeech.md)";
  e.metrics = {"cer", "wer"};
  e.train_defaults = {"--optimizer=adam", "--lr=0.001", "--schedule=constant"};
  e.build = [](const ModelConfig& c, uint64_t seed) -> std::unique_ptr<Model> {
    return std::make_unique<DeepSpeech>(deepspeech_config(c, seed));
  };
  e.source = deepspeech_source;
  e.evaluate = deepspeech_evaluate;
  r.push_back(std::move(e));
}

}  // namespace aim::models
