// The DIEN registry entry (MODELS.md §4.2): GRU + auxiliary loss + attention + AUGRU + Dice head
// on DIEN's synthetic click data (data/dien_synthetic.h) or the reference's files
// (data/dien_files.h; docs/dien-data.md), evaluated by AUC, GAUC and accuracy; Adam 1e-3 as the
// reference's train.py.
#include <algorithm>
#include <map>

#include "autograd/variable.h"
#include "data/dien_files.h"
#include "data/dien_synthetic.h"
#include "data/metrics.h"
#include "models/dien.h"
#include "models/registry.h"
#include "tensor/check.h"

namespace aim::models {
namespace {

DienConfig dien_config(const ModelConfig& c) {
  return c.at("size") == "tiny" ? DienConfig::tiny() : DienConfig();
}

std::unique_ptr<data::BatchSource> dien_source(const ModelConfig& c, const std::string& data,
                                               uint64_t seed) {
  const DienConfig m = dien_config(c);
  if (data != "synthetic") {
    auto src = std::make_unique<data::DienFileSource>(data, seed);
    const data::DienTsvReader& r = src->train();
    const std::pair<const char*, std::pair<int64_t, int64_t>> sizes[] = {
        {"uid_voc.txt (users)", {r.uid_vocab().size(), m.n_uid}},
        {"mid_voc.txt (items)", {r.mid_vocab().size(), m.n_mid}},
        {"cat_voc.txt (categories)", {r.cat_vocab().size(), m.n_cat}}};
    for (const auto& [what, n] : sizes)
      AIM_CHECK(n.first <= n.second, "--data ", data, ": ", what, " has ", n.first,
                " entries, more than the model's table of ", n.second,
                " (--config size=", c.at("size"), ")");
    return src;
  }
  data::DienSyntheticConfig d = c.at("size") == "tiny" ? data::DienSyntheticConfig::tiny(seed)
                                                       : data::DienSyntheticConfig::full(seed);
  AIM_CHECK(d.base.n_users <= m.n_uid && d.base.n_items <= m.n_mid && d.base.n_cates <= m.n_cat,
            "dien: synthetic vocabularies exceed the model's");
  return std::make_unique<data::DienSyntheticSource>(d);
}

Metrics dien_evaluate(Model& m, const data::BatchSource& src, int64_t n, Device dev) {
  AIM_CHECK(n > 0 && n <= src.eval_size(), "dien evaluation: ", n,
            " samples asked, the evaluation set has ", src.eval_size());
  autograd::NoGradGuard ng;
  const bool was_training = m.is_training();
  m.eval();
  std::vector<double> scores;
  std::vector<int64_t> labels, users;
  int64_t correct = 0;
  constexpr int64_t kChunk = 2048;
  for (int64_t s = 0; s < n; s += kChunk) {
    TensorMap b = src.eval_batch(s, std::min(kChunk, n - s));
    const std::vector<float> lg =
        m.infer(batch_to_device(m, b, dev)).at("logits").to(kCPU).contiguous().to_vector<float>();
    const std::vector<int64_t> lb = b.at("label").to_vector<int64_t>();
    const std::vector<int64_t> u = b.at("uid").to_vector<int64_t>();
    for (size_t i = 0; i < lb.size(); ++i) {
      // Score = logit difference: monotone in the click probability, without f32 ties.
      const double d = double(lg[2 * i]) - double(lg[2 * i + 1]);
      scores.push_back(d);
      correct += (d > 0) == (lb[i] == 1);
    }
    labels.insert(labels.end(), lb.begin(), lb.end());
    users.insert(users.end(), u.begin(), u.end());
  }
  m.train(was_training);
  // accuracy: the reference's mean(round(y_hat) == target), i.e. p(click) > 0.5 == label.
  Metrics r{{"auc", data::auc(scores, labels)}, {"accuracy", double(correct) / double(n)}};
  std::map<int64_t, int> seen;  // user -> bit 1: a non-click, bit 2: a click
  bool any_group = false;
  for (size_t i = 0; i < users.size() && !any_group; ++i)
    any_group = (seen[users[i]] |= labels[i] ? 2 : 1) == 3;
  if (any_group) r["gauc"] = data::gauc(scores, labels, users);
  return r;
}

}  // namespace

void add_dien_model(std::vector<ModelEntry>& r) {
  ModelEntry e;
  e.name = "dien";
  e.infer_defaults = {"--batch-size=256"};  // MODELS.md §1.1
  e.task = "rec";
  e.description =
      "Deep Interest Evolution Network as benchmarked by AI Matrix (MODELS.md \xC2\xA7"
      "4.2): GRU + auxiliary loss, PReLU-query attention, AUGRU, Dice head";
  e.config = {{"size",
               "full",
               {"full", "tiny"},
               "full: Amazon Books vocabularies, emb 18+18, hidden 36; tiny: 200/300/20, emb 4"}};
  e.data_doc =
      "'synthetic', or a directory with the reference's local_train_splitByUser, "
      "local_test_splitByUser, item-info, reviews-info and uid/mid/cat_voc.txt "
      "(docs/dien-data.md)";
  e.metrics = {"auc", "gauc", "accuracy"};
  // MODELS.md §4.2: Adam, learning rate 1e-3 (reference train.py).
  e.train_defaults = {"--optimizer=adam", "--lr=0.001"};
  e.build = [](const ModelConfig& c, uint64_t seed) -> std::unique_ptr<Model> {
    DienConfig d = dien_config(c);
    d.seed = seed;
    return std::make_unique<Dien>(d);
  };
  e.source = dien_source;
  e.evaluate = dien_evaluate;
  r.push_back(std::move(e));
}

}  // namespace aim::models
