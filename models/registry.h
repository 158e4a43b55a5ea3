// The model registry (DESIGN §2 models/): every model aim-train and aim-infer know, with its
// description, configuration keys, batch source, metrics and builder. Explicit list in
// registry.cpp (no static initialisers), so it fits on one screen.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/source.h"
#include "models/model.h"
#include "tensor/device.h"

namespace aim::models {

// --config key=value pairs after defaults are applied.
using ModelConfig = std::map<std::string, std::string>;
// Evaluation results by metric name ("auc", "gauc", ...).
using Metrics = std::map<std::string, double>;

struct ConfigKey {
  std::string key, default_value;
  std::vector<std::string> allowed;  // empty: any value
  std::string doc;
};

// A model's own optimizer (aim-train --optimizer NAME), e.g. Wide&Deep's FTRL + Adagrad: groups of
// parameters by name prefix, or by substrings of the name (BERT's no-decay group: names containing
// "bias" or "LayerNorm.weight"), each with one of train/optim.h's optimizers ("ftrl", "adagrad",
// "adamw", "lamb") and its settings ("lr" and the constructor's arguments by name). A parameter
// goes to the first group it matches. --lr scales every group's rate by lr / ref_lr (so --lr
// ref_lr gives the recipe's rates).
struct OptimizerGroup {
  std::string prefix;  // parameters whose name starts with it ("" matches every name: last)
  std::string kind;    // ftrl | adagrad | adamw | lamb
  std::map<std::string, double> settings;
  // When non-empty, the group takes the parameters whose name contains any of these instead
  // (Hugging Face's `any(nd in n for nd in no_decay)`); prefix must then be "".
  std::vector<std::string> name_contains = {};
};
struct ModelOptimizer {
  std::string name, doc;
  double ref_lr = 0;
  std::vector<OptimizerGroup> groups;
};

struct ModelEntry {
  std::string name, task, description;  // task: rec | nlp | cv | graph
  std::vector<ConfigKey> config;
  std::string data_doc;              // what --data accepts besides "synthetic"
  std::vector<std::string> metrics;  // evaluation metrics, the first is the headline
  // The model's training recipe as aim-train flags ("--optimizer=sgd", "--nesterov"): each
  // applies unless the command line gives that flag itself; aim-train --help MODEL lists them.
  std::vector<std::string> train_defaults;
  // aim-infer's flags for this model, the same way ("--batch-size=16": the reference's smallest
  // inference batch, MODELS.md §1.1); without it aim-infer's own defaults.
  std::vector<std::string> infer_defaults;
  std::vector<ModelOptimizer> optimizers;  // its own, besides sgd/adam/adamw/adagrad/lamb
  // The model for a configuration, initialised from `seed` (on the CPU).
  std::function<std::unique_ptr<Model>(const ModelConfig&, uint64_t seed)> build;
  // The batch source: data = "synthetic" or a path (see data_doc).
  std::function<std::unique_ptr<data::BatchSource>(const ModelConfig&, const std::string& data,
                                                   uint64_t seed)>
      source;
  // Metrics over the first n samples of the source's evaluation set (eval mode, no graph).
  std::function<Metrics(Model&, const data::BatchSource&, int64_t n, Device)> evaluate;
  // "key=value,..." of a configuration, in key order (results files, checkpoint metadata).
  static std::string config_string(const ModelConfig& c);
  // Defaults overridden by "key=value" strings; unknown keys or values not allowed are errors
  // naming the flag, the key and what is allowed.
  ModelConfig parse_config(const std::vector<std::string>& kvs) const;
};

const std::vector<ModelEntry>& model_registry();
// The CNN classifiers' entries (models/vision_registry.cpp), appended after the rec models.
void add_vision_models(std::vector<ModelEntry>& r);
void add_ncf_model(std::vector<ModelEntry>& r);  // models/ncf_registry.cpp
void add_dien_model(std::vector<ModelEntry>& r);
void add_wide_deep_model(std::vector<ModelEntry>& r);    // models/wide_deep_registry.cpp
void add_crnn_model(std::vector<ModelEntry>& r);         // models/crnn_registry.cpp
void add_bert_model(std::vector<ModelEntry>& r);         // models/bert_registry.cpp
void add_ssd_models(std::vector<ModelEntry>& r);         // models/ssd_registry.cpp
void add_seglink_model(std::vector<ModelEntry>& r);      // models/seglink_registry.cpp
void add_dssd_model(std::vector<ModelEntry>& r);         // models/dssd_registry.cpp
void add_ssd_resnet_models(std::vector<ModelEntry>& r);  // models/ssd_resnet_registry.cpp
void add_cpn_model(std::vector<ModelEntry>& r);          // models/cpn_registry.cpp
void add_faster_rcnn_model(std::vector<ModelEntry>& r);  // models/faster_rcnn_registry.cpp
void add_gcn_model(std::vector<ModelEntry>& r);          // models/gcn_registry.cpp
void add_deepspeech_model(std::vector<ModelEntry>& r);   // models/deepspeech_registry.cpp
void add_mask_rcnn_model(std::vector<ModelEntry>& r);    // models/mask_rcnn_registry.cpp
void add_nmt_model(std::vector<ModelEntry>& r);          // models/nmt_registry.cpp
// What an allocation that fails while the model is built names (tensor/host_memory.h): the model
// and the --config keys that differ from its defaults, the flag that makes it smaller:
// "building nmt with --config units=200000 (the other keys at their defaults)".
std::string building_context(const ModelEntry& e, const ModelConfig& c);
// The entry named `name`; an unknown name is an error listing the models.
const ModelEntry& find_model(const std::string& name);
// A --config value read as an integer >= `min`, or a number in [lo, hi]; anything else is an
// aim::Error "--config key='value': expected ..." (one parser for every model's keys).
// Integers are at most `max` (default 2^31 - 1: no width, count or length of a model is larger,
// and a huge value must not overflow the sizes computed from it).
constexpr int64_t kConfigIntMax = (int64_t(1) << 31) - 1;
int64_t config_int(const ModelConfig& c, const std::string& key, int64_t min,
                   int64_t max = kConfigIntMax);
// Detectors' num_classes (classes + background): every head is sized by it.
constexpr int64_t kMaxDetectionClasses = 100000;
// Beam widths of the decoders (nmt's beam search, crnn's and deepspeech's CTC beams: the
// reference's widest is DeepSpeech's 1024) and nmt's decoding limit in tokens.
constexpr int64_t kMaxBeamWidth = 4096;
constexpr int64_t kMaxDecodeLength = 4096;
double config_number(const ModelConfig& c, const std::string& key, double lo, double hi);

}  // namespace aim::models
