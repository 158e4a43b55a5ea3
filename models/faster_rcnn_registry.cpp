// The faster_rcnn registry entry (MODELS.md §6.7, docs/detection.md): the detection sources of
// the SSD family (synthetic shapes, voc:ROOT) resized to a square input, evaluation by
// test_net's post-processing and VOC07 11-point mAP, py-faster-rcnn's solver as the defaults.
#include <algorithm>
#include <memory>

#include "autograd/variable.h"
#include "data/detection_metrics.h"
#include "models/faster_rcnn.h"
#include "models/registry.h"
#include "models/ssd_registry.h"
#include "tensor/check.h"

namespace aim::models {
namespace {

int64_t input_size(const ModelConfig& c) { return c.at("size") == "tiny" ? 128 : 600; }

FasterRcnnConfig faster_rcnn_config(const ModelConfig& c, uint64_t seed) {
  FasterRcnnConfig f;
  const std::string& n = c.at("num_classes");
  // classes + background; COCO's 81 and far beyond fit under the bound.
  if (n != "auto") f.num_classes = config_int(c, "num_classes", 2, kMaxDetectionClasses);
  f.image_size = input_size(c);
  f.seed = seed;
  if (c.at("size") == "tiny") {
    f.width_divisor = 8;
    f.fc_width = 256;
    f.anchor_scales = {2, 4, 6};  // 32 .. 96 px anchors for 128 x 128 images
  }
  return f;
}

Metrics faster_rcnn_evaluate(Model& model, const data::BatchSource& src, int64_t n, Device dev) {
  auto& m = dynamic_cast<FasterRcnn&>(model);
  AIM_CHECK(n > 0 && n <= src.eval_size(), "faster_rcnn evaluation: ", n,
            " samples asked, the evaluation set has ", src.eval_size());
  autograd::NoGradGuard ng;
  const bool was_training = m.is_training();
  m.eval();
  std::vector<data::Detection> dets;
  std::vector<data::GroundTruth> gts;
  const float S = float(m.config().image_size);
  const int64_t chunk = 4;
  for (int64_t s = 0; s < n; s += chunk) {
    const int64_t b = std::min(chunk, n - s);
    const TensorMap batch = src.eval_batch(s, b);
    const TensorMap out = m.infer(batch_to_device(m, batch, dev));
    const std::vector<FasterRcnnDetections> per = m.detect(out);
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
      const FasterRcnnDetections& d = per[size_t(i)];
      const float* db = d.boxes.data<float>();
      for (int64_t k = 0; k < d.scores.numel(); ++k)
        dets.push_back({s + i, d.labels.data<int64_t>()[k], d.scores.data<float>()[k],
                        db[4 * k] * sx, db[4 * k + 1] * sy, db[4 * k + 2] * sx,
                        db[4 * k + 3] * sy});
      for (int64_t k = 0; k < counts[size_t(i)]; ++k) {
        const float* g = boxes.data() + (i * G + k) * 4;
        data::GroundTruth t;
        t.image = s + i, t.label = labels[size_t(i * G + k)];
        t.difficult = !difficult.empty() && difficult[size_t(i * G + k)];
        t.x1 = g[0] * sx, t.y1 = g[1] * sy, t.x2 = g[2] * sx, t.y2 = g[3] * sy;
        gts.push_back(t);
      }
    }
  }
  m.train(was_training);
  // The sources' continuous pixel coordinates: no +1 on widths.
  data::VocApOptions o;
  o.pixel_inclusive = false;
  return {{"map", data::voc_ap(dets, gts, m.config().num_classes - 1, o).map}};
}

}  // namespace

void add_faster_rcnn_model(std::vector<ModelEntry>& r) {
  ModelEntry e = ssd_family_entry("faster_rcnn", 600);
  e.infer_defaults = {"--batch-size=1"};  // MODELS.md §1.1
  e.description =
      "Faster R-CNN VGG16 end to end as py-faster-rcnn (MODELS.md \xC2\xA7"
      "6.7): Caffe layer names, RPN (9 anchors, 256 sampled), proposal layer (NMS 0.7), 128 "
      "RoIs, RoIPool 7x7, fc6/fc7 4096, per-class NMS 0.3; size=tiny: widths / 8, fc 256, 128 "
      "x 128 inputs";
  e.config[0].doc = "full: the reference's widths at 600 x 600; tiny: convs / 8, fc 256, 128 x 128";
  e.data_doc =
      "'synthetic' (shapes on textures, data/detection_synthetic.h) or voc:ROOT (ROOT/VOC2007 "
      "[+ VOC2012] trainval, VOC2007 test), resized to a square 600 x 600 (tiny: 128)";
  e.metrics = {"map"};
  // solver.prototxt: SGD base_lr 1e-3, momentum 0.9, weight_decay 5e-4; IMS_PER_BATCH 1.
  e.train_defaults = {"--optimizer=sgd", "--momentum=0.9", "--lr=1e-3", "--weight-decay=5e-4",
                      "--batch-size=1"};
  e.build = [](const ModelConfig& c, uint64_t seed) -> std::unique_ptr<Model> {
    return std::make_unique<FasterRcnn>(faster_rcnn_config(c, seed));
  };
  e.source = [](const ModelConfig& c, const std::string& data, uint64_t seed) {
    AIM_CHECK(data == "synthetic" || data.rfind("voc:", 0) == 0, "faster_rcnn: --data '", data,
              "': expected synthetic or voc:ROOT");
    return ssd_family_entry("faster_rcnn", input_size(c)).source(c, data, seed);
  };
  e.evaluate = faster_rcnn_evaluate;
  r.push_back(std::move(e));
}

}  // namespace aim::models
