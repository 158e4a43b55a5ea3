// The dssd registry entry (MODELS.md §6.3): the SSD family's sources, evaluation and keys
// (models/ssd_registry.h) at 321 x 321, with the reference's fine-tune recipe.
#include <memory>

#include "models/dssd.h"
#include "models/registry.h"
#include "models/ssd_registry.h"

namespace aim::models {

void add_dssd_model(std::vector<ModelEntry>& r) {
  ModelEntry e = ssd_family_entry("dssd", 321);
  e.infer_defaults = {"--batch-size=1"};  // MODELS.md §1.1
  e.description =
      "DSSD321 (MODELS.md \xC2\xA7"
      "6.3): ResNet-101 (dilated res5, frozen BN) + res6..res9, deconvolution module with "
      "element-wise products, residual prediction modules, Caffe's MultiBox loss (MatchBBox, 3:1 "
      "hard negatives, VALID) and 17080 priors; size=tiny also takes one block per ResNet stage";
  // ssd_pascal_resnet_deconv_ft_321.py: SGD momentum 0.9, weight decay 5e-4, base_lr 4e-5 (per
  // image and GPU) * 25 / loc_weight 1 (normalization VALID) * 0.1 (the fine-tune's solver) =
  // 1e-4, not scaled by the batch under VALID; batch 1, the harness's smallest (BS 1/2/4).
  e.train_defaults = {"--optimizer=sgd", "--momentum=0.9", "--lr=1e-4", "--weight-decay=5e-4",
                      "--batch-size=1"};
  e.build = [](const ModelConfig& c, uint64_t seed) -> std::unique_ptr<Model> {
    SsdConfig s = ssd_family_config(c, seed);
    const SsdConfig ref = dssd_config();
    s.image_size = ref.image_size;
    s.caffe_matching = ref.caffe_matching;
    s.loss_per_image = ref.loss_per_image;
    DssdOptions o;
    if (c.at("size") == "tiny") o.stage_blocks = {1, 1, 1, 1};
    return std::make_unique<Dssd>(s, o);
  };
  r.push_back(std::move(e));
}

}  // namespace aim::models
