// Embedding: rows of weight [V, C] gathered by integer indices (torch.nn.Embedding).
// Init N(0, 1) from Philox(seed), the padding row (if any) zeroed; that row gets no gradient.
// padding_idx may be negative (counts from the end, as PyTorch).
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "autograd/functions/embedding.h"
#include "kernels/random/random.h"
#include "layers/init.h"
#include "layers/module.h"

namespace aim::layers {

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim,
            std::optional<int64_t> padding_idx = std::nullopt, uint64_t seed = 0)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {
    AIM_CHECK(num_embeddings > 0 && embedding_dim > 0, "Embedding: sizes must be positive, got ",
              num_embeddings, " x ", embedding_dim);
    if (padding_idx) {
      const int64_t p = *padding_idx < 0 ? *padding_idx + num_embeddings : *padding_idx;
      AIM_CHECK(p >= 0 && p < num_embeddings, "Embedding: padding_idx ", *padding_idx,
                " out of range for ", num_embeddings, " embeddings");
      padding_idx_ = p;
    }
    kernels::Generator gen(seed);
    Tensor w = normal_init({num_embeddings, embedding_dim}, 0.0, 1.0, gen);
    if (padding_idx_ >= 0) w.select(0, padding_idx_).zero_();
    weight = param("weight", w);
  }
  // indices: i32/i64, any shape -> [..., C].
  Variable forward(const Tensor& indices) {
    return autograd::embedding(weight, indices, padding_idx_);
  }
  // Sequential's entry: the variable's data are the indices.
  Variable forward(const Variable& indices) override { return forward(indices.data()); }
  std::string type_name() const override { return "Embedding"; }
  bool is_embedding_table() const override { return true; }
  int64_t padding_idx() const { return padding_idx_; }  // -1: none
  int64_t num_embeddings() const { return num_embeddings_; }
  int64_t embedding_dim() const { return embedding_dim_; }

  Parameter weight;  // [V, C]

 private:
  int64_t num_embeddings_, embedding_dim_;
  int64_t padding_idx_ = -1;
};

// torch.cat([tables[k](indices[k]) for k], -1), each table's rows gathered straight into its
// columns of the result (autograd::embedding_cat: no separate gathers and concatenation copy).
inline Variable embedding_cat(const std::vector<const Embedding*>& tables,
                              const std::vector<Tensor>& indices) {
  std::vector<Variable> weights;
  std::vector<int64_t> padding;
  for (const Embedding* t : tables) {
    weights.push_back(t->weight);
    padding.push_back(t->padding_idx());
  }
  return autograd::embedding_cat(weights, indices, padding);
}

}  // namespace aim::layers
