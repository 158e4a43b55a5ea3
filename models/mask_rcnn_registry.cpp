// The mask_rcnn registry entry (MODELS.md §6.9, docs/detection.md): torchvision 0.14's
// maskrcnn_resnet50_fpn (backbone=resnet101 for ResNet-101), the synthetic instances
// (data/instance_synthetic.h) by default, COCO box AP and mask AP as pycocotools computes them
// (data/coco_eval.h, data/coco_eval_segm.h), torchvision's reference recipe as the defaults.
#include <algorithm>
#include <cstdlib>
#include <memory>

#include "autograd/variable.h"
#include "data/coco_eval.h"
#include "data/coco_eval_segm.h"
#include "data/instance_synthetic.h"
#include "models/mask_rcnn.h"
#include "models/registry.h"
#include "tensor/check.h"

namespace aim::models {
namespace {

bool tiny(const ModelConfig& c) { return c.at("size") == "tiny"; }
// The synthetic images' side: tiny 128 (the model's min_size), full 800 (torchvision's).
int64_t image_side(const ModelConfig& c) { return tiny(c) ? 128 : 800; }

int64_t num_classes(const ModelConfig& c) {
  const std::string& n = c.at("num_classes");
  if (n == "auto") return tiny(c) ? 6 : 21;
  char* end = nullptr;
  const long long v = std::strtoll(n.c_str(), &end, 10);
  AIM_CHECK(end && *end == '\0' && v >= 2 && v <= 41, "mask_rcnn: --config num_classes=", n,
            ": expected auto or an integer in [2, 41] (synthetic classes + background)");
  return v;
}

MaskRcnnConfig mask_rcnn_config(const ModelConfig& c, uint64_t seed) {
  MaskRcnnConfig m = tiny(c) ? MaskRcnnConfig::tiny(num_classes(c)) : MaskRcnnConfig{};
  m.num_classes = num_classes(c);
  if (c.at("backbone") == "resnet101")
    m.blocks = tiny(c) ? std::vector<int64_t>{1, 1, 2, 1} : std::vector<int64_t>{3, 4, 23, 3};
  m.seed = seed;
  return m;
}

Metrics mask_rcnn_evaluate(Model& model, const data::BatchSource& src, int64_t n, Device dev) {
  auto& m = dynamic_cast<MaskRcnn&>(model);
  const auto* inst = dynamic_cast<const data::InstanceSyntheticSource*>(&src);
  AIM_CHECK(inst != nullptr, "mask_rcnn evaluation needs the synthetic instance source");
  AIM_CHECK(n > 0 && n <= src.eval_size(), "mask_rcnn evaluation: ", n,
            " samples asked, the evaluation set has ", src.eval_size());
  autograd::NoGradGuard ng;
  const bool was_training = m.is_training();
  m.eval();
  const std::vector<data::CocoSegmGt> segm_gt = inst->eval_ground_truth(0, n);
  std::vector<data::CocoEvalGt> box_gt;
  for (const data::CocoSegmGt& g : segm_gt) {
    const std::array<double, 4> b = data::coco_rle_to_bbox(g.mask);
    box_gt.push_back({g.id, g.image_id, g.category_id, b[0], b[1], b[2], b[3], g.area, false});
  }
  std::vector<data::CocoSegmDet> segm_det;
  std::vector<data::CocoEvalDet> box_det;
  const int64_t chunk = 4;
  for (int64_t s = 0; s < n; s += chunk) {
    const int64_t b = std::min(chunk, n - s);
    const TensorMap out =
        m.postprocess_outputs(m.infer(batch_to_device(m, src.eval_batch(s, b), dev)));
    const Tensor &boxes = out.at("boxes"), &scores = out.at("scores"), &labels = out.at("labels"),
                 &num = out.at("num_detections"), &masks = out.at("masks");
    const int64_t D = boxes.size(1), Dm = masks.size(1), H = masks.size(2), W = masks.size(3);
    for (int64_t i = 0; i < b; ++i)
      for (int64_t k = 0; k < num.data<int64_t>()[i]; ++k) {
        const float* q = boxes.data<float>() + (i * D + k) * 4;
        const int64_t lab = labels.data<int64_t>()[i * D + k];
        const double sc = scores.data<float>()[i * D + k];
        box_det.push_back({s + i, lab, q[0], q[1], double(q[2]) - q[0], double(q[3]) - q[1], sc});
        segm_det.push_back(
            {s + i, lab, sc,
             data::coco_rle_encode(masks.data<uint8_t>() + (i * Dm + k) * H * W, H, W)});
      }
  }
  m.train(was_training);
  std::vector<int64_t> images(static_cast<size_t>(n)), cats;
  for (int64_t i = 0; i < n; ++i) images[size_t(i)] = i;
  for (int64_t k = 1; k < m.config().num_classes; ++k) cats.push_back(k);
  const data::CocoStats box = data::coco_evaluate_bbox(box_gt, box_det, images, cats);
  const data::CocoStats segm = data::coco_evaluate_segm(segm_gt, segm_det, images, cats);
  // pycocotools' -1 (nothing defined) read as 0, so that a metric can only rise from it.
  auto v = [](double x) { return std::max(x, 0.0); };
  return {{"mask_ap", v(segm[0])},
          {"mask_ap50", v(segm[1])},
          {"bbox_ap", v(box[0])},
          {"bbox_ap50", v(box[1])}};
}

}  // namespace

void add_mask_rcnn_model(std::vector<ModelEntry>& r) {
  ModelEntry e;
  e.name = "mask_rcnn";
  e.infer_defaults = {"--batch-size=1"};  // MODELS.md §1.1
  e.task = "cv";
  e.description =
      "Mask R-CNN ResNet-50-FPN as torchvision 0.14's maskrcnn_resnet50_fpn (MODELS.md \xC2\xA7"
      "6.9): its parameter names, FrozenBatchNorm2d, GeneralizedRCNNTransform (800 / 1333), RPN "
      "(2000 / 1000 proposals), RoIAlign box head (512 sampled) and mask head (28 x 28 masks "
      "pasted into the image); size=tiny: widths / 8, one block per stage, 128 x 128";
  e.config = {{"size",
               "full",
               {"full", "tiny"},
               "full: torchvision's widths, 800 x 800 synthetic images; tiny: base width 8, one "
               "bottleneck per stage, FPN 32, 128 x 128 images"},
              {"backbone", "resnet50", {"resnet50", "resnet101"}, "the ResNet trunk"},
              {"num_classes", "auto", {}, "classes + background; auto: 21 (tiny: 6)"}};
  e.data_doc =
      "'synthetic' (shapes on textures with their visible pixel masks, "
      "data/instance_synthetic.h), 800 x 800 (tiny: 128 x 128)";
  e.metrics = {"mask_ap", "mask_ap50", "bbox_ap", "bbox_ap50"};
  // torchvision's references/detection recipe: SGD 0.02 for 16 images (0.0025 per image at batch
  // 2), momentum 0.9, weight decay 1e-4.
  e.train_defaults = {"--optimizer=sgd", "--momentum=0.9", "--lr=0.0025", "--weight-decay=1e-4",
                      "--batch-size=2"};
  e.build = [](const ModelConfig& c, uint64_t seed) -> std::unique_ptr<Model> {
    return std::make_unique<MaskRcnn>(mask_rcnn_config(c, seed));
  };
  e.source = [](const ModelConfig& c, const std::string& data,
                uint64_t seed) -> std::unique_ptr<data::BatchSource> {
    AIM_CHECK(data == "synthetic", "mask_rcnn: --data '", data, "': expected synthetic");
    data::DetectionSyntheticConfig d;
    d.classes = num_classes(c) - 1;
    d.seed = seed;
    d.height = d.width = image_side(c);
    if (tiny(c)) d.max_objects = 3, d.min_size = 0.2, d.max_size = 0.6;
    return std::make_unique<data::InstanceSyntheticSource>(d);
  };
  e.evaluate = mask_rcnn_evaluate;
  r.push_back(std::move(e));
}

}  // namespace aim::models
