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

void amp::declarations_embedding(std::vector<amp::Declaration>& out) {
  out.insert(out.end(), {kEmbeddingAmp});
}

}  // namespace aim::autograd
