// Embedding lookup (F.embedding): out[n, :] = weight[indices[n], :].
// Shapes: weight, dweight [V, C]; indices [N] (i32 or i64); out, dout [N, C] whose rows may be
// spaced (stride(0) >= C, stride(1) == 1): a column slice of a wider tensor, so several tables'
// rows are gathered straight into one concatenation (autograd::embedding_cat) and read back
// from its gradient's slices.
// padding_idx: a row in [0, V) that receives no gradient, or < 0 for none. (PyTorch's negative
// padding_idx counts from the end; the layer converts it before calling these kernels.)
// An index outside [0, V) is an error naming the index and V (CUDA variants: see README.md).
// Math and gradient: kernels/embedding/README.md
#pragma once
#include "kernels/op.h"

namespace aim::kernels {

struct EmbeddingFwdArgs {
  Tensor weight, indices;  // weight: [V, C]; indices: [N] i32/i64
  Tensor out;              // [N, C], weight's dtype, rows spaced stride(0) apart: written
  int64_t padding_idx = -1;
  Device device() const { return weight.device(); }
  DType dtype() const { return weight.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("weight", s.weight), f.in("indices", s.indices), f.out("out", s.out);
    f.param("padding_idx", s.padding_idx);
  }
};

struct EmbeddingBwdArgs {
  Tensor dout, indices;  // dout: [N, C], rows spaced stride(0) apart; indices: [N] i32/i64
  Tensor dweight;        // [V, C]: accumulated (+=)
  int64_t padding_idx = -1;
  Device device() const { return dweight.device(); }
  DType dtype() const { return dweight.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dout", s.dout), f.in("indices", s.indices), f.out("dweight", s.dweight);
    f.param("padding_idx", s.padding_idx);
  }
};

inline Cost embedding_fwd_cost(const EmbeddingFwdArgs& a) {
  const double N = double(a.indices.numel()), C = double(a.weight.size(1));
  const double e = double(dtype_size(a.weight.dtype()));
  return Cost{0, N * C * e + N * double(dtype_size(a.indices.dtype())), N * C * e};
}
inline Cost embedding_bwd_cost(const EmbeddingBwdArgs& a) {
  const double N = double(a.indices.numel()), C = double(a.dweight.size(1));
  const double e = double(dtype_size(a.dweight.dtype()));
  // One add per element; the touched rows of dweight are read and written (at most N rows).
  return Cost{N * C, N * C * e + N * double(dtype_size(a.indices.dtype())) + N * C * e, N * C * e};
}

// The row stride of out / dout (elements between rows): C or more.
inline int64_t embedding_row_stride(const Tensor& t) {
  return t.size(0) > 1 ? t.stride(0) : t.size(1);
}

// Host-side validation shared by every variant (shapes, dtypes, padding_idx range).
void check_embedding_fwd_args(const EmbeddingFwdArgs& a);
void check_embedding_bwd_args(const EmbeddingBwdArgs& a);
// Throws "[op] index <i> at position <n> is out of range for V = <V>" naming the first bad one.
[[noreturn]] void embedding_index_error(const char* op, int64_t position, int64_t index, int64_t V);

void embedding_fwd(const EmbeddingFwdArgs& a);
void embedding_bwd(const EmbeddingBwdArgs& a);

}  // namespace aim::kernels
