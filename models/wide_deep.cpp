#include "models/wide_deep.h"

#include <cmath>
#include <optional>

#include "autograd/functions/dropout.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/loss.h"
#include "autograd/functions/shape.h"
#include "data/census.h"
#include "layers/init.h"
#include "profiler/profiler.h"
#include "tensor/check.h"

namespace aim::models {

namespace ag = aim::autograd;

namespace {
Tensor glorot(const Shape& sizes, int64_t fan_in, int64_t fan_out, kernels::Generator& gen) {
  const double r = std::sqrt(6.0 / double(fan_in + fan_out));
  return layers::uniform_init(sizes, -r, r, gen);
}
}  // namespace

WideLinear::WideLinear() {
  bag = child("bag", std::make_shared<layers::EmbeddingBag>(data::kWideRows, 1,
                                                            layers::BagMode::sum, data::kWidePad));
  bag->weight.data().zero_();  // TF's linear model starts at zero
  bias = param("bias", Tensor::zeros({1}));
}

Variable WideLinear::forward(const Tensor& ids) {
  AIM_CHECK(ids.dim() == 2 && ids.size(1) == data::kCensusWideColumns,
            "WideLinear: wide ids must be [B, ", data::kCensusWideColumns, "], got ",
            to_string(ids.sizes()));
  return ag::add(bag->forward(ids), bias);
}

WideDeepDeep::WideDeepDeep(const WideDeepConfig& cfg, kernels::Generator& gen) {
  embedding = child("embedding", std::make_shared<layers::Embedding>(data::kCensusHashBuckets,
                                                                     cfg.occupation_dim));
  embedding->weight.data().copy_(
      layers::normal_init({data::kCensusHashBuckets, cfg.occupation_dim}, 0.0,
                          1.0 / std::sqrt(double(cfg.occupation_dim)), gen));
  std::vector<int64_t> dims{data::kCensusDense + cfg.occupation_dim};
  dims.insert(dims.end(), cfg.hidden.begin(), cfg.hidden.end());
  mlp = child("mlp", layers::make_mlp(dims, "relu", cfg.seed, /*activate_last=*/true));
  logits = child("logits", std::make_shared<layers::Linear>(dims.back(), 1, cfg.seed));
  std::vector<layers::Linear*> fcs;
  for (const auto& [name, m] : mlp->children())
    if (auto* fc = dynamic_cast<layers::Linear*>(m.get())) fcs.push_back(fc);
  fcs.push_back(logits.get());
  for (layers::Linear* fc : fcs) {
    fc->weight.data().copy_(glorot(fc->weight.sizes(), fc->in_features(), fc->out_features(), gen));
    fc->bias.data().zero_();
  }
}

Variable WideDeepDeep::forward(const Tensor& dense, const Tensor& occupation) {
  return logits->forward(
      mlp->forward(ag::concat({Variable(dense), embedding->forward(occupation)}, -1)));
}

Variable WideDeepDeep::forward(const Variable&) {
  AIM_FAIL("WideDeepDeep takes (dense, occupation): call forward(dense, occupation)");
}

WideDeep::WideDeep(const WideDeepConfig& cfg) : cfg_(cfg) {
  AIM_CHECK(!cfg.hidden.empty() && cfg.occupation_dim > 0,
            "WideDeep: hidden must be non-empty and occupation_dim positive");
  kernels::Generator gen(cfg.seed);
  wide = child("wide", std::make_shared<WideLinear>());
  deep = child("deep", std::make_shared<WideDeepDeep>(cfg, gen));
}

Variable WideDeep::forward(const Tensor& wide_ids, const Tensor& dense, const Tensor& occupation) {
  const int64_t b = wide_ids.dim() == 2 ? wide_ids.size(0) : -1;
  AIM_CHECK(b > 0 && dense.dim() == 2 && dense.size(0) == b &&
                dense.size(1) == data::kCensusDense && occupation.dim() == 1 &&
                occupation.size(0) == b,
            "WideDeep::forward: expected wide [B, 8], dense [B, 43], occupation [B], got ",
            to_string(wide_ids.sizes()), ", ", to_string(dense.sizes()), ", ",
            to_string(occupation.sizes()));
  using profiler::Scope;
  using profiler::ScopeKind;
  std::optional<Scope> scope(std::in_place, "wide", ScopeKind::Layer);
  const Variable w = wide->forward(wide_ids);
  scope.reset();
  scope.emplace("deep", ScopeKind::Layer);
  const Variable d = deep->forward(dense, occupation);
  scope.reset();
  return ag::squeeze(ag::add(w, d), -1);
}

std::vector<TensorSpec> WideDeep::input_specs() const {
  return {{"wide", DType::i64, {"B", "8"}, "wide-column row ids in [0, 3050) (data/census.h)"},
          {"dense", DType::f32, {"B", "43"}, "5 raw numerics + one-hots of 4 vocab columns"},
          {"occupation", DType::i64, {"B"}, "occupation hash bucket in [0, 1000)"}};
}

std::vector<TensorSpec> WideDeep::label_specs() const {
  return {{"label", DType::i64, {"B"}, "income_bracket == \">50K\" (1) or not (0)"}};
}

std::vector<TensorSpec> WideDeep::output_specs() const {
  return {{"logits", DType::f32, {"B"}, "logit of >50K (wide + deep)"},
          {"output", DType::f32, {"B"}, "sigmoid(logits): probability of >50K"}};
}

TensorMap WideDeep::infer(const TensorMap& batch) {
  check_batch(input_specs(), batch, "wide_deep inputs");
  const Variable logits = forward(batch.at("wide"), batch.at("dense"), batch.at("occupation"));
  return {{"logits", logits.data()}, {"output", ag::sigmoid(logits).data()}};
}

Variable WideDeep::training_loss(const TensorMap& batch) {
  std::vector<TensorSpec> specs = input_specs();
  for (const TensorSpec& s : label_specs()) specs.push_back(s);
  check_batch(specs, batch, "wide_deep batch");
  return loss(forward(batch.at("wide"), batch.at("dense"), batch.at("occupation")),
              batch.at("label"));
}

double WideDeep::forward_flops(const TensorMap& batch) const {
  return double(batch.at("occupation").numel()) * flops_per_sample();
}

Variable WideDeep::loss(const Variable& logits, const Tensor& labels) {
  return ag::bce_with_logits(logits, labels.to(logits.dtype()).reshape(logits.sizes()));
}

double WideDeep::flops_per_sample() const {
  double f = wide->bag->flops(data::kCensusWideColumns, 1, /*fixed_bags=*/true,
                              /*per_sample_weights=*/false);
  f += 1;  // + wide bias
  double in = double(data::kCensusDense + cfg_.occupation_dim);
  for (int64_t o : cfg_.hidden) {
    f += 2 * in * double(o) + double(o);
    in = double(o);
  }
  f += 2 * in;   // logits FC -> 1
  return f + 1;  // wide + deep
}

std::vector<Model::Fp32Params> WideDeep::amp_fp32_params() const {
  return {{"^wide\\.", "the wide part: FTRL over sparse crossed features, a sum of a few weights"},
          {"^deep\\.embedding\\.", "the occupation embedding table"}};
}

}  // namespace aim::models
