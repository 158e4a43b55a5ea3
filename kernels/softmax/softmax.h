// Softmax / log-softmax along one dim, with an optional keep-mask, and its gradient.
// Shapes: x, y, dy, dx: same shape (any rank <= 8), contiguous, one float dtype; mask (optional):
// bool, broadcastable to x (expand rules: fewer leading dims or size-1 dims), any strides,
// true = keep. Masked positions get y = 0 (log: -inf) and dx = 0; a row with every position
// masked gives y = 0 everywhere (log: -inf) where PyTorch gives NaN.
// Math, PyTorch equivalents and the variants: kernels/softmax/README.md
#pragma once
#include "kernels/op.h"

#if defined(__CUDACC__)
#define AIM_SOFTMAX_HD __host__ __device__
#else
#define AIM_SOFTMAX_HD
#endif

namespace aim::kernels {

struct SoftmaxArgs {
  Tensor x, y;  // x: input; y: output (allocated by the caller), x's shape and dtype
  Tensor mask;  // optional: bool, broadcastable to x; true = keep
  int64_t dim = -1;
  bool log = false;  // log-softmax
  Device device() const { return x.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.out("y", s.y), f.in_opt("mask", s.mask);
    f.param("dim", s.dim), f.param("log", s.log);
  }
};

struct SoftmaxBwdArgs {
  Tensor dy, y, dx;  // dy: gradient of y; y: the forward output; dx: written
  Tensor mask;       // optional, as in the forward
  int64_t dim = -1;
  bool log = false;
  Device device() const { return dy.device(); }
  DType dtype() const { return dy.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dy", s.dy), f.in("y", s.y), f.out("dx", s.dx), f.in_opt("mask", s.mask);
    f.param("dim", s.dim), f.param("log", s.log);
  }
};

constexpr int kSoftmaxMaxDims = 8;

// x seen as [outer, C, inner] around `dim`: element (o, c, i) at (o * C + c) * inner + i.
// The mask (expanded to x's shape) is addressed by row_offset(o, i) + c * c_stride.
struct SoftmaxGeometry {
  int64_t outer = 1, C = 1, inner = 1;
  bool has_mask = false;
  int n_outer = 0, n_inner = 0;  // dims before / after `dim`
  int64_t outer_sizes[kSoftmaxMaxDims] = {}, outer_strides[kSoftmaxMaxDims] = {};
  int64_t inner_sizes[kSoftmaxMaxDims] = {}, inner_strides[kSoftmaxMaxDims] = {};
  int64_t c_stride = 0;
  AIM_SOFTMAX_HD int64_t row_offset(int64_t o, int64_t i) const {
    int64_t off = 0;
    for (int d = n_inner - 1; d >= 0; --d) {
      off += (i % inner_sizes[d]) * inner_strides[d];
      i /= inner_sizes[d];
    }
    for (int d = n_outer - 1; d >= 0; --d) {
      off += (o % outer_sizes[d]) * outer_strides[d];
      o /= outer_sizes[d];
    }
    return off;
  }
};

// Validates (shapes, dtypes, contiguity, mask) with `who` as the error prefix and returns the
// geometry. `mask_view` receives the mask expanded to x's shape (undefined when there is none).
SoftmaxGeometry softmax_geometry(const SoftmaxArgs& a, const char* who, Tensor* mask_view);
SoftmaxGeometry softmax_bwd_geometry(const SoftmaxBwdArgs& a, const char* who, Tensor* mask_view);

inline Cost softmax_cost(const SoftmaxArgs& a) {
  const double n = double(a.x.numel()), e = double(dtype_size(a.x.dtype()));
  return Cost{/*flops=*/5 * n,
              /*bytes_read=*/n * e + (a.mask.defined() ? double(a.mask.numel()) : 0.0),
              /*bytes_written=*/n * e};
}
inline Cost softmax_bwd_cost(const SoftmaxBwdArgs& a) {
  const double n = double(a.dy.numel()), e = double(dtype_size(a.dy.dtype()));
  return Cost{/*flops=*/4 * n,
              /*bytes_read=*/2 * n * e + (a.mask.defined() ? double(a.mask.numel()) : 0.0),
              /*bytes_written=*/n * e};
}

void softmax(const SoftmaxArgs& a);         // runs the selected variant
void softmax_bwd(const SoftmaxBwdArgs& a);  // gradient: kernels/softmax/README.md

}  // namespace aim::kernels
