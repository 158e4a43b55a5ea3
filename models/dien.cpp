#include "models/dien.h"

#include <cmath>
#include <optional>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/matmul.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "autograd/functions/softmax.h"
#include "profiler/profiler.h"
#include "tensor/check.h"

namespace aim::models {

namespace ag = aim::autograd;

namespace {

constexpr double kBnEps = 1e-3;     // tf.layers.batch_normalization default
constexpr double kProbEps = 1e-8;   // the reference's softmax(...) + 0.00000001
constexpr double kPreluInit = 0.1;  // utils.prelu's alpha initialiser

std::vector<int64_t> mlp_dims(int64_t in, const std::vector<int64_t>& hidden, int64_t out) {
  std::vector<int64_t> d{in};
  d.insert(d.end(), hidden.begin(), hidden.end());
  d.push_back(out);
  return d;
}

const Tensor& get(const TensorMap& b, const char* name) {
  auto it = b.find(name);
  AIM_CHECK(it != b.end() && it->second.defined(), "dien batch: missing tensor '", name, "'");
  return it->second;
}

// Click labels on the host are 0 or 1 (the CTR target is one-hot [y, 1 - y]).
void check_labels(const Tensor& labels) {
  const std::vector<int64_t> yv = labels.to(DType::i64).contiguous().to_vector<int64_t>();
  for (size_t i = 0; i < yv.size(); ++i)
    AIM_CHECK(yv[i] == 0 || yv[i] == 1, "Dien::ctr_loss: label[", i, "] is ", yv[i],
              ", expected 0 or 1");
}

// Real lengths [B] i64 on the CPU from mask [B, T]: each row must be 1s then 0s, at least one 1.
Tensor lengths_from_mask(const Tensor& mask) {
  const int64_t B = mask.size(0), T = mask.size(1);
  const std::vector<float> m = mask.to(kCPU).to(DType::f32).contiguous().to_vector<float>();
  std::vector<int64_t> len(size_t(B), 0);
  for (int64_t b = 0; b < B; ++b) {
    int64_t n = 0;
    while (n < T && m[size_t(b * T + n)] != 0.0f) ++n;
    for (int64_t t = n; t < T; ++t)
      AIM_CHECK(m[size_t(b * T + t)] == 0.0f, "dien: mask row ", b,
                " is not 1s followed by 0s (position ", t, " is ", m[size_t(b * T + t)],
                " after padding began at ", n, ")");
    AIM_CHECK(n >= 1, "dien: mask row ", b, " has no real history position (need length >= 1)");
    len[size_t(b)] = n;
  }
  return Tensor::from_vector(len, {B});
}

// Kernels' cost of the MLP dims[0] -> ... -> dims.back() with `act` FLOPs per hidden element.
double mlp_flops(const std::vector<int64_t>& dims, double act) {
  double f = 0;
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    f += 2.0 * double(dims[i]) * double(dims[i + 1]);
    if (i + 2 < dims.size()) f += act * double(dims[i + 1]);
  }
  return f;
}

}  // namespace

// ---- DienDice --------------------------------------------------------------------------------

DienDice::DienDice(int64_t channels, double eps)
    : alpha(param("alpha", Tensor::zeros({channels}))), channels_(channels), eps_(eps) {}

Variable DienDice::forward(const Variable& x) {
  AIM_CHECK(x.defined() && x.dim() >= 2 && x.size(-1) == channels_, "DienDice: expected x [..., ",
            channels_, "], got ", to_string(x.sizes()));
  std::vector<int64_t> dims;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) dims.push_back(d);
  const Variable mean = ag::mean(x, dims, /*keepdim=*/true);
  const Variable d = ag::sub(x, mean);
  const Variable var = ag::mean(ag::add(ag::square(d), eps_), dims, true);
  const Variable p = ag::sigmoid(ag::div(d, ag::add(ag::sqrt(var), eps_)));
  const Variable ax = ag::mul(x, alpha);  // alpha (1 - p) x + p x = ax + p (x - ax)
  return ag::add(ax, ag::mul(p, ag::sub(x, ax)));
}

double DienDice::flops(double n, double c) {
  // mean, subtract, square, + eps, mean (n each), sqrt and + eps per channel, divide,
  // sigmoid (4), alpha x, x - ax, p (.), + (n each).
  return 5 * n + 2 * c + n + 4 * n + 4 * n;
}

// ---- Dien ------------------------------------------------------------------------------------

Dien::Dien(const DienConfig& cfg) : cfg_(cfg) {
  AIM_CHECK(cfg.n_uid > 0 && cfg.n_mid > 0 && cfg.n_cat > 0 && cfg.emb_dim > 0 && cfg.hidden > 0,
            "Dien: sizes must be positive");
  AIM_CHECK(cfg.mlp_hidden.size() == 2, "Dien: mlp_hidden must have 2 sizes (f1, f2), got ",
            cfg.mlp_hidden.size());
  const int64_t E = cfg.emb_dim, D = cfg.item_dim(), H = cfg.hidden;
  uid_emb = child("uid_emb",
                  std::make_shared<layers::Embedding>(cfg.n_uid, E, std::nullopt, cfg.seed + 1));
  mid_emb = child("mid_emb",
                  std::make_shared<layers::Embedding>(cfg.n_mid, E, std::nullopt, cfg.seed + 2));
  cat_emb = child("cat_emb",
                  std::make_shared<layers::Embedding>(cfg.n_cat, E, std::nullopt, cfg.seed + 3));
  layers::RnnOptions ro;
  ro.batch_first = true;
  ro.linear_before_reset = false;  // TensorFlow's GRUCell
  gru = child("gru", std::make_shared<layers::GRU>(D, H, ro, cfg.seed + 4));
  {
    // TF GRUCell initialises the gate (r, z) biases to 1 and the candidate bias to 0.
    std::vector<float> b(size_t(3 * H), 0.0f);
    for (int64_t i = 0; i < 2 * H; ++i) b[size_t(i)] = 1.0f;
    const layers::StateDict sd = {{"bias_ih_l0", Tensor::from_vector(b, {3 * H})},
                                  {"bias_hh_l0", Tensor::zeros({3 * H})}};
    gru->load_state_dict(sd, /*strict=*/false);
  }
  aux_bn = child("aux_bn", std::make_shared<layers::BatchNorm1d>(H + D, kBnEps));
  aux =
      child("aux", layers::make_mlp(mlp_dims(H + D, cfg.aux_hidden, 2), "sigmoid", cfg.seed + 10));
  att_q = child("att_q", std::make_shared<layers::Linear>(D, H, cfg.seed + 20));
  att_prelu = child("att_prelu", std::make_shared<layers::PReLU>(H, kPreluInit));
  att =
      child("att", layers::make_mlp(mlp_dims(4 * H, cfg.att_hidden, 1), "sigmoid", cfg.seed + 30));
  layers::AugruOptions ao;
  ao.batch_first = true;
  augru = child("augru", std::make_shared<layers::AUGRU>(H, H, ao, cfg.seed + 40));
  bn1 = child("bn1", std::make_shared<layers::BatchNorm1d>(cfg.head_in(), kBnEps));
  f1 = child("f1",
             std::make_shared<layers::Linear>(cfg.head_in(), cfg.mlp_hidden[0], cfg.seed + 50));
  dice1 = child("dice1", std::make_shared<DienDice>(cfg.mlp_hidden[0]));
  f2 = child("f2",
             std::make_shared<layers::Linear>(cfg.mlp_hidden[0], cfg.mlp_hidden[1], cfg.seed + 51));
  dice2 = child("dice2", std::make_shared<DienDice>(cfg.mlp_hidden[1]));
  f3 = child("f3", std::make_shared<layers::Linear>(cfg.mlp_hidden[1], 2, cfg.seed + 52));
}

Variable Dien::bn(const std::shared_ptr<layers::BatchNorm1d>& m, const Variable& x) {
  // Reference quirk: moving stats fixed at mean 0, var 1 -> weight * x / sqrt(1 + eps) + bias.
  return ag::add(ag::mul(ag::mul(x, m->weight), 1.0 / std::sqrt(1.0 + kBnEps)), m->bias);
}

Dien::Out Dien::forward(const TensorMap& b) {
  const Tensor& mask = get(b, "mask");
  const int64_t B = mask.size(0), T = mask.size(1), H = cfg_.hidden;
  AIM_CHECK(B > 0 && T > 0, "Dien::forward: empty batch or history");
  // The GRU/AUGRU loops need the lengths on the host: host_metadata's, else read from the mask
  // (a device-to-host read when the batch did not come through batch_to_device).
  auto hl = b.find("hist_len");
  const Tensor lengths = hl != b.end() && hl->second.device().is_cpu() && hl->second.size(0) == B
                             ? hl->second
                             : lengths_from_mask(mask);
  using profiler::Scope;
  using profiler::ScopeKind;
  std::optional<Scope> scope(std::in_place, "emb", ScopeKind::Layer);
  const Variable u = uid_emb->forward(get(b, "uid"));
  const Variable q =
      layers::embedding_cat({mid_emb.get(), cat_emb.get()}, {get(b, "item"), get(b, "cate")});
  const Variable e = layers::embedding_cat({mid_emb.get(), cat_emb.get()},
                                           {get(b, "hist_item"), get(b, "hist_cate")});
  const Variable s = ag::sum(e, {1});  // unmasked, as the reference
  scope.reset();
  scope.emplace("gru", ScopeKind::Layer);
  const Variable h = gru->forward(e, lengths).output;  // [B, T, H]
  scope.reset();
  scope.emplace("att", ScopeKind::Layer);
  const Variable qa = att_prelu->forward(att_q->forward(q));  // [B, H]
  const Variable qe = ag::expand(ag::unsqueeze(qa, 1), {B, T, H});
  const Variable sc =
      ag::squeeze(att->forward(ag::concat({qe, h, ag::sub(qe, h), ag::mul(qe, h)}, -1)), -1);
  const Tensor keep =
      ag::gt(Variable(mask), Variable(Tensor::zeros({1}, mask.dtype(), mask.device())));
  const Variable a = ag::softmax(sc, 1, keep);  // [B, T]
  scope.reset();
  scope.emplace("augru", ScopeKind::Layer);
  const Variable f = augru->forward(h, a, lengths).h_n;  // [B, H]
  scope.reset();
  scope.emplace("head", ScopeKind::Layer);
  const Variable x = bn(bn1, ag::concat({u, q, s, ag::mul(q, s), f}, -1));
  const Variable logits = f3->forward(dice2->forward(f2->forward(dice1->forward(f1->forward(x)))));
  return Out{logits, h, e};
}

Variable Dien::aux_loss(const Out& o, const TensorMap& b) {
  const Tensor& mask = get(b, "mask");
  const int64_t T = mask.size(1);
  if (T < 2) return Variable(Tensor::zeros({}, o.logits.dtype(), o.logits.device()));
  profiler::Scope scope("aux", profiler::ScopeKind::Layer);
  const Variable neg = layers::embedding_cat({mid_emb.get(), cat_emb.get()},
                                             {get(b, "noclk_item"), get(b, "noclk_cate")});
  const Variable hs = ag::slice(o.gru, 1, 0, T - 1);  // h_t, t < T - 1
  auto prob0 = [&](const Variable& next) {            // p(click) of (h_t, x_{t+1})
    const Variable in = bn(aux_bn, ag::concat({hs, ag::slice(next, 1, 1, T)}, -1));
    const Variable p = ag::softmax(aux->forward(in), -1);               // [B, T-1, 2]
    return ag::add(ag::squeeze(ag::slice(p, -1, 0, 1), -1), kProbEps);  // [B, T-1]
  };
  const Variable pc = prob0(o.hist), pn = prob0(neg);
  const Variable m(mask.slice(1, 1, T));
  // -log(pc) - log(1 - pn), masked, mean over all B x (T-1) positions (reference).
  const Variable l = ag::add(ag::log(pc), ag::log(ag::add(ag::neg(pn), 1.0)));
  return ag::neg(ag::mean(ag::mul(l, m)));
}

Variable Dien::ctr_loss(const Variable& logits, const Tensor& labels) {
  AIM_CHECK(logits.dim() == 2 && logits.size(1) == 2, "Dien::ctr_loss: logits must be [B, 2], got ",
            to_string(logits.sizes()));
  const int64_t B = logits.size(0);
  AIM_CHECK(labels.numel() == B, "Dien::ctr_loss: label has ", labels.numel(),
            " elements, expected B = ", B);
  // The reference's one-hot target [y, 1 - y], made where the labels are. The 0/1 check runs on
  // the host: here for host labels, in host_metadata() for a batch moved by batch_to_device.
  if (labels.device().is_cpu()) check_labels(labels);
  const Tensor y = labels.to(logits.dtype()).to(logits.device());
  const Variable yc = ag::unsqueeze(Variable(y.contiguous().view({B})), 1);  // [B, 1]
  const Variable target(ag::concat({yc, ag::add(ag::neg(yc), 1.0)}, 1).data());
  const Variable lp = ag::log(ag::add(ag::softmax(logits, 1), kProbEps));
  return ag::neg(ag::mean(ag::mul(lp, target)));
}

std::vector<TensorSpec> Dien::input_specs() const {
  const std::string nu = std::to_string(cfg_.n_uid), nm = std::to_string(cfg_.n_mid),
                    nc = std::to_string(cfg_.n_cat);
  return {{"uid", DType::i64, {"B"}, "user id in [0, " + nu + ")"},
          {"item", DType::i64, {"B"}, "candidate item id in [0, " + nm + ")"},
          {"cate", DType::i64, {"B"}, "candidate category id in [0, " + nc + ")"},
          {"hist_item", DType::i64, {"B", "T"}, "clicked item ids, oldest first, 0-padded"},
          {"hist_cate", DType::i64, {"B", "T"}, "clicked items' category ids, 0-padded"},
          {"mask", DType::f32, {"B", "T"}, "1 = real history position, 0 = padding (1s then 0s)"}};
}

std::vector<TensorSpec> Dien::label_specs() const {
  return {{"label", DType::i64, {"B"}, "click (1) or not (0)"},
          {"noclk_item", DType::i64, {"B", "T"}, "sampled non-clicked item per history position"},
          {"noclk_cate", DType::i64, {"B", "T"}, "category of noclk_item"}};
}

std::vector<TensorSpec> Dien::output_specs() const {
  return {{"logits", DType::f32, {"B", "2"}, "2-way softmax logits, column 0 = click"},
          {"output", DType::f32, {"B"}, "click probability = softmax(logits)[:, 0]"}};
}

TensorMap Dien::host_metadata(const TensorMap& host_batch) const {
  auto it = host_batch.find("mask");
  if (it == host_batch.end() || !it->second.defined()) return {};
  if (auto l = host_batch.find("label"); l != host_batch.end() && l->second.defined())
    check_labels(l->second);
  return {{"hist_len", lengths_from_mask(it->second)}};  // checked here, on the host
}

TensorMap Dien::infer(const TensorMap& batch) {
  check_batch(input_specs(), batch, "dien inputs");
  const Variable logits = forward(batch).logits;
  const Variable p = ag::squeeze(ag::slice(ag::softmax(logits, 1), 1, 0, 1), 1);
  return {{"logits", logits.data()}, {"output", p.data()}};
}

Variable Dien::training_loss(const TensorMap& batch) {
  std::vector<TensorSpec> specs = input_specs();
  for (const TensorSpec& s : label_specs()) specs.push_back(s);
  check_batch(specs, batch, "dien batch");
  const Out o = forward(batch);
  const Variable ctr = ctr_loss(o.logits, get(batch, "label"));
  return ag::add(ctr, ag::mul(aux_loss(o, batch), cfg_.aux_weight));
}

double Dien::forward_flops(const TensorMap& batch) const {
  const Tensor& h = get(batch, "hist_item");
  return double(h.size(0)) * flops_per_sample(cfg_, h.size(1), is_training()) +
         DienDice::flops(0, double(cfg_.mlp_hidden[0])) +
         DienDice::flops(0, double(cfg_.mlp_hidden[1]));
}

double Dien::flops_per_sample(const DienConfig& cfg, int64_t T, bool with_aux) {
  const double D = double(cfg.item_dim()), H = double(cfg.hidden), t = double(T);
  auto rnn = [&](double in) {  // rnn_fwd_cost per sample: G = 3 gates
    return t * (2 * 3 * H * (in + H) + 25 * H);
  };
  double f = t * D;  // history sum
  f += rnn(D);       // GRU
  // Attention: query FC + PReLU, q - h, q * h, MLP per position, masked softmax.
  f += 2 * D * H + 3 * H + 2 * t * H + t * mlp_flops(mlp_dims(4 * H, cfg.att_hidden, 1), 4) + 5 * t;
  f += rnn(H);  // AUGRU
  // Head: q * s, BN affine (3 per element), f1 Dice f2 Dice f3 (Dice's per-channel terms are
  // per batch: forward_flops adds them).
  const double n = double(cfg.head_in()), c1 = double(cfg.mlp_hidden[0]),
               c2 = double(cfg.mlp_hidden[1]);
  f += D + 3 * n + 2 * n * c1 + DienDice::flops(c1, 0) + 2 * c1 * c2 + DienDice::flops(c2, 0) +
       2 * c2 * 2;
  if (!with_aux) return f;
  // Auxiliary net, twice over T - 1 positions: BN affine, MLP (sigmoid), 2-way softmax, + eps.
  const double t1 = t - 1, a_in = H + D;
  if (t1 > 0)
    f += 2 * t1 * (3 * a_in + mlp_flops(mlp_dims(a_in, cfg.aux_hidden, 2), 4) + 5 * 2 + 1) +
         t1 * 6;  // log, 1 - p (2), log, add, mask
  return f;
}

std::vector<Model::Fp32Params> Dien::amp_fp32_params() const {
  return {{"^(uid|mid|cat)_emb\\.",
           "embedding tables: rows are gathered, not multiplied; f32 keeps Adam's small updates"}};
}

}  // namespace aim::models
