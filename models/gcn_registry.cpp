// The GCN registry entry (MODELS.md §7): Kipf & Welling's two-layer GCN on a synthetic
// stochastic-block graph or a Planetoid set converted by tools/planetoid_convert.py
// (docs/gcn.md). One step = one full-batch epoch (--batch-size 1: the batch is the graph);
// Kipf's recipe is 200 epochs of Adam at lr 0.01. Metrics: accuracy on the test and validation
// nodes.
#include <algorithm>
#include <filesystem>

#include "autograd/variable.h"
#include "data/graph.h"
#include "models/gcn.h"
#include "models/registry.h"
#include "tensor/check.h"

namespace aim::models {
namespace {

constexpr char kPlanetoid[] = "planetoid:";

// features/classes "auto": the synthetic graph's of that size (full: Cora's 1433 and 7).
int64_t dim(const ModelConfig& c, const std::string& key, int64_t full, int64_t tiny) {
  if (c.at(key) == "auto") return c.at("size") == "tiny" ? tiny : full;
  return config_int(c, key, 1);
}

GcnConfig gcn_config(const ModelConfig& c) {
  const data::SbmConfig tiny = data::SbmConfig::tiny();
  GcnConfig g;
  g.features = dim(c, "features", data::SbmConfig().features, tiny.features);
  g.classes = dim(c, "classes", data::SbmConfig().classes, tiny.classes);
  g.hidden = config_int(c, "hidden", 1);
  g.dropout = config_number(c, "dropout", 0, 0.999);
  g.weight_decay = config_number(c, "weight_decay", 0, 1);
  return g;
}

std::unique_ptr<data::BatchSource> gcn_source(const ModelConfig& c, const std::string& data,
                                              uint64_t seed) {
  const GcnConfig m = gcn_config(c);
  std::unique_ptr<data::GraphSource> src;
  if (data == "synthetic") {
    data::SbmConfig d = c.at("size") == "tiny" ? data::SbmConfig::tiny(seed) : data::SbmConfig();
    d.seed = seed;
    src = std::make_unique<data::GraphSource>(
        data::sbm_graph(d), "gcn-sbm seed " + std::to_string(seed) + " (" + c.at("size") + ")");
  } else {
    AIM_CHECK(data.rfind(kPlanetoid, 0) == 0, "--data '", data,
              "': gcn reads 'synthetic' or 'planetoid:DIR' (a directory written by "
              "tools/planetoid_convert.py, docs/gcn.md)");
    const std::string dir = data.substr(sizeof(kPlanetoid) - 1);
    AIM_CHECK(std::filesystem::is_directory(dir), "--data ", data, ": no such directory '", dir,
              "'");
    data::GraphData g = data::read_planetoid(dir);
    src = std::make_unique<data::GraphSource>(std::move(g), "planetoid " + dir);
  }
  const data::GraphData& g = src->graph();
  AIM_CHECK(g.features == m.features && g.classes == m.classes, "--data ", data, ": the graph has ",
            g.features, " features and ", g.classes, " classes, the model ", m.features, " and ",
            m.classes, " (run with --config features=", g.features, " --config classes=", g.classes,
            ")");
  return src;
}

double accuracy(const std::vector<float>& logits, int64_t C, const std::vector<int64_t>& labels,
                const std::vector<int64_t>& idx) {
  int64_t right = 0;
  for (int64_t i : idx) {
    const float* r = logits.data() + i * C;
    right += int64_t(std::max_element(r, r + C) - r) == labels[size_t(i)];
  }
  return idx.empty() ? 0.0 : double(right) / double(idx.size());
}

Metrics gcn_evaluate(Model& m, const data::BatchSource& src, int64_t n, Device dev) {
  AIM_CHECK(n == 1, "gcn evaluation: the evaluation set is the one graph, ", n, " asked");
  autograd::NoGradGuard ng;
  const bool was_training = m.is_training();
  m.eval();
  const TensorMap b = src.eval_batch(0, 1);
  const Tensor logits = m.infer(batch_to_device(m, b, dev)).at("logits").to(kCPU).contiguous();
  m.train(was_training);
  const std::vector<float> lg = logits.to_vector<float>();
  const std::vector<int64_t> labels = b.at("labels").to_vector<int64_t>();
  const int64_t C = logits.size(1);
  return {{"test_accuracy", accuracy(lg, C, labels, b.at("test_idx").to_vector<int64_t>())},
          {"val_accuracy", accuracy(lg, C, labels, b.at("val_idx").to_vector<int64_t>())},
          {"train_accuracy", accuracy(lg, C, labels, b.at("train_idx").to_vector<int64_t>())}};
}

}  // namespace

void add_gcn_model(std::vector<ModelEntry>& r) {
  ModelEntry e;
  e.name = "gcn";
  e.infer_defaults = {"--batch-size=1"};  // MODELS.md §1.1
  e.task = "graph";
  e.description =
      "Kipf & Welling GCN (MODELS.md \xC2\xA7"
      "7): 2 graph convolutions (16 hidden) over D^-1/2 (A+I) D^-1/2, full batch; one step = "
      "one epoch";
  e.config = {
      {"size",
       "full",
       {"full", "tiny"},
       "synthetic graph: full = Cora-sized (2708 nodes, 1433 features, 7 classes); tiny = 240 "
       "nodes, 64 features, 4 classes"},
      {"features", "auto", {}, "input features (auto: the synthetic graph's of --config size)"},
      {"classes", "auto", {}, "classes (auto: the synthetic graph's of --config size)"},
      {"hidden", "16", {}, "hidden units of gc1"},
      {"dropout", "0.5", {}, "dropout on both layers' inputs"},
      {"weight_decay", "5e-4", {}, "L2 on gc1.weight, in the loss (wd/2 ||W1||^2, as Kipf)"}};
  e.data_doc =
      "planetoid:DIR, a directory written by tools/planetoid_convert.py from Kipf's "
      "ind.<name>.* files (docs/gcn.md); --config features=... classes=... to match it";
  e.metrics = {"test_accuracy", "val_accuracy", "train_accuracy"};
  // Kipf: Adam lr 0.01, 200 epochs, weight decay in the loss (not the optimizer's).
  e.train_defaults = {"--optimizer=adam", "--lr=0.01",   "--weight-decay=0",
                      "--batch-size=1",   "--steps=200", "--eval-samples=1"};
  e.build = [](const ModelConfig& c, uint64_t seed) -> std::unique_ptr<Model> {
    GcnConfig g = gcn_config(c);
    g.seed = seed;
    return std::make_unique<Gcn>(g);
  };
  e.source = gcn_source;
  e.evaluate = gcn_evaluate;
  r.push_back(std::move(e));
}

}  // namespace aim::models
