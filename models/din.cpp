#include "models/din.h"

#include <cmath>
#include <optional>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/loss.h"
#include "autograd/functions/matmul.h"
#include "autograd/functions/shape.h"
#include "autograd/functions/softmax.h"
#include "layers/activation.h"
#include "profiler/profiler.h"
#include "tensor/check.h"

namespace aim::models {

namespace ag = aim::autograd;

namespace {

constexpr double kBnEps = 1e-3;  // tf.layers.batch_normalization default

std::vector<int64_t> mlp_dims(int64_t in, const std::vector<int64_t>& hidden) {
  std::vector<int64_t> d{in};
  d.insert(d.end(), hidden.begin(), hidden.end());
  d.push_back(1);
  return d;
}

}  // namespace

Din::Din(const DinConfig& cfg) : cfg_(cfg) {
  AIM_CHECK(cfg.n_mid > 0 && cfg.n_cat > 0 && cfg.emb_dim > 0, "Din: sizes must be positive");
  AIM_CHECK(cfg.att_impl == "split" || cfg.att_impl == "concat" || cfg.att_impl == "fold",
            "Din: att_impl must be split, concat or fold, got \"", cfg.att_impl, "\"");
  AIM_CHECK(cfg.act == "sigmoid" || cfg.act == "dice", "Din: act must be sigmoid or dice, got \"",
            cfg.act, "\"");
  const int64_t E = cfg.emb_dim, H = cfg.hidden();
  item_b = param("item_b", Tensor::zeros({cfg.n_mid}));
  item_emb = child("item_emb",
                   std::make_shared<layers::Embedding>(cfg.n_mid, E, std::nullopt, cfg.seed + 1));
  cate_emb = child("cate_emb",
                   std::make_shared<layers::Embedding>(cfg.n_cat, E, std::nullopt, cfg.seed + 2));
  att = child("att", layers::make_mlp(mlp_dims(4 * H, cfg.att_hidden), cfg.act, cfg.seed + 10));
  hist_bn = child("hist_bn", std::make_shared<layers::BatchNorm1d>(H, kBnEps));
  hist_fcn = child("hist_fcn", std::make_shared<layers::Linear>(H, H, cfg.seed + 20));
  b1 = child("b1", std::make_shared<layers::BatchNorm1d>(2 * H, kBnEps));
  // Reference quirk unless bn=train: moving statistics fixed at mean 0, variance 1.
  hist_bn->set_unit_statistics(!cfg.bn_train);
  b1->set_unit_statistics(!cfg.bn_train);
  mlp = child("mlp", layers::make_mlp(mlp_dims(2 * H, cfg.mlp_hidden), cfg.act, cfg.seed + 30));
}

Variable Din::attention_scores(const Variable& q, const Variable& k) {
  const int64_t B = k.size(0), T = k.size(1), H = cfg_.hidden();
  auto qe = [&] { return ag::expand(ag::unsqueeze(q, 1), {B, T, H}); };  // q per position
  if (cfg_.att_impl == "concat") {
    const Variable e = qe();
    return att->forward(ag::concat({e, k, ag::sub(e, k), ag::mul(e, k)}, -1));  // [B,T,4H]
  }
  const auto& layers = att->children();
  const auto* fc1 = static_cast<const layers::Linear*>(layers.front().second.get());
  const Variable& w = fc1->weight;  // [A, 4H]
  const Variable wd = ag::slice(w, 1, 2 * H, 3 * H);
  const Variable w_q = ag::add(ag::slice(w, 1, 0, H), wd);                   // [A, H]
  const Variable w_k = ag::sub(ag::slice(w, 1, H, 2 * H), wd);               // [A, H]
  const Variable w_p = ag::slice(w, 1, 3 * H, 4 * H);                        // [A, H]
  const Variable per_row = ag::unsqueeze(ag::linear(q, w_q, fc1->bias), 1);  // [B,1,A]
  Variable per_pos;                                                          // [B,T,A]
  if (cfg_.att_impl == "fold") {
    // Per row b: W_b' = w_k' + q_b w_p' (q_b scaling each row h), then k_b W_b'. Built as
    // [B, H, A] (not W_b [B, A, H] with a transposed product): the GEMM then reads its rows of A
    // = 80 floats in place instead of transposing each row's 40 KB operand while packing it.
    auto t = [](const Variable& w) { return ag::contiguous(ag::transpose(w, 0, 1)); };  // [H,A]
    const Variable w_bt =
        ag::add(ag::unsqueeze(t(w_k), 0),
                ag::mul(ag::unsqueeze(q, 2), ag::unsqueeze(t(w_p), 0)));  // [B,H,A]
    per_pos = ag::matmul(k, w_bt);
  } else {
    per_pos = ag::linear(ag::concat({k, ag::mul(qe(), k)}, -1), ag::concat({w_k, w_p}, 1));
  }
  Variable x = ag::add(per_pos, per_row);
  for (size_t i = 1; i < layers.size(); ++i) x = layers[i].second->forward(x);
  return x;
}

Variable Din::forward(const data::RecBatch& b) {
  const int64_t B = b.batch_size(), T = b.max_len(), H = cfg_.hidden();
  AIM_CHECK(B > 0 && T > 0, "Din::forward: empty batch or history");
  using profiler::Scope;
  using profiler::ScopeKind;
  std::optional<Scope> scope(std::in_place, "emb", ScopeKind::Layer);
  const Variable q = layers::embedding_cat({item_emb.get(), cate_emb.get()}, {b.item, b.cate});
  const Variable k =
      layers::embedding_cat({item_emb.get(), cate_emb.get()}, {b.hist_item, b.hist_cate});
  scope.reset();
  scope.emplace("att", ScopeKind::Layer);
  const Variable qe = ag::expand(ag::unsqueeze(q, 1), {B, T, H});
  Variable s = ag::squeeze(attention_scores(q, k), -1);  // [B,T]
  s = ag::mul(s, 1.0 / std::sqrt(double(H)));
  const Tensor keep =
      ag::gt(Variable(b.mask), Variable(Tensor::zeros({1}, b.mask.dtype(), b.mask.device())));
  const Variable w = ag::softmax(s, 1, keep);                             // [B,T]
  const Variable h = ag::squeeze(ag::matmul(ag::unsqueeze(w, 1), k), 1);  // [B,H]
  scope.reset();
  scope.emplace("hist_fcn", ScopeKind::Layer);
  const Variable u = hist_fcn->forward(hist_bn->forward(h));
  scope.reset();
  scope.emplace("mlp", ScopeKind::Layer);
  const Variable out = ag::squeeze(mlp->forward(b1->forward(ag::concat({u, q}, -1))), -1);  // [B]
  return ag::add(out, ag::index_select(item_b, 0, b.item));
}

std::vector<TensorSpec> Din::input_specs() const {
  const std::string nm = std::to_string(cfg_.n_mid), nc = std::to_string(cfg_.n_cat);
  return {{"item", DType::i64, {"B"}, "candidate item id in [0, " + nm + ")"},
          {"cate", DType::i64, {"B"}, "candidate category id in [0, " + nc + ")"},
          {"hist_item", DType::i64, {"B", "T"}, "history item ids, oldest first, 0-padded"},
          {"hist_cate", DType::i64, {"B", "T"}, "history category ids, 0-padded"},
          {"mask", DType::f32, {"B", "T"}, "1 = real history position, 0 = padding"}};
}

std::vector<TensorSpec> Din::label_specs() const {
  return {{"label", DType::i64, {"B"}, "click (1) or not (0)"}};
}

std::vector<TensorSpec> Din::output_specs() const {
  return {{"logits", DType::f32, {"B"}, "sigmoid logit of a click"},
          {"output", DType::f32, {"B"}, "click probability = sigmoid(logits)"}};
}

TensorMap Din::infer(const TensorMap& batch) {
  check_batch(input_specs(), batch, "din inputs");
  const Variable logits = forward(data::RecBatch::from_map(batch));
  return {{"logits", logits.data()}, {"output", ag::sigmoid(logits).data()}};
}

namespace {
bool is_history(const std::string& name) {
  return name == "hist_item" || name == "hist_cate" || name == "mask";
}
}  // namespace

Shape Din::padded_shape(const std::string& name, const Shape& shape) const {
  if (!is_history(name) || cfg_.act == "dice" || shape.size() != 2) return shape;
  return {shape[0], (shape[1] + 7) / 8 * 8};
}

TensorMap Din::pad_batch(const TensorMap& batch, const std::map<std::string, Shape>& shapes) const {
  TensorMap r = batch;
  if (cfg_.act != "dice") {
    for (auto& [k, t] : r) {
      auto it = shapes.find(k);
      if (!is_history(k) || it == shapes.end() || it->second == t.sizes()) continue;
      const Shape& want = it->second;
      AIM_CHECK(t.dim() == 2 && want.size() == 2 && want[0] == t.size(0) && want[1] >= t.size(1),
                "din: cannot pad ", k, " ", to_string(t.sizes()), " to ", to_string(want));
      Tensor p = Tensor::zeros(want, t.dtype());  // id 0 and mask 0: positions of weight 0
      p.slice(1, 0, t.size(1)).copy_(t);
      t = p;
    }
  }
  return Model::pad_batch(r, shapes);  // the rest must match
}

Variable Din::training_loss(const TensorMap& batch) {
  std::vector<TensorSpec> specs = input_specs();
  for (const TensorSpec& s : label_specs()) specs.push_back(s);
  check_batch(specs, batch, "din batch");
  const data::RecBatch b = data::RecBatch::from_map(batch);
  return loss(forward(b), b.label);
}

double Din::forward_flops(const TensorMap& batch) const {
  const Tensor& h = batch.at("hist_item");
  return double(h.size(0)) * flops_per_sample(cfg_, h.size(1), is_training());
}

Variable Din::loss(const Variable& logits, const Tensor& labels) {
  return ag::bce_with_logits(logits, labels.to(logits.dtype()).reshape(logits.sizes()));
}

double Din::flops_per_sample(const DinConfig& cfg, int64_t T, bool training) {
  const double H = double(cfg.hidden()), t = double(T);
  // Per activated element: sigmoid 4; Dice = normalise (eval: subtract, scale; training: the
  // batch mean, subtract, square, variance, scale) + sigmoid 4 + p*x + (1-p)*alpha*x (6).
  // Dice's per-channel [C] terms (rsqrt of the variance) are per batch, left out.
  const double act = cfg.act == "dice" ? (training ? 15.0 : 12.0) : 4.0;
  auto mlp_flops = [&](double in, const std::vector<int64_t>& hidden) {
    double f = 0, d = in;
    for (int64_t o : hidden) {
      f += 2 * d * double(o) + act * double(o);
      d = double(o);
    }
    return f + 2 * d;  // last FC -> 1
  };
  double f = 0;
  if (cfg.att_impl == "concat") {
    f += 2 * t * H;                             // q - k, q * k
    f += t * mlp_flops(4 * H, cfg.att_hidden);  // attention MLP per position
  } else {
    const double a1 = double(cfg.att_hidden.front());
    if (cfg.att_impl == "fold") {
      f += 2 * H * a1 + 2 * H * a1 + t * (2 * H * a1 + a1);  // per-row weights, per-row part,
                                                             // per-position part, add
    } else {
      f += t * H;                                   // q * k
      f += 2 * H * a1 + t * (2 * 2 * H * a1 + a1);  // per-row FC1 part, per-position part, add
    }
    f += t * (act * a1 + mlp_flops(a1, {cfg.att_hidden.begin() + 1, cfg.att_hidden.end()}));
  }
  f += t + 5 * t;                                     // scale, masked softmax
  f += 2 * t * H;                                     // weighted sum of keys
  f += 3 * H + 2 * H * H;                             // BN affine, hist_fcn
  f += 3 * 2 * H + mlp_flops(2 * H, cfg.mlp_hidden);  // BN affine, scoring MLP
  return f + 1;                                       // + item bias
}

std::vector<Model::Fp32Params> Din::amp_fp32_params() const {
  return {{"^(item|cate)_emb\\.",
           "embedding tables: rows are gathered, not multiplied; f32 keeps Adam's small updates"}};
}

}  // namespace aim::models
