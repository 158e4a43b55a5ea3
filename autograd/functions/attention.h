// Differentiable fused scaled-dot-product attention (kernels/attention/attention.h), PyTorch's
// torch.nn.functional.scaled_dot_product_attention semantics: softmax(scale q k^T + mask) v with
// an optional causal mask and dropout on the probabilities; the [T, T] matrix is never stored
// (the backward recomputes it from the saved log-sum-exp).
#pragma once
#include "autograd/variable.h"
#include "kernels/random/random.h"

namespace aim::autograd {

struct AttentionOptions {
  Tensor mask;           // optional additive [B|1, NH|1, Tq|1, Tk], f32 or q's dtype; no gradient
  bool causal = false;   // key j > query i + (Tk - Tq) masked
  double dropout_p = 0;  // on the probabilities, when training
  bool training = false;
  kernels::Generator* gen = nullptr;  // draws B NH Tq Tk numbers when dropout is on
  double scale = 0;                   // 0: 1 / sqrt(HS)
};

// q [B, NH, Tq, HS]; k, v [B, NH, Tk, HS] -> [B, NH, Tq, HS]. A fully masked row gives zeros.
Variable scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v,
                                      const AttentionOptions& o = {});

}  // namespace aim::autograd
