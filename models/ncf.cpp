#include "models/ncf.h"

#include <cmath>
#include <optional>

#include "autograd/functions/dropout.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/embedding.h"
#include "autograd/functions/index.h"
#include "autograd/functions/loss.h"
#include "autograd/functions/matmul.h"
#include "autograd/functions/shape.h"
#include "layers/init.h"
#include "profiler/profiler.h"
#include "tensor/check.h"

namespace aim::models {

namespace ag = aim::autograd;

namespace {

// tf.glorot_uniform_initializer for a [fan_in -> fan_out] kernel stored with `sizes`.
Tensor glorot(const Shape& sizes, int64_t fan_in, int64_t fan_out, kernels::Generator& gen) {
  const double r = std::sqrt(6.0 / double(fan_in + fan_out));
  return layers::uniform_init(sizes, -r, r, gen);
}

}  // namespace

OneHotDense::OneHotDense(int64_t vocab, int64_t channels, kernels::Generator& gen) {
  AIM_CHECK(vocab > 0 && channels > 0, "OneHotDense: sizes must be positive, got ", vocab, " x ",
            channels);
  weight = param("weight", glorot({vocab, channels}, vocab, channels, gen));
  bias = param("bias", Tensor::zeros({channels}));
}

Variable OneHotDense::forward(const Tensor& indices) {
  return ag::relu(ag::add(ag::embedding(weight, indices), bias));
}

Ncf::Ncf(const NcfConfig& cfg) : cfg_(cfg) {
  AIM_CHECK(cfg.n_users > 0 && cfg.n_items > 0 && cfg.emb_dim > 0 && !cfg.mlp_hidden.empty(),
            "Ncf: users, items, emb_dim must be positive and mlp_hidden non-empty");
  const int64_t E = cfg.emb_dim;
  kernels::Generator gen(cfg.seed);
  user_gmf = child("user_gmf", std::make_shared<OneHotDense>(cfg.n_users, E, gen));
  item_gmf = child("item_gmf", std::make_shared<OneHotDense>(cfg.n_items, E, gen));
  user_mlp = child("user_mlp", std::make_shared<OneHotDense>(cfg.n_users, E, gen));
  item_mlp = child("item_mlp", std::make_shared<OneHotDense>(cfg.n_items, E, gen));
  std::vector<int64_t> dims{2 * E};
  dims.insert(dims.end(), cfg.mlp_hidden.begin(), cfg.mlp_hidden.end());
  mlp = child("mlp", layers::make_mlp(dims, "relu", cfg.seed, /*activate_last=*/true));
  predict = child("predict", std::make_shared<layers::Linear>(E + dims.back(), 1, cfg.seed));
  // Re-initialise the FCs as the reference: Glorot-uniform kernels, zero biases.
  std::vector<layers::Linear*> fcs;
  for (const auto& [name, m] : mlp->children())
    if (auto* fc = dynamic_cast<layers::Linear*>(m.get())) fcs.push_back(fc);
  fcs.push_back(predict.get());
  for (layers::Linear* fc : fcs) {
    fc->weight.data().copy_(glorot(fc->weight.sizes(), fc->in_features(), fc->out_features(), gen));
    fc->bias.data().zero_();
  }
}

Variable Ncf::forward(const Tensor& user, const Tensor& item) {
  AIM_CHECK(user.dim() == 1 && item.dim() == 1 && user.size(0) == item.size(0) && user.size(0) > 0,
            "Ncf::forward: user and item must be non-empty [B] tensors of one size, got ",
            to_string(user.sizes()), " and ", to_string(item.sizes()));
  using profiler::Scope;
  using profiler::ScopeKind;
  std::optional<Scope> scope(std::in_place, "gmf", ScopeKind::Layer);
  const Variable gmf = ag::mul(user_gmf->forward(user), item_gmf->forward(item));  // [B, E]
  scope.reset();
  scope.emplace("mlp", ScopeKind::Layer);
  const Variable h =
      mlp->forward(ag::concat({user_mlp->forward(user), item_mlp->forward(item)}, -1));
  scope.reset();
  scope.emplace("predict", ScopeKind::Layer);
  return ag::squeeze(predict->forward(ag::concat({gmf, h}, -1)), -1);  // [B]
}

std::vector<TensorSpec> Ncf::input_specs() const {
  return {{"user", DType::i64, {"B"}, "user id in [0, " + std::to_string(cfg_.n_users) + ")"},
          {"item", DType::i64, {"B"}, "item id in [0, " + std::to_string(cfg_.n_items) + ")"}};
}

std::vector<TensorSpec> Ncf::label_specs() const {
  return {{"label", DType::i64, {"B"}, "interaction (1) or sampled negative (0)"}};
}

std::vector<TensorSpec> Ncf::output_specs() const {
  return {{"logits", DType::f32, {"B"}, "sigmoid logit of an interaction"},
          {"output", DType::f32, {"B"}, "sigmoid(logits): the score ranked for top-10"}};
}

TensorMap Ncf::infer(const TensorMap& batch) {
  check_batch(input_specs(), batch, "ncf inputs");
  const Variable logits = forward(batch.at("user"), batch.at("item"));
  return {{"logits", logits.data()}, {"output", ag::sigmoid(logits).data()}};
}

Variable Ncf::training_loss(const TensorMap& batch) {
  std::vector<TensorSpec> specs = input_specs();
  for (const TensorSpec& s : label_specs()) specs.push_back(s);
  check_batch(specs, batch, "ncf batch");
  return loss(forward(batch.at("user"), batch.at("item")), batch.at("label"));
}

double Ncf::forward_flops(const TensorMap& batch) const {
  return double(batch.at("user").numel()) * flops_per_sample(cfg_);
}

Variable Ncf::loss(const Variable& logits, const Tensor& labels) {
  return ag::bce_with_logits(logits, labels.to(logits.dtype()).reshape(logits.sizes()));
}

double Ncf::flops_per_sample(const NcfConfig& cfg) {
  const double E = double(cfg.emb_dim);
  double f = 4 * (E + E);  // four one-hot layers: gather (0) + bias + ReLU
  f += E;                  // GMF product
  double in = 2 * E;
  for (int64_t o : cfg.mlp_hidden) {
    f += 2 * in * double(o) + double(o);  // FC + ReLU
    in = double(o);
  }
  return f + 2 * (E + in);  // predict FC -> 1
}

std::vector<Model::Fp32Params> Ncf::amp_fp32_params() const {
  return {{"^(user|item)_(gmf|mlp)\\.",
           "the one-hot dense 'embeddings' are tables read by row (embedding + bias + ReLU)"}};
}

}  // namespace aim::models
