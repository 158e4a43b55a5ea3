// cuda.rows: x as a contiguous [outer, R, inner] block (reduce_view: size-1 dims dropped,
// neighbouring dims merged; reduced dims that are not one block are permuted to the end by a
// device copy first). Two kernels:
//  - rows (inner == 1): R <= 1024: one warp per output row, 8 rows per block; R > 1024: one
//    256-thread block per row. Threads stride through the row (coalesced), reduce in registers,
//    then warp shuffles (+ shared memory across warps). Traffic: x read once (twice for var/std:
//    the second pass mostly hits L1/L2), y written once -> bandwidth bound when rows >> #SMs.
//    Limit: a row is one block, so a reduction to very few outputs (e.g. the whole tensor to a
//    scalar) runs on few SMs; a split-R two-stage kernel would be the next step.
//  - columns (inner > 1, e.g. [B, C] -> [C]): a block is 32 consecutive columns of one `o` x
//    (8 or 32) streams along R; each warp reads 32 consecutive elements of one row of the block
//    (coalesced), partials combine through shared memory. Bound: bandwidth when outer * inner /
//    32 blocks fill the GPU; 32 streams per block when they do not.
// Accumulation in f32 for f32/f16/bf16 (f16/bf16 loaded and converted per element), f64 for f64.
// var/std: two passes (mean, then squared deviations) inside the same kernel. max/min carry the
// position (first occurrence on ties; NaN wins, as in PyTorch).
#include <cmath>

#include "kernels/cuda_common.h"
#include "kernels/reduce/reduce.h"

namespace aim::kernels::AIM_CUDA_NS {
namespace {

// Accumulation policy, chosen at compile time.
enum class RK : int { sum, prod, abs, sq, pow, maxabs, max, min, var };
// What happens to the accumulated value before the store.
enum class Post : int { none, div_n, sqrt, root_p, div_var, sqrt_div_var };

struct Params {
  int64_t outer, R, inner;
  double p;        // pow: exponent
  double divisor;  // var/std: max(0, R - correction)
  Post post;
};

template <class A>
__device__ __forceinline__ A abs_a(A v) {
  if constexpr (std::is_same_v<A, float>) {
    return fabsf(v);
  } else {
    return fabs(v);
  }
}
template <class A>
__device__ __forceinline__ A sqrt_a(A v) {
  if constexpr (std::is_same_v<A, float>) {
    return sqrtf(v);
  } else {
    return sqrt(v);
  }
}
template <class A>
__device__ __forceinline__ A pow_a(A v, A e) {
  if constexpr (std::is_same_v<A, float>) {
    return powf(v, e);
  } else {
    return pow(v, e);
  }
}

template <RK K, class A>
__device__ __forceinline__ A r_init() {
  return K == RK::prod ? A(1) : A(0);
}
template <RK K, class A>
__device__ __forceinline__ A r_map(A v, A aux) {  // aux: p (pow) or the mean (var)
  if constexpr (K == RK::abs || K == RK::maxabs) {
    return abs_a(v);
  } else if constexpr (K == RK::sq) {
    return v * v;
  } else if constexpr (K == RK::pow) {
    return pow_a(abs_a(v), aux);
  } else if constexpr (K == RK::var) {
    return (v - aux) * (v - aux);
  } else {
    return v;
  }
}
template <RK K, class A>
__device__ __forceinline__ A r_comb(A a, A b) {
  if constexpr (K == RK::prod) {
    return a * b;
  } else if constexpr (K == RK::maxabs) {
    return (b > a || b != b) ? b : a;
  } else {
    return a + b;
  }
}

// (b, bi) replaces (a, ai)? ai < 0: empty. First occurrence wins ties; NaN beats numbers.
template <RK K, class A>
__device__ __forceinline__ bool arg_takes(A a, long long ai, A b, long long bi) {
  if (bi < 0) return false;
  if (ai < 0) return true;
  const bool a_nan = a != a, b_nan = b != b;
  if (a_nan || b_nan) return b_nan && (!a_nan || bi < ai);
  if (K == RK::max ? b > a : b < a) return true;
  return b == a && bi < ai;
}

template <RK K, class A>
__device__ __forceinline__ A warp_comb(A v) {
  for (int o = kWarpSize / 2; o > 0; o /= 2) v = r_comb<K>(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}
template <RK K, class A>
__device__ __forceinline__ void warp_argcomb(A& v, long long& i) {
  for (int o = kWarpSize / 2; o > 0; o /= 2) {
    const A w = __shfl_xor_sync(kFullMask, v, o);
    const long long wi = __shfl_xor_sync(kFullMask, i, o);
    if (arg_takes<K>(v, i, w, wi)) v = w, i = wi;
  }
}

// Over a warp (kBlock false) or the whole block (kBlock true); every thread gets the result.
template <bool kBlock, RK K, class A>
__device__ __forceinline__ A group_comb(A v, A* scratch) {
  v = warp_comb<K>(v);
  if constexpr (kBlock) {
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    const int warps = blockDim.x / kWarpSize;
    __syncthreads();  // scratch may still be read by a previous call
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = warp_comb<K>(lane < warps ? scratch[lane] : r_init<K, A>());
  }
  return v;
}
template <bool kBlock, RK K, class A>
__device__ __forceinline__ void group_argcomb(A& v, long long& i, A* sv, long long* si) {
  warp_argcomb<K>(v, i);
  if constexpr (kBlock) {
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    const int warps = blockDim.x / kWarpSize;
    __syncthreads();
    if (lane == 0) sv[warp] = v, si[warp] = i;
    __syncthreads();
    v = lane < warps ? sv[lane] : A(0);
    i = lane < warps ? si[lane] : -1;
    warp_argcomb<K>(v, i);
  }
}

template <class A>
__device__ __forceinline__ A finish(A v, const Params& p) {
  switch (p.post) {
    case Post::none:
      return v;
    case Post::div_n:
      return v / A(p.R);
    case Post::sqrt:
      return sqrt_a(v);
    case Post::root_p:
      return pow_a(v, A(1.0 / p.p));
    case Post::div_var:
      return v / A(p.divisor);
    case Post::sqrt_div_var:
      return sqrt_a(v / A(p.divisor));
  }
  return v;
}

// rows: y[row] reduces x[row, 0:R]; a warp (kBlock false) or a block (kBlock true) per row.
template <bool kBlock, RK K, class T>
__global__ void reduce_rows_kernel(const T* x, T* y, long long* idx, Params p) {
  using A = typename Acc<T>::type;
  __shared__ A scratch[kWarpSize];
  __shared__ long long scratch_i[kWarpSize];
  const int g = kBlock ? int(blockDim.x) : kWarpSize;
  const int t = kBlock ? int(threadIdx.x) : int(threadIdx.x % kWarpSize);
  const int64_t row =
      kBlock ? int64_t(blockIdx.x)
             : int64_t(blockIdx.x) * (blockDim.x / kWarpSize) + threadIdx.x / kWarpSize;
  if (row >= p.outer) return;  // a whole warp leaves together (blocks: never)
  const T* xr = x + row * p.R;
  if constexpr (K == RK::max || K == RK::min) {
    A bv = A(0);
    long long bi = -1;
    for (int64_t r = t; r < p.R; r += g) {
      const A v = to_acc<A>(xr[r]);
      if (arg_takes<K>(bv, bi, v, r)) bv = v, bi = r;
    }
    group_argcomb<kBlock, K>(bv, bi, scratch, scratch_i);
    if (t == 0) {
      y[row] = from_acc<T>(bv);
      if (idx) idx[row] = bi;
    }
  } else if constexpr (K == RK::var) {
    A s = A(0);
    for (int64_t r = t; r < p.R; r += g) s += to_acc<A>(xr[r]);
    const A mean = group_comb<kBlock, RK::sum>(s, scratch) / A(p.R);
    A q = A(0);
    for (int64_t r = t; r < p.R; r += g) q += r_map<RK::var>(to_acc<A>(xr[r]), mean);
    q = group_comb<kBlock, RK::sum>(q, scratch);
    if (t == 0) y[row] = from_acc<T>(finish(q, p));
  } else {
    const A aux = A(p.p);
    A acc = r_init<K, A>();
    for (int64_t r = t; r < p.R; r += g) acc = r_comb<K>(acc, r_map<K>(to_acc<A>(xr[r]), aux));
    acc = group_comb<kBlock, K>(acc, scratch);
    if (t == 0) y[row] = from_acc<T>(finish(acc, p));
  }
}

// columns: y[o, i] reduces x[o, 0:R, i]. Block (32, S): threadIdx.x = column in a tile of 32,
// threadIdx.y = stream along R (r = y, y + S, ...). blockIdx.x = o * tiles + tile.
constexpr int kMaxStreams = 32;

template <RK K, class A>
__device__ __forceinline__ A column_comb(A v, A (*sv)[kWarpSize]) {
  __syncthreads();  // sv may still be read by a previous call
  sv[threadIdx.y][threadIdx.x] = v;
  __syncthreads();
  A acc = r_init<K, A>();
  for (unsigned s = 0; s < blockDim.y; ++s) acc = r_comb<K>(acc, sv[s][threadIdx.x]);
  return acc;
}

template <RK K, class T>
__global__ void reduce_columns_kernel(const T* x, T* y, long long* idx, Params p) {
  using A = typename Acc<T>::type;
  __shared__ A sv[kMaxStreams][kWarpSize];
  __shared__ long long si[kMaxStreams][kWarpSize];
  const int64_t tiles = ceil_div(p.inner, kWarpSize);
  const int64_t o = int64_t(blockIdx.x) / tiles;
  const int64_t i = (int64_t(blockIdx.x) % tiles) * kWarpSize + threadIdx.x;
  const bool live = i < p.inner;  // dead columns still take part in the barriers
  const T* xc = x + o * p.R * p.inner + (live ? i : 0);
  const int S = int(blockDim.y);
  if constexpr (K == RK::max || K == RK::min) {
    A bv = A(0);
    long long bi = -1;
    if (live)
      for (int64_t r = threadIdx.y; r < p.R; r += S) {
        const A v = to_acc<A>(xc[r * p.inner]);
        if (arg_takes<K>(bv, bi, v, r)) bv = v, bi = r;
      }
    sv[threadIdx.y][threadIdx.x] = bv;
    si[threadIdx.y][threadIdx.x] = bi;
    __syncthreads();
    if (threadIdx.y == 0 && live) {
      for (int s = 1; s < S; ++s)
        if (arg_takes<K>(bv, bi, sv[s][threadIdx.x], si[s][threadIdx.x]))
          bv = sv[s][threadIdx.x], bi = si[s][threadIdx.x];
      y[o * p.inner + i] = from_acc<T>(bv);
      if (idx) idx[o * p.inner + i] = bi;
    }
  } else if constexpr (K == RK::var) {
    A s = A(0);
    if (live)
      for (int64_t r = threadIdx.y; r < p.R; r += S) s += to_acc<A>(xc[r * p.inner]);
    const A mean = column_comb<RK::sum>(s, sv) / A(p.R);
    A q = A(0);
    if (live)
      for (int64_t r = threadIdx.y; r < p.R; r += S)
        q += r_map<RK::var>(to_acc<A>(xc[r * p.inner]), mean);
    q = column_comb<RK::sum>(q, sv);
    if (threadIdx.y == 0 && live) y[o * p.inner + i] = from_acc<T>(finish(q, p));
  } else {
    const A aux = A(p.p);
    A acc = r_init<K, A>();
    if (live)
      for (int64_t r = threadIdx.y; r < p.R; r += S)
        acc = r_comb<K>(acc, r_map<K>(to_acc<A>(xc[r * p.inner]), aux));
    acc = column_comb<K>(acc, sv);
    if (threadIdx.y == 0 && live) y[o * p.inner + i] = from_acc<T>(finish(acc, p));
  }
}

template <RK K, class T>
void launch_reduce(const T* x, T* y, long long* idx, const Params& p, Device dev) {
  const auto stream = stream_for(dev);
  if (p.inner == 1) {
    if (p.R <= 1024) {
      constexpr int kWarps = 8;
      AIM_LAUNCH(unsigned(ceil_div(p.outer, kWarps)), kWarps * kWarpSize, 0, stream,
                 reduce_rows_kernel<false, K, T>)
      (x, y, idx, p);
    } else {
      AIM_LAUNCH(unsigned(p.outer), 256, 0, stream, reduce_rows_kernel<true, K, T>)(x, y, idx, p);
    }
  } else {
    const int64_t blocks = p.outer * ceil_div(p.inner, kWarpSize);
    const unsigned streams = blocks < 256 && p.R >= 256 ? kMaxStreams : 8;
    AIM_LAUNCH(unsigned(blocks), dim3(kWarpSize, streams), 0, stream, reduce_columns_kernel<K, T>)
    (x, y, idx, p);
  }
  AIM_CHECK_LAUNCH();
}

void reduce_cuda_rows(const ReduceArgs& a) {
  check_reduce_args(a, "[reduce] cuda.rows");
  if (a.y.numel() == 0) return;
  const ReduceView v = reduce_view(a.x, a.dims);
  AIM_CHECK(v.outer * ceil_div(v.inner, kWarpSize) < (int64_t(1) << 31),
            "[reduce] cuda.rows: ", v.outer, " x ", v.inner, " outputs exceed the grid of x ",
            to_string(a.x.sizes()));
  Params p{v.outer, v.R, v.inner, a.p, std::max(0.0, double(v.R) - a.correction), Post::none};
  long long* idx =
      a.indices.defined() ? reinterpret_cast<long long*>(a.indices.data<int64_t>()) : nullptr;
  const Device dev = a.x.device();
  AIM_DISPATCH_CUDA_FLOAT_TYPES(a.x.dtype(), T, {
    const T* x = static_cast<const T*>(v.x.raw_data());
    T* y = static_cast<T*>(a.y.raw_data());
    switch (a.kind) {
      case ReduceKind::sum:
        launch_reduce<RK::sum>(x, y, idx, p, dev);
        break;
      case ReduceKind::mean:
        p.post = Post::div_n;
        launch_reduce<RK::sum>(x, y, idx, p, dev);
        break;
      case ReduceKind::prod:
        launch_reduce<RK::prod>(x, y, idx, p, dev);
        break;
      case ReduceKind::max:
        launch_reduce<RK::max>(x, y, idx, p, dev);
        break;
      case ReduceKind::min:
        launch_reduce<RK::min>(x, y, idx, p, dev);
        break;
      case ReduceKind::var:
      case ReduceKind::std:
        p.post = a.kind == ReduceKind::var ? Post::div_var : Post::sqrt_div_var;
        launch_reduce<RK::var>(x, y, idx, p, dev);
        break;
      case ReduceKind::norm:
        if (std::isinf(a.p)) {
          launch_reduce<RK::maxabs>(x, y, idx, p, dev);
        } else if (a.p == 1) {
          launch_reduce<RK::abs>(x, y, idx, p, dev);
        } else if (a.p == 2) {
          p.post = Post::sqrt;
          launch_reduce<RK::sq>(x, y, idx, p, dev);
        } else {
          p.post = Post::root_p;
          launch_reduce<RK::pow>(x, y, idx, p, dev);
        }
        break;
    }
  });
}

}  // namespace

void register_reduce_cuda(Registry& r) {
  auto& op = r.op<ReduceArgs>("reduce");
  op.add({"cuda.rows",
          AIM_CUDA_BACKEND,
          Provider::Own,
          reduce_cuda_rows,
          {DType::f32, DType::f64, DType::f16, DType::bf16}});
  op.set_default(AIM_CUDA_BACKEND, "cuda.rows");
}

}  // namespace aim::kernels::AIM_CUDA_NS
