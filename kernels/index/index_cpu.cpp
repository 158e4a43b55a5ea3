// index: CPU variants of concat, index_select, index_add, gather, scatter_add, one_hot, pad,
// pad_bwd.
// cpu.ref: one loop over the output (or source) elements with N-d offsets. Obviously right.
// cpu.omp: the same mappings, row-wise (memcpy of contiguous rows where there are any), OpenMP
// over independent rows when the work is large. The accumulating ops (index_add, scatter_add)
// parallelise only over positions whose targets cannot collide and keep the order of the
// additions of cpu.ref, so they are deterministic and bitwise equal to it.
// Test cases: index_cases.cpp.
#include "kernels/index/index_cpu.h"

#include <algorithm>
#include <cstring>

#include "kernels/index/index.h"
#include "kernels/registry.h"
#include "kernels/strided.h"

namespace aim::kernels {

// ---- argument checks (shared with the CUDA variants) -----------------------------------------

namespace {

void check_index_tensor(const char* op, const Tensor& index, const char* name, const Tensor& data) {
  AIM_CHECK(index.device() == data.device(), "[", op, "] ", name, " is on ", index.device().str(),
            " but the data is on ", data.device().str());
  AIM_CHECK(index.dtype() == DType::i32 || index.dtype() == DType::i64, "[", op, "] ", name,
            " must be i32 or i64, got ", dtype_name(index.dtype()));
  AIM_CHECK(index.is_contiguous(), "[", op, "] ", name, " must be contiguous, got sizes ",
            to_string(index.sizes()), " strides ", to_string(index.strides()));
}

void check_same(const char* op, const Tensor& a, const char* an, const Tensor& b, const char* bn) {
  AIM_CHECK(a.dtype() == b.dtype(), "[", op, "] ", an, " is ", dtype_name(a.dtype()), " but ", bn,
            " is ", dtype_name(b.dtype()));
  AIM_CHECK(a.device() == b.device(), "[", op, "] ", an, " on ", a.device().str(), " but ", bn,
            " on ", b.device().str());
}

void check_contiguous(const char* op, const Tensor& t, const char* name) {
  AIM_CHECK(t.is_contiguous(), "[", op, "] ", name, " must be contiguous, got sizes ",
            to_string(t.sizes()), " strides ", to_string(t.strides()));
}

int64_t wrap(const char* op, int64_t dim, int64_t ndim) {
  AIM_CHECK(dim >= -ndim && dim < ndim, "[", op, "] dim ", dim, " out of range for ", ndim,
            "-d tensors");
  return dim < 0 ? dim + ndim : dim;
}

}  // namespace

void check_concat(const ConcatArgs& a) {
  AIM_CHECK(!a.xs.empty(), "[concat] needs at least one input, got none");
  AIM_CHECK(a.y.dim() >= 1, "[concat] y must have at least one dim, got ", to_string(a.y.sizes()));
  check_contiguous("concat", a.y, "y");
  const int64_t dim = wrap("concat", a.dim, a.y.dim());
  int64_t total = 0;
  for (size_t k = 0; k < a.xs.size(); ++k) {
    const Tensor& x = a.xs[k];
    check_same("concat", x, str("xs[", k, "]").c_str(), a.y, "y");
    bool ok = x.dim() == a.y.dim();
    for (int64_t d = 0; ok && d < x.dim(); ++d) ok = d == dim || x.size(d) == a.y.size(d);
    AIM_CHECK(ok, "[concat] xs[", k, "] ", to_string(x.sizes()), " does not fit y ",
              to_string(a.y.sizes()), " along dim ", dim);
    total += x.size(dim);
  }
  AIM_CHECK(total == a.y.size(dim), "[concat] inputs sum to ", total, " along dim ", dim,
            ", y has ", a.y.size(dim));
}

void check_index_select(const IndexSelectArgs& a) {
  check_same("index_select", a.x, "x", a.y, "y");
  check_index_tensor("index_select", a.index, "index", a.x);
  check_contiguous("index_select", a.y, "y");
  AIM_CHECK(a.index.dim() == 1, "[index_select] index must be 1-d, got ",
            to_string(a.index.sizes()));
  AIM_CHECK(a.x.dim() >= 1 && a.x.dim() == a.y.dim(), "[index_select] x ", to_string(a.x.sizes()),
            " and y ", to_string(a.y.sizes()), " differ in rank");
  const int64_t dim = wrap("index_select", a.dim, a.x.dim());
  bool ok = true;
  for (int64_t d = 0; d < a.x.dim(); ++d)
    ok &= a.y.size(d) == (d == dim ? a.index.size(0) : a.x.size(d));
  AIM_CHECK(ok, "[index_select] y must be ", to_string(a.x.sizes()), " with ", a.index.size(0),
            " at dim ", dim, ", got ", to_string(a.y.sizes()));
}

void check_index_add(const IndexAddArgs& a) {
  check_same("index_add", a.src, "src", a.y, "y");
  check_index_tensor("index_add", a.index, "index", a.src);
  check_contiguous("index_add", a.src, "src");
  check_contiguous("index_add", a.y, "y");
  AIM_CHECK(a.index.dim() == 1, "[index_add] index must be 1-d, got ", to_string(a.index.sizes()));
  AIM_CHECK(a.y.dim() >= 1 && a.src.dim() == a.y.dim(), "[index_add] src ",
            to_string(a.src.sizes()), " and y ", to_string(a.y.sizes()), " differ in rank");
  const int64_t dim = wrap("index_add", a.dim, a.y.dim());
  bool ok = true;
  for (int64_t d = 0; d < a.y.dim(); ++d)
    ok &= a.src.size(d) == (d == dim ? a.index.size(0) : a.y.size(d));
  AIM_CHECK(ok, "[index_add] src must be ", to_string(a.y.sizes()), " with ", a.index.size(0),
            " at dim ", dim, ", got ", to_string(a.src.sizes()));
}

void check_gather(const GatherArgs& a) {
  check_same("gather", a.x, "x", a.y, "y");
  check_index_tensor("gather", a.index, "index", a.x);
  check_contiguous("gather", a.y, "y");
  AIM_CHECK(a.x.dim() >= 1 && a.x.dim() == a.index.dim() && a.y.dim() == a.index.dim(),
            "[gather] x ", to_string(a.x.sizes()), ", index ", to_string(a.index.sizes()),
            " and y ", to_string(a.y.sizes()), " must have the same rank");
  const int64_t dim = wrap("gather", a.dim, a.x.dim());
  AIM_CHECK(a.y.sizes() == a.index.sizes(), "[gather] y ", to_string(a.y.sizes()),
            " must have the shape of index ", to_string(a.index.sizes()));
  for (int64_t d = 0; d < a.x.dim(); ++d)
    AIM_CHECK(d == dim || a.index.size(d) <= a.x.size(d), "[gather] index ",
              to_string(a.index.sizes()), " larger than x ", to_string(a.x.sizes()), " at dim ", d);
}

void check_scatter_add(const ScatterAddArgs& a) {
  check_same("scatter_add", a.src, "src", a.y, "y");
  check_index_tensor("scatter_add", a.index, "index", a.src);
  check_contiguous("scatter_add", a.src, "src");
  check_contiguous("scatter_add", a.y, "y");
  AIM_CHECK(a.y.dim() >= 1 && a.src.dim() == a.index.dim() && a.y.dim() == a.index.dim(),
            "[scatter_add] src ", to_string(a.src.sizes()), ", index ", to_string(a.index.sizes()),
            " and y ", to_string(a.y.sizes()), " must have the same rank");
  const int64_t dim = wrap("scatter_add", a.dim, a.y.dim());
  for (int64_t d = 0; d < a.y.dim(); ++d) {
    AIM_CHECK(a.index.size(d) <= a.src.size(d), "[scatter_add] index ", to_string(a.index.sizes()),
              " larger than src ", to_string(a.src.sizes()), " at dim ", d);
    AIM_CHECK(d == dim || a.index.size(d) <= a.y.size(d), "[scatter_add] index ",
              to_string(a.index.sizes()), " larger than y ", to_string(a.y.sizes()), " at dim ", d);
  }
}

void check_one_hot(const OneHotArgs& a) {
  check_index_tensor("one_hot", a.indices, "indices", a.y);
  check_contiguous("one_hot", a.y, "y");
  AIM_CHECK(a.indices.device() == a.y.device(), "[one_hot] indices on ", a.indices.device().str(),
            " but y on ", a.y.device().str());
  bool ok = a.y.dim() == a.indices.dim() + 1;
  for (int64_t d = 0; ok && d < a.indices.dim(); ++d) ok = a.y.size(d) == a.indices.size(d);
  AIM_CHECK(ok, "[one_hot] y must be indices ", to_string(a.indices.sizes()),
            " plus a class dim, got ", to_string(a.y.sizes()));
}

std::vector<int64_t> check_pad(const char* op, const Shape& x, const Shape& y,
                               const std::vector<int64_t>& pads) {
  const int64_t nd = int64_t(x.size());
  AIM_CHECK(pads.size() % 2 == 0 && int64_t(pads.size()) <= 2 * nd, "[", op,
            "] pads must be (before, after) pairs for at most ", nd, " dims, got ", pads.size(),
            " values");
  AIM_CHECK(y.size() == x.size(), "[", op, "] input ", to_string(x), " and output ", to_string(y),
            " differ in rank");
  std::vector<int64_t> before(size_t(nd), 0);
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t pair = nd - 1 - d;  // pairs start at the last dim
    const int64_t b = 2 * pair < int64_t(pads.size()) ? pads[size_t(2 * pair)] : 0;
    const int64_t e = 2 * pair < int64_t(pads.size()) ? pads[size_t(2 * pair + 1)] : 0;
    AIM_CHECK(x[size_t(d)] + b + e == y[size_t(d)], "[", op, "] padded ", to_string(x),
              " with pads (", b, ", ", e, ") at dim ", d, " gives ", x[size_t(d)] + b + e,
              ", the padded tensor is ", to_string(y));
    before[size_t(d)] = b;
  }
  return before;
}

namespace {

[[noreturn]] void bad_index(const char* op, int64_t value, int64_t pos, int64_t n) {
  AIM_FAIL("[", op, "] index ", value, " at position ", pos, " out of range [0, ", n, ")");
}

template <class I>
void check_range(const char* op, const I* idx, int64_t count, int64_t n) {
  for (int64_t i = 0; i < count; ++i)
    if (idx[i] < 0 || idx[i] >= n) bad_index(op, int64_t(idx[i]), i, n);
}

void check_indices(const char* op, const Tensor& index, int64_t n) {
  AIM_DISPATCH_INDEX_TYPES(index.dtype(), I,
                           { check_range(op, index.data<I>(), index.numel(), n); });
}

// Reads index element i as int64 (either index dtype).
struct IndexReader {
  const void* p;
  bool i64;
  explicit IndexReader(const Tensor& t) : p(t.raw_data()), i64(t.dtype() == DType::i64) {}
  int64_t operator()(int64_t i) const {
    return i64 ? static_cast<const int64_t*>(p)[i] : int64_t(static_cast<const int32_t*>(p)[i]);
  }
};

// y += v with 16-bit floats added in float.
template <class T>
inline void add_to(T& y, T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    y = T(float(y) + float(v));
  } else {
    y = T(y + v);
  }
}

// Offset in `strides` of the element at the row-major coordinates of linear index i in `sizes`,
// with the coordinate at `dim` replaced by `at`.
inline int64_t offset_with(int64_t i, const Shape& sizes, const Shape& strides, int64_t dim,
                           int64_t at) {
  int64_t off = 0;
  for (int64_t d = int64_t(sizes.size()) - 1; d >= 0; --d) {
    const int64_t s = sizes[size_t(d)];
    off += (d == dim ? at : i % s) * strides[size_t(d)];
    i /= s;
  }
  return off;
}

// ---- cpu.ref ---------------------------------------------------------------------------------

void concat_cpu_ref(const ConcatArgs& a) {
  check_concat(a);
  const int64_t dim = wrap("concat", a.dim, a.y.dim());
  const DimSplit ys = split_at(a.y.sizes(), dim);
  AIM_DISPATCH_ALL_TYPES(a.y.dtype(), T, {
    T* y = a.y.data<T>();
    int64_t off = 0;
    for (const Tensor& x : a.xs) {
      const T* xp = x.data<T>();
      const DimSplit xs = split_at(x.sizes(), dim);
      for (int64_t i = 0; i < x.numel(); ++i) {
        const int64_t o = i / (xs.size * xs.inner), d = i / xs.inner % xs.size, in = i % xs.inner;
        y[(o * ys.size + off + d) * ys.inner + in] = xp[strided_offset(i, x.sizes(), x.strides())];
      }
      off += xs.size;
    }
  });
}

void index_select_cpu_ref(const IndexSelectArgs& a) {
  check_index_select(a);
  const int64_t dim = wrap("index_select", a.dim, a.x.dim());
  const int64_t n = a.x.size(dim);
  const IndexReader idx(a.index);
  const DimSplit ys = split_at(a.y.sizes(), dim);
  AIM_DISPATCH_ALL_TYPES(a.x.dtype(), T, {
    const T* x = a.x.data<T>();
    T* y = a.y.data<T>();
    for (int64_t i = 0; i < a.y.numel(); ++i) {
      const int64_t k = i / ys.inner % ys.size;
      const int64_t j = idx(k);
      if (j < 0 || j >= n) bad_index("index_select", j, k, n);
      y[i] = x[offset_with(i, a.y.sizes(), a.x.strides(), dim, j)];
    }
  });
}

void index_add_cpu_ref(const IndexAddArgs& a) {
  check_index_add(a);
  const int64_t dim = wrap("index_add", a.dim, a.y.dim());
  const int64_t n = a.y.size(dim);
  const IndexReader idx(a.index);
  const DimSplit ss = split_at(a.src.sizes(), dim);
  AIM_DISPATCH_FLOAT_TYPES(a.y.dtype(), T, {
    const T* src = a.src.data<T>();
    T* y = a.y.data<T>();
    for (int64_t i = 0; i < a.src.numel(); ++i) {
      const int64_t o = i / (ss.size * ss.inner), k = i / ss.inner % ss.size, in = i % ss.inner;
      const int64_t j = idx(k);
      if (j < 0 || j >= n) bad_index("index_add", j, k, n);
      add_to(y[(o * n + j) * ss.inner + in], src[i]);
    }
  });
}

void gather_cpu_ref(const GatherArgs& a) {
  check_gather(a);
  const int64_t dim = wrap("gather", a.dim, a.x.dim());
  const int64_t n = a.x.size(dim);
  const IndexReader idx(a.index);
  AIM_DISPATCH_ALL_TYPES(a.x.dtype(), T, {
    const T* x = a.x.data<T>();
    T* y = a.y.data<T>();
    for (int64_t i = 0; i < a.y.numel(); ++i) {
      const int64_t j = idx(i);
      if (j < 0 || j >= n) bad_index("gather", j, i, n);
      y[i] = x[offset_with(i, a.index.sizes(), a.x.strides(), dim, j)];
    }
  });
}

void scatter_add_cpu_ref(const ScatterAddArgs& a) {
  check_scatter_add(a);
  const int64_t dim = wrap("scatter_add", a.dim, a.y.dim());
  const int64_t n = a.y.size(dim);
  const IndexReader idx(a.index);
  AIM_DISPATCH_FLOAT_TYPES(a.y.dtype(), T, {
    const T* src = a.src.data<T>();
    T* y = a.y.data<T>();
    for (int64_t i = 0; i < a.index.numel(); ++i) {
      const int64_t j = idx(i);
      if (j < 0 || j >= n) bad_index("scatter_add", j, i, n);
      // src position: the index position itself (-1: keep the coordinate at dim).
      const int64_t s = offset_with(i, a.index.sizes(), a.src.strides(), -1, 0);
      add_to(y[offset_with(i, a.index.sizes(), a.y.strides(), dim, j)], src[s]);
    }
  });
}

void one_hot_cpu_ref(const OneHotArgs& a) {
  check_one_hot(a);
  const int64_t c = a.y.size(-1);
  const IndexReader idx(a.indices);
  AIM_DISPATCH_ALL_TYPES(a.y.dtype(), T, {
    T* y = a.y.data<T>();
    for (int64_t i = 0; i < a.indices.numel(); ++i) {
      const int64_t j = idx(i);
      if (j < 0 || j >= c) bad_index("one_hot", j, i, c);
      for (int64_t k = 0; k < c; ++k) y[i * c + k] = cast_value<T>(k == j ? 1 : 0);
    }
  });
}

// dst[p] = src[p - shift] where that lies inside src, else `value` (pad: shift = before;
// pad_bwd: shift = -before, value 0).
template <class T>
void shift_copy_ref(const Tensor& src, const Tensor& dst, const std::vector<int64_t>& shift,
                    T value) {
  const T* s = src.data<T>();
  T* d = dst.data<T>();
  const int64_t nd = dst.dim();
  for (int64_t i = 0; i < dst.numel(); ++i) {
    int64_t rem = i, off = 0;
    bool inside = true;
    for (int64_t k = nd - 1; k >= 0; --k) {
      const int64_t c = rem % dst.size(k) - shift[size_t(k)];
      rem /= dst.size(k);
      inside &= c >= 0 && c < src.size(k);
      off += c * src.stride(k);
    }
    d[i] = inside ? s[off] : value;
  }
}

std::vector<int64_t> negated(std::vector<int64_t> v) {
  for (auto& e : v) e = -e;
  return v;
}

void pad_cpu_ref(const PadArgs& a) {
  check_same("pad", a.x, "x", a.y, "y");
  check_contiguous("pad", a.y, "y");
  const auto before = check_pad("pad", a.x.sizes(), a.y.sizes(), a.pads);
  AIM_DISPATCH_ALL_TYPES(a.x.dtype(), T,
                         { shift_copy_ref<T>(a.x, a.y, before, cast_value<T>(a.value)); });
}

void pad_bwd_cpu_ref(const PadBwdArgs& a) {
  check_same("pad_bwd", a.dy, "dy", a.dx, "dx");
  check_contiguous("pad_bwd", a.dx, "dx");
  const auto before = check_pad("pad_bwd", a.dx.sizes(), a.dy.sizes(), a.pads);
  AIM_DISPATCH_ALL_TYPES(a.dx.dtype(), T,
                         { shift_copy_ref<T>(a.dy, a.dx, negated(before), cast_value<T>(0)); });
}

// ---- cpu.omp ---------------------------------------------------------------------------------

constexpr int64_t kParallelElems = int64_t(1) << 15;  // below this, one thread is faster

// Copies the elements of the (strided) tensor x, in row-major order, into consecutive runs of
// dst: row r of x's last dim goes to dst + row_dst(r).
template <class T, class RowDst>
void copy_rows(const Tensor& x, T* dst_base, RowDst row_dst) {
  const int64_t n = x.numel();
  if (n == 0) return;
  const T* xp = static_cast<const T*>(x.raw_data());
  const int64_t last = x.size(-1), xs = x.stride(-1), rows = n / last;
  const bool contiguous_rows = xs == 1;
#pragma omp parallel for schedule(static) if (n > kParallelElems)
  for (int64_t r = 0; r < rows; ++r) {
    const T* src = xp + strided_offset(r * last, x.sizes(), x.strides());
    T* dst = dst_base + row_dst(r);
    if (contiguous_rows) {
      std::memcpy(dst, src, size_t(last) * sizeof(T));
    } else {
      for (int64_t c = 0; c < last; ++c) dst[c] = src[c * xs];
    }
  }
}

template <class T>
void concat_omp(const ConcatArgs& a, int64_t dim) {
  const DimSplit ys = split_at(a.y.sizes(), dim);
  T* y = static_cast<T*>(a.y.raw_data());
  int64_t off = 0;
  for (const Tensor& x : a.xs) {
    const DimSplit xs = split_at(x.sizes(), dim);
    const int64_t last = x.size(-1);
    if (x.is_contiguous()) {
      // One contiguous block of size*inner elements per outer index.
      const int64_t block = xs.size * xs.inner;
      const T* xp = static_cast<const T*>(x.raw_data());
#pragma omp parallel for schedule(static) if (x.numel() > kParallelElems)
      for (int64_t o = 0; o < xs.outer; ++o)
        std::memcpy(y + (o * ys.size + off) * ys.inner, xp + o * block, size_t(block) * sizeof(T));
    } else {
      // A row of x's last dim lands on consecutive elements of y (inner rows when dim is not
      // the last, a run along dim when it is).
      copy_rows<T>(x, y, [&](int64_t r) {
        const int64_t i = r * last;
        const int64_t o = i / (xs.size * xs.inner), d = i / xs.inner % xs.size, in = i % xs.inner;
        return (o * ys.size + off + d) * ys.inner + in;
      });
    }
    off += xs.size;
  }
}

void concat_cpu_omp(const ConcatArgs& a) {
  check_concat(a);
  const int64_t dim = wrap("concat", a.dim, a.y.dim());
  AIM_DISPATCH_BY_SIZE(dtype_size(a.y.dtype()), T, { concat_omp<T>(a, dim); });
}

template <class T, class I>
void index_select_omp(const IndexSelectArgs& a, int64_t dim) {
  const DimSplit xs = split_at(a.x.sizes(), dim);
  const int64_t k_count = a.index.size(0);
  const I* idx = a.index.data<I>();
  const T* x = static_cast<const T*>(a.x.raw_data());
  T* y = static_cast<T*>(a.y.raw_data());
  const int64_t rows = xs.outer * k_count;
  const bool contiguous = a.x.is_contiguous();
#pragma omp parallel for schedule(static) if (a.y.numel() > kParallelElems)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r / k_count, j = int64_t(idx[r % k_count]);
    T* dst = y + r * xs.inner;
    if (contiguous) {
      std::memcpy(dst, x + (o * xs.size + j) * xs.inner, size_t(xs.inner) * sizeof(T));
    } else {
      const int64_t base = (o * xs.size + j) * xs.inner;
      for (int64_t in = 0; in < xs.inner; ++in)
        dst[in] = x[strided_offset(base + in, a.x.sizes(), a.x.strides())];
    }
  }
}

void index_select_cpu_omp(const IndexSelectArgs& a) {
  check_index_select(a);
  const int64_t dim = wrap("index_select", a.dim, a.x.dim());
  check_indices("index_select", a.index, a.x.size(dim));
  AIM_DISPATCH_INDEX_TYPES(a.index.dtype(), I, {
    AIM_DISPATCH_BY_SIZE(dtype_size(a.x.dtype()), T, { index_select_omp<T, I>(a, dim); });
  });
}

// Parallel over (outer index, chunk of the inner dims): targets of different tasks never
// collide, and each task adds the k rows in order, as cpu.ref does.
template <class T, class I>
void index_add_omp(const IndexAddArgs& a, int64_t dim) {
  const DimSplit ss = split_at(a.src.sizes(), dim);
  const int64_t n = a.y.size(dim);
  const I* idx = a.index.data<I>();
  const T* src = a.src.data<T>();
  T* y = a.y.data<T>();
  constexpr int64_t kChunk = 256;
  const int64_t chunks = (ss.inner + kChunk - 1) / kChunk;
  const int64_t tasks = ss.outer * chunks;
#pragma omp parallel for schedule(static) if (a.src.numel() > kParallelElems && tasks > 1)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t o = t / chunks, c0 = t % chunks * kChunk;
    const int64_t c1 = std::min(ss.inner, c0 + kChunk);
    for (int64_t k = 0; k < ss.size; ++k) {
      const T* s = src + (o * ss.size + k) * ss.inner;
      T* d = y + (o * n + int64_t(idx[k])) * ss.inner;
      for (int64_t in = c0; in < c1; ++in) add_to(d[in], s[in]);
    }
  }
}

void index_add_cpu_omp(const IndexAddArgs& a) {
  check_index_add(a);
  const int64_t dim = wrap("index_add", a.dim, a.y.dim());
  check_indices("index_add", a.index, a.y.size(dim));
  AIM_DISPATCH_INDEX_TYPES(a.index.dtype(), I, {
    AIM_DISPATCH_FLOAT_TYPES(a.y.dtype(), T, { index_add_omp<T, I>(a, dim); });
  });
}

template <class T, class I>
void gather_omp(const GatherArgs& a, int64_t dim) {
  const I* idx = a.index.data<I>();
  const T* x = static_cast<const T*>(a.x.raw_data());
  T* y = static_cast<T*>(a.y.raw_data());
  const int64_t n = a.y.numel();
  const int64_t last = a.y.size(-1), rows = n / std::max<int64_t>(last, 1);
  const int64_t nd = a.y.dim();
  const int64_t xs_last = a.x.stride(-1), sd = a.x.stride(dim);
#pragma omp parallel for schedule(static) if (n > kParallelElems)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i0 = r * last;
    // Row base with the coordinate at dim set to 0; the index adds index * stride(dim), the
    // column adds c * stride(-1) unless the column is the dim itself.
    const int64_t base = offset_with(i0, a.index.sizes(), a.x.strides(), dim, 0);
    const int64_t cs = dim == nd - 1 ? 0 : xs_last;
    for (int64_t c = 0; c < last; ++c) y[i0 + c] = x[base + c * cs + int64_t(idx[i0 + c]) * sd];
  }
}

void gather_cpu_omp(const GatherArgs& a) {
  check_gather(a);
  const int64_t dim = wrap("gather", a.dim, a.x.dim());
  check_indices("gather", a.index, a.x.size(dim));
  if (a.y.numel() == 0) return;
  AIM_DISPATCH_INDEX_TYPES(a.index.dtype(), I, {
    AIM_DISPATCH_BY_SIZE(dtype_size(a.x.dtype()), T, { gather_omp<T, I>(a, dim); });
  });
}

// Parallel over the lines along dim (all coordinates but dim fixed): their targets never
// collide; along a line the additions run in cpu.ref's order.
template <class T, class I>
void scatter_add_omp(const ScatterAddArgs& a, int64_t dim) {
  const DimSplit is = split_at(a.index.sizes(), dim);
  const I* idx = a.index.data<I>();
  const T* src = a.src.data<T>();
  T* y = a.y.data<T>();
  const int64_t lines = is.outer * is.inner;
  const int64_t ss = a.src.stride(dim), ys = a.y.stride(dim);
#pragma omp parallel for schedule(static) if (a.index.numel() > kParallelElems)
  for (int64_t l = 0; l < lines; ++l) {
    const int64_t o = l / is.inner, in = l % is.inner;
    const int64_t i0 = o * is.size * is.inner + in;  // linear index position of (o, 0, in)
    const int64_t s0 = offset_with(i0, a.index.sizes(), a.src.strides(), dim, 0);
    const int64_t y0 = offset_with(i0, a.index.sizes(), a.y.strides(), dim, 0);
    for (int64_t j = 0; j < is.size; ++j)
      add_to(y[y0 + int64_t(idx[i0 + j * is.inner]) * ys], src[s0 + j * ss]);
  }
}

void scatter_add_cpu_omp(const ScatterAddArgs& a) {
  check_scatter_add(a);
  const int64_t dim = wrap("scatter_add", a.dim, a.y.dim());
  check_indices("scatter_add", a.index, a.y.size(dim));
  if (a.index.numel() == 0) return;
  AIM_DISPATCH_INDEX_TYPES(a.index.dtype(), I, {
    AIM_DISPATCH_FLOAT_TYPES(a.y.dtype(), T, { scatter_add_omp<T, I>(a, dim); });
  });
}

template <class T, class I>
void one_hot_omp(const OneHotArgs& a, T one) {
  const I* idx = a.indices.data<I>();
  T* y = static_cast<T*>(a.y.raw_data());
  const int64_t c = a.y.size(-1), n = a.indices.numel();
  std::memset(static_cast<void*>(y), 0, size_t(a.y.nbytes()));  // 0 is all-zero bits in every dtype
#pragma omp parallel for schedule(static) if (a.y.numel() > kParallelElems)
  for (int64_t i = 0; i < n; ++i) y[i * c + int64_t(idx[i])] = one;
}

void one_hot_cpu_omp(const OneHotArgs& a) {
  check_one_hot(a);
  check_indices("one_hot", a.indices, a.y.size(-1));
  AIM_DISPATCH_INDEX_TYPES(a.indices.dtype(), I, {
    AIM_DISPATCH_ALL_TYPES(a.y.dtype(), T, { one_hot_omp<T, I>(a, cast_value<T>(1)); });
  });
}

// Row-wise shift copy: each row of dst's last dim is [fill | copied run | fill].
template <class T>
void shift_copy_omp(const Tensor& src, const Tensor& dst, const std::vector<int64_t>& shift,
                    T value) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const T* s = static_cast<const T*>(src.raw_data());
  T* d = static_cast<T*>(dst.raw_data());
  const int64_t nd = dst.dim(), last = dst.size(-1), rows = n / last;
  const int64_t sh = shift[size_t(nd - 1)], src_last = src.size(-1), ss = src.stride(-1);
  // Columns [c0, c1) of a row come from the source row.
  const int64_t c0 = std::clamp<int64_t>(sh, 0, last);
  const int64_t c1 = std::clamp<int64_t>(src_last + sh, c0, last);
#pragma omp parallel for schedule(static) if (n > kParallelElems)
  for (int64_t r = 0; r < rows; ++r) {
    T* row = d + r * last;
    int64_t rem = r, off = 0;
    bool inside = true;
    for (int64_t k = nd - 2; k >= 0; --k) {
      const int64_t c = rem % dst.size(k) - shift[size_t(k)];
      rem /= dst.size(k);
      inside &= c >= 0 && c < src.size(k);
      off += c * src.stride(k);
    }
    if (!inside) {
      std::fill(row, row + last, value);
      continue;
    }
    std::fill(row, row + c0, value);
    if (c1 > c0) {
      const T* sr = s + off + (c0 - sh) * ss;
      if (ss == 1) {
        std::memcpy(row + c0, sr, size_t(c1 - c0) * sizeof(T));
      } else {
        for (int64_t c = c0; c < c1; ++c) row[c] = sr[(c - c0) * ss];
      }
    }
    std::fill(row + c1, row + last, value);
  }
}

void pad_cpu_omp(const PadArgs& a) {
  check_same("pad", a.x, "x", a.y, "y");
  check_contiguous("pad", a.y, "y");
  const auto before = check_pad("pad", a.x.sizes(), a.y.sizes(), a.pads);
  AIM_DISPATCH_ALL_TYPES(a.x.dtype(), T,
                         { shift_copy_omp<T>(a.x, a.y, before, cast_value<T>(a.value)); });
}

void pad_bwd_cpu_omp(const PadBwdArgs& a) {
  check_same("pad_bwd", a.dy, "dy", a.dx, "dx");
  check_contiguous("pad_bwd", a.dx, "dx");
  const auto before = check_pad("pad_bwd", a.dx.sizes(), a.dy.sizes(), a.pads);
  AIM_DISPATCH_ALL_TYPES(a.dx.dtype(), T,
                         { shift_copy_omp<T>(a.dy, a.dx, negated(before), cast_value<T>(0)); });
}

std::vector<DType> all_dtypes() { return {std::begin(kAllDTypes), std::end(kAllDTypes)}; }
std::vector<DType> float_dtypes() { return {DType::f32, DType::f64, DType::f16, DType::bf16}; }

}  // namespace

void concat(const ConcatArgs& a) { AIM_DISPATCH_OP(ConcatArgs, "concat", a); }
void index_select(const IndexSelectArgs& a) { AIM_DISPATCH_OP(IndexSelectArgs, "index_select", a); }
void index_add(const IndexAddArgs& a) { AIM_DISPATCH_OP(IndexAddArgs, "index_add", a); }
void gather(const GatherArgs& a) { AIM_DISPATCH_OP(GatherArgs, "gather", a); }
void scatter_add(const ScatterAddArgs& a) { AIM_DISPATCH_OP(ScatterAddArgs, "scatter_add", a); }
void one_hot(const OneHotArgs& a) { AIM_DISPATCH_OP(OneHotArgs, "one_hot", a); }
void pad(const PadArgs& a) { AIM_DISPATCH_OP(PadArgs, "pad", a); }
void pad_bwd(const PadBwdArgs& a) { AIM_DISPATCH_OP(PadBwdArgs, "pad_bwd", a); }

void register_index_cpu(Registry& r) {
  {
    auto& op = r.op<ConcatArgs>("concat");
    op.description = "torch.cat: concatenate along a dim (inputs any strides)";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, concat_cpu_ref, all_dtypes()});
    op.add({"cpu.omp", Backend::CPU, Provider::Own, concat_cpu_omp, all_dtypes()});
    op.set_default(Backend::CPU, "cpu.omp");
    op.set_cost(concat_cost);
    op.make_case = index_cpu::make_concat_case;
    op.set_shape_fields(index_cpu::concat_shape_fields());
    op.add_test_shapes(index_cpu::concat_test_shapes());
    op.small_enough_for_simt = index_cpu::concat_small_enough_for_simt;
  }
  {
    auto& op = r.op<IndexSelectArgs>("index_select");
    op.description = "torch.index_select (x any strides)";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, index_select_cpu_ref, all_dtypes()});
    op.add({"cpu.omp", Backend::CPU, Provider::Own, index_select_cpu_omp, all_dtypes()});
    op.set_default(Backend::CPU, "cpu.omp");
    op.set_cost(index_select_cost);
    op.make_case = index_cpu::make_index_select_case;
    op.set_shape_fields(index_cpu::index_select_shape_fields());
    op.add_test_shapes(index_cpu::index_select_test_shapes());
    op.small_enough_for_simt = index_cpu::abc_small_enough_for_simt;
  }
  {
    auto& op = r.op<IndexAddArgs>("index_add");
    op.description = "Tensor.index_add_ (backward of index_select)";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, index_add_cpu_ref, float_dtypes()});
    op.add({"cpu.omp", Backend::CPU, Provider::Own, index_add_cpu_omp, float_dtypes()});
    op.set_default(Backend::CPU, "cpu.omp");
    op.set_cost(index_add_cost);
    op.make_case = index_cpu::make_index_add_case;
    op.tolerance = index_cpu::accumulate_tolerance;
    op.set_shape_fields(index_cpu::index_add_shape_fields());
    op.add_test_shapes(index_cpu::index_add_test_shapes());
    op.small_enough_for_simt = index_cpu::abc_small_enough_for_simt;
  }
  {
    auto& op = r.op<GatherArgs>("gather");
    op.description = "torch.gather (x any strides)";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, gather_cpu_ref, all_dtypes()});
    op.add({"cpu.omp", Backend::CPU, Provider::Own, gather_cpu_omp, all_dtypes()});
    op.set_default(Backend::CPU, "cpu.omp");
    op.set_cost(gather_cost);
    op.make_case = index_cpu::make_gather_case;
    op.set_shape_fields(index_cpu::gather_shape_fields());
    op.add_test_shapes(index_cpu::gather_test_shapes());
    op.small_enough_for_simt = index_cpu::abc_small_enough_for_simt;
  }
  {
    auto& op = r.op<ScatterAddArgs>("scatter_add");
    op.description = "Tensor.scatter_add_ (backward of gather)";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, scatter_add_cpu_ref, float_dtypes()});
    op.add({"cpu.omp", Backend::CPU, Provider::Own, scatter_add_cpu_omp, float_dtypes()});
    op.set_default(Backend::CPU, "cpu.omp");
    op.set_cost(scatter_add_cost);
    op.make_case = index_cpu::make_scatter_add_case;
    op.tolerance = index_cpu::accumulate_tolerance;
    op.set_shape_fields(index_cpu::scatter_add_shape_fields());
    op.add_test_shapes(index_cpu::scatter_add_test_shapes());
    op.small_enough_for_simt = index_cpu::abc_small_enough_for_simt;
  }
  {
    auto& op = r.op<OneHotArgs>("one_hot");
    op.description = "F.one_hot in any dtype";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, one_hot_cpu_ref, all_dtypes()});
    op.add({"cpu.omp", Backend::CPU, Provider::Own, one_hot_cpu_omp, all_dtypes()});
    op.set_default(Backend::CPU, "cpu.omp");
    op.set_cost(one_hot_cost);
    op.make_case = index_cpu::make_one_hot_case;
    op.set_shape_fields(index_cpu::one_hot_shape_fields());
    op.add_test_shapes(index_cpu::one_hot_test_shapes());
    op.small_enough_for_simt = index_cpu::leading_small_enough_for_simt;
  }
  {
    auto& op = r.op<PadArgs>("pad");
    op.description = "F.pad, constant mode (negative pads crop; x any strides)";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, pad_cpu_ref, all_dtypes()});
    op.add({"cpu.omp", Backend::CPU, Provider::Own, pad_cpu_omp, all_dtypes()});
    op.set_default(Backend::CPU, "cpu.omp");
    op.set_cost(pad_cost);
    op.make_case = index_cpu::make_pad_case;
    op.set_shape_fields(index_cpu::pad_shape_fields());
    op.add_test_shapes(index_cpu::pad_test_shapes());
    op.small_enough_for_simt = index_cpu::leading_small_enough_for_simt;
  }
  {
    auto& op = r.op<PadBwdArgs>("pad_bwd");
    op.description = "gradient of pad: crop (zeros where pad cropped)";
    op.add({"cpu.ref", Backend::CPU, Provider::Own, pad_bwd_cpu_ref, all_dtypes()});
    op.add({"cpu.omp", Backend::CPU, Provider::Own, pad_bwd_cpu_omp, all_dtypes()});
    op.set_default(Backend::CPU, "cpu.omp");
    op.set_cost(pad_bwd_cost);
    op.make_case = index_cpu::make_pad_bwd_case;
    op.set_shape_fields(index_cpu::pad_shape_fields());
    op.add_test_shapes(index_cpu::pad_test_shapes());
    op.small_enough_for_simt = index_cpu::leading_small_enough_for_simt;
  }
}

}  // namespace aim::kernels
