// The Wide&Deep registry entry (MODELS.md §4.4): the census wide&deep model on the synthetic
// census rows or the reference's adult.data / adult.test (docs/wide-deep-data.md), evaluated by
// AUC and accuracy.
#include <algorithm>
#include <filesystem>

#include "autograd/variable.h"
#include "data/census.h"
#include "data/metrics.h"
#include "models/registry.h"
#include "models/wide_deep.h"
#include "tensor/check.h"

namespace aim::models {
namespace {

std::unique_ptr<data::BatchSource> wide_deep_source(const ModelConfig& c, const std::string& data,
                                                    uint64_t seed) {
  if (data == "synthetic") {
    data::CensusSyntheticConfig d;
    d.seed = seed;
    if (c.at("size") == "tiny") d.eval_size = 4096;
    return std::make_unique<data::CensusSyntheticSource>(d);
  }
  AIM_CHECK(std::filesystem::is_directory(data), "--data '", data,
            "': wide_deep reads 'synthetic' or a directory with adult.data and adult.test "
            "(docs/wide-deep-data.md); no such directory");
  return std::make_unique<data::CensusFileSource>(data, seed);
}

Metrics wide_deep_evaluate(Model& m, const data::BatchSource& src, int64_t n, Device dev) {
  AIM_CHECK(n > 0 && n <= src.eval_size(), "wide_deep evaluation: ", n,
            " rows asked, the evaluation set has ", src.eval_size());
  autograd::NoGradGuard ng;
  const bool was_training = m.is_training();
  m.eval();
  std::vector<double> scores;
  std::vector<int64_t> labels;
  constexpr int64_t kChunk = 4096;
  int64_t correct = 0;
  for (int64_t s = 0; s < n; s += kChunk) {
    TensorMap b = src.eval_batch(s, std::min(kChunk, n - s));
    const std::vector<float> lg =
        m.infer(batch_to_device(m, b, dev)).at("logits").to(kCPU).contiguous().to_vector<float>();
    const std::vector<int64_t> lb = b.at("label").to_vector<int64_t>();
    for (size_t i = 0; i < lg.size(); ++i) correct += (lg[i] > 0) == (lb[i] == 1);
    scores.insert(scores.end(), lg.begin(), lg.end());
    labels.insert(labels.end(), lb.begin(), lb.end());
  }
  m.train(was_training);
  // AUC of the logits (sigmoid is monotone); accuracy at probability 0.5, i.e. logit > 0.
  return {{"auc", data::auc(scores, labels)}, {"accuracy", double(correct) / double(n)}};
}

}  // namespace

void add_wide_deep_model(std::vector<ModelEntry>& r) {
  ModelEntry e;
  e.name = "wide_deep";
  e.infer_defaults = {"--batch-size=1024"};  // MODELS.md §1.1
  e.task = "rec";
  e.description =
      "census Wide&Deep as benchmarked by AI Matrix (MODELS.md \xC2\xA7"
      "4.4): linear model over 8 wide columns (hashed crosses) + DNN 100-75-50-25, AUC";
  e.config = {{"size",
               "full",
               {"full", "tiny"},
               "full: the reference network on 16281 evaluation rows; tiny: same network, "
               "4096 synthetic evaluation rows"}};
  e.data_doc =
      "a directory with the UCI Adult files adult.data and adult.test (docs/wide-deep-data.md)";
  e.metrics = {"auc", "accuracy"};
  // MODELS.md §4.4: linear part FTRL (lr 0.2), DNN part Adagrad lr 0.05; --lr scales both
  // (train/optim.h GroupedOptimizer).
  e.train_defaults = {"--optimizer=wide_deep", "--lr=0.05"};
  // The census recipe (MODELS.md §4.4, models/wide_deep.h): parameters under "wide." FTRL (TF
  // defaults, lr min(0.2, 1/sqrt(8 wide columns)) = 0.2), the others TF's Adagrad (lr 0.05,
  // initial accumulator 0.1); --lr 0.05 gives these rates.
  e.optimizers = {{"wide_deep",
                   "FTRL for wide.*, Adagrad for the rest",
                   0.05,
                   {{"wide.",
                     "ftrl",
                     {{"lr", 0.2},
                      {"lr_power", -0.5},
                      {"initial_accumulator_value", 0.1},
                      {"l1", 0.0},
                      {"l2", 0.0}}},
                    {"",
                     "adagrad",
                     {{"lr", 0.05},
                      {"lr_decay", 0.0},
                      {"weight_decay", 0.0},
                      {"eps", 1e-10},
                      {"initial_accumulator_value", 0.1}}}}}};
  e.build = [](const ModelConfig& c, uint64_t seed) -> std::unique_ptr<Model> {
    WideDeepConfig w = c.at("size") == "tiny" ? WideDeepConfig::tiny() : WideDeepConfig();
    w.seed = seed;
    return std::make_unique<WideDeep>(w);
  };
  e.source = wide_deep_source;
  e.evaluate = wide_deep_evaluate;
  r.push_back(std::move(e));
}

}  // namespace aim::models
