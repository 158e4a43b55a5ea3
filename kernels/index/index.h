// Index ops: concat, index_select / index_add, gather / scatter_add, one_hot, pad / pad_bwd.
// PyTorch semantics (torch.cat, torch.index_select, Tensor.index_add_, torch.gather,
// Tensor.scatter_add_, F.one_hot, F.pad in constant mode). Math and gradients:
// kernels/index/README.md.
//
// Layout rules (checked, with an error naming the tensor, never silently copied):
// - concat: inputs any strides (views), output contiguous.
// - index_select: x any strides; index and y contiguous.
// - gather, pad, pad_bwd: x (dy) any strides; the rest contiguous.
// - everything else: contiguous tensors.
// Index tensors are i32 or i64; an out-of-range index is an error naming it, thrown at once (CPU)
// or recorded on the device and thrown by the next kernels::check_device_errors (CUDA:
// kernels/error_flag.h). Negative indices are out of range.
#pragma once
#include <vector>

#include "kernels/copy/copy.h"
#include "kernels/op.h"

namespace aim::kernels {

// y = cat(xs, dim). xs[k]: [..., D_k, ...] (same sizes except at dim, same dtype as y);
// y: [..., sum_k D_k, ...] contiguous. dim may be negative.
struct ConcatArgs {
  std::vector<Tensor> xs;
  Tensor y;
  int64_t dim = 0;
  Device device() const { return y.device(); }
  DType dtype() const { return y.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.ins("x", s.xs), f.out("y", s.y), f.param("dim", s.dim);
  }
};

// y = x.index_select(dim, index). x: [..., N, ...]; index: [K] (i32/i64, values in [0, N));
// y: [..., K, ...].
struct IndexSelectArgs {
  Tensor x, index, y;
  int64_t dim = 0;
  Device device() const { return y.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.in("index", s.index), f.out("y", s.y), f.param("dim", s.dim);
  }
};

// y.index_add_(dim, index, src): y[..., index[k], ...] += src[..., k, ...]. The backward of
// index_select. src: [..., K, ...]; index: [K]; y: [..., N, ...] (accumulated).
struct IndexAddArgs {
  Tensor src, index, y;
  int64_t dim = 0;
  Device device() const { return y.device(); }
  DType dtype() const { return y.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("src", s.src), f.in("index", s.index), f.out("y", s.y), f.param("dim", s.dim);
  }
};

// y = torch.gather(x, dim, index): y[p] = x[p with p[dim] := index[p]]. index and y have the
// same shape; x.size(d) >= index.size(d) for d != dim; index values in [0, x.size(dim)).
struct GatherArgs {
  Tensor x, index, y;
  int64_t dim = 0;
  Device device() const { return y.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.in("index", s.index), f.out("y", s.y), f.param("dim", s.dim);
  }
};

// y.scatter_add_(dim, index, src): y[p with p[dim] := index[p]] += src[p] for every position p
// of index. The backward of gather. index: same rank as src and y, index.size(d) <= src.size(d)
// for all d and <= y.size(d) for d != dim.
struct ScatterAddArgs {
  Tensor src, index, y;
  int64_t dim = 0;
  Device device() const { return y.device(); }
  DType dtype() const { return y.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("src", s.src), f.in("index", s.index), f.out("y", s.y), f.param("dim", s.dim);
  }
};

// y = F.one_hot(indices, C) in y's dtype. indices: [N...] (i32/i64, values in [0, C));
// y: [N..., C].
struct OneHotArgs {
  Tensor indices, y;
  Device device() const { return y.device(); }
  DType dtype() const { return y.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("indices", s.indices), f.out("y", s.y);
  }
};

// y = F.pad(x, pads, mode="constant", value). pads in PyTorch order: (before, after) pairs for
// the last dim first, then the dim before it, ...; a negative entry crops. y.size(d) =
// x.size(d) + before(d) + after(d).
struct PadArgs {
  Tensor x, y;
  std::vector<int64_t> pads;
  double value = 0;
  Device device() const { return y.device(); }
  DType dtype() const { return x.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("x", s.x), f.out("y", s.y), f.list("pads", s.pads), f.param("value", s.value);
  }
};

// The gradient of pad: dx[i] = dy[i + before] where that lies inside dy, else 0 (cropped
// elements get no gradient). dy: pad's y shape; dx: pad's x shape.
struct PadBwdArgs {
  Tensor dy, dx;
  std::vector<int64_t> pads;
  Device device() const { return dx.device(); }
  DType dtype() const { return dx.dtype(); }
  template <class S, class F>
  static void fields(S& s, F& f) {
    f.in("dy", s.dy), f.out("dx", s.dx), f.list("pads", s.pads);
  }
};

inline Cost concat_cost(const ConcatArgs& a) {
  double r = 0;
  for (const Tensor& x : a.xs) r += double(x.nbytes());
  return Cost{0, r, double(a.y.nbytes())};
}
inline Cost index_select_cost(const IndexSelectArgs& a) {
  return Cost{0, double(a.y.nbytes() + a.index.nbytes()), double(a.y.nbytes())};
}
inline Cost index_add_cost(const IndexAddArgs& a) {
  // Read src, index and the touched rows of y; write those rows back.
  const double touched = double(a.src.nbytes());
  return Cost{double(a.src.numel()), double(a.src.nbytes() + a.index.nbytes()) + touched, touched};
}
inline Cost gather_cost(const GatherArgs& a) {
  return Cost{0, double(a.y.nbytes() + a.index.nbytes()), double(a.y.nbytes())};
}
inline Cost scatter_add_cost(const ScatterAddArgs& a) {
  const double touched = double(a.index.numel() * dtype_size(a.y.dtype()));
  return Cost{double(a.index.numel()),
              double(a.index.numel() * dtype_size(a.src.dtype()) + a.index.nbytes()) + touched,
              touched};
}
inline Cost one_hot_cost(const OneHotArgs& a) {
  return Cost{0, double(a.indices.nbytes()), double(a.y.nbytes())};
}
inline Cost pad_cost(const PadArgs& a) {
  return Cost{0, double(std::min(a.x.nbytes(), a.y.nbytes())), double(a.y.nbytes())};
}
inline Cost pad_bwd_cost(const PadBwdArgs& a) {
  return Cost{0, double(std::min(a.dx.nbytes(), a.dy.nbytes())), double(a.dx.nbytes())};
}

void concat(const ConcatArgs& a);
void index_select(const IndexSelectArgs& a);
void index_add(const IndexAddArgs& a);
void gather(const GatherArgs& a);
void scatter_add(const ScatterAddArgs& a);
void one_hot(const OneHotArgs& a);
void pad(const PadArgs& a);
void pad_bwd(const PadBwdArgs& a);

// Argument checks shared by every variant (throw aim::Error with the op prefix).
void check_concat(const ConcatArgs& a);
void check_index_select(const IndexSelectArgs& a);
void check_index_add(const IndexAddArgs& a);
void check_gather(const GatherArgs& a);
void check_scatter_add(const ScatterAddArgs& a);
void check_one_hot(const OneHotArgs& a);
// Checks pads against x and y and returns before[d] for every dim d of x (0 where not padded).
std::vector<int64_t> check_pad(const char* op, const Shape& x, const Shape& y,
                               const std::vector<int64_t>& pads);

// A tensor seen as [outer, size(dim), inner] (dim already wrapped).
struct DimSplit {
  int64_t outer = 1, size = 1, inner = 1;
};
inline DimSplit split_at(const Shape& s, int64_t dim) {
  DimSplit r;
  for (int64_t d = 0; d < int64_t(s.size()); ++d) {
    if (d < dim)
      r.outer *= s[size_t(d)];
    else if (d == dim)
      r.size = s[size_t(d)];
    else
      r.inner *= s[size_t(d)];
  }
  return r;
}

}  // namespace aim::kernels

// AIM_DISPATCH_BY_SIZE(bytes, T, ...): an unsigned integer type of the element size, for ops that
// only move elements (every dtype through 1, 2, 4 or 8-byte words).
#define AIM_DISPATCH_BY_SIZE(bytes, T, ...)                          \
  do {                                                               \
    switch (bytes) {                                                 \
      case 1: {                                                      \
        using T = uint8_t;                                           \
        __VA_ARGS__;                                                 \
        break;                                                       \
      }                                                              \
      case 2: {                                                      \
        using T = uint16_t;                                          \
        __VA_ARGS__;                                                 \
        break;                                                       \
      }                                                              \
      case 4: {                                                      \
        using T = uint32_t;                                          \
        __VA_ARGS__;                                                 \
        break;                                                       \
      }                                                              \
      case 8: {                                                      \
        using T = uint64_t;                                          \
        __VA_ARGS__;                                                 \
        break;                                                       \
      }                                                              \
      default:                                                       \
        AIM_FAIL("element size ", int64_t(bytes), " not supported"); \
    }                                                                \
  } while (0)
