// GCN (Kipf & Welling, ICLR 2017; MODELS.md §7): two graph convolutions over the normalised
// adjacency A_hat = D^-1/2 (A + I) D^-1/2 of the whole graph (full batch):
//   h      = ReLU(A_hat (dropout(X) W1) + b1)          X [V, F], W1 [F, H]   (gc1)
//   logits = A_hat (dropout(h) W2) + b2                W2 [H, C]             (gc2)
//   loss   = mean CE of logits[train_idx] vs their labels + wd/2 * ||W1||^2 (Kipf: weight decay
//            as tf.nn.l2_loss on the first layer's weights only; wd = 5e-4)
// Dropout 0.5 on both layers' inputs (Kipf drops the sparse feature entries; a dense dropout of
// the same X has the same distribution: a zero stays zero). Parameters named as pygcn
// (tests/peers/gcn.py): gc1.weight [F, H], gc1.bias [H], gc2.weight [H, C], gc2.bias [C];
// Glorot-uniform weights, zero biases (Kipf's init).
// A step (aim-train) is one full-batch epoch: the batch is the whole graph (--batch-size 1).
// A_hat must be symmetric (data/graph.h builds it so): it is its own transpose in the backward.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layers/dropout.h"
#include "layers/graph_conv.h"
#include "models/model.h"

namespace aim::models {

struct GcnConfig {
  int64_t features = 1433, hidden = 16, classes = 7;  // Cora
  double dropout = 0.5, weight_decay = 5e-4;
  uint64_t seed = 0;
};

class Gcn : public Model {
 public:
  explicit Gcn(const GcnConfig& cfg = GcnConfig());

  // Logits [V, C] of every node; a / a_t: A_hat and its transpose on the module's device.
  Variable forward(const Variable& x, const kernels::Csr& a, const kernels::Csr& a_t);
  // A_hat from a batch's adj_row_ptr, adj_col_idx, adj_values (no copy).
  static kernels::Csr adjacency(const TensorMap& batch);

  // Inputs: features [V, F] f32, adj_row_ptr [R] i32 (R = V + 1), adj_col_idx [E] i32,
  // adj_values [E] f32. Labels: train_idx [T] i64, train_labels [T] i64. Outputs: logits [V, C].
  std::vector<TensorSpec> input_specs() const override;
  std::vector<TensorSpec> label_specs() const override;
  std::vector<TensorSpec> output_specs() const override;
  std::vector<Fp32Params> amp_fp32_params() const override { return {}; }
  TensorMap infer(const TensorMap& batch) override;
  Variable training_loss(const TensorMap& batch) override;
  // 2 V F H + 2 E H + V H (gc1: GEMM, SpMM, bias) + V H (ReLU) + 2 V H C + 2 E C + V C (gc2);
  // in training also the two dropouts (V F + V H), as the dropout kernel's cost counts them.
  double forward_flops(const TensorMap& batch) const override;
  std::string type_name() const override { return "Gcn"; }
  const GcnConfig& config() const { return cfg_; }

  std::shared_ptr<layers::GraphConvolution> gc1, gc2;
  std::shared_ptr<layers::Dropout> drop1, drop2;

 private:
  GcnConfig cfg_;
};

}  // namespace aim::models
