// The SSD family's registry entries (MODELS.md §6, docs/detection.md): what every detector of
// models/ssd.h shares (--data synthetic shapes (default), Pascal VOC or COCO; evaluation by its
// post-processing and VOC mAP (VOC07 11-point) or COCO AP; num_classes, size), and ssd_vgg16
// (torchvision's ssd300_vgg16).
#include "models/ssd_registry.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "autograd/variable.h"
#include "data/coco_eval.h"
#include "data/coco_source.h"
#include "data/detection_metrics.h"
#include "data/detection_synthetic.h"
#include "data/voc_source.h"
#include "models/registry.h"
#include "models/ssd_vgg16.h"
#include "tensor/check.h"

namespace aim::models {
namespace {

int64_t num_classes(const ModelConfig& c) {
  const std::string& v = c.at("num_classes");
  // classes + background; COCO's 81 and far beyond fit under the bound.
  if (v != "auto") return config_int(c, "num_classes", 2, kMaxDetectionClasses);
  return 21;  // VOC's 20 classes (and the synthetic source's); coco:ROOT needs num_classes=81
}

// --data: synthetic | voc:ROOT (ROOT/VOC2007:trainval [+ ROOT/VOC2012:trainval], eval
// ROOT/VOC2007:test) | coco:ROOT (ROOT/{train2017,val2017}, ROOT/annotations/instances_*.json).
std::unique_ptr<data::BatchSource> ssd_source(const std::string& model, int64_t size,
                                              const ModelConfig& c, const std::string& data,
                                              uint64_t seed) {
  const int64_t classes = num_classes(c) - 1;
  if (data == "synthetic") {
    AIM_CHECK(classes <= 40, model, ": the synthetic data has at most 40 classes, --config ",
              "num_classes=", classes + 1);
    data::DetectionSyntheticConfig d;
    d.classes = classes;
    d.seed = seed;
    d.height = d.width = size;
    if (c.at("size") == "tiny") d.max_objects = 3, d.min_size = 0.2, d.max_size = 0.6;
    return std::make_unique<data::DetectionSyntheticSource>(d);
  }
  if (data.rfind("voc:", 0) == 0) {
    AIM_CHECK(classes == 20, model, ": VOC has 20 classes, --config num_classes=", classes + 1);
    const std::string root = data.substr(4);
    data::VocSourceConfig v;
    v.train_sets = {root + "/VOC2007:trainval"};
    if (std::filesystem::exists(root + "/VOC2012/ImageSets/Main/trainval.txt"))
      v.train_sets.push_back(root + "/VOC2012:trainval");
    v.eval_set = root + "/VOC2007:test";
    v.size = size;
    v.seed = seed;
    return std::make_unique<data::VocSource>(v);
  }
  if (data.rfind("coco:", 0) == 0) {
    AIM_CHECK(classes == 80, model, ": COCO has 80 classes, --config num_classes=", classes + 1);
    const std::string root = data.substr(5);
    data::CocoSourceConfig v;
    v.train_images = root + "/train2017";
    v.eval_images = root + "/val2017";
    v.train_annotations = root + "/annotations/instances_train2017.json";
    v.eval_annotations = root + "/annotations/instances_val2017.json";
    v.size = size;
    v.seed = seed;
    return std::make_unique<data::CocoSource>(v);
  }
  AIM_FAIL(model, ": --data '", data, "': expected synthetic, voc:ROOT or coco:ROOT");
}

// Detections of the first n evaluation images, in the images' original coordinates when the
// batch says them (orig_size), with the ground truth of the batch (VOC's difficult flags).
Metrics ssd_evaluate(Model& model, const data::BatchSource& src, int64_t n, Device dev) {
  auto& m = dynamic_cast<Ssd&>(model);
  AIM_CHECK(n > 0 && n <= src.eval_size(), m.name(), " evaluation: ", n,
            " samples asked, the evaluation set has ", src.eval_size());
  autograd::NoGradGuard ng;
  const bool was_training = m.is_training();
  m.eval();
  const auto* coco = dynamic_cast<const data::CocoSource*>(&src);
  std::vector<data::Detection> dets;
  std::vector<data::GroundTruth> gts;
  std::vector<data::CocoEvalDet> coco_dets;
  const float S = float(m.config().image_size);
  const int64_t chunk = 8;
  for (int64_t s = 0; s < n; s += chunk) {
    const int64_t b = std::min(chunk, n - s);
    const TensorMap batch = src.eval_batch(s, b);
    const TensorMap out = m.infer(batch_to_device(m, batch, dev));
    SsdHeadOutputs h{Variable(out.at("cls_logits").to(kCPU)),
                     Variable(out.at("bbox_regression").to(kCPU))};
    const std::vector<SsdDetections> per = m.postprocess(h);
    const std::vector<float> boxes = batch.at("boxes").to_vector<float>();
    const std::vector<int64_t> labels = batch.at("labels").to_vector<int64_t>(),
                               counts = batch.at("num_boxes").to_vector<int64_t>();
    const int64_t G = batch.at("labels").size(1);
    std::vector<int64_t> orig;
    if (batch.count("orig_size")) orig = batch.at("orig_size").to_vector<int64_t>();
    std::vector<uint8_t> difficult;
    if (batch.count("difficult")) difficult = batch.at("difficult").to_vector<uint8_t>();
    for (int64_t i = 0; i < b; ++i) {
      const float sy = orig.empty() ? 1.0f : float(orig[size_t(2 * i)]) / S,
                  sx = orig.empty() ? 1.0f : float(orig[size_t(2 * i + 1)]) / S;
      const int64_t image = s + i;
      const SsdDetections& d = per[size_t(i)];
      const float* db = d.boxes.data<float>();
      for (int64_t k = 0; k < d.scores.numel(); ++k) {
        const float x1 = db[4 * k] * sx, y1 = db[4 * k + 1] * sy, x2 = db[4 * k + 2] * sx,
                    y2 = db[4 * k + 3] * sy;
        const int64_t label = d.labels.data<int64_t>()[k];
        const float score = d.scores.data<float>()[k];
        if (coco) {
          coco_dets.push_back({coco->eval_image_id(image), coco->category_ids()[size_t(label - 1)],
                               x1, y1, x2 - x1, y2 - y1, score});
        } else {
          dets.push_back({image, label, score, x1, y1, x2, y2});
        }
      }
      for (int64_t k = 0; k < counts[size_t(i)] && !coco; ++k) {
        const float* g = boxes.data() + (i * G + k) * 4;
        data::GroundTruth t;
        t.image = image, t.label = labels[size_t(i * G + k)];
        t.difficult = !difficult.empty() && difficult[size_t(i * G + k)];
        t.x1 = g[0] * sx, t.y1 = g[1] * sy, t.x2 = g[2] * sx, t.y2 = g[3] * sy;
        gts.push_back(t);
      }
    }
  }
  m.train(was_training);
  if (coco) {
    // The ground truth of the evaluated images only.
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < n; ++i) ids.push_back(coco->eval_image_id(i));
    std::vector<data::CocoEvalGt> g;
    const std::set<int64_t> keep(ids.begin(), ids.end());
    for (const data::CocoEvalGt& x : coco->eval_ground_truth())
      if (keep.count(x.image_id)) g.push_back(x);
    const data::CocoStats st = data::coco_evaluate_bbox(g, coco_dets, ids, coco->category_ids());
    return {{"map", st[0]}, {"ap50", st[1]}, {"ap75", st[2]}};
  }
  // Continuous pixel coordinates: no +1 (VOC's inclusive-pixel widths are x2 - x1 here).
  data::VocApOptions o;
  o.pixel_inclusive = false;
  const data::VocApResult r = data::voc_ap(dets, gts, m.config().num_classes - 1, o);
  return {{"map", r.map}};
}

}  // namespace

SsdConfig ssd_family_config(const ModelConfig& c, uint64_t seed) {
  SsdConfig s;
  s.num_classes = num_classes(c);
  s.width_divisor = c.at("size") == "tiny" ? 8 : 1;
  s.seed = seed;
  return s;
}

ModelEntry ssd_family_entry(const std::string& name, int64_t image_size) {
  ModelEntry e;
  e.name = name;
  e.task = "cv";
  e.config = {{"size",
               "full",
               {"full", "tiny"},
               "full: the reference's widths; tiny: every channel count / 8 (same priors)"},
              {"num_classes",
               "auto",
               {},
               "classes + background; auto: 21 (VOC, synthetic); coco:ROOT needs 81"}};
  e.data_doc =
      "'synthetic' (shapes of 20 classes on textures, data/detection_synthetic.h), voc:ROOT "
      "(ROOT/VOC2007 [+ VOC2012] trainval, VOC2007 test), coco:ROOT (train2017/val2017 + "
      "annotations/instances_*.json); images resized to " +
      std::to_string(image_size) + " x " + std::to_string(image_size);
  e.metrics = {"map", "ap50", "ap75"};
  e.source = [name, image_size](const ModelConfig& c, const std::string& data, uint64_t seed) {
    return ssd_source(name, image_size, c, data, seed);
  };
  e.evaluate = ssd_evaluate;
  return e;
}

void add_ssd_models(std::vector<ModelEntry>& r) {
  ModelEntry e = ssd_family_entry("ssd_vgg16", 300);
  e.infer_defaults = {"--batch-size=8"};  // MODELS.md §1.1
  e.description =
      "SSD300 with VGG16 (MODELS.md \xC2\xA7"
      "6.1) as torchvision's ssd300_vgg16: module tree and parameter names, MultiBox loss "
      "(3:1 hard negatives), post-processing (NMS 0.45, 200 per image)";
  // MODELS.md §6.1: SGD momentum 0.9, lr 1e-3, weight decay 5e-4, batch 8 (the harness's smallest).
  e.train_defaults = {"--optimizer=sgd", "--momentum=0.9", "--lr=1e-3", "--weight-decay=5e-4",
                      "--batch-size=8"};
  e.build = [](const ModelConfig& c, uint64_t seed) -> std::unique_ptr<Model> {
    return std::make_unique<SsdVgg16>(ssd_family_config(c, seed));
  };
  r.push_back(std::move(e));
}

}  // namespace aim::models
