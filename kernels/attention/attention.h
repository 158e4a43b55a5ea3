// Scaled dot-product attention, fused: the [Tq, Tk] scores and probabilities are never an output.
// Shapes (contiguous, one float dtype for q, k, v, o, dout, dq, dk, dv):
//   q, o [B, NH, Tq, HS]; k, v [B, NH, Tk, HS]; lse [B, NH, Tq] f32 (f64 allowed for f64 inputs);
//   mask (optional, additive) f32 or q's dtype, [B or 1, NH or 1, Tq or 1, Tk], last dim
//   contiguous, other strides free (an expanded view is fine).
//   s = scale q k^T + mask; causal: key j > query i + (Tk - Tq) masked (s = -inf)
//   p = softmax(s) along keys, lse = log-sum-exp of s's row; o = dropout(p) v
// Dropout: element (b, h, i, j) is kept iff philox::uniform(seed, offset, ((b NH + h) Tq + i) Tk
// + j) >= dropout_p (the numbers dropout_fwd draws for a contiguous [B, NH, Tq, Tk] tensor), kept
// values scaled by 1 / (1 - dropout_p): the same elements on every variant, forward and backward.
// A fully masked row (every s = -inf) gives o = 0, lse = -inf, and zero gradient. The additive
// mask gets no gradient.
// Math, PyTorch equivalent, cost model and variants: kernels/attention/README.md
#pragma once
#include <cmath>

#include "kernels/op.h"
#include "tensor/philox.h"

namespace aim::kernels {

struct AttentionFwdArgs {
  Tensor q, k, v;   // q [B, NH, Tq, HS]; k, v [B, NH, Tk, HS]
  Tensor mask;      // optional additive [B|1, NH|1, Tq|1, Tk], f32 or q's dtype
  Tensor o;         // [B, NH, Tq, HS], q's dtype (written)
  Tensor lse;       // [B, NH, Tq] f32 (f64 allowed for f64 inputs) (written)
  float scale = 0;  // 0: 1 / sqrt(HS)
  bool causal = false;
  float dropout_p = 0;
  uint64_t seed = 0, offset = 0;
  Device device() const { return q.device(); }
  DType dtype() const { return q.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("q", s.q), f.in("k", s.k), f.in("v", s.v), f.in_opt("mask", s.mask);
    f.out("o", s.o), f.out("lse", s.lse);
    f.param("scale", s.scale), f.param("causal", s.causal), f.param("dropout_p", s.dropout_p);
    f.param("seed", s.seed), f.param("offset", s.offset);
  }
};

// Gradients of q, k, v (written, not accumulated) from the forward's o and lse; the same mask,
// causal and dropout parameters as the forward.
struct AttentionBwdArgs {
  Tensor dout;     // [B, NH, Tq, HS]: gradient of o
  Tensor q, k, v;  // as the forward
  Tensor o, lse;   // the forward's outputs
  Tensor mask;     // optional, as the forward
  Tensor dq;       // [B, NH, Tq, HS] (written)
  Tensor dk, dv;   // [B, NH, Tk, HS] (written)
  float scale = 0;
  bool causal = false;
  float dropout_p = 0;
  uint64_t seed = 0, offset = 0;
  Device device() const { return q.device(); }
  DType dtype() const { return q.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dout", s.dout), f.in("q", s.q), f.in("k", s.k), f.in("v", s.v), f.in("o", s.o);
    f.in("lse", s.lse), f.in_opt("mask", s.mask);
    f.out("dq", s.dq), f.out("dk", s.dk), f.out("dv", s.dv);
    f.param("scale", s.scale), f.param("causal", s.causal), f.param("dropout_p", s.dropout_p);
    f.param("seed", s.seed), f.param("offset", s.offset);
  }
};

// What every variant needs, validated once (attention_geometry): extents, the effective scale,
// the mask's element strides (0 along broadcast dims) and the dropout parameters. Trivially
// copyable: CUDA kernels take it by value.
struct AttentionGeometry {
  int64_t B = 0, NH = 0, Tq = 0, Tk = 0, HS = 0;
  double scale = 1;  // the effective scale (1 / sqrt(HS) when the argument is 0)
  bool causal = false;
  bool has_mask = false;
  bool mask_f32 = true;                           // mask dtype f32 (else q's dtype)
  int64_t mask_sb = 0, mask_sh = 0, mask_sq = 0;  // element strides; key stride 1
  bool lse_f64 = false;                           // lse is f64 (f64 inputs only)
  float dropout_p = 0;
  uint64_t seed = 0, offset = 0;

  // Key j is visible to query i (causal: j <= i + Tk - Tq).
  AIM_HOST_DEVICE bool visible(int64_t i, int64_t j) const { return !causal || j <= i + Tk - Tq; }
  // Number of visible keys of query i (its keys are 0 .. count - 1).
  AIM_HOST_DEVICE int64_t visible_keys(int64_t i) const {
    if (!causal) return Tk;
    const int64_t n = i + Tk - Tq + 1;
    return n < 0 ? 0 : n > Tk ? Tk : n;
  }
  // Offset of mask element (b, h, i, j = 0).
  AIM_HOST_DEVICE int64_t mask_row(int64_t b, int64_t h, int64_t i) const {
    return b * mask_sb + h * mask_sh + i * mask_sq;
  }
  // The flat index that numbers element (bh = b NH + h, i, j) of the dropout stream.
  AIM_HOST_DEVICE uint64_t dropout_index(int64_t bh, int64_t i, int64_t j) const {
    return uint64_t((bh * Tq + i) * Tk + j);
  }
  AIM_HOST_DEVICE bool dropout() const { return dropout_p > 0.0f; }
  // Element (bh, i, j) is kept by dropout.
  AIM_HOST_DEVICE bool kept(int64_t bh, int64_t i, int64_t j) const {
    return philox::uniform(seed, offset, dropout_index(bh, i, j)) >= dropout_p;
  }
};

// The factor of kept elements, 1 / (1 - p) (0 for p = 1), in the accumulation type.
template <class A>
AIM_HOST_DEVICE A attention_dropout_scale(float p) {
  return p < 1.0f ? A(1) / (A(1) - A(p)) : A(0);
}

// Validates the arguments (aim::Error with `who`, e.g. "[attention_fwd] cpu.flash", as prefix).
AttentionGeometry attention_geometry(const AttentionFwdArgs& a, const char* who);
AttentionGeometry attention_bwd_geometry(const AttentionBwdArgs& a, const char* who);

// Number of visible (query, key) pairs of one head: Tq Tk, or the causal band's count.
inline double attention_pairs(int64_t Tq, int64_t Tk, bool causal) {
  if (!causal) return double(Tq) * double(Tk);
  double n = 0;
  for (int64_t i = 0; i < Tq; ++i) {
    const int64_t c = i + Tk - Tq + 1;
    n += double(c < 0 ? 0 : c > Tk ? Tk : c);
  }
  return n;
}

// Cost of the fused op (not of the unfused graph): per visible pair 2 HS FLOPs for q.k and 2 HS
// for p.v, ~5 for the softmax (scale/mask add, max, exp, sum, normalise); q, k, v and the mask
// read once, o and lse written once.
inline Cost attention_fwd_cost(const AttentionFwdArgs& a) {
  if (a.q.dim() != 4 || a.k.dim() != 4) return Cost{};
  const double bh = double(a.q.size(0) * a.q.size(1)), HS = double(a.q.size(3));
  const double pairs = bh * attention_pairs(a.q.size(2), a.k.size(2), a.causal);
  return Cost{
      /*flops=*/pairs * (4 * HS + 5),
      /*bytes_read=*/
      double(a.q.nbytes() + a.k.nbytes() + a.v.nbytes() + (a.mask.defined() ? a.mask.nbytes() : 0)),
      /*bytes_written=*/double(a.o.nbytes() + a.lse.nbytes())};
}

// Backward: per visible pair five products of 2 HS FLOPs (s = q.k recomputed, dp = do.v,
// dv += p do, dk += ds q, dq += ds k) and ~6 elementwise (exp, dropout, ds); D = rowsum(do o):
// 2 HS per query. Reads do, q, k, v, o, lse, mask once; writes dq, dk, dv once.
inline Cost attention_bwd_cost(const AttentionBwdArgs& a) {
  if (a.q.dim() != 4 || a.k.dim() != 4) return Cost{};
  const double bh = double(a.q.size(0) * a.q.size(1)), HS = double(a.q.size(3));
  const double pairs = bh * attention_pairs(a.q.size(2), a.k.size(2), a.causal);
  return Cost{/*flops=*/pairs * (10 * HS + 6) + bh * double(a.q.size(2)) * 2 * HS,
              /*bytes_read=*/
              double(a.dout.nbytes() + a.q.nbytes() + a.k.nbytes() + a.v.nbytes() + a.o.nbytes() +
                     a.lse.nbytes() + (a.mask.defined() ? a.mask.nbytes() : 0)),
              /*bytes_written=*/double(a.dq.nbytes() + a.dk.nbytes() + a.dv.nbytes())};
}

void attention_fwd(const AttentionFwdArgs& a);  // runs the selected variant
void attention_bwd(const AttentionBwdArgs& a);  // gradient: kernels/attention/README.md

}  // namespace aim::kernels
