// The registry entries of the SSD detectors on ResNet trunks (models/ssd_resnet.h): what the SSD
// family shares comes from ssd_family_entry (models/ssd_registry.h); each adds its description,
// build and the training recipe of its reference (MODELS.md §6.2, §6.4).
#include "models/registry.h"
#include "models/ssd_registry.h"
#include "models/ssd_resnet.h"

namespace aim::models {
namespace {

// The family's keys (num_classes, size=tiny's width divisor, seed) on the model's own defaults.
SsdConfig with_family_keys(SsdConfig c, const ModelConfig& mc, uint64_t seed) {
  const SsdConfig f = ssd_family_config(mc, seed);
  c.num_classes = f.num_classes;
  c.width_divisor = f.width_divisor;
  c.seed = f.seed;
  return c;
}

}  // namespace

void add_ssd_resnet_models(std::vector<ModelEntry>& r) {
  ModelEntry e = ssd_family_entry("ssd_resnet34", 300);
  e.infer_defaults = {"--batch-size=8"};  // MODELS.md §1.1
  e.description =
      "SSD300 with ResNet-34 (MODELS.md \xC2\xA7"
      "6.4) as MLPerf training's reference: module tree and parameter names, size-major heads "
      "and default boxes, per-image normalised MultiBox loss, evaluation post-processing (score "
      "0.05, NMS 0.5, 200 per image)";
  // MODELS.md §6.4 / the reference's train.py: SGD momentum 0.9, weight decay 5e-4, lr 2.5e-3
  // times global batch / 32, i.e. 2.5e-3 at its batch of 32 (no warmup: the reference's default).
  e.train_defaults = {"--optimizer=sgd", "--momentum=0.9", "--lr=2.5e-3", "--weight-decay=5e-4",
                      "--batch-size=32"};
  e.build = [](const ModelConfig& c, uint64_t seed) -> std::unique_ptr<Model> {
    return std::make_unique<SsdResnet34>(
        with_family_keys(SsdResnet34::reference_config(), c, seed));
  };
  r.push_back(std::move(e));

  e = ssd_family_entry("ssd_resnet18", 321);
  e.infer_defaults = {"--batch-size=8"};  // MODELS.md §1.1
  e.description =
      "SSD with ResNet-18 at 321 (MODELS.md \xC2\xA7"
      "6.2) as AI Matrix's Caffe SSD_ResNet18: torchvision names with res2a's projection, "
      "Caffe's pool rounding, conv6/conv7 extras with BN, cell-major 3x3 heads on 40, 20, 10, 5, "
      "17000 Caffe priors, per-prediction matching, VALID-normalised MultiBox loss";
  // ssd_pascal_resnet18_321.py: base_lr 4e-5 times its loss multiplier 25 (the VALID
  // normalisation's), SGD momentum 0.9, weight decay 5e-4, batch 8.
  e.train_defaults = {"--optimizer=sgd", "--momentum=0.9", "--lr=1e-3", "--weight-decay=5e-4",
                      "--batch-size=8"};
  e.build = [](const ModelConfig& c, uint64_t seed) -> std::unique_ptr<Model> {
    return std::make_unique<SsdResnet18>(
        with_family_keys(SsdResnet18::reference_config(), c, seed));
  };
  r.push_back(std::move(e));
}

}  // namespace aim::models
