// EmbeddingBag (torch.nn.EmbeddingBag, modes sum and mean): per bag, the sum or mean of the rows
// of weight [V, C] its indices pick (autograd::embedding_bag: bags, offsets, padding and
// per-sample weights as documented there). Init N(0, 1) from Philox(seed), the padding row (if
// any) zeroed, as torch.nn.EmbeddingBag. padding_idx may be negative (counts from the end).
#pragma once
#include <cstdint>
#include <optional>

#include "autograd/functions/embedding_bag.h"
#include "kernels/random/random.h"
#include "layers/init.h"
#include "layers/module.h"

namespace aim::layers {

using autograd::BagMode;

class EmbeddingBag : public Module {
 public:
  EmbeddingBag(int64_t num_embeddings, int64_t embedding_dim, BagMode mode = BagMode::mean,
               std::optional<int64_t> padding_idx = std::nullopt, bool include_last_offset = false,
               uint64_t seed = 0)
      : num_embeddings_(num_embeddings),
        embedding_dim_(embedding_dim),
        mode_(mode),
        include_last_offset_(include_last_offset) {
    AIM_CHECK(num_embeddings > 0 && embedding_dim > 0, "EmbeddingBag: sizes must be positive, got ",
              num_embeddings, " x ", embedding_dim);
    if (padding_idx) {
      const int64_t p = *padding_idx < 0 ? *padding_idx + num_embeddings : *padding_idx;
      AIM_CHECK(p >= 0 && p < num_embeddings, "EmbeddingBag: padding_idx ", *padding_idx,
                " out of range for ", num_embeddings, " embeddings");
      padding_idx_ = p;
    }
    kernels::Generator gen(seed);
    Tensor w = normal_init({num_embeddings, embedding_dim}, 0.0, 1.0, gen);
    if (padding_idx_ >= 0) w.select(0, padding_idx_).zero_();
    weight = param("weight", w);
  }
  // indices [B, L] (offsets undefined) or [N] with offsets [B] ([B + 1] with
  // include_last_offset); per_sample_weights: indices' shape, mode sum only. -> [B, C].
  Variable forward(const Tensor& indices, const Tensor& offsets = Tensor(),
                   const Variable& per_sample_weights = Variable()) {
    return autograd::embedding_bag(weight, indices, offsets, mode_, per_sample_weights,
                                   padding_idx_, include_last_offset_);
  }
  // Sequential's entry: the variable's data are fixed-size bags [B, L].
  Variable forward(const Variable& indices) override { return forward(indices.data()); }
  std::string type_name() const override { return "EmbeddingBag"; }
  bool is_embedding_table() const override { return true; }
  // FLOPs of forward() on N indices in B bags, as the kernels it runs count them.
  double flops(int64_t N, int64_t B, bool fixed_bags, bool per_sample_weights) const {
    const double n = double(N), b = double(B), C = double(embedding_dim_);
    const bool pad = padding_idx_ >= 0;
    double f = 0;
    if (pad) f += n;                                    // the padding mask (ne)
    if (pad && per_sample_weights) f += n;              // mask * per_sample_weights
    if (pad || per_sample_weights) f += n * C;          // rows * scale
    f += n * C;                                         // the bag sums (reduce or index_add)
    if (mode_ == BagMode::mean && pad) f += n + 2 * b;  // count (reduce or index_add), clamp
    if (mode_ == BagMode::mean && (pad || !fixed_bags)) f += b * C;  // divide by the count
    return f;
  }
  // in = [B, L] (fixed-size bags, no per-sample weights) -> [B, C].
  Shape count_flops(const Shape& in, double& flops_out) const override {
    AIM_CHECK(in.size() == 2, "EmbeddingBag: count_flops takes fixed-size bags [B, L], got ",
              to_string(in), " (for offsets use flops(N, B, ...))");
    flops_out += flops(in[0] * in[1], in[0], /*fixed_bags=*/true, /*per_sample_weights=*/false);
    return {in[0], embedding_dim_};
  }
  BagMode mode() const { return mode_; }
  int64_t padding_idx() const { return padding_idx_; }  // -1: none
  int64_t num_embeddings() const { return num_embeddings_; }
  int64_t embedding_dim() const { return embedding_dim_; }

  Parameter weight;  // [V, C]

 private:
  int64_t num_embeddings_, embedding_dim_;
  BagMode mode_;
  bool include_last_offset_;
  int64_t padding_idx_ = -1;
};

}  // namespace aim::layers
