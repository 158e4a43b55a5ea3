// embedding: forward by the embedding gather kernel, backward by its scatter-add into the
// table's gradient.
#include "autograd/functions/embedding.h"

#include "autograd/amp.h"
#include "autograd/node.h"
#include "autograd/tensor_ops.h"
#include "kernels/embedding/embedding.h"

namespace aim::autograd {
namespace {

// ---- embedding -------------------------------------------------------------------------------

struct EmbeddingNode final : Node {
  Tensor indices;  // [N], contiguous, on the weight's device
  int64_t padding_idx = -1, C = 0;
  const char* name() const override { return "Embedding"; }
  void backward(Grads& g) override {
    if (!g.needs(0)) return;
    kernels::EmbeddingBwdArgs a;
    a.dout = g.dy().view({indices.numel(), C});
    a.indices = indices;
    a.dweight = g.accum(0);
    a.padding_idx = padding_idx;
    kernels::embedding_bwd(a);
  }
  void release() override { indices = Tensor(); }
};

// The tables' gradients from their column slices of the concatenated output's gradient.
struct EmbeddingCatNode final : Node {
  std::vector<Tensor> indices;  // each [N], contiguous, on the tables' device
  std::vector<int64_t> padding_idx, offset, C;
  int64_t N = 0, width = 0;
  const char* name() const override { return "EmbeddingCat"; }
  void backward(Grads& g) override {
    const Tensor dy = g.dy().contiguous().view({N, width});
    for (size_t k = 0; k < indices.size(); ++k) {
      if (!g.needs(int(k))) continue;
      kernels::EmbeddingBwdArgs a;
      a.dout = dy.slice(1, offset[k], offset[k] + C[k]);
      a.indices = indices[k];
      a.dweight = g.accum(int(k));
      a.padding_idx = padding_idx[k];
      kernels::embedding_bwd(a);
    }
  }
  void release() override { indices.clear(); }
};

}  // namespace

constexpr amp::Declaration kEmbeddingAmp{"embedding", amp::OpClass::native, amp::kWhyTables};
Variable embedding(const Variable& weight, const Tensor& indices, int64_t padding_idx) {
  AIM_CHECK(weight.defined() && weight.dim() == 2, "embedding: weight must be [V, C]");
  AIM_CHECK(indices.defined(), "embedding: undefined indices");
  const int64_t C = weight.size(1);
  const Tensor w = weight.data().contiguous();
  kernels::EmbeddingFwdArgs a;
  a.weight = w;
  a.indices = conform(indices, w, false).view({indices.numel()});
  a.out = Tensor::empty({indices.numel(), C}, w.dtype(), w.device());
  a.padding_idx = padding_idx < 0 ? -1 : padding_idx;
  kernels::embedding_fwd(a);
  Shape s = indices.sizes();
  s.push_back(C);
  const Tensor y = a.out.view(s);
  if (!needs_grad({&weight})) return Variable(y);
  auto n = std::make_shared<EmbeddingNode>();
  n->indices = a.indices;
  n->padding_idx = a.padding_idx;
  n->C = C;
  return attach1(n, {weight}, y);
}

constexpr amp::Declaration kEmbeddingCatAmp{"embedding_cat", amp::OpClass::native, amp::kWhyTables};
Variable embedding_cat(const std::vector<Variable>& weights, const std::vector<Tensor>& indices,
                       const std::vector<int64_t>& padding_idx) {
  const size_t n = weights.size();
  AIM_CHECK(n > 0 && indices.size() == n && padding_idx.size() == n,
            "embedding_cat: needs one index tensor and one padding_idx per table, got ", n,
            " tables, ", indices.size(), " index tensors, ", padding_idx.size(), " padding_idx");
  auto node = std::make_shared<EmbeddingCatNode>();
  std::vector<Tensor> tables;
  int64_t width = 0;
  for (size_t k = 0; k < n; ++k) {
    AIM_CHECK(weights[k].defined() && weights[k].dim() == 2, "embedding_cat: table ", k,
              " must be [V, C]");
    AIM_CHECK(indices[k].defined() && indices[k].sizes() == indices[0].sizes(),
              "embedding_cat: index tensor ", k, " ",
              indices[k].defined() ? to_string(indices[k].sizes()) : std::string("undefined"),
              " differs from index tensor 0 ", to_string(indices[0].sizes()));
    tables.push_back(weights[k].data().contiguous());
    AIM_CHECK(tables[k].dtype() == tables[0].dtype() && tables[k].device() == tables[0].device(),
              "embedding_cat: table ", k, " is ", dtype_name(tables[k].dtype()), " on ",
              tables[k].device().str(), ", table 0 ", dtype_name(tables[0].dtype()), " on ",
              tables[0].device().str());
    node->offset.push_back(width);
    node->C.push_back(tables[k].size(1));
    width += tables[k].size(1);
  }
  const int64_t N = indices[0].numel();
  const Tensor y = Tensor::empty({N, width}, tables[0].dtype(), tables[0].device());
  for (size_t k = 0; k < n; ++k) {
    kernels::EmbeddingFwdArgs a;
    a.weight = tables[k];
    a.indices = conform(indices[k], tables[k], false).view({N});
    a.out = y.slice(1, node->offset[k], node->offset[k] + node->C[k]);
    a.padding_idx = padding_idx[k] < 0 ? -1 : padding_idx[k];
    kernels::embedding_fwd(a);
    node->indices.push_back(a.indices);
    node->padding_idx.push_back(a.padding_idx);
  }
  Shape s = indices[0].sizes();
  s.push_back(width);
  const Tensor out = y.view(s);
  if (!needs_grad(weights)) return Variable(out);
  node->N = N;
  node->width = width;
  return attach1(node, weights, out);
}

void amp::declarations_embedding(std::vector<amp::Declaration>& out) {
  out.insert(out.end(), {kEmbeddingAmp, kEmbeddingCatAmp});
}

}  // namespace aim::autograd
