#include "models/registry.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>

#include "autograd/variable.h"
#include "data/din_source.h"
#include "data/metrics.h"
#include "models/din.h"
#include "tensor/check.h"

namespace aim::models {
namespace {

// ---- din ------------------------------------------------------------------------------------

DinConfig din_config(const ModelConfig& c) {
  DinConfig d = c.at("size") == "tiny" ? DinConfig::tiny() : DinConfig();
  d.act = c.at("act");
  d.bn_train = c.at("bn") == "train";
  d.att_impl = c.at("att");
  return d;
}

std::unique_ptr<data::BatchSource> din_source(const ModelConfig& c, const std::string& data,
                                              uint64_t seed) {
  const DinConfig m = din_config(c);
  if (data == "synthetic") {
    data::DinSyntheticConfig d =
        c.at("size") == "tiny" ? data::DinSyntheticConfig::tiny(seed) : data::DinSyntheticConfig();
    d.seed = seed;
    if (c.at("size") != "tiny") {
      d.n_users = m.n_uid;
      d.n_items = m.n_mid;
      d.n_cates = m.n_cat;
    }
    return std::make_unique<data::DinSyntheticSource>(d);
  }
  AIM_CHECK(std::filesystem::is_directory(data), "--data '", data,
            "': din reads 'synthetic' or a DIN export directory (docs/din-data.md); no such "
            "directory");
  auto src = std::make_unique<data::DinExportSource>(data, seed);
  const data::DinExport& e = src->data();
  AIM_CHECK(e.n_items() <= m.n_mid && e.n_cates() <= m.n_cat, "--data ", data, ": ", e.n_items(),
            " items and ", e.n_cates(), " categories exceed the ", c.at("size"),
            " model's vocabularies (", m.n_mid, ", ", m.n_cat, ")");
  return src;
}

Metrics din_evaluate(Model& m, const data::BatchSource& src, int64_t n, Device dev) {
  AIM_CHECK(n > 0 && n <= src.eval_size(), "din evaluation: ", n,
            " samples asked, the evaluation set has ", src.eval_size());
  autograd::NoGradGuard ng;
  const bool was_training = m.is_training();
  m.eval();
  std::vector<double> scores;
  std::vector<int64_t> labels, users;
  constexpr int64_t kChunk = 2048;
  for (int64_t s = 0; s < n; s += kChunk) {
    TensorMap b = src.eval_batch(s, std::min(kChunk, n - s));
    const std::vector<float> lg =
        m.infer(batch_to_device(m, b, dev)).at("logits").to_vector<float>();
    const std::vector<int64_t> lb = b.at("label").to_vector<int64_t>();
    const std::vector<int64_t> u = b.at("uid").to_vector<int64_t>();
    scores.insert(scores.end(), lg.begin(), lg.end());
    labels.insert(labels.end(), lb.begin(), lb.end());
    users.insert(users.end(), u.begin(), u.end());
  }
  m.train(was_training);
  Metrics r{{"auc", data::auc(scores, labels)}};
  // GAUC needs a user with both a click and a non-click among the n samples; without one
  // (uniform users over a large vocabulary, few samples) it is left out of the metrics.
  std::map<int64_t, int> seen;  // user -> bit 1: a non-click, bit 2: a click
  bool any_group = false;
  for (size_t i = 0; i < users.size() && !any_group; ++i)
    any_group = (seen[users[i]] |= labels[i] ? 2 : 1) == 3;
  if (any_group) r["gauc"] = data::gauc(scores, labels, users);
  return r;
}

std::vector<ModelEntry> make_registry() {
  std::vector<ModelEntry> r;
  ModelEntry din;
  din.name = "din";
  din.infer_defaults = {"--batch-size=256"};  // MODELS.md §1.1
  din.task = "rec";
  din.description =
      "Deep Interest Network as benchmarked by AI Matrix (MODELS.md \xC2\xA7"
      "4.1): attention over the click history, sigmoid MLPs, BN-as-affine";
  din.config = {
      {"size", "full", {"full", "tiny"}, "full: Amazon Electronics vocabularies, emb 64+64; tiny"},
      {"act", "sigmoid", {"sigmoid", "dice"}, "MLP activation (reference: sigmoid)"},
      {"bn", "affine", {"affine", "train"}, "affine: the reference's frozen-BN quirk; train"},
      {"att",
       "fold",
       {"split", "concat", "fold"},
       "attention FC1: fold (q folded into per-row weights, a quarter of the FLOPs) | split "
       "(regrouped weight, half) | concat (reference graph)"}};
  din.data_doc = "a DIN export directory (tools/din_pickle_export.py, docs/din-data.md)";
  din.metrics = {"auc", "gauc"};
  din.build = [](const ModelConfig& c, uint64_t seed) -> std::unique_ptr<Model> {
    DinConfig d = din_config(c);
    d.seed = seed;
    return std::make_unique<Din>(d);
  };
  din.source = din_source;
  din.evaluate = din_evaluate;
  r.push_back(std::move(din));
  add_ncf_model(r);
  add_dien_model(r);
  add_wide_deep_model(r);
  add_vision_models(r);
  add_crnn_model(r);
  add_bert_model(r);
  add_ssd_models(r);
  add_seglink_model(r);
  add_dssd_model(r);
  add_ssd_resnet_models(r);
  add_cpn_model(r);
  add_faster_rcnn_model(r);
  add_gcn_model(r);
  add_deepspeech_model(r);
  add_mask_rcnn_model(r);
  add_nmt_model(r);
  return r;
}

}  // namespace

std::string ModelEntry::config_string(const ModelConfig& c) {
  std::string s;
  for (const auto& [k, v] : c) s += (s.empty() ? "" : ",") + k + "=" + v;
  return s;
}

ModelConfig ModelEntry::parse_config(const std::vector<std::string>& kvs) const {
  ModelConfig c;
  std::string keys;
  for (const ConfigKey& k : config) {
    c[k.key] = k.default_value;
    keys += (keys.empty() ? "" : ", ") + k.key;
  }
  for (const std::string& kv : kvs) {
    const size_t eq = kv.find('=');
    AIM_CHECK(eq != std::string::npos && eq > 0, "--config '", kv, "': expected key=value (", name,
              " keys: ", keys, ")");
    const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
    auto it = std::find_if(config.begin(), config.end(),
                           [&](const ConfigKey& ck) { return ck.key == k; });
    AIM_CHECK(it != config.end(), "--config key '", k, "' is not known to ", name,
              " (allowed: ", keys, ")");
    if (!it->allowed.empty() &&
        std::find(it->allowed.begin(), it->allowed.end(), v) == it->allowed.end()) {
      std::string allowed;
      for (const std::string& a : it->allowed) allowed += (allowed.empty() ? "" : ", ") + a;
      AIM_FAIL("--config ", k, "='", v, "' is not allowed (allowed: ", allowed, ")");
    }
    c[k] = v;
  }
  return c;
}

const std::vector<ModelEntry>& model_registry() {
  static const std::vector<ModelEntry> r = make_registry();
  return r;
}

int64_t config_int(const ModelConfig& c, const std::string& key, int64_t min, int64_t max) {
  const std::string& w = c.at(key);
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(w, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  // stoll skips leading space: " 2" is refused as "2 " is.
  const bool digits = !w.empty() && !std::isspace(static_cast<unsigned char>(w[0]));
  AIM_CHECK(digits && used == w.size() && v >= min && v <= max, "--config ", key, "='", w,
            "': expected ",
            min == 1 ? std::string("a positive integer") : str("an integer >= ", min), " (at most ",
            max, ")");
  return v;
}

double config_number(const ModelConfig& c, const std::string& key, double lo, double hi) {
  const std::string& w = c.at(key);
  AIM_CHECK(w.empty() || !std::isspace(static_cast<unsigned char>(w[0])), "--config ", key, "='", w,
            "': expected a number in [", lo, ", ", hi, "]");
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(w, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  AIM_CHECK(!w.empty() && used == w.size() && v >= lo && v <= hi, "--config ", key, "='", w,
            "': expected a number in [", lo, ", ", hi, "]");
  return v;
}

std::string building_context(const ModelEntry& e, const ModelConfig& c) {
  std::string given;
  for (const ConfigKey& k : e.config) {
    auto it = c.find(k.key);
    if (it != c.end() && it->second != k.default_value)
      given += (given.empty() ? "" : " ") + k.key + "=" + it->second;
  }
  if (given.empty()) return "building " + e.name + " (its default configuration)";
  return "building " + e.name + " with --config " + given + " (the other keys at their defaults)";
}

const ModelEntry& find_model(const std::string& name) {
  std::string names;
  for (const ModelEntry& e : model_registry()) {
    if (e.name == name) return e;
    names += (names.empty() ? "" : ", ") + e.name;
  }
  AIM_FAIL("unknown model '", name, "' (allowed: ", names, "; see --list)");
}

}  // namespace aim::models
