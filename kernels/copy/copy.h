// Strided copy with dtype cast, and fill. These are what Tensor::contiguous(), to(dtype),
// clone(), copy_() and fill_() run.
// Shapes: src, dst: same sizes (src may be an expanded/strided view), any strides, any dtypes.
// Math: kernels/copy/README.md
#pragma once
#include "kernels/op.h"

namespace aim::kernels {

constexpr int kMaxDims = 8;  // strided kernels index up to 8 dims

struct CopyArgs {
  Tensor src, dst;
  Device device() const { return dst.device(); }
  DType dtype() const { return src.dtype(); }  // variants list the source dtypes they take
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("src", s.src), f.out("dst", s.dst);
  }
};

struct FillArgs {
  Tensor dst;
  double value = 0;
  Device device() const { return dst.device(); }
  DType dtype() const { return dst.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.out("dst", s.dst), f.param("value", s.value);
  }
};

inline Cost copy_cost(const CopyArgs& a) {
  return Cost{0, double(a.src.numel() * dtype_size(a.src.dtype())), double(a.dst.nbytes())};
}
inline Cost fill_cost(const FillArgs& a) { return Cost{0, 0, double(a.dst.nbytes())}; }

void copy(const CopyArgs& a);
void fill(const FillArgs& a);

// Casting rule shared by every variant: float -> int truncates toward zero; anything -> bool is
// (x != 0); bool -> number is 0 or 1; 16-bit floats convert through float.
template <class D, class S>
inline D cast_value(S v) {
  if constexpr (std::is_same_v<D, bool>) {
    return static_cast<float>(v) != 0.0f;
  } else if constexpr (std::is_same_v<S, Half> || std::is_same_v<S, BFloat16>) {
    return static_cast<D>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>) {
    return D(static_cast<float>(v));
  } else {
    return static_cast<D>(v);
  }
}

}  // namespace aim::kernels
