// The CRNN registry entry (MODELS.md §5.1): ShadowNet + 2x BiLSTM 256 + CTC on the synthetic
// text images (data/text_synthetic.h) or an MJSynth directory (data/mjsynth.h), evaluated by
// whole-sequence and per-character accuracy of the decoded text; momentum SGD 0.9, lr 0.01
// (docs/crnn.md: the reference's x0.1-every-500k-steps decay and aim's schedules).
#include <algorithm>

#include "autograd/variable.h"
#include "data/mjsynth.h"
#include "data/text_synthetic.h"
#include "models/crnn.h"
#include "models/ctc_eval.h"
#include "models/registry.h"
#include "tensor/check.h"

namespace aim::models {
namespace {

CrnnConfig crnn_config(const ModelConfig& c, uint64_t seed) {
  CrnnConfig m = c.at("size") == "tiny" ? CrnnConfig::tiny() : CrnnConfig();
  m.decoder = c.at("decoder");
  m.beam_width = config_int(c, "beam_width", 1, kMaxBeamWidth);
  m.seed = seed;
  return m;
}

std::unique_ptr<data::BatchSource> crnn_source(const ModelConfig& c, const std::string& data,
                                               uint64_t seed) {
  if (data == "synthetic") {
    data::TextSyntheticConfig d = c.at("size") == "tiny" ? data::TextSyntheticConfig::tiny(seed)
                                                         : data::TextSyntheticConfig();
    d.seed = seed;
    return std::make_unique<data::TextSyntheticSource>(d);
  }
  return std::make_unique<data::MjsynthSource>(data, seed);
}

Metrics crnn_evaluate(Model& m, const data::BatchSource& src, int64_t n, Device dev) {
  const DecodedSequences d = ctc_eval_sequences(m, src, n, dev, 256, "crnn");
  const TextAccuracy a = text_accuracy(d.labels, d.preds);
  return {{"sequence_accuracy", a.sequence_accuracy}, {"char_accuracy", a.char_accuracy}};
}

}  // namespace

void add_crnn_model(std::vector<ModelEntry>& r) {
  ModelEntry e;
  e.name = "crnn";
  e.infer_defaults = {"--batch-size=128"};  // MODELS.md §1.1
  e.task = "cv";
  e.description =
      "CRNN as benchmarked by AI Matrix (MODELS.md \xC2\xA7"
      "5.1): ShadowNet conv stack, 2x bidirectional LSTM 256, CTC; time-major logits [25, B, 37]";
  e.config = {{"size",
               "full",
               {"full", "tiny"},
               "full: ShadowNet 64..512, LSTM 256; tiny: 16..64, LSTM 64"},
              {"decoder",
               "greedy",
               {"greedy", "beam"},
               "greedy best path (the reference's beam width 1); beam: prefix beam search"},
              {"beam_width",
               "1",
               {},
               "beam width of decoder=beam (the reference's training monitor: 100)"}};
  e.data_doc =
      "'synthetic' (rendered 0-9a-z strings), or an MJSynth directory: lexicon.txt, "
      "annotation_train.txt, annotation_val.txt (docs/crnn.md)";
  e.metrics = {"sequence_accuracy", "char_accuracy"};
  // MODELS.md §5.1: Momentum 0.9, lr 0.01, x0.1 every 500k steps (staircase). aim's schedules
  // have no step size flag ('step' decays at a third of the run); for any run under 500k steps
  // the reference's rate is constant 0.01, so constant is the exact schedule (docs/crnn.md).
  e.train_defaults = {"--optimizer=sgd", "--momentum=0.9", "--lr=0.01", "--schedule=constant"};
  e.build = [](const ModelConfig& c, uint64_t seed) -> std::unique_ptr<Model> {
    return std::make_unique<Crnn>(crnn_config(c, seed));
  };
  e.source = crnn_source;
  e.evaluate = crnn_evaluate;
  r.push_back(std::move(e));
}

}  // namespace aim::models
