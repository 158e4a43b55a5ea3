// DIEN (Deep Interest Evolution Network) as benchmarked by AI Matrix (MODELS.md §4.2, the
// reference's Model_DIN_V2_Gru_Vec_attGru_Neg). E = emb_dim, H = hidden (36 = 2E in the reference):
//
//   u     = uid_emb(uid)                                          [B, E]
//   q     = [mid_emb(item), cat_emb(cate)]                        [B, 2E]    (candidate)
//   e     = [mid_emb(hist_item), cat_emb(hist_cate)]              [B, T, 2E] (click history)
//   e_neg = [mid_emb(noclk_item), cat_emb(noclk_cate)]            [B, T, 2E] (sampled non-clicks)
//   s     = sum_t e_t  over all T positions, padding included (the reference does not mask it)
//   h     = GRU(e) with lengths, TensorFlow's GRUCell (layers::GRU, linear_before_reset = false,
//           gate biases initialised to 1 as TF does)                            [B, T, H]
//   aux   = mean over B x (T-1) of mask[t+1] * (-log p(h_t, e_{t+1}) - log(1 - p(h_t,
//   e_neg_{t+1})))
//           p(h, x) = softmax(aux(BN_aux([h, x])))[0] + 1e-8, aux = FC(H+2E->100) sigmoid
//           FC(100->50) sigmoid FC(50->2)           (0 when T = 1: there is no next step)
//   qa    = PReLU(att_q(q))   (FC 2E->H linear, PReLU alpha init 0.1)           [B, H]
//   a     = softmax over T of att([qa, h, qa - h, qa * h]), padded positions masked out, no
//           scaling; att = FC(4H->80) sigmoid FC(80->40) sigmoid FC(40->1)     [B, T]
//   f     = AUGRU(h, a) final state at each sequence's length                  [B, H]
//   x     = BN_1([u, q, s, q * s, f])                                          [B, E+6E+H] (162)
//   logits = f3(dice2(f2(dice1(f1(x)))))   FC 200, Dice, FC 80, Dice, FC 2     [B, 2]
//
// Column 0 of logits is the click (the reference's target is [label, 1 - label]); output =
// softmax(logits)[:, 0], the click probability. loss() is the reference's
//   -mean over B x 2 of log(softmax(logits) + 1e-8) * [label, 1 - label]   + aux.
//
// Dice (DienDice) is the reference's utils.dice: statistics of the current batch always (also in
// eval), mean over every dim but the last, std = sqrt(mean((x - mean)^2) + eps),
// p = sigmoid((x - mean) / (std + eps)), y = alpha (1 - p) x + p x, eps 1e-9, alpha init 0.
// BN-as-affine quirk (as Din): tf.layers.batch_normalization with training=False, i.e.
// y = weight * x / sqrt(1 + 1e-3) + bias; the BatchNorm1d children keep torch's key layout.
//
// Parameter names equal tests/peers/dien.py's PyTorch module:
//   uid_emb.weight, mid_emb.weight, cat_emb.weight, gru.{weight,bias}_{ih,hh}_l0, aux_bn.*,
//   aux.{0,2,4}.*, att_q.*, att_prelu.weight, att.{0,2,4}.*, augru.*, bn1.*, f1.*, dice1.alpha,
//   f2.*, dice2.alpha, f3.*
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layers/activation.h"
#include "layers/batchnorm.h"
#include "layers/embedding.h"
#include "layers/linear.h"
#include "layers/module.h"
#include "layers/rnn.h"
#include "layers/sequential.h"
#include "models/model.h"

namespace aim::models {

using autograd::Variable;

struct DienConfig {
  // Vocabulary sizes of the benchmarked Amazon Books set (MODELS.md §4.2, train.py's comment).
  int64_t n_uid = 543060, n_mid = 367983, n_cat = 1601;
  int64_t emb_dim = 18;                         // EMBEDDING_DIM: item repr. = 2 * emb_dim
  int64_t hidden = 36;                          // HIDDEN_SIZE: GRU / AUGRU / attention query
  std::vector<int64_t> att_hidden = {80, 40};   // attention MLP hidden sizes (then FC -> 1)
  std::vector<int64_t> aux_hidden = {100, 50};  // auxiliary net hidden sizes (then FC -> 2)
  std::vector<int64_t> mlp_hidden = {200, 80};  // head hidden sizes (Dice), then FC -> 2
  double aux_weight = 1.0;                      // loss = ctr + aux_weight * aux (reference: 1)
  uint64_t seed = 0;                            // parameter initialisation

  int64_t item_dim() const { return 2 * emb_dim; }
  int64_t head_in() const { return emb_dim + 3 * item_dim() + hidden; }  // 162 in the reference

  // CPU-test size; vocabularies cover data::DienSyntheticConfig::tiny().
  static DienConfig tiny() {
    DienConfig c;
    c.n_uid = 200;
    c.n_mid = 300;
    c.n_cat = 20;
    c.emb_dim = 4;
    c.hidden = 8;
    c.att_hidden = {16, 8};
    c.aux_hidden = {16, 8};
    c.mlp_hidden = {16, 8};
    return c;
  }
};

// The reference's utils.dice: batch statistics always (see the top of this file).
class DienDice : public layers::Module {
 public:
  explicit DienDice(int64_t channels, double eps = 1e-9);
  Variable forward(const Variable& x) override;
  std::string type_name() const override { return "DienDice"; }
  // FLOPs of forward() on n elements of c channels (the kernels' cost model).
  static double flops(double n, double c);

  layers::Parameter alpha;  // [C], starts at 0

 private:
  int64_t channels_;
  double eps_;
};

class Dien : public Model {
 public:
  explicit Dien(const DienConfig& cfg = DienConfig());

  struct Out {
    Variable logits;  // [B, 2], column 0 = click
    Variable gru;     // GRU outputs [B, T, H] (the auxiliary loss' states)
    Variable hist;    // click-history embeddings e [B, T, 2E]
  };
  // Main path on a batch (tensors on the module's device; see input_specs()).
  Out forward(const TensorMap& b);
  // The auxiliary loss of forward()'s GRU states against the next clicked and non-clicked items.
  Variable aux_loss(const Out& o, const TensorMap& b);

  // Inputs: uid, item, cate [B] i64; hist_item, hist_cate [B, T] i64; mask [B, T] f32.
  // Labels (training only): label [B] i64; noclk_item, noclk_cate [B, T] i64.
  // Outputs: logits [B, 2], output [B] = click probability.
  std::vector<TensorSpec> input_specs() const override;
  std::vector<TensorSpec> label_specs() const override;
  std::vector<TensorSpec> output_specs() const override;
  std::vector<Fp32Params> amp_fp32_params() const override;
  TensorMap infer(const TensorMap& batch) override;
  // "hist_len" [B] i64: the history lengths from the mask, for the GRU/AUGRU loops.
  TensorMap host_metadata(const TensorMap& host_batch) const override;
  Variable training_loss(const TensorMap& batch) override;
  // infer()'s FLOPs; in training mode also the auxiliary net of training_loss().
  double forward_flops(const TensorMap& batch) const override;
  // The reference's CTR loss: -mean over B x 2 of log(softmax(logits) + 1e-8) * [y, 1 - y].
  static Variable ctr_loss(const Variable& logits, const Tensor& labels);
  std::string type_name() const override { return "Dien"; }
  const DienConfig& config() const { return cfg_; }

  // Analytic FLOPs per sample at padded history length T (the GRU / AUGRU are counted over all
  // T steps, as the kernels' cost model does). GEMMs 2*M*N*K, elementwise
  // ops as the kernels' cost model; embedding gathers not counted. aux: add the auxiliary net
  // and both losses.
  static double flops_per_sample(const DienConfig& cfg, int64_t hist_len, bool aux);

  std::shared_ptr<layers::Embedding> uid_emb, mid_emb, cat_emb;
  std::shared_ptr<layers::GRU> gru;
  std::shared_ptr<layers::BatchNorm1d> aux_bn;
  std::shared_ptr<layers::Sequential> aux;
  std::shared_ptr<layers::Linear> att_q;
  std::shared_ptr<layers::PReLU> att_prelu;
  std::shared_ptr<layers::Sequential> att;
  std::shared_ptr<layers::AUGRU> augru;
  std::shared_ptr<layers::BatchNorm1d> bn1;
  std::shared_ptr<layers::Linear> f1, f2, f3;
  std::shared_ptr<DienDice> dice1, dice2;

 private:
  Variable bn(const std::shared_ptr<layers::BatchNorm1d>& m, const Variable& x);
  DienConfig cfg_;
};

}  // namespace aim::models
