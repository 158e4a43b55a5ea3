// The SegLink registry entry (MODELS.md §5.2, docs/seglink.md): the network of models/seglink.h
// on the synthetic oriented words (data/text_detection_synthetic.h) or ICDAR 2015's folders
// (data/icdar_source.h), evaluated by decoding, combining and the ICDAR 2015 localisation
// evaluation (data/icdar_eval.h).
#include <algorithm>
#include <cstdlib>

#include "autograd/variable.h"
#include "data/icdar_eval.h"
#include "data/icdar_source.h"
#include "data/text_detection_synthetic.h"
#include "models/registry.h"
#include "models/seglink.h"
#include "tensor/check.h"

namespace aim::models {
namespace {

int64_t image_size(const ModelConfig& c) {
  const std::string& v = c.at("image_size");
  char* end = nullptr;
  const long long s = std::strtoll(v.c_str(), &end, 10);
  AIM_CHECK(!v.empty() && end && *end == '\0' && s >= 129 && s <= 4096,
            "seglink: --config image_size='", v,
            "': expected an integer side in [129, 4096] (the six maps need >= 129)");
  return int64_t(s);
}

SeglinkModelConfig seglink_model_config(const ModelConfig& c, uint64_t seed) {
  SeglinkModelConfig s;
  s.image_size = image_size(c);
  s.width_divisor = c.at("size") == "tiny" ? 8 : 1;
  s.seed = seed;
  return s;
}

std::unique_ptr<data::BatchSource> seglink_source(const ModelConfig& c, const std::string& data,
                                                  uint64_t seed) {
  const int64_t S = image_size(c);
  if (data.rfind("icdar:", 0) == 0) {
    // icdar:ROOT[:train|:test] (the evaluation split; the folder names are fixed).
    data::IcdarSourceConfig d;
    d.root = data.substr(6);
    for (const char* split : {"train", "test"}) {
      const std::string tail = std::string(":") + split;
      if (d.root.size() > tail.size() &&
          d.root.compare(d.root.size() - tail.size(), tail.size(), tail) == 0) {
        d.root.resize(d.root.size() - tail.size());
        d.eval_split = split;
        break;
      }
    }
    AIM_CHECK(!d.root.empty(), "seglink: --data '", data, "': expected icdar:ROOT[:train|:test]");
    d.size = S;
    d.seed = seed;
    return std::make_unique<data::IcdarSource>(d);
  }
  AIM_CHECK(data == "synthetic", "seglink: --data '", data,
            "': expected synthetic or icdar:ROOT[:train|:test] (ICDAR 2015 Challenge 4 folders, "
            "docs/seglink.md)");
  data::TextDetectionSyntheticConfig d;
  d.height = d.width = S;
  d.seed = seed;
  if (c.at("size") == "tiny") d.max_words = 4, d.min_height = 0.05;
  return std::make_unique<data::TextDetectionSyntheticSource>(d);
}

// Hmean, precision and recall of the combined words on the first n evaluation images.
Metrics seglink_evaluate(Model& model, const data::BatchSource& src, int64_t n, Device dev) {
  auto& m = dynamic_cast<Seglink&>(model);
  AIM_CHECK(n > 0 && n <= src.eval_size(), "seglink evaluation: ", n,
            " samples asked, the evaluation set has ", src.eval_size());
  autograd::NoGradGuard ng;
  const bool was_training = m.is_training();
  m.eval();
  std::vector<std::vector<data::IcdarWord>> gts;
  std::vector<std::vector<data::IcdarQuad>> dets;
  const int64_t chunk = 8;
  for (int64_t s = 0; s < n; s += chunk) {
    const int64_t b = std::min(chunk, n - s);
    const TensorMap batch = src.eval_batch(s, b);
    const TensorMap out = m.infer(batch_to_device(m, batch, dev));
    const auto found = m.detect({Variable(out.at("seg_logits")), Variable(out.at("link_logits")),
                                 Variable(out.at("offsets"))});
    const std::vector<float> quads = batch.at("quads").to_vector<float>();
    const std::vector<int64_t> counts = batch.at("num_boxes").to_vector<int64_t>();
    const std::vector<uint8_t> dc = batch.at("dont_care").to_vector<uint8_t>();
    const int64_t G = batch.at("quads").size(1);
    // Images resized from another size (ICDAR folders): both sides go back to the original
    // pixels, the detections as the reference's evaluate.py writes them (scaled, clipped to the
    // image, rounded), so the metric sees what a submission would hold.
    const std::vector<int64_t> orig = batch.count("orig_size")
                                          ? batch.at("orig_size").to_vector<int64_t>()
                                          : std::vector<int64_t>();
    const int64_t S = batch.at("images").size(3);
    for (int64_t i = 0; i < b; ++i) {
      std::vector<data::IcdarWord> g;
      for (int64_t k = 0; k < counts[size_t(i)]; ++k) {
        data::IcdarWord w;
        for (int j = 0; j < 8; ++j) w.quad[size_t(j)] = quads[size_t((i * G + k) * 8 + j)];
        if (!orig.empty())
          w.quad = data::icdar_to_original(w.quad, orig[size_t(2 * i)], orig[size_t(2 * i + 1)], S,
                                           false);
        w.dont_care = dc[size_t(i * G + k)] != 0;
        w.text = w.dont_care ? "###" : "word";
        g.push_back(w);
      }
      gts.push_back(g);
      std::vector<data::IcdarQuad> d;
      for (const auto& x : found[size_t(i)])
        d.push_back(orig.empty() ? x.quad
                                 : data::icdar_to_original(x.quad, orig[size_t(2 * i)],
                                                           orig[size_t(2 * i + 1)], S, true));
      dets.push_back(d);
    }
  }
  m.train(was_training);
  const data::IcdarEvalResult r = data::icdar_evaluate(gts, dets);
  return {{"hmean", r.hmean}, {"precision", r.precision}, {"recall", r.recall}};
}

}  // namespace

void add_seglink_model(std::vector<ModelEntry>& r) {
  ModelEntry e;
  e.name = "seglink";
  e.infer_defaults = {"--batch-size=4"};  // MODELS.md §1.1
  e.task = "cv";
  e.description =
      "SegLink (MODELS.md \xC2\xA7"
      "5.2, bgshih/seglink): SSD-style VGG16, segments and within/cross-layer links on six "
      "maps, 3:1 hard negatives, union-find combination into oriented words";
  e.config = {{"size",
               "full",
               {"full", "tiny"},
               "full: the reference's widths; tiny: every channel count / 8 (same maps)"},
              {"image_size",
               "384",
               {},
               "input side S (S x S images; 384: pretrain.json, 512: finetune_ic15.json)"}};
  e.data_doc =
      "'synthetic' (oriented words of stroke glyphs on textures, data/text_detection_synthetic.h) "
      "or 'icdar:ROOT[:train|:test]' (ICDAR 2015 Challenge 4 folders: training on "
      "ch4_training_*, evaluation on the test split (default) or the training one, with "
      "SegLink's crop augmentation; data/icdar_source.h)";
  e.metrics = {"hmean", "precision", "recall"};
  // exp/sgd/pretrain.json: SGD momentum 0.9, base lr 5e-4, weight decay 5e-4, batch 32.
  e.train_defaults = {"--optimizer=sgd", "--momentum=0.9", "--lr=5e-4", "--weight-decay=5e-4",
                      "--batch-size=32"};
  e.build = [](const ModelConfig& c, uint64_t seed) -> std::unique_ptr<Model> {
    return std::make_unique<Seglink>(seglink_model_config(c, seed));
  };
  e.source = seglink_source;
  e.evaluate = seglink_evaluate;
  r.push_back(std::move(e));
}

}  // namespace aim::models
