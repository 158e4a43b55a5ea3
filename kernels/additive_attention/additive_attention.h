// Normalised additive (Bahdanau) attention of one query step over a memory, as TensorFlow's
// BahdanauAttention(normalize=True) used by GNMT (MODELS.md §3.2). With the projections done by
// the caller (keys = memory W1^T, query = q W2^T, plain GEMMs):
//   h[b,t,c] = tanh(keys[b,t,c] + query[b,c] + bias[c])
//   e[b,t]   = g / ||v|| * sum_c v[c] h[b,t,c]                    (TF's normed_v = g v / ||v||)
//   align[b,t] = softmax over t < len[b] of e[b,t]; 0 at t >= len[b] (padded source positions)
//   context[b,d] = sum_t align[b,t] values[b,t,d]
// A row with len[b] = 0 has align 0 and context 0. Gradient and derivation:
// kernels/additive_attention/README.md.
#pragma once
#include "kernels/op.h"

namespace aim::kernels {

struct AdditiveAttentionFwdArgs {
  Tensor keys;     // [B, T, C]: the projected memory
  Tensor query;    // [B, C]: the projected query
  Tensor bias;     // [C]
  Tensor v;        // [C]: the score vector (normalised inside)
  Tensor g;        // [1]: the learned gain
  Tensor values;   // [B, T, D]: the memory the context is taken from
  Tensor lengths;  // [B] i32 on the inputs' device, 0 <= len <= T; undefined: every length is T
  Tensor align;    // [B, T]: written
  Tensor context;  // [B, D]: written
  Device device() const { return keys.device(); }
  DType dtype() const { return keys.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("keys", s.keys), f.in("query", s.query), f.in("bias", s.bias), f.in("v", s.v);
    f.in("g", s.g), f.in("values", s.values), f.in_opt("lengths", s.lengths);
    f.out("align", s.align), f.out("context", s.context);
  }
};

struct AdditiveAttentionBwdArgs {
  Tensor keys, query, bias, v, g, values, lengths;  // as the forward
  Tensor align;                                     // [B, T]: the forward's output
  Tensor dcontext;                                  // [B, D]
  Tensor dalign;                                    // [B, T] or undefined (zeros)
  Tensor dkeys;                                     // [B, T, C]: written, or undefined
  Tensor dquery;                                    // [B, C]: written, or undefined
  Tensor dvalues;                                   // [B, T, D]: written, or undefined
  Tensor dbias, dv, dg;  // [C], [C], [1]: accumulated (+=), each may be undefined
  Device device() const { return keys.device(); }
  DType dtype() const { return keys.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("keys", s.keys), f.in("query", s.query), f.in("bias", s.bias), f.in("v", s.v);
    f.in("g", s.g), f.in("values", s.values), f.in_opt("lengths", s.lengths);
    f.in("align", s.align), f.in("dcontext", s.dcontext), f.in_opt("dalign", s.dalign);
    f.out_opt("dkeys", s.dkeys), f.out_opt("dquery", s.dquery), f.out_opt("dvalues", s.dvalues);
    f.out_opt("dbias", s.dbias), f.out_opt("dv", s.dv), f.out_opt("dg", s.dg);
  }
};

// Forward: per (b, t, c) an add pair, a tanh (counted as 1) and a multiply-add (5 FLOPs); the
// softmax's 5 per (b, t); the context's 2 per (b, t, d). Compulsory bytes: keys and values read
// once, align and context written once.
inline Cost additive_attention_fwd_cost(const AdditiveAttentionFwdArgs& a) {
  const double B = double(a.keys.size(0)), T = double(a.keys.size(1)), C = double(a.keys.size(2)),
               D = double(a.values.size(2)), e = double(dtype_size(a.keys.dtype()));
  return Cost{B * T * (5 * C + 5 + 2 * D), (B * T * (C + D) + B * C + 2 * C + 1) * e,
              (B * T + B * D) * e};
}
// Backward: h recomputed (4 per (b,t,c)), dh (4), the dquery/dbias/dv sums (5), dvalues and the
// da dot (4 per (b,t,d)). Reads the forward's inputs and align, writes dkeys, dvalues, dquery.
inline Cost additive_attention_bwd_cost(const AdditiveAttentionBwdArgs& a) {
  const double B = double(a.keys.size(0)), T = double(a.keys.size(1)), C = double(a.keys.size(2)),
               D = double(a.values.size(2)), e = double(dtype_size(a.keys.dtype()));
  return Cost{B * T * (13 * C + 8 + 4 * D), (B * T * (C + D + 2) + B * (C + D) + 2 * C + 1) * e,
              (B * T * (C + D) + B * C + 2 * C + 1) * e};
}

// Host-side validation shared by every variant ("[additive_attention_fwd] ..." naming the tensor,
// its shape and what was expected).
void check_additive_attention_fwd_args(const AdditiveAttentionFwdArgs& a);
void check_additive_attention_bwd_args(const AdditiveAttentionBwdArgs& a);

void additive_attention_fwd(const AdditiveAttentionFwdArgs& a);
void additive_attention_bwd(const AdditiveAttentionBwdArgs& a);

}  // namespace aim::kernels
