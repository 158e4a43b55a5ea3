// Wide&Deep on census (MODELS.md §4.4): TF's DNNLinearCombinedClassifier as the reference's
// census_main.py builds it, on the features of data/census.h.
//
//   wide  = sum over the 8 wide columns of wide.bag.weight[id] + wide.bias          [B, 1]
//           (a sparse linear model: EmbeddingBag sum of 1-dim embeddings; the zero padding row
//           kWidePad stands for an out-of-vocabulary value, as TF drops id -1)
//   deep  = logits(mlp([dense, deep.embedding.weight[occupation]]))                  [B, 1]
//           dense [B, 43] (5 raw numerics + 38 one-hots), embedding 8 -> 51 inputs,
//           mlp = FC 51-100-75-50-25, ReLU after each; logits = FC 25 -> 1, linear
//   logit = wide + deep                                                              [B]
// Loss: mean sigmoid cross-entropy. No dropout (reference default).
//
// Initialisation as TF: the linear model's weights and bias zeros; the occupation embedding
// N(0, 1/sqrt(8)) (TF truncates at 2 std: not modelled); every FC Glorot-uniform, biases 0.
//
// Parameter names equal tests/peers/wide_deep.py's PyTorch module: wide.bag.weight [3050, 1],
// wide.bias [1], deep.embedding.weight [1000, 8], deep.mlp.{0,2,4,6}.{weight [out, in], bias},
// deep.logits.{weight [1, 25], bias [1]}. The optimizer "wide_deep" (train/trainer.cpp) trains
// the parameters under "wide." with FTRL and the others with Adagrad, as the reference.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layers/embedding.h"
#include "layers/embedding_bag.h"
#include "layers/linear.h"
#include "layers/module.h"
#include "layers/sequential.h"
#include "models/model.h"

namespace aim::models {

using autograd::Variable;

struct WideDeepConfig {
  std::vector<int64_t> hidden = {100, 75, 50, 25};  // reference hidden_units
  int64_t occupation_dim = 8;                       // reference embedding_column dimension
  uint64_t seed = 0;
  // The CPU-test size: the reference's network is already small (about 25k weights besides the
  // 3050-row linear table), so tiny = full.
  static WideDeepConfig tiny() { return WideDeepConfig(); }
};

// The linear (wide) part: bag.weight [kWideRows, 1] summed over each row's ids, + bias [1].
class WideLinear : public layers::Module {
 public:
  WideLinear();
  Variable forward(const Tensor& ids);  // ids [B, 8] i64 -> [B, 1]
  Variable forward(const Variable& ids) override { return forward(ids.data()); }
  std::string type_name() const override { return "WideLinear"; }
  std::shared_ptr<layers::EmbeddingBag> bag;
  layers::Parameter bias;
};

class WideDeepDeep : public layers::Module {
 public:
  WideDeepDeep(const WideDeepConfig& cfg, kernels::Generator& gen);
  Variable forward(const Tensor& dense, const Tensor& occupation);  // -> [B, 1]
  Variable forward(const Variable&) override;
  std::string type_name() const override { return "WideDeepDeep"; }
  std::shared_ptr<layers::Embedding> embedding;  // occupation bucket -> 8
  std::shared_ptr<layers::Sequential> mlp;
  std::shared_ptr<layers::Linear> logits;
};

class WideDeep : public Model {
 public:
  explicit WideDeep(const WideDeepConfig& cfg = WideDeepConfig());

  // Logits [B] (f32); tensors on the module's device.
  Variable forward(const Tensor& wide_ids, const Tensor& dense, const Tensor& occupation);

  // Inputs: wide [B, 8] i64, dense [B, 43] f32, occupation [B] i64 (data/census.h). Label:
  // label [B] i64 (0/1). Outputs: logits [B], output = sigmoid(logits) [B].
  std::vector<TensorSpec> input_specs() const override;
  std::vector<TensorSpec> label_specs() const override;
  std::vector<TensorSpec> output_specs() const override;
  std::vector<Fp32Params> amp_fp32_params() const override;
  TensorMap infer(const TensorMap& batch) override;
  Variable training_loss(const TensorMap& batch) override;
  double forward_flops(const TensorMap& batch) const override;
  static Variable loss(const Variable& logits, const Tensor& labels);
  std::string type_name() const override { return "WideDeep"; }
  const WideDeepConfig& config() const { return cfg_; }

  // Analytic forward FLOPs per sample as the kernels count them: the wide EmbeddingBag over 8
  // ids with a padding row (EmbeddingBag::flops: mask 8, row scaling 8, sums 8) + bias 1; the
  // embedding gather and concat 0; each FC 2 * in * out (bias fused) + ReLU out; logits 2 * 25;
  // wide + deep 1. The output sigmoid and the loss are not counted.
  double flops_per_sample() const;

  std::shared_ptr<WideLinear> wide;
  std::shared_ptr<WideDeepDeep> deep;

 private:
  WideDeepConfig cfg_;
};

}  // namespace aim::models
