// The NCF registry entry (MODELS.md §4.3): NeuMF on the synthetic latent-factor data or the
// reference's MovieLens-1M files converted by tools/ncf_npy_export.py, evaluated by HR@10,
// NDCG@10 and MRR@10 over each user's 100 candidates (docs/ncf-data.md).
#include <algorithm>
#include <filesystem>

#include "autograd/variable.h"
#include "data/metrics.h"
#include "data/ncf_data.h"
#include "models/ncf.h"
#include "models/registry.h"
#include "tensor/check.h"

namespace aim::models {
namespace {

constexpr int64_t kTopK = 10;  // reference topK

NcfConfig ncf_config(const ModelConfig& c) {
  return c.at("size") == "tiny" ? NcfConfig::tiny() : NcfConfig();
}

std::unique_ptr<data::BatchSource> ncf_source(const ModelConfig& c, const std::string& data,
                                              uint64_t seed) {
  const NcfConfig m = ncf_config(c);
  if (data == "synthetic") {
    data::NcfSyntheticConfig d =
        c.at("size") == "tiny" ? data::NcfSyntheticConfig::tiny(seed) : data::NcfSyntheticConfig();
    d.seed = seed;
    d.n_users = m.n_users;
    d.n_items = m.n_items;
    return std::make_unique<data::NcfSyntheticSource>(d);
  }
  AIM_CHECK(std::filesystem::is_directory(data), "--data '", data,
            "': ncf reads 'synthetic' or a directory with train.bin and test.bin "
            "(tools/ncf_npy_export.py, docs/ncf-data.md); no such directory");
  auto src = std::make_unique<data::NcfFileSource>(data, seed);
  AIM_CHECK(src->n_users() <= m.n_users && src->n_items() <= m.n_items, "--data ", data, ": ",
            src->n_users(), " users and ", src->n_items(), " items exceed the ", c.at("size"),
            " model's vocabularies (", m.n_users, ", ", m.n_items, ")");
  return src;
}

Metrics ncf_evaluate(Model& m, const data::BatchSource& src, int64_t n, Device dev) {
  AIM_CHECK(n > 0 && n <= src.eval_size(), "ncf evaluation: ", n,
            " rows asked, the evaluation set has ", src.eval_size());
  AIM_CHECK(n % data::kNcfGroup == 0, "ncf evaluation: --eval-samples ", n,
            " is not a multiple of ", data::kNcfGroup,
            " (each user's group is 1 held-out positive + 99 negatives)");
  autograd::NoGradGuard ng;
  const bool was_training = m.is_training();
  m.eval();
  std::vector<double> scores;
  std::vector<int64_t> labels;
  constexpr int64_t kChunk = 50 * data::kNcfGroup;
  for (int64_t s = 0; s < n; s += kChunk) {
    TensorMap b = src.eval_batch(s, std::min(kChunk, n - s));
    const std::vector<float> lg =
        m.infer(batch_to_device(m, b, dev)).at("logits").to(kCPU).contiguous().to_vector<float>();
    const std::vector<int64_t> lb = b.at("label").to_vector<int64_t>();
    scores.insert(scores.end(), lg.begin(), lg.end());
    labels.insert(labels.end(), lb.begin(), lb.end());
  }
  m.train(was_training);
  // Ranked by the logits: sigmoid is monotone, so this is the reference's top_k of
  // sigmoid(logits), without the ties f32 sigmoid creates by rounding logits above ~17 to 1.
  return {{"hr@10", data::hr_at_k(scores, labels, data::kNcfGroup, kTopK)},
          {"ndcg@10", data::ndcg_at_k(scores, labels, data::kNcfGroup, kTopK)},
          {"mrr@10", data::mrr_at_k(scores, labels, data::kNcfGroup, kTopK)}};
}

}  // namespace

void add_ncf_model(std::vector<ModelEntry>& r) {
  ModelEntry e;
  e.name = "ncf";
  e.infer_defaults = {"--batch-size=128"};  // MODELS.md §1.1
  e.task = "rec";
  e.description =
      "NeuMF as benchmarked by AI Matrix (MODELS.md \xC2\xA7"
      "4.3): GMF + MLP 32-16-8 on four 16-wide one-hot layers, HR/NDCG/MRR@10";
  e.config = {{"size",
               "full",
               {"full", "tiny"},
               "full: MovieLens-1M vocabularies (6040 users, 3706 items); tiny: 200 x 300"}};
  e.data_doc =
      "a directory with train.bin and test.bin converted from the reference's .npy files "
      "(tools/ncf_npy_export.py, docs/ncf-data.md)";
  e.metrics = {"hr@10", "ndcg@10", "mrr@10"};
  // MODELS.md §4.3: Adam, learning rate 1e-3 (reference main.py defaults).
  e.train_defaults = {"--optimizer=adam", "--lr=0.001"};
  e.build = [](const ModelConfig& c, uint64_t seed) -> std::unique_ptr<Model> {
    NcfConfig n = ncf_config(c);
    n.seed = seed;
    return std::make_unique<Ncf>(n);
  };
  e.source = ncf_source;
  e.evaluate = ncf_evaluate;
  r.push_back(std::move(e));
}

}  // namespace aim::models
