// The cpn registry entry (MODELS.md §5.3, docs/cpn.md): models/cpn.h on the synthetic stick
// figures (data/keypoint_synthetic.h), evaluated by mptest.py's decoding (flip test) and COCO's
// keypoint OKS AP (data/coco_keypoints.h).
#include <algorithm>

#include "autograd/variable.h"
#include "data/coco_keypoints.h"
#include "data/keypoint_synthetic.h"
#include "models/cpn.h"
#include "models/registry.h"
#include "tensor/check.h"

namespace aim::models {
namespace {

CpnConfig cpn_config(const ModelConfig& c, uint64_t seed) {
  CpnConfig m = c.at("size") == "tiny" ? CpnConfig::tiny() : CpnConfig();
  m.flip_test = c.at("flip_test") == "1";
  m.seed = seed;
  return m;
}

std::unique_ptr<data::BatchSource> cpn_source(const ModelConfig& c, const std::string& data,
                                              uint64_t seed) {
  AIM_CHECK(data == "synthetic", "cpn: --data '", data,
            "': expected synthetic (COCO person crops from detector boxes are not read yet: "
            "docs/cpn.md)");
  const CpnConfig m = cpn_config(c, seed);
  data::KeypointSyntheticConfig d;
  d.height = m.height, d.width = m.width, d.out_h = m.out_h, d.out_w = m.out_w;
  d.seed = seed;
  return std::make_unique<data::KeypointSyntheticSource>(d);
}

// Keypoint OKS AP of the decoded (flip-tested) keypoints on the first n evaluation images; each
// image is one person (ground truth and one result scored by its mean keypoint score).
Metrics cpn_evaluate(Model& model, const data::BatchSource& src, int64_t n, Device dev) {
  auto& m = dynamic_cast<Cpn&>(model);
  AIM_CHECK(n > 0 && n <= src.eval_size(), "cpn evaluation: ", n,
            " samples asked, the evaluation set has ", src.eval_size());
  autograd::NoGradGuard ng;
  const bool was_training = m.is_training();
  m.eval();
  std::vector<data::CocoKeypointAnnotation> gts;
  std::vector<data::CocoKeypointDet> dets;
  std::vector<int64_t> images;
  const int64_t K = m.config().keypoints, chunk = 8;
  AIM_CHECK(K == data::kCocoKeypoints, "cpn evaluation: COCO's OKS needs 17 keypoints, got ", K);
  for (int64_t s = 0; s < n; s += chunk) {
    const int64_t b = std::min(chunk, n - s);
    const TensorMap batch = src.eval_batch(s, b);
    TensorMap out = m.infer(batch_to_device(m, batch, dev));
    out["heatmaps"] = out.at("heatmaps").to(kCPU);
    const TensorMap post = m.postprocess_outputs(out);
    const std::vector<float> kp = batch.at("keypoints").to_vector<float>(),
                             area = batch.at("area").to_vector<float>(),
                             found = post.at("keypoints").to_vector<float>(),
                             score = post.at("scores").to_vector<float>();
    for (int64_t i = 0; i < b; ++i) {
      const int64_t id = s + i + 1;
      images.push_back(id);
      data::CocoKeypointAnnotation g;
      g.id = g.image_id = id;
      g.category_id = 1;
      double x0 = 1e30, y0 = 1e30, x1 = -1e30, y1 = -1e30;
      for (int64_t k = 0; k < 3 * K; ++k) g.keypoints[size_t(k)] = kp[size_t(i * 3 * K + k)];
      for (int64_t k = 0; k < K; ++k) {
        if (!(g.keypoints[size_t(3 * k + 2)] > 0)) continue;
        ++g.num_keypoints;
        x0 = std::min(x0, g.keypoints[size_t(3 * k)]),
        x1 = std::max(x1, g.keypoints[size_t(3 * k)]);
        y0 = std::min(y0, g.keypoints[size_t(3 * k + 1)]);
        y1 = std::max(y1, g.keypoints[size_t(3 * k + 1)]);
      }
      if (g.num_keypoints > 0) g.x = x0, g.y = y0, g.w = x1 - x0, g.h = y1 - y0;
      g.area = area[size_t(i)];
      gts.push_back(g);
      data::CocoKeypointDet d;
      d.image_id = id;
      for (int64_t k = 0; k < 3 * K; ++k) d.keypoints[size_t(k)] = found[size_t(i * 3 * K + k)];
      d.score = score[size_t(i)];
      dets.push_back(d);
    }
  }
  m.train(was_training);
  const std::array<double, 10> st = data::coco_evaluate_keypoints(gts, dets, images, {1});
  return {{"oks_ap", st[0]}, {"oks_ap50", st[1]}, {"oks_ap75", st[2]}, {"oks_ar", st[5]}};
}

}  // namespace

void add_cpn_model(std::vector<ModelEntry>& r) {
  ModelEntry e;
  e.name = "cpn";
  e.infer_defaults = {"--batch-size=4"};  // MODELS.md §1.1
  e.task = "cv";
  e.description =
      "CPN (MODELS.md \xC2\xA7"
      "5.3, megvii tf-cpn COCO.res101.384x288.CPN): ResNet-101, GlobalNet (FPN, 4 heatmap "
      "outputs) and RefineNet, 17 COCO keypoint heatmaps at 96 x 72; L2 losses with online hard "
      "keypoint mining (top 8 of 17), flip test, COCO keypoint OKS AP";
  e.config = {{"size",
               "full",
               {"full", "tiny"},
               "full: 384 x 288 input, ResNet-101, 256 channels; tiny: 96 x 72, one block per "
               "stage, base 8, 32 channels"},
              {"flip_test",
               "1",
               {"0", "1"},
               "1: heatmaps averaged with the mirrored image's (mptest.py); 0: one pass"}};
  e.data_doc =
      "'synthetic' (one articulated stick figure per image with COCO's 17 keypoints, "
      "data/keypoint_synthetic.h)";
  e.metrics = {"oks_ap", "oks_ap50", "oks_ap75", "oks_ar"};
  // MODELS.md §5.3: Adam lr 5e-4, weight decay 1e-5; batch 4 (the harness's smallest).
  e.train_defaults = {"--optimizer=adam", "--lr=5e-4", "--weight-decay=1e-5", "--batch-size=4"};
  e.build = [](const ModelConfig& c, uint64_t seed) -> std::unique_ptr<Model> {
    return std::make_unique<Cpn>(cpn_config(c, seed));
  };
  e.source = cpn_source;
  e.evaluate = cpn_evaluate;
  r.push_back(std::move(e));
}

}  // namespace aim::models
