// Differentiable normalised Bahdanau attention of one query step over a memory, on
// kernels/additive_attention (math and gradient: kernels/additive_attention/README.md). One graph
// node per call; GNMT's decoder calls it once per target step with the same keys and values.
#pragma once
#include "autograd/variable.h"

namespace aim::autograd {

struct AdditiveAttentionResult {
  Variable context;  // [B, D]
  Variable align;    // [B, T]: 0 at t >= lengths[b]
};

// keys [B, T, C] (the projected memory), query [B, C] (the projected query), bias [C], v [C],
// g [1], values [B, T, D]; lengths [B] i32 on keys' device or undefined (every length is T).
AdditiveAttentionResult additive_attention(const Variable& keys, const Variable& query,
                                           const Variable& bias, const Variable& v,
                                           const Variable& g, const Variable& values,
                                           const Tensor& lengths);

}  // namespace aim::autograd
