// The CNN classifiers' registry entries (MODELS.md §2): one ImageClassifier builder per model,
// the synthetic / image-folder sources, and top-1 / top-5 evaluation.
#include <algorithm>
#include <filesystem>
#include <numeric>

#include "autograd/variable.h"
#include "data/image_folder.h"
#include "data/image_synthetic.h"
#include "models/densenet.h"
#include "models/googlenet.h"
#include "models/plain_cnn.h"
#include "models/registry.h"
#include "models/resnet.h"
#include "models/synnet.h"
#include "tensor/check.h"

namespace aim::models {
namespace {

bool is_tiny(const ModelConfig& c) { return c.at("size") == "tiny"; }

// A positive integer config value; "auto" gives `fallback` (full: ImageNet's, tiny: 10 / 32).
int64_t int_or_auto(const ModelConfig& c, const std::string& key, int64_t fallback,
                    int64_t max = kConfigIntMax) {
  const std::string& v = c.at(key);
  if (v == "auto") return fallback;
  return config_int(c, key, 1, max);
}

ImageModelConfig image_config(const ModelConfig& c, uint64_t seed) {
  ImageModelConfig m;
  m.tiny = is_tiny(c);
  m.classes = int_or_auto(c, "classes", m.tiny ? 10 : 1000);
  // A side past 4096 (192 MiB per f32 image) is a typo, not an experiment: refused before the
  // synthetic source sizes its images by it.
  m.height = m.width = int_or_auto(c, "image", m.tiny ? 32 : 224, 4096);
  m.label_smoothing = config_number(c, "label_smoothing", 0, 0.999);
  auto v = c.find("variant");
  if (v != c.end()) m.variant = v->second;
  m.seed = seed;
  return m;
}

std::unique_ptr<data::BatchSource> image_source(const ModelConfig& c, const std::string& data,
                                                uint64_t seed) {
  const ImageModelConfig m = image_config(c, seed);
  if (data == "synthetic") {
    data::ImageSyntheticConfig d =
        m.tiny ? data::ImageSyntheticConfig::tiny(seed) : data::ImageSyntheticConfig();
    d.classes = m.classes;
    d.height = m.height;
    d.width = m.width;
    d.seed = seed;
    return std::make_unique<data::ImageSyntheticSource>(d);
  }
  AIM_CHECK(std::filesystem::is_directory(data), "--data '", data,
            "': the image models read 'synthetic' or an image folder (one folder per class, "
            "docs/image-data.md); no such directory");
  AIM_CHECK(m.height == m.width, "--config image: image folders give square crops");
  data::ImageFolderConfig d;
  d.root = data;
  d.seed = seed;
  d.transform.crop = m.height;
  d.transform.resize = m.height * 256 / 224;  // ImageNet's evaluation ratio
  d.train_flip = true;
  auto src = std::make_unique<data::ImageFolderSource>(d);
  AIM_CHECK(int64_t(src->classes().size()) == m.classes, "--data ", data, ": ",
            src->classes().size(), " class folders, but the model has ", m.classes,
            " classes (set --config classes=", src->classes().size(), ")");
  return src;
}

Metrics image_evaluate(Model& m, const data::BatchSource& src, int64_t n, Device dev) {
  AIM_CHECK(n > 0 && n <= src.eval_size(), "image evaluation: ", n,
            " samples asked, the evaluation set has ", src.eval_size());
  autograd::NoGradGuard ng;
  const bool was_training = m.is_training();
  m.eval();
  int64_t top1 = 0, top5 = 0;
  constexpr int64_t kChunk = 64;
  for (int64_t s = 0; s < n; s += kChunk) {
    TensorMap b = src.eval_batch(s, std::min(kChunk, n - s));
    const Tensor lg =
        m.infer(batch_to_device(m, b, dev)).at("logits").to(kCPU).to(DType::f32).contiguous();
    const std::vector<float> v = lg.to_vector<float>();
    const std::vector<int64_t> lb = b.at("label").to_vector<int64_t>();
    const int64_t k = lg.size(1);
    for (size_t i = 0; i < lb.size(); ++i) {
      const float* row = v.data() + i * size_t(k);
      // Rank of the true class: classes scoring strictly higher (ties count for the label).
      int64_t above = 0;
      for (int64_t j = 0; j < k; ++j) above += row[j] > row[lb[i]];
      top1 += above < 1;
      top5 += above < 5;
    }
  }
  m.train(was_training);
  return {{"top1", double(top1) / double(n)}, {"top5", double(top5) / double(n)}};
}

using Builder = std::function<std::unique_ptr<ImageClassifier>(const ImageModelConfig&)>;

// lr: the recipe's base learning rate flags (MODELS.md §2.1).
ModelEntry image_entry(const std::string& name, const std::string& description,
                       std::vector<ConfigKey> extra, std::vector<std::string> lr, Builder make) {
  ModelEntry e;
  e.name = name;
  e.infer_defaults = {"--batch-size=16"};  // MODELS.md §1.1
  e.task = "cv";
  e.description = description;
  e.config = {{"size", "full", {"full", "tiny"}, "full: ImageNet-sized; tiny: narrow, 32 px"},
              {"classes", "auto", {}, "classes (auto: 1000, tiny 10)"},
              {"image", "auto", {}, "input height = width (auto: 224, tiny 32)"},
              {"label_smoothing", "0", {}, "cross-entropy label smoothing in [0, 1)"}};
  for (ConfigKey& k : extra) e.config.push_back(std::move(k));
  e.data_doc =
      "an image folder: root/<class>/*.jpg|png or root/{train,val}/<class>/* "
      "(docs/image-data.md)";
  e.metrics = {"top1", "top5"};
  // MODELS.md §2.1 (nvcnn.py): Nesterov momentum 0.9, poly decay (power 2) to 0 over the run,
  // L2 1e-4 on all weights.
  e.train_defaults = {"--optimizer=sgd", "--momentum=0.9", "--nesterov",
                      "--schedule=poly", "--poly-power=2", "--weight-decay=1e-4"};
  e.train_defaults.insert(e.train_defaults.end(), lr.begin(), lr.end());
  e.build = [make](const ModelConfig& c, uint64_t seed) -> std::unique_ptr<Model> {
    return make(image_config(c, seed));
  };
  e.source = image_source;
  e.evaluate = image_evaluate;
  return e;
}

}  // namespace

void add_vision_models(std::vector<ModelEntry>& r) {
  // Base learning rates of nvcnn.py: resnet 1.0 per 1024 samples (linear in the batch),
  // googlenet 0.04, alexnet 0.03, vgg 0.02, densenet and synNet 0.001. SqueezeNet is not in
  // nvcnn.py: 0.04 as its fellow small-filter network googlenet.
  const std::vector<std::string> resnet_lr = {"--lr=1.0", "--lr-batch=1024"};
  const ConfigKey resnet_variant{
      "variant", "v1.5", {"v1.5", "v1"}, "v1.5: stride on the 3x3 (torchvision); v1: on the 1x1"};
  r.push_back(image_entry("resnet50",
                          "ResNet-50 (MODELS.md \xC2\xA7"
                          "2.1), torchvision names",
                          {resnet_variant}, resnet_lr, [](const ImageModelConfig& c) {
                            return std::make_unique<ResNet>(c, std::vector<int64_t>{3, 4, 6, 3});
                          }));
  r.push_back(image_entry("resnet152",
                          "ResNet-152 (MODELS.md \xC2\xA7"
                          "2.1), torchvision names",
                          {resnet_variant}, resnet_lr, [](const ImageModelConfig& c) {
                            return std::make_unique<ResNet>(c, std::vector<int64_t>{3, 8, 36, 3});
                          }));
  r.push_back(image_entry("vgg16", "VGG-16 (torchvision vgg16)", {}, {"--lr=0.02"}, make_vgg16));
  r.push_back(
      image_entry("alexnet", "AlexNet (torchvision alexnet)", {}, {"--lr=0.03"}, make_alexnet));
  r.push_back(image_entry("squeezenet", "SqueezeNet 1.1 (torchvision squeezenet1_1)", {},
                          {"--lr=0.04"}, make_squeezenet));
  r.push_back(image_entry(
      "googlenet", "Inception-v1 as AI Matrix's nvcnn.py (no BN, TF SAME padding)", {},
      {"--lr=0.04"}, [](const ImageModelConfig& c) { return std::make_unique<GoogLeNet>(c); }));
  r.push_back(image_entry(
      "densenet121", "DenseNet-121: torchvision's, or AI Matrix's TF graph (variant=aimatrix_tf)",
      {{"variant",
        "standard",
        {"standard", "aimatrix_tf"},
        "standard: torchvision densenet121; aimatrix_tf: nvcnn.py's 3-block graph"}},
      {"--lr=0.001"}, [](const ImageModelConfig& c) { return std::make_unique<DenseNet>(c); }));
  r.push_back(image_entry(
      "synnet", "AI Matrix's synthetic 62-conv CNN (nvcnn.py inference_synthetic_net)", {},
      {"--lr=0.001"}, [](const ImageModelConfig& c) { return std::make_unique<SynNet>(c); }));
}

}  // namespace aim::models
