// DIN (Deep Interest Network) as benchmarked by AI Matrix (MODELS.md §4.1, din/model.py).
//
//   q  = [item_emb(item), cate_emb(cate)]                           [B, 2E]   (candidate)
//   k  = [item_emb(hist_item), cate_emb(hist_cate)]                 [B, T, 2E] (history)
//   a  = att([q, k, q - k, q * k]) -> [B, T]    att = FC(8E->80) act FC(80->40) act FC(40->1)
//   w  = softmax(a / sqrt(2E)) over T, padded positions masked out (TF: -2^32+1 before scaling)
//   h  = sum_t w_t k_t                                              [B, 2E]
//   u  = hist_fcn(BN_hist(h))                                       [B, 2E]   (linear FC 2E->2E)
//   logit = item_b[item] + mlp(BN_b1([u, q]))  mlp = FC(4E->80) act FC(80->40) act FC(40->1)
//
// forward() returns the logits [B] (one sigmoid logit per sample, as the reference's
// sigmoid cross-entropy on the single (item, label) logit); loss() = mean BCE-with-logits.
//
// BN-as-affine quirk (default): the reference calls tf.layers.batch_normalization with
// training=False, so its moving statistics stay at mean 0 / var 1 and each BN is the learned
// affine  y = weight * x / sqrt(1 + 1e-3) + bias.  The BN layers are layers::BatchNorm1d(eps 1e-3)
// children (so state_dict matches torch.nn.BatchNorm1d) but only their weight and bias are used;
// their running stats stay at their initial values. bn_train = true switches to a real
// BatchNorm1d (batch statistics in training, running stats in eval).
//
// act = "sigmoid" (reference) or "dice" (model_dice.py switch: layers::Dice after each hidden FC
// of both MLPs; batch statistics in training mode, running statistics in eval).
//
// Not modelled: the reference's user embedding table (192 403 x 128) is created but unused by the
// graph, so it is omitted here. Parameter names equal tests/peers/din.py's PyTorch module:
//   item_emb.weight [n_mid, E], cate_emb.weight [n_cat, E], item_b [n_mid], att.{0,2,4}.*,
//   hist_bn.*, hist_fcn.*, b1.*, mlp.{0,2,4}.*  (Dice: att.1.*, att.3.*, mlp.1.*, mlp.3.*).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/rec_batch.h"
#include "layers/batchnorm.h"
#include "layers/embedding.h"
#include "layers/linear.h"
#include "layers/module.h"
#include "layers/sequential.h"
#include "models/model.h"

namespace aim::models {

using autograd::Variable;

struct DinConfig {
  // Vocabulary sizes of the benchmarked Amazon Electronics set (MODELS.md §4.1). n_uid sizes the
  // (unused, omitted) user table; it is kept for data generators and reporting.
  int64_t n_uid = 192403, n_mid = 63001, n_cat = 801;
  int64_t emb_dim = 64;                        // item and category each: item repr. = 2 * emb_dim
  std::vector<int64_t> att_hidden = {80, 40};  // attention MLP hidden sizes (then FC -> 1)
  std::vector<int64_t> mlp_hidden = {80, 40};  // scoring MLP hidden sizes (then FC -> 1)
  std::string act = "sigmoid";                 // "sigmoid" (reference) | "dice"
  bool bn_train = false;                       // false: BN-as-affine quirk (reference)
  // How the attention MLP's first layer is computed (same function, same parameters):
  //   "concat": FC1 on the materialised [q, k, q - k, q * k]  [B, T, 4H] (the reference's graph)
  //   "split":  FC1's weight W = [Wq | Wk | Wd | Wp] (column blocks of H) is regrouped,
  //             q Wq' + k Wk' + (q - k) Wd' + (q k) Wp' = q (Wq + Wd)' + [k, q k] [Wk - Wd | Wp]'
  //             so the per-position GEMM has K = 2H instead of 4H and the per-candidate part is
  //             computed once per row instead of once per position: half the FLOPs and bytes.
  //   "fold":   as split, with q's product folded into per-row weights:
  //             [k, q k] [Wk - Wd | Wp]' = k (Wk - Wd + diag(q) Wp)', one batched GEMM with
  //             K = H and no [B, T, 2H] operand (the weights [B, A, H] are per row, not per
  //             position): a quarter of concat's per-position FLOPs.
  std::string att_impl = "fold";
  uint64_t seed = 0;  // parameter initialisation

  int64_t hidden() const { return 2 * emb_dim; }  // H = 128 in the reference

  // CPU-test size; vocabularies cover DinSyntheticConfig::tiny() (100 users, 200 items, 10 cates).
  static DinConfig tiny() {
    DinConfig c;
    c.n_uid = 200;
    c.n_mid = 300;
    c.n_cat = 20;
    c.emb_dim = 8;
    c.att_hidden = {16, 8};
    c.mlp_hidden = {16, 8};
    return c;
  }
};

class Din : public Model {
 public:
  explicit Din(const DinConfig& cfg = DinConfig());

  // Logits [B] (f32) of the batch's candidates. Batch tensors must be on the module's device.
  Variable forward(const data::RecBatch& b);

  // Model interface. Inputs: item, cate [B] i64; hist_item, hist_cate [B, T] i64; mask [B, T]
  // f32. Label: label [B] i64. Outputs: logits [B] and output = sigmoid(logits) [B] (the CTR).
  std::vector<TensorSpec> input_specs() const override;
  std::vector<TensorSpec> label_specs() const override;
  std::vector<TensorSpec> output_specs() const override;
  std::vector<Fp32Params> amp_fp32_params() const override;
  TensorMap infer(const TensorMap& batch) override;
  Variable training_loss(const TensorMap& batch) override;
  double forward_flops(const TensorMap& batch) const override;
  // --cuda-graph: histories padded to a multiple of 8 positions (mask 0: the masked softmax gives
  // them weight 0, so loss and gradients are unchanged). Not with act=dice, whose statistics in
  // the attention MLP count every position.
  Shape padded_shape(const std::string& name, const Shape& shape) const override;
  TensorMap pad_batch(const TensorMap& batch,
                      const std::map<std::string, Shape>& shapes) const override;
  // Mean sigmoid cross-entropy of logits [B] against labels [B] (0/1, any dtype).
  static Variable loss(const Variable& logits, const Tensor& labels);
  std::string type_name() const override { return "Din"; }
  const DinConfig& config() const { return cfg_; }

  // Analytic forward FLOPs per sample at history length T: GEMMs 2*M*N*K (biases not counted,
  // as kernels/matmul's cost), elementwise ops as the kernels' cost model (binary 1, sigmoid 4,
  // softmax 5 per element, Dice 12 per element in eval, 15 in training); embedding gathers and
  // the loss are not counted.
  static double flops_per_sample(const DinConfig& cfg, int64_t hist_len, bool training = false);

  std::shared_ptr<layers::Embedding> item_emb, cate_emb;
  Variable item_b;  // [n_mid], starts at 0 (reference)
  std::shared_ptr<layers::Sequential> att;
  std::shared_ptr<layers::BatchNorm1d> hist_bn;
  std::shared_ptr<layers::Linear> hist_fcn;
  std::shared_ptr<layers::BatchNorm1d> b1;
  std::shared_ptr<layers::Sequential> mlp;

 private:
  // Attention MLP output [B, T, 1] for candidates q [B, H] and history keys k [B, T, H].
  Variable attention_scores(const Variable& q, const Variable& k);
  DinConfig cfg_;
};

}  // namespace aim::models
