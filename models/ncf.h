// NCF = NeuMF without pre-training, as benchmarked by AI Matrix (MODELS.md §4.3, NCF/NCF.py).
//
// The reference feeds one-hot vectors (depth users / items) to dense layers with ReLU, i.e.
// four "embeddings" e = ReLU(onehot(id) W + b) of size E = 16. onehot(id) W is row `id` of W, so
// aim computes the same function as a gather (OneHotDense below): e = ReLU(W[id] + b).
//
//   ug = ReLU(user_gmf.W[user] + user_gmf.b)   ig = ReLU(item_gmf.W[item] + item_gmf.b)   [B, E]
//   um = ReLU(user_mlp.W[user] + user_mlp.b)   im = ReLU(item_mlp.W[item] + item_mlp.b)   [B, E]
//   gmf = ug * ig                                                                    [B, E]
//   h   = mlp([um, im]),  mlp = FC(2E -> 2E) ReLU FC(2E -> E) ReLU FC(E -> E/2) ReLU  [B, E/2]
//   logits = predict([gmf, h])                   predict = FC(E + E/2 -> 1), linear  [B]
//
// Loss: mean sigmoid cross-entropy of the logits against the 0/1 labels. Dropout is 0 in the
// reference and L2 regularisation 0, so neither is modelled. Initialisation as the reference
// (tf.glorot_uniform_initializer, biases 0): every weight U(-r, r), r = sqrt(6 / (fan_in +
// fan_out)); for the one-hot layers fan_in = vocabulary size, fan_out = E.
//
// Parameter names equal tests/peers/ncf.py's PyTorch module (weights exchange through
// safetensors): user_gmf.{weight [users, E], bias [E]}, item_gmf.*, user_mlp.*, item_mlp.*
// (weight in the embedding layout [V, E], which is also TF's dense kernel layout [in, out]),
// mlp.{0,2,4}.{weight [out, in], bias}, predict.{weight [1, E + E/2], bias [1]}.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/random/random.h"
#include "layers/linear.h"
#include "layers/module.h"
#include "layers/sequential.h"
#include "models/model.h"

namespace aim::models {

using autograd::Variable;

struct NcfConfig {
  int64_t n_users = 6040, n_items = 3706;         // MovieLens-1M (MODELS.md §4.3)
  int64_t emb_dim = 16;                           // reference embedding_size
  std::vector<int64_t> mlp_hidden = {32, 16, 8};  // layer1..3_MLP = 2E, E, E/2
  uint64_t seed = 0;                              // parameter initialisation

  // CPU-test size: vocabularies of data::NcfSyntheticConfig::tiny() (200 users, 300 items);
  // the layer widths stay the reference's.
  static NcfConfig tiny() {
    NcfConfig c;
    c.n_users = 200;
    c.n_items = 300;
    return c;
  }
};

// A dense layer on a one-hot input, computed as a gather: y = ReLU(weight[idx] + bias).
// weight [V, C] (TF's kernel layout [in, out] = the embedding layout), Glorot-uniform from `gen`
// (fan_in V, fan_out C); bias [C] zeros.
class OneHotDense : public layers::Module {
 public:
  OneHotDense(int64_t vocab, int64_t channels, kernels::Generator& gen);
  Variable forward(const Tensor& indices);  // indices [B] i32/i64 in [0, V) -> [B, C]
  // Sequential's entry: the variable's data are the indices.
  Variable forward(const Variable& indices) override { return forward(indices.data()); }
  std::string type_name() const override { return "OneHotDense"; }
  layers::Parameter weight, bias;
};

class Ncf : public Model {
 public:
  explicit Ncf(const NcfConfig& cfg = NcfConfig());

  // Logits [B] (f32) of the (user, item) pairs; tensors on the module's device.
  Variable forward(const Tensor& user, const Tensor& item);

  // Model interface. Inputs: user, item [B] i64. Label: label [B] i64 (0/1). Outputs: logits [B]
  // and output = sigmoid(logits) [B] (the score the top-10 ranking uses).
  std::vector<TensorSpec> input_specs() const override;
  std::vector<TensorSpec> label_specs() const override;
  std::vector<TensorSpec> output_specs() const override;
  std::vector<Fp32Params> amp_fp32_params() const override;
  TensorMap infer(const TensorMap& batch) override;
  Variable training_loss(const TensorMap& batch) override;
  double forward_flops(const TensorMap& batch) const override;
  // Mean sigmoid cross-entropy of logits [B] against labels [B] (0/1, any dtype).
  static Variable loss(const Variable& logits, const Tensor& labels);
  std::string type_name() const override { return "Ncf"; }
  const NcfConfig& config() const { return cfg_; }

  // Analytic forward FLOPs per sample, as the kernels' cost models count them: the one-hot
  // layers are gathers (0 FLOPs: the reference's one-hot GEMM, 2 * V * E per sample, is not
  // what runs and is not counted), then + bias (1) and ReLU (1) per element of each of the four
  // [E] embeddings; the GMF product (1 per element); each FC 2 * in * out (bias fused into the
  // GEMM, not counted) + ReLU (1 per output); predict 2 * (E + E/2). The output sigmoid of
  // infer() (4 per sample, ~0.1%) and the loss are not counted.
  static double flops_per_sample(const NcfConfig& cfg);

  std::shared_ptr<OneHotDense> user_gmf, item_gmf, user_mlp, item_mlp;
  std::shared_ptr<layers::Sequential> mlp;
  std::shared_ptr<layers::Linear> predict;

 private:
  NcfConfig cfg_;
};

}  // namespace aim::models
