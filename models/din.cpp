#include "models/din.h"

#include <cmath>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/matmul.h"
#include "autograd/functions/nn.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "layers/activation.h"
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
  mlp = child("mlp", layers::make_mlp(mlp_dims(2 * H, cfg.mlp_hidden), cfg.act, cfg.seed + 30));
}

Variable Din::bn(const std::shared_ptr<layers::BatchNorm1d>& m, const Variable& x) {
  if (cfg_.bn_train) return m->forward(x);
  // Reference quirk: moving stats fixed at mean 0, var 1 -> weight * x / sqrt(1 + eps) + bias.
  return ag::add(ag::mul(ag::mul(x, m->weight), 1.0 / std::sqrt(1.0 + kBnEps)), m->bias);
}

Variable Din::forward(const data::RecBatch& b) {
  const int64_t B = b.batch_size(), T = b.max_len(), H = cfg_.hidden();
  AIM_CHECK(B > 0 && T > 0, "Din::forward: empty batch or history");
  const Variable q = ag::concat({item_emb->forward(b.item), cate_emb->forward(b.cate)}, -1);
  const Variable k =
      ag::concat({item_emb->forward(b.hist_item), cate_emb->forward(b.hist_cate)}, -1);
  const Variable qe = ag::expand(ag::unsqueeze(q, 1), {B, T, H});
  const Variable din_all = ag::concat({qe, k, ag::sub(qe, k), ag::mul(qe, k)}, -1);  // [B,T,4H]
  Variable s = ag::squeeze(att->forward(din_all), -1);                               // [B,T]
  s = ag::mul(s, 1.0 / std::sqrt(double(H)));
  const Tensor keep =
      ag::gt(Variable(b.mask), Variable(Tensor::zeros({1}, b.mask.dtype(), b.mask.device())));
  const Variable w = ag::softmax(s, 1, keep);                             // [B,T]
  const Variable h = ag::squeeze(ag::matmul(ag::unsqueeze(w, 1), k), 1);  // [B,H]
  const Variable u = hist_fcn->forward(bn(hist_bn, h));
  const Variable out = ag::squeeze(mlp->forward(bn(b1, ag::concat({u, q}, -1))), -1);  // [B]
  return ag::add(out, ag::index_select(item_b, 0, b.item));
}

Variable Din::loss(const Variable& logits, const Tensor& labels) {
  return ag::bce_with_logits(logits, labels.to(logits.dtype()).reshape(logits.sizes()));
}

double Din::flops_per_sample(const DinConfig& cfg, int64_t T) {
  const double H = double(cfg.hidden()), t = double(T);
  const double act = cfg.act == "dice" ? 10.0 : 4.0;
  auto mlp_flops = [&](double in, const std::vector<int64_t>& hidden) {
    double f = 0, d = in;
    for (int64_t o : hidden) {
      f += 2 * d * double(o) + act * double(o);
      d = double(o);
    }
    return f + 2 * d;  // last FC -> 1
  };
  double f = 2 * t * H;                               // q - k, q * k
  f += t * mlp_flops(4 * H, cfg.att_hidden);          // attention MLP per position
  f += t + 5 * t;                                     // scale, masked softmax
  f += 2 * t * H;                                     // weighted sum of keys
  f += 3 * H + 2 * H * H;                             // BN affine, hist_fcn
  f += 3 * 2 * H + mlp_flops(2 * H, cfg.mlp_hidden);  // BN affine, scoring MLP
  return f + 1;                                       // + item bias
}

}  // namespace aim::models
