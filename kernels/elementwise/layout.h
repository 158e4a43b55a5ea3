// Host-side layout of an elementwise operation shared by the CPU and CUDA launchers of the
// elementwise family: operand 0 is the output, operands 1.. the inputs seen through NumPy
// broadcasting (stride 0 where broadcast). Size-1 dims are dropped and adjacent dims merged where
// every operand's strides allow it, so a contiguous problem becomes one dim, a row broadcast two
// dims with strides (0, 1), a column broadcast two dims with strides (1, 0), and so on.
#pragma once
#include <algorithm>
#include <vector>

#include "kernels/strided.h"

namespace aim::kernels {

struct EwLayout {
  Shape sizes;                 // merged sizes, at least one dim (outermost first)
  std::vector<Shape> strides;  // [operand][dim], in elements; operand 0 = output
  int64_t numel = 0;
  int ndim() const { return int(sizes.size()); }
  int64_t inner() const { return sizes.back(); }
  int64_t stride(int op, int d) const { return strides[size_t(op)][size_t(d)]; }
};

// `inputs` are broadcast to y's sizes (the caller has checked that they broadcast).
inline EwLayout make_ew_layout(const Tensor& y, const std::vector<const Tensor*>& inputs) {
  const Shape& out = y.sizes();
  const size_t nops = 1 + inputs.size();
  std::vector<Shape> st(nops);
  st[0] = y.strides();
  for (size_t j = 0; j < inputs.size(); ++j) st[j + 1] = broadcast_strides(*inputs[j], out);

  EwLayout l;
  l.numel = shape_numel(out);
  l.strides.assign(nops, Shape());
  // Walk from the innermost dim outwards, merging into the current (innermost-first) dim.
  for (int64_t d = int64_t(out.size()) - 1; d >= 0; --d) {
    if (out[size_t(d)] == 1) continue;
    bool merge = !l.sizes.empty();
    for (size_t o = 0; merge && o < nops; ++o)
      merge = st[o][size_t(d)] == l.strides[o].back() * l.sizes.back();
    if (merge) {
      l.sizes.back() *= out[size_t(d)];
    } else {
      l.sizes.push_back(out[size_t(d)]);
      for (size_t o = 0; o < nops; ++o) l.strides[o].push_back(st[o][size_t(d)]);
    }
  }
  if (l.sizes.empty()) {  // a single element (or a scalar tensor)
    l.sizes.push_back(1);
    for (auto& s : l.strides) s.push_back(1);
  }
  std::reverse(l.sizes.begin(), l.sizes.end());
  for (auto& s : l.strides) std::reverse(s.begin(), s.end());
  return l;
}

}  // namespace aim::kernels
