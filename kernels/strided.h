// N-d index arithmetic for strided tensors on the host.
#pragma once
#include "tensor/tensor.h"

namespace aim::kernels {

// Element offset (in elements, from the tensor's first element) of the linear row-major index i.
inline int64_t strided_offset(int64_t i, const Shape& sizes, const Shape& strides) {
  int64_t off = 0;
  for (int64_t d = int64_t(sizes.size()) - 1; d >= 0; --d) {
    const int64_t s = sizes[d];
    off += (i % s) * strides[d];
    i /= s;
  }
  return off;
}

// Strides of `t` seen through the broadcast shape `out` (0 where t is broadcast).
inline Shape broadcast_strides(const Tensor& t, const Shape& out) {
  Shape st(out.size(), 0);
  const size_t lead = out.size() - size_t(t.dim());
  for (size_t i = lead; i < out.size(); ++i)
    st[i] = t.size(int64_t(i - lead)) == 1 ? 0 : t.stride(int64_t(i - lead));
  return st;
}

}  // namespace aim::kernels
