// index: own CUDA variants. Every kernel is a grid-stride loop over one side of the mapping;
// the N-d shapes and strides travel by value in a small table (kernel parameters live in
// constant memory), up to kMaxDims (8) dims. Pure data movement is dispatched on the element
// size (1, 2, 4, 8 bytes), so every dtype shares four instantiations.
//
// concat/cuda.grid_stride: one launch per input, one thread per input element; the input's
// N-d offset comes from its strides (any view), the output position from (outer, d, inner).
// Reads each input once, writes y once -> bandwidth bound. Contiguous inputs skip the N-d math.
//
// index_select/cuda.grid_stride, gather/cuda.grid_stride: one thread per output element,
// writes coalesced, reads x at the indexed rows (coalesced along inner dims for index_select;
// gathered element by element for gather) -> bandwidth/latency bound.
//
// index_add/cuda.atomic, scatter_add/cuda.atomic (default): one thread per source element,
// atomicAdd into y (native for f32/f64/f16/bf16 on sm_90). Bound by the atomics where indices
// repeat. The order of the additions is not fixed: float results can differ in the last bits from
// run to run (not deterministic); --deterministic selects cuda.sorted.
//
// index_add/cuda.sorted, scatter_add/cuda.sorted (deterministic: bitwise identical run to run,
// whatever the scheduling): embedding_bwd's cuda.sorted pattern. Each source position p gets a
// key, its destination (index_add: the row index[k] of y along dim, p = k; scatter_add: y's
// element offset, p = the position in index), -1 for a bad index (recorded, skipped).
//   1-4. the key buckets of kernels/key_buckets.cuh: the positions sorted by key, in position
//   order within a key, and the keys that occur (uniq) in increasing order (O(bucket size^2):
//   fine for spread indices, quadratic in one huge bucket);
//   5. index_add: one thread per (outer, occurring row, inner) element of y; scatter_add: one
//   thread per occurring element of y; each starts from y and adds its sources in position
//   order in the accumulator type (f32; f64 for f64), rounding once to y's dtype. For f32/f64
//   that is exactly cpu.ref's sequential loop, so the bits equal cpu.ref's too.
// Scratch (i32, caching allocator): 3 * positions + 2 * keys + min(positions, keys) + 2.
// Limits: positions and keys (index_add: y.size(dim); scatter_add: y.numel()) < 2^31 - 2.
// Slower than cuda.atomic where indices rarely repeat (five more passes over the positions and
// the scan); unmeasured on a GPU so far (no device in this session).
//
// one_hot/cuda.grid_stride: one thread per output element, y[i] = (i % C == indices[i / C]);
// writes y once, no separate zero fill.
//
// pad/cuda.grid_stride, pad_bwd/cuda.grid_stride: one thread per output element; the source
// coordinate is the output coordinate minus the shift (pad: +before; pad_bwd: -before), fill
// value outside the source. Writes once, reads the overlap once -> bandwidth bound.
//
// Out-of-range indices are never used as an address: they are recorded in the device's error
// record (kernels/error_flag.h) and the element is written as zero (index_select, gather,
// one_hot) or skipped (index_add, scatter_add); the next check_device_errors throws the CPU's
// message naming the index. No trap (which would kill the CUDA context), no read-back here.
#include <algorithm>
#include <cstring>

#include "kernels/cuda_common.h"
#include "kernels/error_flag.cuh"
#include "kernels/index/index.h"
#include "kernels/key_buckets.cuh"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

constexpr int kThreads = 256;

// Shapes and strides of one mapping: `sizes` is the shape iterated over (row-major), `a` and
// `b` strides (or shapes) of the operands, `shift` per-dim offsets.
struct Dims {
  int ndim;
  int64_t sizes[kMaxDims];
  int64_t a[kMaxDims];
  int64_t b[kMaxDims];
  int64_t shift[kMaxDims];
};

Dims make_dims(const Shape& sizes) {
  AIM_CHECK(sizes.size() <= size_t(kMaxDims), "index kernels handle up to ", kMaxDims,
            " dims, got ", sizes.size());
  Dims d{};
  d.ndim = int(sizes.size());
  for (int i = 0; i < d.ndim; ++i) d.sizes[i] = sizes[size_t(i)];
  return d;
}

std::string dims_ok(int64_t ndim) {
  return ndim <= kMaxDims ? "" : str("needs at most ", kMaxDims, " dims, got ", ndim);
}

// Offset in strides `st` of the element with the row-major coordinates of i in `sizes`, the
// coordinate at `dim` replaced by `at` (dim < 0: none replaced).
__device__ __forceinline__ int64_t offset_of(int64_t i, const Dims& t, const int64_t* st, int dim,
                                             int64_t at) {
  int64_t off = 0;
  for (int d = t.ndim - 1; d >= 0; --d) {
    const int64_t c = i % t.sizes[d];
    i /= t.sizes[d];
    off += (d == dim ? at : c) * st[d];
  }
  return off;
}

// idx[k] when it is in [0, n); else records it (position k) and returns -1.
template <class I>
__device__ __forceinline__ int64_t checked_index(const I* idx, int64_t k, int64_t n,
                                                 DeviceErrorRecord* err, DeviceErrorOp op) {
  const int64_t j = int64_t(idx[k]);
  if (j >= 0 && j < n) return j;
  record_device_error(err, op, k, 0, j, n, 0);
  return -1;
}

template <class T>
__global__ void concat_kernel(const T* x, T* y, int64_t n, Dims xd, int64_t size, int64_t inner,
                              int64_t ysize, int64_t off, bool contiguous) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = i / (size * inner), d = i / inner % size, in = i % inner;
    const int64_t src = contiguous ? i : offset_of(i, xd, xd.a, -1, 0);
    y[(o * ysize + off + d) * inner + in] = x[src];
  }
}

template <class T, class I>
__global__ void index_select_kernel(const T* x, const I* idx, T* y, int64_t n, Dims yd, int dim,
                                    int64_t inner, int64_t k_count, int64_t size,
                                    DeviceErrorRecord* err) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j =
        checked_index(idx, i / inner % k_count, size, err, DeviceErrorOp::index_select);
    y[i] = j < 0 ? T{} : x[offset_of(i, yd, yd.a, dim, j)];  // yd.a: strides of x
  }
}

template <class T, class I>
__global__ void index_add_kernel(const T* src, const I* idx, T* y, int64_t n, int64_t inner,
                                 int64_t k_count, int64_t size, DeviceErrorRecord* err) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = i / (k_count * inner), in = i % inner;
    const int64_t j = checked_index(idx, i / inner % k_count, size, err, DeviceErrorOp::index_add);
    if (j >= 0) atomicAdd(y + (o * size + j) * inner + in, src[i]);
  }
}

template <class T, class I>
__global__ void gather_kernel(const T* x, const I* idx, T* y, int64_t n, Dims id, int dim,
                              int64_t size, DeviceErrorRecord* err) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = checked_index(idx, i, size, err, DeviceErrorOp::gather);
    y[i] = j < 0 ? T{} : x[offset_of(i, id, id.a, dim, j)];  // id.a: strides of x
  }
}

template <class T, class I>
__global__ void scatter_add_kernel(const T* src, const I* idx, T* y, int64_t n, Dims id, int dim,
                                   int64_t size, DeviceErrorRecord* err) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = checked_index(idx, i, size, err, DeviceErrorOp::scatter_add);
    if (j < 0) continue;
    // id.a: strides of src, id.b: strides of y.
    atomicAdd(y + offset_of(i, id, id.b, dim, j), src[offset_of(i, id, id.a, -1, 0)]);
  }
}

// ---- index_add / scatter_add: cuda.sorted ---------------------------------------------------

// keys[k] = index[k] (the destination row), or -1 for a bad index (recorded).
template <class I>
__global__ void index_add_keys_kernel(const I* idx, int64_t K, int64_t size, int* keys,
                                      DeviceErrorRecord* err) {
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < K;
       k += int64_t(gridDim.x) * blockDim.x)
    keys[k] = int(checked_index(idx, k, size, err, DeviceErrorOp::index_add));
}

// keys[i] = offset in y of index position i's destination (id.b: strides of y), or -1.
template <class I>
__global__ void scatter_add_keys_kernel(const I* idx, int64_t n, Dims id, int dim, int64_t size,
                                        int* keys, DeviceErrorRecord* err) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = checked_index(idx, i, size, err, DeviceErrorOp::scatter_add);
    keys[i] = j < 0 ? -1 : int(offset_of(i, id, id.b, dim, j));
  }
}

// One thread per (o, u, in), u < max_uniq (those past meta[0] idle): y's row uniq[u] gets its
// source rows k in increasing order.
template <class T>
__global__ void index_add_sorted_kernel(const T* src, T* y, const int* offsets, const int* sorted,
                                        const int* uniq, const int* meta, int64_t outer,
                                        int64_t max_uniq, int64_t K, int64_t size, int64_t inner) {
  using A = typename Acc<T>::type;
  const int64_t nu = meta[0];
  const int64_t total = outer * max_uniq * inner;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t in = i % inner, u = i / inner % max_uniq, o = i / (inner * max_uniq);
    if (u >= nu) continue;
    const int64_t j = uniq[u];
    T* yp = y + (o * size + j) * inner + in;
    A acc = to_acc<A>(*yp);
    for (int q = offsets[j]; q < offsets[j + 1]; ++q)  // position order: deterministic
      acc += to_acc<A>(src[(o * K + sorted[q]) * inner + in]);
    *yp = from_acc<T>(acc);
  }
}

// One thread per occurring element of y (offset uniq[u]): its sources in index order (id.a:
// strides of src).
template <class T>
__global__ void scatter_add_sorted_kernel(const T* src, T* y, const int* offsets, const int* sorted,
                                          const int* uniq, const int* meta, Dims id) {
  using A = typename Acc<T>::type;
  const int64_t nu = meta[0];
  for (int64_t u = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; u < nu;
       u += int64_t(gridDim.x) * blockDim.x) {
    const int64_t v = uniq[u];
    A acc = to_acc<A>(y[v]);
    for (int q = offsets[v]; q < offsets[v + 1]; ++q)  // position order: deterministic
      acc += to_acc<A>(src[offset_of(sorted[q], id, id.a, -1, 0)]);
    y[v] = from_acc<T>(acc);
  }
}

std::string sorted_fits(int64_t positions, int64_t keys) {
  if (positions < kKeyBucketsLimit && keys < kKeyBucketsLimit) return "";
  return str("needs fewer than 2^31 - 2 positions and destinations (int32 scratch), got ",
             positions, " and ", keys);
}

template <class T, class I>
__global__ void one_hot_kernel(const I* idx, T* y, int64_t n, int64_t classes, T zero, T one,
                               DeviceErrorRecord* err) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    // Each bad index is recorded once (by its row's first element), not once per class.
    const int64_t j = i % classes == 0
                          ? checked_index(idx, i / classes, classes, err, DeviceErrorOp::one_hot)
                          : int64_t(idx[i / classes]);
    y[i] = i % classes == j ? one : zero;
  }
}

// dst[p] = src[p - shift] inside src, else value. d.sizes: dst shape, d.b: src shape, d.a: src
// strides.
template <class T>
__global__ void shift_copy_kernel(const T* src, T* dst, int64_t n, Dims d, T value) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t rem = i, off = 0;
    bool inside = true;
    for (int k = d.ndim - 1; k >= 0; --k) {
      const int64_t c = rem % d.sizes[k] - d.shift[k];
      rem /= d.sizes[k];
      inside = inside && c >= 0 && c < d.b[k];
      off += c * d.a[k];
    }
    dst[i] = inside ? src[off] : value;
  }
}

// The bits of cast_value<host type of dtype t>(v) as the same-sized unsigned integer U.
template <class U>
U value_bits(double v, DType t) {
  U bits = 0;
  AIM_DISPATCH_ALL_TYPES(t, H, {
    if constexpr (sizeof(H) == sizeof(U)) {
      const H h = cast_value<H>(v);
      std::memcpy(&bits, &h, sizeof(H));
    } else {
      AIM_FAIL("element size ", sizeof(U), " does not match ", dtype_name(t));
    }
  });
  return bits;
}

int wrap_dim(int64_t dim, int64_t ndim) { return int(dim < 0 ? dim + ndim : dim); }

void concat_cuda(const ConcatArgs& a) {
  check_concat(a);
  const int dim = wrap_dim(a.dim, a.y.dim());
  const DimSplit ys = split_at(a.y.sizes(), dim);
  int64_t off = 0;
  AIM_DISPATCH_BY_SIZE(dtype_size(a.y.dtype()), T, {
    for (const Tensor& x : a.xs) {
      const int64_t n = x.numel(), size = x.size(dim);
      if (n > 0) {
        Dims xd = make_dims(x.sizes());
        for (int d = 0; d < xd.ndim; ++d) xd.a[d] = x.stride(d);
        AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream_for(a.y.device()), concat_kernel<T>)
        (static_cast<const T*>(x.raw_data()), static_cast<T*>(a.y.raw_data()), n, xd, size,
         ys.inner, ys.size, off, x.is_contiguous());
        AIM_CHECK_LAUNCH();
      }
      off += size;
    }
  });
}

void index_select_cuda(const IndexSelectArgs& a) {
  check_index_select(a);
  const int dim = wrap_dim(a.dim, a.x.dim());
  const int64_t n = a.y.numel();
  if (n == 0) return;
  Dims yd = make_dims(a.y.sizes());
  for (int d = 0; d < yd.ndim; ++d) yd.a[d] = a.x.stride(d);
  const DimSplit ys = split_at(a.y.sizes(), dim);
  AIM_DISPATCH_INDEX_TYPES(a.index.dtype(), I, {
    AIM_DISPATCH_BY_SIZE(dtype_size(a.x.dtype()), T, {
      AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream_for(a.y.device()),
                 index_select_kernel<T, I>)
      (static_cast<const T*>(a.x.raw_data()), a.index.data<I>(), static_cast<T*>(a.y.raw_data()), n,
       yd, dim, ys.inner, ys.size, a.x.size(dim), device_error_record(a.y.device()));
    });
  });
  AIM_CHECK_LAUNCH();
}

void index_add_cuda(const IndexAddArgs& a) {
  check_index_add(a);
  const int dim = wrap_dim(a.dim, a.y.dim());
  const int64_t n = a.src.numel();
  if (n == 0) return;
  const DimSplit ss = split_at(a.src.sizes(), dim);
  AIM_DISPATCH_INDEX_TYPES(a.index.dtype(), I, {
    AIM_DISPATCH_CUDA_FLOAT_TYPES(a.y.dtype(), T, {
      AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream_for(a.y.device()),
                 index_add_kernel<T, I>)
      (a.src.data<T>(), a.index.data<I>(), a.y.data<T>(), n, ss.inner, ss.size, a.y.size(dim),
       device_error_record(a.y.device()));
    });
  });
  AIM_CHECK_LAUNCH();
}

void index_add_cuda_sorted(const IndexAddArgs& a) {
  check_index_add(a);
  const int dim = wrap_dim(a.dim, a.y.dim());
  if (a.src.numel() == 0) return;
  const DimSplit ss = split_at(a.src.sizes(), dim);
  const int64_t K = ss.size, size = a.y.size(dim);
  const Device dev = a.y.device();
  const auto stream = stream_for(dev);
  const KeyBuckets ks(K, size, dev, /*stored_keys=*/true);
  AIM_DISPATCH_INDEX_TYPES(a.index.dtype(), I, {
    AIM_LAUNCH(grid_for(K, kThreads), kThreads, 0, stream, index_add_keys_kernel<I>)
    (a.index.data<I>(), K, size, ks.keys, device_error_record(dev));
    AIM_CHECK_LAUNCH();
  });
  ks.sort(StoredKeys{ks.keys}, stream);
  if (ks.max_uniq == 0) return;
  const int64_t total = ss.outer * ks.max_uniq * ss.inner;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.y.dtype(), T, {
    AIM_LAUNCH(grid_for(total, kThreads), kThreads, 0, stream, index_add_sorted_kernel<T>)
    (static_cast<const T*>(a.src.raw_data()), static_cast<T*>(a.y.raw_data()), ks.offsets,
     ks.sorted, ks.uniq, ks.meta, ss.outer, ks.max_uniq, K, size, ss.inner);
  });
  AIM_CHECK_LAUNCH();
}

std::string index_add_sorted_supports(const IndexAddArgs& a) {
  const int64_t nd = a.y.dim();
  if (nd < 1 || a.index.dim() != 1 || a.dim < -nd || a.dim >= nd) return "";  // checks name it
  return sorted_fits(a.index.numel(), a.y.size(wrap_dim(a.dim, nd)));
}

void gather_cuda(const GatherArgs& a) {
  check_gather(a);
  const int dim = wrap_dim(a.dim, a.x.dim());
  const int64_t n = a.y.numel();
  if (n == 0) return;
  Dims id = make_dims(a.index.sizes());
  for (int d = 0; d < id.ndim; ++d) id.a[d] = a.x.stride(d);
  AIM_DISPATCH_INDEX_TYPES(a.index.dtype(), I, {
    AIM_DISPATCH_BY_SIZE(dtype_size(a.x.dtype()), T, {
      AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream_for(a.y.device()), gather_kernel<T, I>)
      (static_cast<const T*>(a.x.raw_data()), a.index.data<I>(), static_cast<T*>(a.y.raw_data()), n,
       id, dim, a.x.size(dim), device_error_record(a.y.device()));
    });
  });
  AIM_CHECK_LAUNCH();
}

void scatter_add_cuda(const ScatterAddArgs& a) {
  check_scatter_add(a);
  const int dim = wrap_dim(a.dim, a.y.dim());
  const int64_t n = a.index.numel();
  if (n == 0) return;
  Dims id = make_dims(a.index.sizes());
  for (int d = 0; d < id.ndim; ++d) {
    id.a[d] = a.src.stride(d);
    id.b[d] = a.y.stride(d);
  }
  AIM_DISPATCH_INDEX_TYPES(a.index.dtype(), I, {
    AIM_DISPATCH_CUDA_FLOAT_TYPES(a.y.dtype(), T, {
      AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream_for(a.y.device()),
                 scatter_add_kernel<T, I>)
      (a.src.data<T>(), a.index.data<I>(), a.y.data<T>(), n, id, dim, a.y.size(dim),
       device_error_record(a.y.device()));
    });
  });
  AIM_CHECK_LAUNCH();
}

void scatter_add_cuda_sorted(const ScatterAddArgs& a) {
  check_scatter_add(a);
  const int dim = wrap_dim(a.dim, a.y.dim());
  const int64_t n = a.index.numel();
  if (n == 0) return;
  Dims id = make_dims(a.index.sizes());
  for (int d = 0; d < id.ndim; ++d) {
    id.a[d] = a.src.stride(d);
    id.b[d] = a.y.stride(d);
  }
  const Device dev = a.y.device();
  const auto stream = stream_for(dev);
  const KeyBuckets ks(n, a.y.numel(), dev, /*stored_keys=*/true);
  AIM_DISPATCH_INDEX_TYPES(a.index.dtype(), I, {
    AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream, scatter_add_keys_kernel<I>)
    (a.index.data<I>(), n, id, dim, a.y.size(dim), ks.keys, device_error_record(dev));
    AIM_CHECK_LAUNCH();
  });
  ks.sort(StoredKeys{ks.keys}, stream);
  if (ks.max_uniq == 0) return;
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.y.dtype(), T, {
    AIM_LAUNCH(grid_for(ks.max_uniq, kThreads), kThreads, 0, stream, scatter_add_sorted_kernel<T>)
    (static_cast<const T*>(a.src.raw_data()), static_cast<T*>(a.y.raw_data()), ks.offsets,
     ks.sorted, ks.uniq, ks.meta, id);
  });
  AIM_CHECK_LAUNCH();
}

std::string scatter_add_sorted_supports(const ScatterAddArgs& a) {
  if (std::string why = dims_ok(a.y.dim()); !why.empty()) return why;
  return sorted_fits(a.index.numel(), a.y.numel());
}

void one_hot_cuda(const OneHotArgs& a) {
  check_one_hot(a);
  const int64_t n = a.y.numel();
  if (n == 0) return;
  AIM_DISPATCH_INDEX_TYPES(a.indices.dtype(), I, {
    AIM_DISPATCH_BY_SIZE(dtype_size(a.y.dtype()), T, {
      AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream_for(a.y.device()), one_hot_kernel<T, I>)
      (a.indices.data<I>(), static_cast<T*>(a.y.raw_data()), n, a.y.size(-1),
       value_bits<T>(0, a.y.dtype()), value_bits<T>(1, a.y.dtype()),
       device_error_record(a.y.device()));
    });
  });
  AIM_CHECK_LAUNCH();
}

void shift_copy_cuda(const Tensor& src, const Tensor& dst, const std::vector<int64_t>& shift,
                     double value) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  Dims d = make_dims(dst.sizes());
  for (int k = 0; k < d.ndim; ++k) {
    d.a[k] = src.stride(k);
    d.b[k] = src.size(k);
    d.shift[k] = shift[size_t(k)];
  }
  AIM_DISPATCH_BY_SIZE(dtype_size(dst.dtype()), T, {
    AIM_LAUNCH(grid_for(n, kThreads), kThreads, 0, stream_for(dst.device()), shift_copy_kernel<T>)
    (static_cast<const T*>(src.raw_data()), static_cast<T*>(dst.raw_data()), n, d,
     value_bits<T>(value, dst.dtype()));
  });
  AIM_CHECK_LAUNCH();
}

void pad_cuda(const PadArgs& a) {
  AIM_CHECK(a.x.dtype() == a.y.dtype() && a.x.device() == a.y.device(), "[pad] x is ",
            dtype_name(a.x.dtype()), " on ", a.x.device().str(), " but y is ",
            dtype_name(a.y.dtype()), " on ", a.y.device().str());
  AIM_CHECK(a.y.is_contiguous(), "[pad] y must be contiguous, got strides ",
            to_string(a.y.strides()));
  shift_copy_cuda(a.x, a.y, check_pad("pad", a.x.sizes(), a.y.sizes(), a.pads), a.value);
}

void pad_bwd_cuda(const PadBwdArgs& a) {
  AIM_CHECK(a.dy.dtype() == a.dx.dtype() && a.dy.device() == a.dx.device(), "[pad_bwd] dy is ",
            dtype_name(a.dy.dtype()), " on ", a.dy.device().str(), " but dx is ",
            dtype_name(a.dx.dtype()), " on ", a.dx.device().str());
  AIM_CHECK(a.dx.is_contiguous(), "[pad_bwd] dx must be contiguous, got strides ",
            to_string(a.dx.strides()));
  std::vector<int64_t> shift = check_pad("pad_bwd", a.dx.sizes(), a.dy.sizes(), a.pads);
  for (auto& s : shift) s = -s;
  shift_copy_cuda(a.dy, a.dx, shift, 0.0);
}

std::vector<DType> all_dtypes() { return {std::begin(kAllDTypes), std::end(kAllDTypes)}; }
std::vector<DType> float_dtypes() { return {DType::f32, DType::f64, DType::f16, DType::bf16}; }

}  // namespace

void register_index_cuda(Registry& r) {
  const auto B = AIM_CUDA_BACKEND;
  const auto P = Provider::Own;
  {
    auto& op = r.op<ConcatArgs>("concat");
    op.add({"cuda.grid_stride", B, P, concat_cuda, all_dtypes(),
            [](const ConcatArgs& a) { return dims_ok(a.y.dim()); }});
    op.set_default(B, "cuda.grid_stride");
  }
  {
    auto& op = r.op<IndexSelectArgs>("index_select");
    op.add({"cuda.grid_stride", B, P, index_select_cuda, all_dtypes(),
            [](const IndexSelectArgs& a) { return dims_ok(a.x.dim()); }});
    op.set_default(B, "cuda.grid_stride");
  }
  {
    auto& op = r.op<IndexAddArgs>("index_add");
    op.add({"cuda.atomic", B, P, index_add_cuda, float_dtypes()});
    op.add({"cuda.sorted", B, P, index_add_cuda_sorted, float_dtypes(), index_add_sorted_supports});
    op.set_default(B, "cuda.atomic");
    op.set_nondeterministic("cuda.atomic", "cuda.sorted",
                            "float atomicAdd: the order of the adds varies");
  }
  {
    auto& op = r.op<GatherArgs>("gather");
    op.add({"cuda.grid_stride", B, P, gather_cuda, all_dtypes(),
            [](const GatherArgs& a) { return dims_ok(a.x.dim()); }});
    op.set_default(B, "cuda.grid_stride");
  }
  {
    auto& op = r.op<ScatterAddArgs>("scatter_add");
    op.add({"cuda.atomic", B, P, scatter_add_cuda, float_dtypes(),
            [](const ScatterAddArgs& a) { return dims_ok(a.y.dim()); }});
    op.add({"cuda.sorted", B, P, scatter_add_cuda_sorted, float_dtypes(),
            scatter_add_sorted_supports});
    op.set_default(B, "cuda.atomic");
    op.set_nondeterministic("cuda.atomic", "cuda.sorted",
                            "float atomicAdd: the order of the adds varies");
  }
  {
    auto& op = r.op<OneHotArgs>("one_hot");
    op.add({"cuda.grid_stride", B, P, one_hot_cuda, all_dtypes()});
    op.set_default(B, "cuda.grid_stride");
  }
  {
    auto& op = r.op<PadArgs>("pad");
    op.add({"cuda.grid_stride", B, P, pad_cuda, all_dtypes(),
            [](const PadArgs& a) { return dims_ok(a.y.dim()); }});
    op.set_default(B, "cuda.grid_stride");
  }
  {
    auto& op = r.op<PadBwdArgs>("pad_bwd");
    op.add({"cuda.grid_stride", B, P, pad_bwd_cuda, all_dtypes(),
            [](const PadBwdArgs& a) { return dims_ok(a.dx.dim()); }});
    op.set_default(B, "cuda.grid_stride");
  }
}

}  // namespace aim::kernels::AIM_CUDA_NS
